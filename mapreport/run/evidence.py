"""Evidence packs: for every bottleneck class and every action of a slice, the rows its figure
rests on (`<id>.parquet`, with `source_id` and `line`), the self-contained SQL that selects
them from the dataset (`<id>.sql`), and a spec (`<id>.json`: the figure, its n and CI as the
report states them, the window, the thresholds and how the figure follows from the rows).

The SQL defines the slice's objects as CTEs of the same text the analysis creates them from
(`query.slice_definitions`, `blocking.blocking_definitions`) and runs the analysis's own selection
(`tail.tail_sql`, the primary plan's compute samples, the blocked requests). The figure follows
from the rows by the analysis's own functions (`attribute`, `shares`, `resample`, `pooled`,
`shape_gain`, `shape_accuracy`, the Wilson interval), with the same seeds: nothing is computed
a second way. `mapreport explain ID --dataset DS` reruns the SQL against the dataset and the
reduction, and says whether the figure, n and CI are the ones the report stated.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mapreport.analysis.actions.actions import SLICE_WIDE, Action, class_id
from mapreport.analysis.base.common import Evidence, Thresholds
from mapreport.analysis.base.query import (
    BLOCKED_TABLE,
    SAMPLES,
    SLICE_TABLE,
    SqlValue,
    as_ctes,
    inline,
    slice_definitions,
)
from mapreport.analysis.base.stats import (
    Sample,
    SortedArray,
    bootstrap_relative_error,
    quantile,
    seed_for,
    wilson_interval,
)
from mapreport.analysis.loop.history import p95_change
from mapreport.analysis.mapping.accuracy import shape_accuracy
from mapreport.analysis.mapping.consistency import difference
from mapreport.analysis.mapping.environment import check_environment
from mapreport.analysis.mapping.telemetry import (
    POINT_ROWS,
    points_of,
    series_of,
    vocabulary_named,
    windows,
)
from mapreport.analysis.serving.adaptation import shape_gain
from mapreport.analysis.serving.blocking import blocking_definitions
from mapreport.analysis.serving.classify import ShapeClass
from mapreport.analysis.serving.tail import (
    attribute,
    group_tails,
    pooled,
    resample,
    tail_sql,
)
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.connection import Connection
from mapreport.core.errors import DatasetError, UsageError
from mapreport.core.files import atomic_write
from mapreport.core.kinds import Driver
from mapreport.core.window import Window
from mapreport.dataset.store import Dataset
from mapreport.report.words import metric
from mapreport.run.device_packs import (
    DEVICE_REDUCTIONS,
    device_pack,
    device_sql,
    recompute_device,
)
from mapreport.run.pack_params import (
    PARAMS,
    NoParams,
    QueueParams,
    Recomputed,
    Reduction,
    RegressionParams,
    SampleParams,
    SourceParams,
    TailParams,
)

PACKS = "evidence"
"""The folder of a slice's packs (under its report folder) and of their specs in the dataset."""
MATCH = 1e-12
"""Relative difference up to which a recomputed figure is the stated one (float summation)."""


@dataclass(frozen=True)
class Pack:
    """One class's or action's evidence: how to select its rows and what they must give."""

    id: str
    subject: str
    """`action <kind>` or `class <class>`."""
    workload: str
    slice: str
    shape: str
    metric: str
    reduction: Reduction
    sql: str
    params: dict[str, Any]
    figure: float | None
    n: int
    ci: tuple[float, float] | None
    window: dict[str, Any]
    thresholds: dict[str, Any]

    def spec(self) -> dict[str, Any]:
        """The pack as JSON-ready builtins."""
        return dataclasses.asdict(self)

    def typed(self) -> Any:
        """The pack's parameters as its reduction's dataclass (`PARAMS`)."""
        return msgspec.convert(self.params, PARAMS[self.reduction], strict=True)

    @staticmethod
    def from_spec(data: bytes) -> Pack:
        """A pack back from its spec's JSON, every field and parameter checked for its type
        (msgspec.ValidationError or DecodeError when one is missing, mistyped or unknown)."""
        p = msgspec.json.decode(data, type=Pack, strict=True)
        p.typed()
        msgspec.convert(p.thresholds, Thresholds, strict=True)
        window_of(p)
        return p


