"""`mapreport compare`: two runs (two datasets, or two slices of one) read, compared per
request shape, and written as compare.html and compare.json."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import msgspec
from markupsafe import Markup

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.query import slices
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.comparing.compare import (
    Comparison,
    OpKey,
    compare,
    compare_ops,
    ship_check,
)
from mapreport.analysis.comparing.compare_mapping import MappingComparison, compare_mapping
from mapreport.analysis.comparing.compare_names import align_names, renamed
from mapreport.analysis.comparing.compare_sides import (
    SideSamples,
    shared_basis,
    side_basis,
    side_parts,
    side_samples,
)
from mapreport.analysis.comparing.compare_stats import LatencyBasis
from mapreport.analysis.comparing.compare_tuning import TuningComparison, compare_tuning
from mapreport.analysis.comparing.compare_whole import (
    SideOps,
    TotalComparison,
    compare_total,
    side_ops,
)
from mapreport.analysis.comparing.packs import SideSpec, evidence_ids, packs
from mapreport.analysis.comparing.runlevel import (
    MIN_RUNS,
    Run,
    RunsCompared,
    compare_op_runs,
    op_runs,
    side_runs,
    trace_files,
)
from mapreport.analysis.comparing.runlevel import compare_runs as runlevel
from mapreport.analysis.mapping.environment import SourceSelection, select_sources
from mapreport.analysis.steps.results import SliceResult
from mapreport.analysis.steps.slice import analyze_slice
from mapreport.core.connection import Connection
from mapreport.core.errors import UsageError
from mapreport.core.files import atomic_write
from mapreport.core.kinds import TimeBasis
from mapreport.core.records import replace
from mapreport.core.window import EVERYTHING, Window, night_window
from mapreport.dataset.store import Dataset
from mapreport.report.compare import (
    LeftOut,
    MappingView,
    Parts,
    Side,
    drill_lines,
    headline,
    headline_parts,
    lines,
    mapping_view,
    moved_lines,
    op_lines,
    printed,
    runs_view,
    ship_sentence,
    tail_lines,
)
from mapreport.report.compare_doc import document
from mapreport.report.compare_file import as_json
from mapreport.report.compare_tests import basis_sentence, blocks_sentence, mean_sentence
from mapreport.report.compare_tuning import tuning_rows, tuning_sentence
from mapreport.report.compare_whole import only_lines, part_lines, whole_view
from mapreport.run.compare_packs import write_packs
from mapreport.run.config import Config, load_config


def pick_slice(ds: Dataset, wanted: str | None, which: str) -> tuple[str, str]:
    """The (workload, slice) a side names (`workload` or `workload/slice`), or the dataset's
    only one; a name the dataset lacks is a usage error that lists what it holds."""
    held = sorted(slices(ds.connect()))
    names = [f"{w}/{s}" if s else w for w, s in held]
    if wanted is None:
        if len(held) == 1:
            return held[0]
        raise UsageError(
            f"--{which}-slice: {ds.root} holds {len(held)} slices ({', '.join(names) or 'none'}); "
            "name one"
        )
    w, _, s = wanted.partition("/")
    if (w, s) not in held:
        raise UsageError(
            f"--{which}-slice: {wanted!r} is not in {ds.root} (it holds: {', '.join(names)})"
        )
    return w, s


class Compared(msgspec.Struct, frozen=True):
    """What `compare_runs` compared and concluded."""

    comparison: Comparison
    a: Side
    b: Side
    verdict: str
    mapping: MappingComparison | None = None
    runs: RunsCompared | None = None
    total: TotalComparison | None = None
    tuning: TuningComparison | None = None
    """The two sides' tuning runs (None when neither holds tuning records)."""


class _Read(msgspec.Struct, frozen=True):
    """What one side's records give the comparison."""

    side: Side
    samples: SideSamples
    parts: Parts
    result: SliceResult
    ops: SideOps
    runs: tuple[Run, ...]
    op_runs: dict[OpKey, dict[str, float]]
    spec: SideSpec


class _Opened(msgspec.Struct, frozen=True):
    """One side's slice, window and files, and its connection."""

    con: Connection
    name: str
    workload: str
    slice: str
    span: Window
    spec: SideSpec
    basis: LatencyBasis
    """What the side's own requests allow: end to end where every one has its arrival."""


def _open_side(
    path: Path, wanted: str | None, night: date | None, env: tuple[str, str] | None, which: str
) -> _Opened:
    """One side's slice (of one night, of the files of one environment when asked)."""
    ds = Dataset(path)
    w, s = pick_slice(ds, wanted, which)
    span = night_window(night) if night else EVERYTHING
    con = ds.connect(w, span)
    name = (f"{w}/{s}" if s else w) + (f" on {night.isoformat()}" if night else "")
    sources = None
    if env is not None:
        chosen = select_sources(con, w, *env)
        if not chosen.sources:
            raise UsageError(_none_chosen(which, w, chosen))
        sources = list(chosen.sources)
        con = ds.connect(w, span, sources)
        name += f" [{env[0]}={env[1]}]"
    spec = SideSpec(str(ds.root.resolve()), w, s, night.isoformat() if night else None, sources)
    basis = side_basis(con, w, s, span.start_us, span.end_us)
    return _Opened(con, name, w, s, span, spec, basis)


