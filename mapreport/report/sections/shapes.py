"""Per-shape latency: each shape's requests, errors, latency, queue and compute percentiles and
the actions on it; and findings.json's entry per shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.analysis.base.common import Interval, Review, Thresholds
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.core.kinds import (
    AccuracyState,
    BottleneckClass,
    Decision,
    Driver,
    FallbackCause,
    GainBasis,
    GainState,
    PredictionGap,
)
from mapreport.report import charts, fragments
from mapreport.report.fragments import Evidenced, Tail
from mapreport.report.lines import ShapeLine
from mapreport.report.sections.unit import Facts, Section, same

if TYPE_CHECKING:
    import plotly.graph_objects as go

SHAPE_GROUPS = ("accuracy", "gain", "diagnosis")
"""Nested results of a shape whose fields sit at the top level of its findings entry."""
SHAPE_PERCENTILES = ("latency", "queue", "compute")
"""Percentiles of a shape, flattened to `<name>_p50_us`, `_p95_us`, `_p99_us`."""
SHAPE_RENAMES = {
    "accuracy.state": "accuracy",
    "gain.state": "gain",
    "gain.cost_per_request_us": "adaptation_cost_per_request_us",
    "gain.basis": "gain_basis",
    "gain.compared_shapes": "gain_compared_shapes",
    "diagnosis.cls": "bottleneck_class",
    "insufficient": "insufficient_evidence",
}
SHAPE_LEFT_OUT = frozenset(
    {"gain.gap", "gain.n_adapted", "gain.n_baseline", "diagnosis.basis", "diagnosis.top"}
    | {"diagnosis.runner_up", "diagnosis.evidence"}
)
"""Fields findings.json states otherwise: reasons as words (decision_reason, class_reason), the
evidence with its note (class_evidence), counts the shape states itself (n_adapted)."""


class ShapesView(msgspec.Struct, frozen=True):
    """Each shape with its lines, the evidence thresholds and the SLA the chart draws."""

    shapes: tuple[ShapeLine, ...]
    thresholds: Thresholds
    review: Review


class ShapeEntry(msgspec.Struct):
    """One shape of findings.json `shapes`: `ShapeMetrics` with its accuracy, gain and class
    at the top level (renamed and left out as `SHAPE_RENAMES` and `SHAPE_LEFT_OUT` declare),
    its percentiles flattened, and the words its decision and class rest on."""

    shape: str
    n_total: int
    n: int
    n_failed: int
    traffic_share: float
    covered: bool
    plan_id: str | None
    bucket: str | None
    latency_p50_us: float | None
    latency_p95_us: float | None
    latency_p99_us: float | None
    queue_p50_us: float | None
    queue_p95_us: float | None
    queue_p99_us: float | None
    compute_p50_us: float | None
    compute_p95_us: float | None
    compute_p99_us: float | None
    n_static: int
    n_adapted: int
    n_fallback: int
    predicted_us: float | None
    measured_static_p50_us: float | None
    signed_error: float | None
    ape: float | None
    accuracy: AccuracyState
    signed_error_ci: Interval | None
    prediction_gap: PredictionGap | None
    baseline_variant: str | None
    adaptation_events: int
    adaptation_cost_us: float
    gain: GainState
    baseline_p50_us: float | None
    adapted_p50_us: float | None
    gain_p50: float | None
    gain_p50_ci: Interval | None
    gain_p95: float | None
    gain_p95_ci: Interval | None
    adaptation_cost_per_request_us: float | None
    net_gain_p50: float | None
    net_gain_p50_ci: Interval | None
    gain_basis: GainBasis | None
    gain_compared_shapes: tuple[str, ...]
    caused_wait_us: float | None
    decision: Decision
    insufficient_evidence: tuple[str, ...]
    sources: tuple[str, ...]
    bottleneck_class: BottleneckClass
    fallback_cause: FallbackCause | None
    error_rate: float
    decision_reason: str
    tail_drivers: dict[Driver, float] | None
    tail: Tail | None
    class_evidence: Evidenced | None
    class_pack: str | None
    class_reason: str


class Fragment(msgspec.Struct):
    """findings.json `shapes`."""

    shapes: tuple[ShapeEntry, ...]


def entry(line: ShapeLine) -> ShapeEntry:
    """One shape's entry: `ShapeMetrics` as builtins, its groups and percentiles flattened by
    the declarations above, plus the words and derived figures."""
    m: ShapeMetrics = line.m
    d = msgspec.to_builtins(m)
    out: dict[str, Any] = {}
    for key, value in d.items():
        if key in SHAPE_PERCENTILES:
            p = getattr(m, key)
            out |= {f"{key}_p50_us": p.p50, f"{key}_p95_us": p.p95, f"{key}_p99_us": p.p99}
        elif key in SHAPE_GROUPS:
            for sub, x in value.items():
                name = f"{key}.{sub}"
                if name not in SHAPE_LEFT_OUT:
                    out[SHAPE_RENAMES.get(name, sub)] = x
        elif key != "tail":
            out[SHAPE_RENAMES.get(key, key)] = value
    return ShapeEntry(
        **out,
        error_rate=m.error_rate or 0.0,
        decision_reason=line.decision_reason,
        tail_drivers=m.tail.shares if m.tail else None,
        tail=fragments.tail(m.tail),
        class_evidence=fragments.evidence(m.diagnosis.evidence),
        class_pack=line.pack,
        class_reason=line.class_reason,
    )


def read(f: Facts) -> ShapesView:
    """The shapes with their lines, the thresholds and the review's SLA."""
    r = f.r
    return ShapesView(f.shapes, r.thresholds, r.review)


def fragment(v: ShapesView) -> Fragment:
    """Every shape's entry."""
    return Fragment(tuple(entry(x) for x in v.shapes))


def latency_percentiles(shapes: tuple[ShapeMetrics, ...], review: Review) -> go.Figure:
    """Latency p50/p95/p99 per shape in ms; statistics below their evidence threshold grey."""
    fig = charts.figure()
    names = [m.shape for m in shapes]
    for q, color in (("p50", "#9ecae1"), ("p95", "#4292c6"), ("p99", "#08519c")):
        values = [getattr(m.latency, q) for m in shapes]
        weak = [f"latency_{q}_us" in m.insufficient for m in shapes]
        fig.add_trace(
            charts.bar(
                x=names,
                y=[None if v is None else v / 1000 for v in values],
                name=q,
                marker={
                    "color": [charts.INSUFFICIENT if w else color for w in weak],
                    "line": {"color": "#666", "width": [1 if w else 0 for w in weak]},
                },
                hovertemplate=f"%{{x}}<br>{q} %{{y:.2f}} ms<extra></extra>",
            )
        )
    fig.update_layout(barmode="group")
    charts.sla_lines(fig, review)
    fig.update_yaxes(title="end-to-end latency, ms")
    fig.update_xaxes(title="input shape", tickangle=-20, automargin=True)
    return charts.layout(fig, "Latency percentiles per shape")


def figures(v: ShapesView) -> Mapping[str, go.Figure]:
    """Its chart."""
    return {"latency_percentiles": latency_percentiles(tuple(x.m for x in v.shapes), v.review)}


SECTION = Section(
    "shapes",
    "Per-shape latency",
    read,
    same,
    fragment,
    figures,
    ("latency_percentiles",),
    captions={
        "latency_percentiles": (
            "Grey bars are below their evidence threshold; dashed lines are the slice's SLA "
            "targets."
        ),
    },
    needs_requests=True,
)