def _tables(workload: str, slice_: str) -> str:
    return as_ctes(
        [
            *slice_definitions(workload, slice_),
            *blocking_definitions(workload, slice_),
        ]
    )


def _samples_sql(workload: str, slice_: str, shape: str, events: bool) -> str:
    """The shape's ok compute samples on its primary plan (and its adaptation events)."""
    sql = (
        f"SELECT 'sample' AS kind, shape, variant AS what, compute_us AS value, source_id, line "
        f"FROM ({SAMPLES}) WHERE shape = $shape"
    )
    if events:
        sql += (
            " UNION ALL SELECT 'event', shape, event, coalesce(dur_us, 0), source_id, line "
            "FROM adaptation_event WHERE workload = $w AND slice = $s AND shape = $shape"
        )
    select = f"SELECT * FROM ({sql}) ORDER BY kind, what, value, source_id, line"
    return f"{_tables(workload, slice_)}\n" + inline(
        select, {"w": workload, "s": slice_, "shape": shape}
    )


def _queue_check_sql(workload: str, slice_: str, q: QueueParams) -> str:
    """The records inside the check's window and the server's counters per scrape."""
    metrics = sorted({m for m, _ in vocabulary_named(q.server).series()})
    select = (
        "SELECT 'record' AS kind, source_id, NULL::INTEGER AS scrape, "
        "arrival_us AS scrape_us, NULL AS metric, NULL AS sample, NULL AS type, queue_us AS value"
        f" FROM {SLICE_TABLE} WHERE status = 'ok' AND queue_us IS NOT NULL"
        " AND arrival_us > $start AND arrival_us <= $end"
        "\nUNION ALL\nSELECT 'scrape' AS kind, * FROM ("
        f"{POINT_ROWS}) ORDER BY kind, source_id, scrape, scrape_us, metric, sample, type, value"
    )
    bound: dict[str, SqlValue] = {
        "w": workload,
        "s": slice_,
        "metrics": metrics,
        "start": float(q.start_us),
        "end": float(q.end_us),
    }
    return f"{_tables(workload, slice_)}\n" + inline(select, bound)


def pack_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    """The self-contained SQL of a pack, built by this code from the pack's parameters alone:
    what `write_packs` writes and what `explain` runs (it never runs SQL text read from a
    dataset). Every value enters as a literal written in one pass (`query.inline`)."""
    if isinstance(params, TailParams):
        pooled = shape == SLICE_WIDE
        select = tail_sql(params.budgets, None if pooled else shape)
        where = inline(" WHERE list_contains($shapes, shape)", {"shapes": params.shapes})
        return f"{_tables(workload, slice_)}\nSELECT * FROM ({select}){where if pooled else ''}"
    if reduction in (Reduction.NET_GAIN, Reduction.APE, Reduction.DRIFT):
        return _samples_sql(workload, slice_, shape, events=reduction == Reduction.NET_GAIN)
    if reduction == Reduction.REGRESSION:
        select = inline(
            f"SELECT latency_us AS value, source_id, line FROM {SLICE_TABLE} "
            "WHERE shape = $shape AND status = 'ok' ORDER BY value, source_id, line",
            {"shape": shape},
        )
        return f"{_tables(workload, slice_)}\n{select}"
    if reduction == Reduction.BLOCKED_SHARE:
        return (
            f"{_tables(workload, slice_)}\nSELECT b.*, (SELECT count(*) FROM {SLICE_TABLE} "
            f"WHERE status = 'ok') AS ok FROM {BLOCKED_TABLE} b WHERE blocked_by IS NOT NULL "
            "ORDER BY source_id, line"
        )
    if isinstance(params, QueueParams):
        return _queue_check_sql(workload, slice_, params)
    device = device_sql(reduction, workload, slice_, params)
    if device is not None:
        return device
    ids = {"ids": params.sources}
    if reduction == Reduction.ENVIRONMENT:
        return inline(
            "SELECT * FROM environment WHERE list_contains($ids, source_id) "
            "ORDER BY source_id, line",
            ids,
        )
    return inline(
        "SELECT source_id, path, format, rows, rejected FROM ingest_log "
        "WHERE list_contains($ids, source_id) ORDER BY path",
        ids,
    )


