"""A slice's evidence packs: for every bottleneck class and every action with evidence, the
pack that reproduces its figure (docs/evidence.md), chosen by the evidence's metric or, where
an action's kind states them, the packs it asks for (`Action.packs`); a pack's SQL and figure
are built by the one kind its reduction names (`base.packs.KINDS`)."""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa

from mapreport.analysis.actions import device_packs
from mapreport.analysis.actions.actions import Action, class_id
from mapreport.analysis.base.common import SLICE_WIDE, Evidence, Thresholds
from mapreport.analysis.base.packs import (
    KINDS,
    HeadroomParams,
    NoParams,
    Pack,
    QueueParams,
    Recomputed,
    RegressionParams,
    SampleParams,
    SourceParams,
    TailParams,
)
from mapreport.analysis.base.query import literal
from mapreport.analysis.loop import packs as loop_packs
from mapreport.analysis.serving import packs as serving_packs
from mapreport.analysis.serving.classify import ShapeClass
from mapreport.analysis.steps.results import SliceResult
from mapreport.analysis.tuning import packs as tuning_packs
from mapreport.core.kinds import Driver, Reduction
from mapreport.core.records import as_dict
from mapreport.core.window import Window

FAMILIES = (serving_packs, loop_packs, device_packs, tuning_packs)
"""The families whose figures have packs, imported so their kinds are declared (`declare`)
before a pack is built; an action kind's own module declares its kinds on import too."""


def pack_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    """The self-contained SQL of a pack, built by this code from the pack's parameters alone:
    what `write_packs` writes and what `explain` runs (it never runs SQL text read from a
    dataset). Every value enters as a literal written in one pass (`query.inline`)."""
    return KINDS[reduction].sql(reduction, workload, slice_, shape, params)


def figure_sql(p: Pack) -> str:
    """The SELECT of a pack's figure from its rows (the view `PACK_ROWS`), as the family of its
    figure declares it: one row, the figure's name as findings.json names it, its point value
    and, where it has one, its n. Every value is a literal (`query.literal`, `query.inline`)."""
    th = msgspec.convert(p.thresholds, Thresholds, strict=True)
    select = KINDS[p.reduction].figure(p.reduction, p.typed(), th)
    return f"SELECT {literal(p.metric)} AS figure, * FROM (\n{select}\n)"


def recompute(p: Pack, rows: pa.Table) -> Recomputed:
    """The figure of a pack from its rows, by the analysis's own functions."""
    th = msgspec.convert(p.thresholds, Thresholds, strict=True)
    files = tuple(sorted(set(rows["source_id"].to_pylist()))) if rows.num_rows else ()
    return KINDS[p.reduction].recompute(p, rows, th, files)


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
        as_dict(r.thresholds),
    )


def _window(w: Window) -> dict[str, Any]:
    return {**as_dict(w), "kind": w.kind.value}


def _tail_pack(r: SliceResult, pid: str, subject: str, shape: str, ev: Evidence) -> Pack:
    driver = Driver(ev.metric.split(".", 1)[1])
    whole = shape == SLICE_WIDE
    shapes = [m.shape for m in r.shapes if m.tail is not None] if whole else [shape]
    params = TailParams(driver, shapes, dict(r.budgets))
    return _spec(r, pid, subject, shape, ev, Reduction.TAIL_SHARE, params)


def _device_pack(r: SliceResult, shape: str, ev: Evidence) -> tuple[Reduction, Any] | None:
    """The reduction and parameters of a device finding's pack (None for any other)."""
    roofline = r.device.roofline
    found = [f.row for f in (roofline.findings if roofline else ()) if f.row.label == shape]
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
        d = next(x for x in r.plan.drifts if x.shape == shape)
        params = SampleParams(predicted_us=m.accuracy.predicted_us, baseline=d.baseline)
        return _spec(r, pid, subject, shape, ev, Reduction.DRIFT, params)
    if ev.metric == "blocked_share":
        return _spec(r, pid, subject, shape, ev, Reduction.BLOCKED_SHARE, NoParams())
    moved = [g for g in (r.history.regressions if r.history else ()) if g.shape == shape]
    if ev.metric == "latency_p95_change" and moved:
        reg = RegressionParams(list(moved[0].reference_quantiles), moved[0].reference_n)
        return _spec(r, pid, subject, shape, ev, Reduction.REGRESSION, reg)
    if ev.metric == "consistency.queue_mean_us" and r.serving.queue_check and r.serving.telemetry:
        c = r.serving.queue_check
        queue = QueueParams(r.serving.telemetry.server, c.start_us, c.end_us)
        return _spec(r, pid, subject, shape, ev, Reduction.QUEUE_CHECK, queue)
    device = _device_pack(r, shape, ev)
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
    out += [(a.id, f"action {a.kind}", a.shape, a) for a in r.actions if not a.packs]
    requested = [
        _spec(r, q.id, f"action {a.kind}", a.shape, q.evidence, q.reduction, q.params)
        for a in r.actions
        for q in a.packs
    ]
    return [
        _pack(r, pid, subject, shape, x.evidence) for pid, subject, shape, x in out if x.evidence
    ] + requested
