"""The evidence packs of a profiler trace's device findings (an op x shape's headroom, the
device's idle share, graph padding): their query and their figure recomputed from the pack's
rows by the analysis's own functions (`roofline.headroom_of`, `device_actions.idle_evidence`,
`graphs.buckets_of`), with the same seeds."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mapreport.analysis.actions.device_actions import idle_evidence
from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.packs import Pack, PackKind, Recomputed, Reduction
from mapreport.analysis.base.query import inline
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.device.graphs import PACK as GRAPH_PACK
from mapreport.analysis.device.graphs import buckets_of, captures_of, padding_seed, steps_of
from mapreport.analysis.device.roofline import CALLS, headroom_of
from mapreport.analysis.device.timeline import COMMUNICATION_KERNELS, of_rows
from mapreport.analysis.device.timeline import ROWS as TIMELINE_ROWS


def _headroom_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    selection = {k: getattr(params, k) for k in ("op", "category", "shape", "types")}
    at = {"w": workload, "s": slice_}
    return inline(CALLS, at | selection | {"concrete": params.concrete})


def _padding_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    return inline(GRAPH_PACK, {"w": workload, "s": slice_})


def _idle_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    return inline(TIMELINE_ROWS, {"w": workload, "s": slice_, "comm": COMMUNICATION_KERNELS})


def _headroom(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    if not rows.num_rows:
        return Recomputed(None, 0, None, 0, files)
    params = p.typed()
    durations = [float(d) for d in rows["dur"].to_pylist()]
    seed = seed_for(th.seed, p.workload, p.slice, *params.seed_key, "headroom")
    value, n, head = headroom_of(durations, params.roof_us, th, seed)
    return Recomputed(value, n, (head.low, head.high), rows.num_rows, files)


def _idle(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    if not rows.num_rows:
        return Recomputed(None, 0, None, 0, files)
    cols = [rows[c].to_pylist() for c in ("dev", "trace", "activity", "ts_us", "end_us")]
    seed = seed_for(th.seed, p.workload, p.slice, "device_idle")
    ev = idle_evidence(of_rows(*cols), th, seed)
    ci = None if ev.ci is None else (ev.ci.low, ev.ci.high)
    return Recomputed(ev.value, ev.n, ci, rows.num_rows, files)


def _padding(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    if not rows.num_rows:
        return Recomputed(None, 0, None, 0, files)
    table = rows.to_pylist()
    captures = captures_of([(x["name"], x["capture_us"]) for x in table if x["kind"] == "capture"])
    steps = steps_of(
        [
            (x["name"], x["source_id"], x["launches"], x["graph_us"], x["eager_us"])
            for x in table
            if x["kind"] == "step"
        ]
    )
    f = buckets_of(captures, steps, th, padding_seed(th, p.workload, p.slice)).finding
    if f is None:
        return Recomputed(None, 0, None, rows.num_rows, files)
    ci = None if f.evidence.ci is None else (f.evidence.ci.low, f.evidence.ci.high)
    return Recomputed(f.evidence.value, f.evidence.n, ci, rows.num_rows, files)


KINDS = {
    Reduction.HEADROOM: PackKind(_headroom_sql, _headroom),
    Reduction.DEVICE_IDLE: PackKind(_idle_sql, _idle),
    Reduction.GRAPH_PADDING: PackKind(_padding_sql, _padding),
}
"""The device findings' packs: each reduction's query and recompute function."""