def _spec(
    r: SliceResult,
    pid: str,
    subject: str,
    shape: str,
    ev: Evidence,
    reduction: Reduction,
    params: Any,
) -> Pack:
    ci = None if ev.ci is None else (ev.ci.low, ev.ci.high)
    return Pack(
        pid,
        subject,
        r.workload,
        r.slice,
        shape,
        ev.metric,
        reduction,
        pack_sql(reduction, r.workload, r.slice, shape, params),
        msgspec.to_builtins(params),
        ev.value,
        ev.n,
        ci,
        _window(r.period),
        dataclasses.asdict(r.thresholds),
    )


def _window(w: Window) -> dict[str, Any]:
    return {**dataclasses.asdict(w), "kind": w.kind.value}


def _tail_pack(r: SliceResult, pid: str, subject: str, shape: str, ev: Evidence) -> Pack:
    driver = Driver(ev.metric.split(".", 1)[1])
    whole = shape == SLICE_WIDE
    shapes = [m.shape for m in r.shapes if m.tail is not None] if whole else [shape]
    params = TailParams(driver, shapes, dict(r.budgets))
    return _spec(r, pid, subject, shape, ev, Reduction.TAIL_SHARE, params)


def _pack(r: SliceResult, pid: str, subject: str, shape: str, ev: Evidence) -> Pack:
    """The pack of one piece of evidence."""
    m = next((x for x in r.shapes if x.shape == shape), None)
    if ev.metric.startswith("tail_share."):
        return _tail_pack(r, pid, subject, shape, ev)
    if ev.metric == "net_gain_p50" and m is not None:
        params = SampleParams(covered=m.covered)
        return _spec(r, pid, subject, shape, ev, Reduction.NET_GAIN, params)
    if ev.metric == "ape" and m is not None:
        params = SampleParams(predicted_us=m.accuracy.predicted_us)
        return _spec(r, pid, subject, shape, ev, Reduction.APE, params)
    if ev.metric == "signed_error_drift" and m is not None:
        d = next(x for x in r.drifts if x.shape == shape)
        params = SampleParams(predicted_us=m.accuracy.predicted_us, baseline=d.baseline)
        return _spec(r, pid, subject, shape, ev, Reduction.DRIFT, params)
    if ev.metric == "blocked_share":
        return _spec(r, pid, subject, shape, ev, Reduction.BLOCKED_SHARE, NoParams())
    moved = [g for g in (r.history.regressions if r.history else ()) if g.shape == shape]
    if ev.metric == "latency_p95_change" and moved:
        reg = RegressionParams(list(moved[0].reference_quantiles), moved[0].reference_n)
        return _spec(r, pid, subject, shape, ev, Reduction.REGRESSION, reg)
    if ev.metric == "consistency.queue_mean_us" and r.queue_check and r.telemetry:
        c = r.queue_check
        queue = QueueParams(r.telemetry.server, c.start_us, c.end_us)
        return _spec(r, pid, subject, shape, ev, Reduction.QUEUE_CHECK, queue)
    device = device_pack(r, shape, ev)
    if device is not None:
        return _spec(r, pid, subject, shape, ev, *device)
    kind = Reduction.ENVIRONMENT if ev.metric == "environment.mismatches" else Reduction.RECORDS
    return _spec(r, pid, subject, shape, ev, kind, SourceParams(list(ev.sources)))


def packs(r: SliceResult) -> list[Pack]:
    """Every class with evidence (each shape's, the slice's pooled tail) and every action."""
    out: list[tuple[str, str, str, ShapeClass | Action]] = [
        (class_id(r.workload, r.slice, m.shape), f"class {m.diagnosis.cls}", m.shape, m.diagnosis)
        for m in r.shapes
        if m.diagnosis.evidence is not None
    ]
    if r.tail_class is not None and r.tail_class.evidence is not None:
        pid = class_id(r.workload, r.slice, SLICE_WIDE)
        out.append((pid, f"class {r.tail_class.cls}", SLICE_WIDE, r.tail_class))
    out += [(a.id, f"action {a.kind}", a.shape, a) for a in r.actions]
    return [
        _pack(r, pid, subject, shape, x.evidence) for pid, subject, shape, x in out if x.evidence
    ]