def _read_side(o: _Opened, path: Path, th: Thresholds, same: bool, basis: LatencyBasis) -> _Read:
    """One side's requests (their latencies on the comparison's basis), ops and runs."""
    con, w, s, span = o.con, o.workload, o.slice, o.span
    got = side_samples(con, w, s, span.start_us, span.end_us, basis)
    ops = side_ops(con, w, s)
    side = Side(
        o.name if same else f"{path.name}:{o.name}",
        str(path),
        w,
        s,
        sum(len(v) for v in got.latency.values()),
        sum(len(v) for v in ops.calls.values()),
        basis,
    )
    return _Read(
        side,
        got,
        side_parts(con, w, s, span.start_us, span.end_us, basis),
        analyze_slice(con, w, s, th),
        ops,
        side_runs(con, w, s, span.start_us, span.end_us),
        op_runs(con, w, s),
        o.spec,
    )


def _renamed(read: _Read, names: dict[str, str]) -> _Read:
    """B's side with the shapes it names otherwise renamed to A's names (`align_names`)."""
    if not names:
        return read
    got = read.samples
    samples = replace(
        got,
        latency=renamed(got.latency, names),
        queue=renamed(got.queue, names),
        compute=renamed(got.compute, names),
    )
    return replace(read, samples=samples, parts=renamed(read.parts, names))


def _none_chosen(which: str, workload: str, c: SourceSelection) -> str:
    """Why a side's environment selection chose no file, and what the files do state."""
    seen = ", ".join(c.seen) if c.seen else "none"
    return (
        f"--{which}: no file of {workload} states {c.key}={c.value} (of {c.files} files, "
        f"{c.unstated} state no {c.key} and {c.ambiguous} several; values stated: {seen})"
    )


def compare_runs(
    a_path: Path,
    b_path: Path,
    out: Path,
    a_slice: str | None = None,
    b_slice: str | None = None,
    a_date: date | None = None,
    b_date: date | None = None,
    th: Thresholds | None = None,
    pdf: bool = True,
    config: Path | None = None,
    a_env: tuple[str, str] | None = None,
    b_env: tuple[str, str] | None = None,
    span: bool = False,
) -> Compared:
    """Compare side B with side A (each a slice, of one night when its date is given: the
    arrivals of that UTC day; of the files of one environment when `*_env` names a key and
    value) and write OUT/compare.json, OUT/compare.html and (`pdf`) OUT/compare.pdf, the
    verdict on its first page. Latencies are end to end where both sides record every
    request's arrival, else (or with `span`) each request's span on both sides."""
    from mapreport import __version__
    from mapreport.report import html as pages

    cfg = load_config(config) if config else None  # a bad config fails before any work
    out_of_datasets(out, a_path, b_path)
    th = th or Thresholds()
    same = a_path == b_path
    oa = _open_side(a_path, a_slice, a_date, a_env, "a")
    ob = _open_side(b_path, b_slice, b_date, b_env, "b")
    basis = shared_basis(oa.basis, ob.basis, span)
    ra = _read_side(oa, a_path, th, same, basis)
    rb = _read_side(ob, b_path, th, same, basis)
    names = align_names(ra.samples.latency, rb.samples.latency)
    rb = _renamed(rb, names)
    a, b = ra.side, rb.side
    key = (a.workload, a.slice, b.workload, b.slice)
    sa, sb = ra.samples, rb.samples
    shapes = compare(
        sa.latency, sb.latency, th, key=key, blocks=(sa.block, sb.block),
        parts=((sa.queue, sa.compute), (sb.queue, sb.compute)),
        pooled=None if sa.pooled is None or sb.pooled is None else (sa.pooled, sb.pooled),
        basis=basis,
        # one run a side: a shift of the whole run is not told from the machine's; test the
        # shapes against it (with runs a side, the run-level rule speaks to the whole)
        relative=min(len(ra.runs), len(rb.runs)) < MIN_RUNS,
    )  # fmt: skip
    shapes = replace(shapes, renamed=tuple(sorted(names.items())))
    c, total = _with_ops(shapes, ra.ops, rb.ops, th, key)
    runs = _runs_compared(ra, rb, th)
    out.mkdir(parents=True, exist_ok=True)
    device = TimeBasis.HOST not in (ra.ops.basis, rb.ops.basis)
    done = packs(c, ra.spec, rb.spec, key, th, ops=device)
    write_packs(out, done)
    evidence = evidence_ids(done)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    mapping, tuning = (
        compare_mapping(ra.result, rb.result),
        compare_tuning(ra.result.compiled.ranking, rb.result.compiled.ranking, th),
    )
    ship = ship_check(c.tail, _targets(cfg, b))
    doc = document(c, a, b, now, mapping, ship, (ra.parts, rb.parts), runs, evidence, total, tuning)
    atomic_write(out / "compare.json", json.dumps(as_json(doc), indent=1, allow_nan=False).encode())
    view = mapping_view(mapping)
    context = {
        "a": a,
        "b": b,
        "c": c,
        "th": th,
        "headline": headline_parts(c, total),
        "basis": basis_sentence(c),
        "blocks": blocks_sentence(c),
        "mean": mean_sentence(c),
        "whole": whole_view(total, c.mix_moved is None),
        "parts": part_lines(c),
        "only_ops": only_lines(c),
        "ship": ship_sentence(ship),
        "runs": runs_view(runs),
        "tail": tail_lines(c, evidence),
        "moved": moved_lines(c, evidence),
        "drill": drill_lines(c, (ra.parts, rb.parts), evidence),
        "lines": lines(c, evidence),
        "op_lines": op_lines(c, evidence),
        "mapping": view,
        "tuning": tuning_sentence(tuning),
        "tuning_rows": tuning_rows(tuning),
        "only_a": c.only_a,
        "only_b": c.only_b,
        "more_a": 0,
        "more_b": 0,
        "left_out": LeftOut(),
        "generated_at": now,
        "version": __version__,
        "css": Markup(pages.css()),
        "plotly_js": "",
    }
    _render(out, context, pdf, c, view, evidence)
    said = (ship_sentence(ship), headline(c, total), tuning_sentence(tuning))
    verdict = " ".join(x for x in said if x)
    return Compared(c, a, b, verdict, mapping, runs, total, tuning)


