"""The evidence packs of a profiler trace's device findings (an op x shape's headroom, the
device's idle share, graph padding): their query, their parameters, and their figure recomputed
from the pack's rows by the analysis's own functions."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mapreport.analysis.actions.device_actions import idle_evidence
from mapreport.analysis.base.common import Evidence, Thresholds
from mapreport.analysis.base.query import inline
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.device.graphs import PACK as GRAPH_PACK
from mapreport.analysis.device.graphs import buckets_of, captures_of, padding_seed, steps_of
from mapreport.analysis.device.roofline import CALLS, headroom_of
from mapreport.analysis.device.timeline import COMMUNICATION_KERNELS, of_rows
from mapreport.analysis.device.timeline import ROWS as TIMELINE_ROWS
from mapreport.analysis.steps.results import SliceResult
from mapreport.run.pack_params import HeadroomParams, NoParams, Recomputed, Reduction

DEVICE_REDUCTIONS = frozenset({Reduction.HEADROOM, Reduction.DEVICE_IDLE, Reduction.GRAPH_PADDING})


def device_sql(reduction: Reduction, workload: str, slice_: str, params: Any) -> str | None:
    """The self-contained SQL of a device pack (None for any other reduction)."""
    at = {"w": workload, "s": slice_}
    if isinstance(params, HeadroomParams):
        selection = {k: getattr(params, k) for k in ("op", "category", "shape", "types")}
        return inline(CALLS, at | selection | {"concrete": params.concrete})
    if reduction == Reduction.GRAPH_PADDING:
        return inline(GRAPH_PACK, at)
    if reduction == Reduction.DEVICE_IDLE:
        return inline(TIMELINE_ROWS, at | {"comm": COMMUNICATION_KERNELS})
    return None


def device_pack(r: SliceResult, shape: str, ev: Evidence) -> tuple[Reduction, Any] | None:
    """The reduction and parameters of a device finding's pack (None for any other)."""
    found = [f.row for f in (r.roofline.findings if r.roofline else ()) if f.row.label == shape]
    roof = found[0].roof_us if found else None
    if ev.metric == "headroom_us" and roof is not None:
        op, category, op_shape, types, concrete = found[0].selection
        seed_key = [op, op_shape, types]
        return Reduction.HEADROOM, HeadroomParams(
            op, category, op_shape, types, concrete, roof, seed_key
        )
    if ev.metric == "device_idle_share":
        return Reduction.DEVICE_IDLE, NoParams()
    if ev.metric == "padding_waste_us":
        return Reduction.GRAPH_PADDING, NoParams()
    return None


def recompute_device(
    reduction: Reduction,
    workload: str,
    slice_: str,
    params: Any,
    rows: pa.Table,
    th: Thresholds,
    files: tuple[str, ...],
) -> Recomputed:
    """A device pack's figure, n and CI from its rows."""
    if not rows.num_rows:
        return Recomputed(None, 0, None, 0, files)
    if reduction == Reduction.HEADROOM:
        durations = [float(d) for d in rows["dur"].to_pylist()]
        seed = seed_for(th.seed, workload, slice_, *params.seed_key, "headroom")
        value, n, head = headroom_of(durations, params.roof_us, th, seed)
        return Recomputed(value, n, (head.low, head.high), rows.num_rows, files)
    if reduction == Reduction.DEVICE_IDLE:
        cols = [rows[c].to_pylist() for c in ("dev", "trace", "activity", "ts_us", "end_us")]
        seed = seed_for(th.seed, workload, slice_, "device_idle")
        ev = idle_evidence(of_rows(*cols), th, seed)
    else:
        table = rows.to_pylist()
        captures = captures_of(
            [(x["name"], x["capture_us"]) for x in table if x["kind"] == "capture"]
        )
        steps = steps_of(
            [
                (x["name"], x["source_id"], x["launches"], x["graph_us"], x["eager_us"])
                for x in table
                if x["kind"] == "step"
            ]
        )
        f = buckets_of(captures, steps, th, padding_seed(th, workload, slice_)).finding
        if f is None:
            return Recomputed(None, 0, None, rows.num_rows, files)
        ev = f.evidence
    ci = None if ev.ci is None else (ev.ci.low, ev.ci.high)
    return Recomputed(ev.value, ev.n, ci, rows.num_rows, files)