def write_packs(con: Connection, r: SliceResult, folder: Path, specs: Path) -> int:
    """Write each pack's rows, SQL and spec under `folder`, and its spec under `specs` (the
    dataset's copy `explain` reads); the pack folder holds tonight's packs only."""
    folder.mkdir(parents=True, exist_ok=True)
    specs.mkdir(parents=True, exist_ok=True)
    done = packs(r)
    keep = {p.id for p in done}
    for old in folder.iterdir():
        if old.stem not in keep:
            old.unlink()
    tails: pa.Table | None = None
    for p in done:
        if p.reduction == Reduction.TAIL_SHARE:
            # every tail pack's rows are those of the slice's one tail query for its shapes:
            # run it (and the blocking chain it joins) once, not once per pack
            if tails is None:
                tails = con.sql(
                    f"{_tables(r.workload, r.slice)}\nSELECT * FROM ({tail_sql(r.budgets)})"
                ).to_arrow_table()
            mask = pc.is_in(tails["shape"], pa.array(p.typed().shapes, pa.string()))
            rows = tails.filter(mask)
        else:
            rows = con.sql(p.sql).to_arrow_table()
        pq.write_table(rows, folder / f"{p.id}.parquet")
        atomic_write(folder / f"{p.id}.sql", (p.sql.strip() + ";\n").encode())
        spec = json.dumps(p.spec(), indent=1, sort_keys=True).encode()
        atomic_write(folder / f"{p.id}.json", spec)
        atomic_write(specs / f"{p.id}.json", spec)
    return len(done)


def close(a: float | None, b: float | None) -> bool:
    """A recomputed figure is the stated one: equal within `MATCH` (both None counts too)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= MATCH * max(abs(a), abs(b), 1e-300)


def reproduced(p: Pack, x: Recomputed) -> bool:
    """The recomputed figure, n and CI are the ones the report stated (to MATCH)."""
    same_ci = (p.ci is None and x.ci is None) or (
        p.ci is not None and x.ci is not None and all(map(close, p.ci, x.ci))
    )
    return close(p.figure, x.figure) and p.n == x.n and same_ci


def recompute(p: Pack, rows: pa.Table) -> Recomputed:
    """The figure of a pack from its rows, by the analysis's own functions."""
    th = msgspec.convert(p.thresholds, Thresholds, strict=True)
    params = p.typed()
    files = tuple(sorted(set(rows["source_id"].to_pylist()))) if rows.num_rows else ()
    if p.reduction == Reduction.TAIL_SHARE:
        tails = group_tails(rows)
        # each shape's tail resampled with its own seed, as the analysis did (`tail.pooled`)
        resampled = [
            resample(
                attribute(tails[s][0]),
                th.bootstrap_resamples,
                seed_for(th.seed, p.workload, p.slice, s, "tail"),
            )
            for s in params.shapes
            if s in tails
        ]
        parts, sh, cis = pooled(resampled)
        ci = cis.get(params.driver)
        interval = None if ci is None else (ci.low, ci.high)
        share = None if sh is None else sh.get(params.driver)
        return Recomputed(share, len(parts), interval, rows.num_rows, files)
    if p.reduction in (Reduction.NET_GAIN, Reduction.APE, Reduction.DRIFT):
        return _from_samples(p, params, rows, th, files)
    if p.reduction == Reduction.BLOCKED_SHARE:
        ok = int(rows["ok"][0].as_py()) if rows.num_rows else 0
        blocked = rows.num_rows
        wilson = wilson_interval(blocked, ok) if ok else None
        return Recomputed(blocked / ok if ok else None, ok, wilson, blocked, files)
    if p.reduction == Reduction.QUEUE_CHECK:
        return _queue_check(params, rows, files)
    if p.reduction == Reduction.REGRESSION:
        lat = [v for v in rows["value"].to_pylist() if v is not None]
        if not lat:
            return Recomputed(None, rows.num_rows, None, rows.num_rows, files)
        now = np.quantile(np.array(lat), np.linspace(0, 1, 101)).tolist()
        seed = seed_for(th.seed, p.workload, p.slice, p.shape, "history")
        change, ci = p95_change(
            params.reference, params.n_ref, now, rows.num_rows, th.bootstrap_resamples, seed
        )
        return Recomputed(change, rows.num_rows, (ci.low, ci.high), rows.num_rows, files)
    if p.reduction in DEVICE_REDUCTIONS:
        return recompute_device(p.reduction, p.workload, p.slice, params, rows, th, files)
    if p.reduction == Reduction.ENVIRONMENT:
        check = check_environment(rows.to_pylist())
        return Recomputed(float(len(check.mismatches)), 0, None, rows.num_rows, files)
    return Recomputed(None, 0, None, rows.num_rows, files)


