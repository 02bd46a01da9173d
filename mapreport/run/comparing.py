"""`mapreport compare`: two runs (two datasets, or two slices of one) read, compared per
request shape, and written as compare.html and compare.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path

from markupsafe import Markup

from mapreport.analysis.common import Thresholds
from mapreport.analysis.compare import (
    Comparison,
    compare,
    compare_ops,
    op_samples,
    ship_check,
    side_parts,
    side_samples,
)
from mapreport.analysis.compare_mapping import MappingComparison, compare_mapping
from mapreport.analysis.query import slices
from mapreport.analysis.slice import analyze_slice
from mapreport.core.errors import UsageError
from mapreport.core.files import atomic_write
from mapreport.core.window import EVERYTHING, night_window
from mapreport.dataset.store import Dataset
from mapreport.report.compare import (
    Side,
    document,
    headline,
    lines,
    mapping_view,
    op_lines,
    ship_sentence,
)
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


@dataclass(frozen=True)
class Compared:
    """What `compare_runs` compared and concluded."""

    comparison: Comparison
    a: Side
    b: Side
    verdict: str
    mapping: MappingComparison | None = None


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
) -> Compared:
    """Compare side B with side A (each a slice, of one night when its date is given: the
    arrivals of that UTC day) and write OUT/compare.json, OUT/compare.html and (`pdf`)
    OUT/compare.pdf, the verdict on its first page."""
    from mapreport import __version__
    from mapreport.report import html as pages

    cfg = load_config(config) if config else None  # a bad config fails before any work
    sides = []
    samples = []
    ops = []
    results = []
    parts = []
    for path, wanted, night, which in (
        (a_path, a_slice, a_date, "a"),
        (b_path, b_slice, b_date, "b"),
    ):
        ds = Dataset(path)
        w, s = pick_slice(ds, wanted, which)
        span = night_window(night) if night else EVERYTHING
        con = ds.connect(w, span)
        got = side_samples(con, w, s, span.start_us, span.end_us)
        parts.append(side_parts(con, w, s, span.start_us, span.end_us))
        results.append(analyze_slice(con, w, s, th or Thresholds()))
        name = (f"{w}/{s}" if s else w) + (f" on {night.isoformat()}" if night else "")
        label = name if a_path == b_path else f"{path.name}:{name}"
        requests = sum(len(v) for v in got.values())
        ops.append(op_samples(con, w, s))
        sides.append(Side(label, str(path), w, s, requests))
        samples.append(got)
    a, b = sides
    th = th or Thresholds()
    key = (a.workload, a.slice, b.workload, b.slice)
    c = compare(samples[0], samples[1], th, key=key)
    if ops[0] and ops[1]:
        rows, only_a, only_b = compare_ops(ops[0], ops[1], th, key)
        c = replace(c, ops=rows, ops_only_a=only_a, ops_only_b=only_b)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    mapping = compare_mapping(results[0], results[1])
    ship = ship_check(c.tail, _targets(cfg, b))
    doc = document(c, a, b, now, mapping, ship, (parts[0], parts[1]))
    atomic_write(out / "compare.json", json.dumps(doc, indent=1, allow_nan=False).encode())
    context = {
        "a": a,
        "b": b,
        "c": c,
        "th": th,
        "headline": headline(c),
        "ship": ship_sentence(ship),
        "lines": lines(c),
        "op_lines": op_lines(c),
        "mapping": mapping_view(mapping),
        "generated_at": now,
        "version": __version__,
        "css": Markup(pages.css()),
        "plotly_js": "",
    }
    html = pages.render(
        "compare.html.j2", **context, media="screen", page_js=Markup(pages.page_js())
    )
    atomic_write(out / "compare.html", html.encode())
    if pdf:
        from mapreport.report.pdf import write_pdf

        printable = pages.render("compare.html.j2", **context, media="print", page_js=None)
        write_pdf(printable, out / "compare.pdf")
    return Compared(c, a, b, f"{ship_sentence(ship)} {headline(c)}", mapping)


def _targets(cfg: Config | None, side: Side) -> dict[str, float]:
    """The SLA targets the configuration sets for a side's slice (none without one)."""
    if cfg is None:
        return {}
    sla = cfg.slice_config(side.workload, side.slice)
    if sla is None:
        return {}
    found = {"p95": sla.sla_p95_us, "p99": sla.sla_p99_us}
    return {q: v for q, v in found.items() if v}