def _runs_compared(ra: _Read, rb: _Read, th: Thresholds) -> RunsCompared:
    """The run-level comparison of the sides' runs of requests and trace files."""
    return RunsCompared(
        len(ra.runs),
        len(rb.runs),
        runlevel(ra.runs, rb.runs, th),
        trace_files(ra.op_runs),
        trace_files(rb.op_runs),
        compare_op_runs(ra.op_runs, rb.op_runs),
    )


def _render(
    out: Path, context: dict[str, Any], pdf: bool, c: Comparison, view: MappingView | None,
    evidence: dict[tuple[str, ...], str],
) -> None:  # fmt: skip
    """compare.html, and (`pdf`) compare.pdf with part of each long table."""
    from mapreport.report import html as pages

    html = pages.render(
        "compare.html.j2", **context, media="screen", page_js=Markup(pages.page_js())
    )
    atomic_write(out / "compare.html", html.encode())
    if pdf:
        from mapreport.report.pdf import write_pdf

        # the printed page holds part of each long table: thousands of rows are a read for
        # the screen, and laying them out in pages cost minutes and gigabytes
        part = printed(c, view, evidence)
        context |= {
            "lines": part.lines,
            "op_lines": part.op_lines,
            "mapping": part.mapping,
            "only_a": part.only_a,
            "only_b": part.only_b,
            "more_a": part.more_a,
            "more_b": part.more_b,
            "left_out": part.left_out,
            "only_ops": part.only_ops,
        }
        printable = pages.render("compare.html.j2", **context, media="print", page_js=None)
        write_pdf(printable, out / "compare.pdf")


def _with_ops(
    c: Comparison, a: SideOps, b: SideOps, th: Thresholds, key: tuple[str, ...]
) -> tuple[Comparison, TotalComparison | None]:
    """The comparison with both sides' op x shapes (compared, or listed as one side's own),
    and the whole they add up to."""
    if a.calls or b.calls:
        cats = {**a.categories, **b.categories}
        rows, only_a, only_b = compare_ops(a.calls, b.calls, th, key, categories=cats)
        c = replace(c, ops=rows, ops_only_a=only_a, ops_only_b=only_b)
    return c, compare_total(a, b, th.bootstrap_resamples, seed_for(th.seed, *key, "total"))


def out_of_datasets(out: Path, a_path: Path, b_path: Path) -> None:
    """Refuse an output folder that is dataset A or B or inside either (links resolved): its
    evidence packs would go into the dataset's own `evidence/` folder, replacing the dataset's
    packs, and `mapreport check` would then call the dataset damaged."""
    where = out.resolve()
    for which, path in (("A", a_path), ("B", b_path)):
        root = path.resolve()
        if where.is_relative_to(root):
            raise UsageError(
                f"--out {out} is inside dataset {which} ({path}): the comparison's evidence "
                "packs would be written into the dataset, which `mapreport check` then calls "
                "damaged; choose a folder outside both datasets"
            )


def _targets(cfg: Config | None, side: Side) -> dict[str, float]:
    """The SLA targets the configuration sets for a side's slice (none without one)."""
    if cfg is None:
        return {}
    sla = cfg.slice_config(side.workload, side.slice)
    if sla is None:
        return {}
    found = {"p95": sla.sla_p95_us, "p99": sla.sla_p99_us}
    return {q: v for q, v in found.items() if v}