def _queue_check(q: QueueParams, rows: pa.Table, files: tuple[str, ...]) -> Recomputed:
    """The records' mean against the counters' total, by the analysis's own functions."""
    vocab = vocabulary_named(q.server)
    recs = [x["value"] for x in rows.to_pylist() if x["kind"] == "record"]
    cols = ("source_id", "scrape", "scrape_us", "metric", "sample", "type", "value")
    scraped = [tuple(x[c] for c in cols) for x in rows.to_pylist() if x["kind"] == "scrape"]
    _, total = windows(series_of(points_of(scraped, vocab)), vocab, {})
    if not recs or total is None or total.queue_mean_us is None:
        return Recomputed(None, len(recs), None, rows.num_rows, files)
    figure = difference(sum(recs) / len(recs), total.queue_mean_us)
    return Recomputed(figure, len(recs), None, rows.num_rows, files)


def _from_samples(
    p: Pack, params: SampleParams, rows: pa.Table, th: Thresholds, files: tuple[str, ...]
) -> Recomputed:
    samples: dict[str, list[float]] = {}
    n_events, cost = 0, 0.0
    for kind, what, value in zip(
        rows["kind"].to_pylist(), rows["what"].to_pylist(), rows["value"].to_pylist(), strict=True
    ):
        if kind == "sample":
            samples.setdefault(what, []).append(value)
        else:
            n_events, cost = n_events + 1, cost + value
    arrays: dict[str, Sample] = {k: SortedArray(v) for k, v in samples.items()}
    if p.reduction == Reduction.NET_GAIN:
        key = (p.workload, p.slice, p.shape)
        g = shape_gain(key, bool(params.covered), arrays, (n_events, cost), th)
        gci = g.net_gain_p50_ci
        return Recomputed(
            g.net_gain_p50,
            g.n_adapted,
            None if gci is None else (gci.low, gci.high),
            rows.num_rows,
            files,
        )
    static = arrays.get("static", SortedArray([]))
    p50 = quantile(static, 0.5) if len(static) else None
    acc = shape_accuracy(True, params.predicted_us, len(static), p50, th)
    ci = None
    if acc.signed_error is not None and acc.predicted_us is not None:
        seed = seed_for(th.seed, p.workload, p.slice, p.shape, "error")
        ci = bootstrap_relative_error(static, acc.predicted_us, th.bootstrap_resamples, seed)
    if p.reduction == Reduction.DRIFT:
        base = params.baseline or 0.0
        moved = None if acc.signed_error is None else acc.signed_error - base
        shifted = None if ci is None else (ci[0] - base, ci[1] - base)
        return Recomputed(moved, len(static), shifted, rows.num_rows, files)
    return Recomputed(acc.ape, len(static), ci, rows.num_rows, files)


PACK_ID = re.compile(r"[0-9a-f]{12}")
"""An evidence pack's id: the first 12 hex digits of a SHA-256 (`actions.action_id`)."""


class SpecError(DatasetError):
    """A pack spec in a dataset that cannot be used: unreadable, incomplete, of an unknown
    kind, or holding SQL other than the SQL its parameters give (exit 5)."""


