"""Runtime adaptation gain: per shape, what adapting gained over the static plan (or the
fallback path) on median and p95 compute, net of its own cost, with its bootstrap CI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.core.kinds import Decision
from mapreport.report import charts
from mapreport.report.lines import ShapeLine
from mapreport.report.sections.unit import Facts, Section, same
from mapreport.report.words import label

if TYPE_CHECKING:
    import plotly.graph_objects as go

DECISION_COLORS = {
    # one hue per decision, none of them green: a decision is what to do, not a pass mark
    "specialise": "#cc79a7",
    "static_sufficient": "#0072b2",
    "close_the_loop": "#e69f00",
    "find_bottleneck": "#d55e00",
    "insufficient_evidence": "#9e9e9e",
}
"""One hue per decision."""


class AdaptationView(msgspec.Struct, frozen=True):
    """Each shape's gain, and the shapes the chart cannot place."""

    shapes: tuple[ShapeLine, ...]
    thresholds: Thresholds

    @property
    def unplotted(self) -> tuple[ShapeMetrics, ...]:
        """Shapes with a net gain but no prediction: not on the accuracy-versus-gain chart."""
        return tuple(
            x.m
            for x in self.shapes
            if x.m.accuracy.signed_error is None and x.m.gain.net_gain_p50 is not None
        )


def read(f: Facts) -> AdaptationView:
    """The shapes with their lines, and the thresholds the gain is held to."""
    return AdaptationView(f.shapes, f.r.thresholds)


def accuracy_vs_gain(shapes: tuple[ShapeMetrics, ...], tolerance: float) -> go.Figure:
    """One point per shape: signed prediction error (x) against net p50 gain (y), sized by
    traffic share, coloured by decision, with the gain's 95% CI as error bars."""
    fig = charts.figure()
    tol = tolerance * 100
    fig.add_vrect(x0=-tol, x1=tol, fillcolor="#e8f1e4", opacity=0.6, line_width=0, layer="below")
    fig.add_hline(y=0, line={"color": "#777", "width": 1})
    for decision in Decision:
        pts = [
            m
            for m in shapes
            if m.decision == decision
            and m.accuracy.signed_error is not None
            and m.gain.net_gain_p50 is not None
        ]
        if not pts:
            continue
        fig.add_trace(
            charts.scatter(
                x=[
                    m.accuracy.signed_error * 100
                    for m in pts
                    if m.accuracy.signed_error is not None
                ],
                y=[m.gain.net_gain_p50 * 100 for m in pts if m.gain.net_gain_p50 is not None],
                mode="markers+text",
                text=[m.shape for m in pts],
                textposition="top center",
                textfont={"size": 10},
                name=label(decision),
                marker={
                    "size": [max(8.0, 60 * m.traffic_share**0.5) for m in pts],
                    "symbol": [
                        "triangle-down"
                        if m.gain.net_gain_p50_ci is not None and m.gain.net_gain_p50_ci.high < 0
                        else "circle"
                        for m in pts
                    ],
                    "color": DECISION_COLORS[decision],
                    "opacity": 0.8,
                    "line": {"width": 1, "color": "#333"},
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        (m.gain.net_gain_p50_ci.high - m.gain.net_gain_p50) * 100
                        for m in pts
                        if m.gain.net_gain_p50_ci and m.gain.net_gain_p50 is not None
                    ],
                    "arrayminus": [
                        (m.gain.net_gain_p50 - m.gain.net_gain_p50_ci.low) * 100
                        for m in pts
                        if m.gain.net_gain_p50_ci and m.gain.net_gain_p50 is not None
                    ],
                    "color": "#555",
                },
                hovertemplate="%{text}<br>error %{x:.1f}%<br>net gain %{y:.1f}%<extra></extra>",
            )
        )
    fig.update_xaxes(
        title="signed prediction error (predicted − measured) / measured, %", zeroline=True
    )
    fig.update_yaxes(title="net p50 gain of adaptation, % (95% CI)")
    return charts.layout(fig, "Accuracy versus gain per shape")


def figures(v: AdaptationView) -> Mapping[str, go.Figure]:
    """Its chart (the packet prints it too)."""
    shapes = tuple(x.m for x in v.shapes)
    return {"accuracy_vs_gain": accuracy_vs_gain(shapes, v.thresholds.tolerance)}


SECTION = Section(
    "adaptation",
    "Runtime adaptation gain",
    read,
    same,
    figures=figures,
    charts=("accuracy_vs_gain",),
    captions={
        "accuracy_vs_gain": (
            "One point per shape with a prediction and a measured gain: its signed prediction "
            "error against the net p50 gain of adaptation, sized by traffic share, coloured by "
            "decision; the band is the accuracy tolerance, the bars the gain's 95% CI; a "
            "downward triangle is a shape adaptation makes slower (CI below zero)."
        ),
    },
    needs_requests=True,
    needs_plan=True,
)
