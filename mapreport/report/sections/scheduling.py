"""Scheduling quality: queue wait per stream and per shape, the batch policy's impact, how
evenly the cores and streams are served, and what operator fusion changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.query import CDF_GRID
from mapreport.analysis.serving.scheduling import (
    JAIN_IMBALANCE,
    BatchImpact,
    CoreLoad,
    FusionEffect,
    QueueProfile,
    Scheduling,
    StreamShare,
)
from mapreport.core.kinds import FusionGap
from mapreport.report import charts
from mapreport.report.filters import plural
from mapreport.report.lines import CoreEvidence
from mapreport.report.sections.unit import Facts, Section, same

if TYPE_CHECKING:
    import plotly.graph_objects as go

FUSION_GAPS: dict[FusionGap, str] = {
    FusionGap.NO_GROUPS: "not measured: no fusion groups",
    FusionGap.NOT_BOTH_RAN: "not measured: ops are fused in {n}, but no shape ran "
    "both a fused and an unfused plan of the same bucket",
}
"""Why no fusion effect is shown."""


class SchedulingView(msgspec.Struct, frozen=True):
    """The scheduling figures with what they flag, and the per-core evidence of actions."""

    s: Scheduling | None
    shapes: tuple[str, ...]
    """The slice's shapes, in the order the chart draws them."""
    thresholds: Thresholds
    core_evidence: tuple[CoreEvidence, ...]
    """Per core-placement action: its shape's median compute on each core."""
    jain_limit: float = JAIN_IMBALANCE
    """Below this Jain's index over the cores is imbalance."""

    @property
    def jain_low(self) -> bool:
        """The cores' load is imbalanced, as the analysis judged it."""
        return bool(self.s and self.s.imbalanced)

    @property
    def fusion_note(self) -> str:
        """Why no fusion effect is shown ('' when one is)."""
        return fusion_note(self.s) if self.s else ""


class CoreLine(msgspec.Struct):
    """One shape's median compute on one core (`CoreCompute`)."""

    core: int
    compute_p50_us: float
    vs_median: float


class StreamFairness(msgspec.Struct):
    """How evenly the streams were served."""

    streams: tuple[StreamShare, ...]
    jain_index: float | None


class FusionLines(msgspec.Struct):
    """What operator fusion changed, or why it is not measured."""

    groups: tuple[FusionEffect, ...]
    note: str


class SchedulingQuality(msgspec.Struct):
    """findings.json `scheduling`."""

    cdf_points: tuple[float, ...]
    queue_by_stream: tuple[QueueProfile, ...]
    queue_by_shape: tuple[QueueProfile, ...]
    batch_impact: tuple[BatchImpact, ...]
    cores: tuple[CoreLoad, ...]
    jain_index_cores: float | None
    shape_cores: dict[str, tuple[CoreLine, ...]]
    stream_fairness: StreamFairness
    fusion_effect: FusionLines


class Fragment(msgspec.Struct):
    """findings.json `scheduling` (null without scheduling telemetry)."""

    scheduling: SchedulingQuality | None


def fusion_note(s: Scheduling) -> str:
    """Why no fusion effect is shown ('' when one is)."""
    if s.fusion_gap is None:
        return ""
    return FUSION_GAPS[s.fusion_gap].format(n=plural(s.fused_buckets, "compiled bucket"))


def read(f: Facts) -> SchedulingView:
    """The scheduling figures, the shapes, the thresholds and the per-core evidence."""
    r = f.r
    return SchedulingView(r.scheduling, tuple(m.shape for m in r.shapes), r.thresholds, f.cores)


def fragment(v: SchedulingView) -> Fragment:
    """The figures with the CDF grid, per-core compute and the fusion note."""
    s = v.s
    if s is None:
        return Fragment(None)
    return Fragment(
        SchedulingQuality(
            cdf_points=CDF_GRID,
            queue_by_stream=s.queue_by_stream,
            queue_by_shape=s.queue_by_shape,
            batch_impact=s.batch_impact,
            cores=s.cores,
            jain_index_cores=s.jain_index_cores,
            shape_cores={k: tuple(CoreLine(*c) for c in rows) for k, rows in s.shape_cores.items()},
            stream_fairness=StreamFairness(s.streams, s.jain_index_streams),
            fusion_effect=FusionLines(s.fusion, v.fusion_note),
        )
    )


def queue_ccdf(v: SchedulingView) -> go.Figure | None:
    """Per shape: the share of its requests that waited longer than x (log-log), from the
    queue profile's quantiles; None without queue telemetry."""
    profiles = {q.group: q for q in (v.s.queue_by_shape if v.s else ())}
    if not profiles:
        return None
    fig = charts.figure()
    longer = [1 - q for q in CDF_GRID]
    for shape in v.shapes:
        q = profiles.get(shape)
        if q is None:
            continue
        # a log axis has no zero: waits of 0 µs sit at its left edge, 1 µs
        x = [max(v, 1.0) / 1000 for v in q.cdf_us]
        fig.add_trace(
            charts.scatter(
                x=x,
                y=longer,
                mode="lines",
                name=f"{shape} (n={q.n:,})",
                line={"dash": "dash" if q.n < v.thresholds.min_samples_p99 else "solid"},
                hovertemplate="%{y:.1%} waited longer than %{x:.2f} ms<extra></extra>",
            )
        )
    fig.update_xaxes(title="queue wait, ms (log)", type="log")
    fig.update_yaxes(title="share of requests waiting longer (log)", type="log", range=[-3, 0])
    fig = charts.layout(fig, "Queue wait per shape", height=480)
    fig.update_layout(legend={"orientation": "v", "x": 1.02, "y": 1.0, "yanchor": "top"})
    fig.update_layout(margin={"r": 200})
    return fig


def figures(v: SchedulingView) -> Mapping[str, go.Figure]:
    """Its chart, when a shape has queue telemetry."""
    fig = queue_ccdf(v)
    return {"queue_ccdf": fig} if fig else {}


SECTION = Section(
    "scheduling",
    "Scheduling quality",
    read,
    same,
    fragment,
    figures,
    ("queue_ccdf",),
    captions={
        "queue_ccdf": (
            "Share of a shape's requests that waited longer than x, on log axes: a queueing "
            "burst is the curve that stays high to the right. Dashed: fewer than the p99 evidence "
            "threshold of requests."
        ),
    },
    has=lambda v: v.s is not None and v.s.measured,
    missing="the requests state no queue wait, batch size, core or stream (client-side timing); "
    "server-side records (a native request log, Triton traces or OpenTelemetry spans) "
    "add them",
    needs_requests=True,
)