def load(specs: Path, pid: str) -> Pack | None:
    """The pack spec of `pid` in a dataset's evidence folder (None when there is none). The id
    is checked for its form before any path is made of it; the spec is checked field by
    field, and its SQL against the SQL this code builds from its parameters."""
    if not PACK_ID.fullmatch(pid):
        raise UsageError(
            f"{pid!r} is not an evidence pack id (12 hexadecimal digits, as findings.json's "
            "actions[].id and the report's evidence links give them)"
        )
    path = specs / f"{pid}.json"
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SpecError(f"{path}: cannot read the pack spec: {e.strerror}") from None
    try:
        p = Pack.from_spec(data)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
        raise SpecError(f"{path}: not a usable pack spec: {str(e).splitlines()[0]}") from None
    if p.id != pid:
        raise SpecError(f"{path}: the spec is of pack {p.id!r}, not {pid!r}")
    params = p.typed()
    if p.reduction == Reduction.DRIFT and params.baseline is None:
        raise SpecError(f"{path}: not a usable pack spec: a drift pack needs params.baseline")
    rebuilt = pack_sql(p.reduction, p.workload, p.slice, p.shape, params)
    if p.sql != rebuilt:
        raise SpecError(
            f"{path}: its SQL is not the SQL mapreport builds from the spec's parameters "
            "(tampered with, or written by another version of mapreport: report the slice "
            "again); nothing was run"
        )
    return dataclasses.replace(p, sql=rebuilt)  # the text this code built, not the file's


def window_of(p: Pack) -> Window:
    """The window a pack's figure was computed over."""
    return msgspec.convert(p.window, Window, strict=True)


def explain(dataset_dir: Path, pid: str) -> tuple[list[str], bool]:
    """Rerun a pack's query against the dataset and its figure from the rows: the lines to
    print and whether the report's figure, n and CI are reproduced. The query run is the one
    this code builds from the spec's parameters (`pack_sql`), never text read from the
    dataset."""
    ds = Dataset(dataset_dir)
    p = load(ds.root / PACKS, pid)
    if p is None:
        raise UsageError(
            f"no evidence pack {pid!r} in {ds.root / PACKS} (the ids are findings.json's "
            "actions[].id and the report's evidence links)"
        )
    con = ds.connect(p.workload, window_of(p))
    try:
        rows = con.sql(p.sql).to_arrow_table()  # built by `load` from the spec's parameters
    except duckdb.Error as e:
        raise DatasetError(f"pack {pid}: its query no longer runs on {ds.root}: {e}") from None
    x = recompute(p, rows)
    paths = dict(
        con.execute(
            "SELECT source_id, path FROM ingest_log WHERE list_contains($ids, source_id)",
            {"ids": list(x.files)},
        ).fetchall()
    )
    name = f"{p.workload}/{p.slice}" if p.slice else p.workload
    where = "the whole slice" if p.shape == SLICE_WIDE else p.shape
    ok = reproduced(p, x)

    def ci(c: tuple[float, float] | None) -> str:
        return "-" if c is None else f"[{c[0]:.6g}, {c[1]:.6g}]"

    def fig(v: float | None) -> str:
        return "-" if v is None else f"{v:.6g}"

    lines = [
        f"{p.subject} of {name} at {where} (pack {p.id}, window {p.window['spec']})",
        f"{metric(p.metric)}: {fig(x.figure)} (report: {fig(p.figure)}), n = {x.n} "
        f"(report: {p.n}), 95% CI {ci(x.ci)} (report: {ci(p.ci)})",
        "reproduced exactly"
        if ok
        else "NOT reproduced: the dataset no longer holds what the report was computed from",
        f"{x.rows} row(s) from {len(x.files)} file(s):",
        *(f"  {paths.get(f, '(no longer in the dataset)')} ({f})" for f in x.files),
        f'SQL: {ds.root / PACKS / (p.id + ".json")} ("sql"); the report\'s copy: '
        f"evidence/{p.id}.sql",
    ]
    return lines, ok
