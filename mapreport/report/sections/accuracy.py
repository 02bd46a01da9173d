"""Compile-time mapping accuracy: each shape's prediction against the measured median compute
of the requests that ran the plan as built, and the traffic-weighted error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.mapping.accuracy import Accuracy
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.report import charts
from mapreport.report.decisions import accuracy_gap
from mapreport.report.filters import signed_pct
from mapreport.report.sections.unit import Facts, Section

if TYPE_CHECKING:
    import plotly.graph_objects as go


class AccuracyView(msgspec.Struct, frozen=True):
    """The slice's accuracy, each shape's prediction, and why none was checked if none was."""

    a: Accuracy
    shapes: tuple[ShapeMetrics, ...]
    min_samples: int
    """Requests on the plan as built a measurement needs."""
    gap: str
    """Why no shape's prediction was checked ('' when one was)."""


class Fragment(msgspec.Struct):
    """findings.json `accuracy`."""

    accuracy: Accuracy


def read(f: Facts) -> tuple[Accuracy, tuple[ShapeMetrics, ...], int]:
    """The slice's accuracy, its shapes and the evidence threshold."""
    r = f.r
    return r.accuracy, r.shapes, r.thresholds.min_samples


def view(x: tuple[Accuracy, tuple[ShapeMetrics, ...], int]) -> AccuracyView:
    """The accuracy with why it is missing when it is."""
    a, shapes, min_samples = x
    return AccuracyView(a, shapes, min_samples, accuracy_gap(a, min_samples))


def fragment(v: AccuracyView) -> Fragment:
    """The accuracy as it is."""
    return Fragment(v.a)


def predicted_vs_measured(shapes: tuple[ShapeMetrics, ...]) -> go.Figure:
    """Compile-time prediction against measured static median compute per shape with a
    prediction; the bar label is the signed error, a shape without a measurement says so."""
    predicted = [m for m in shapes if m.accuracy.predicted_us is not None]
    names = [m.shape for m in predicted]
    acc = [m.accuracy for m in predicted]
    fig = charts.figure()
    fig.add_trace(
        charts.bar(
            x=names,
            y=[(a.predicted_us or 0) / 1000 for a in acc],
            name="predicted (compile plan)",
            marker={"color": "#fdae6b"},
        )
    )
    fig.add_trace(
        charts.bar(
            x=names,
            y=[
                None if a.measured_static_p50_us is None else a.measured_static_p50_us / 1000
                for a in acc
            ],
            name="measured static p50",
            marker={"color": "#6baed6"},
            text=["" if a.signed_error is None else signed_pct(a.signed_error, 0) for a in acc],
            textposition="outside",
            cliponaxis=False,
        )
    )
    for name, a in zip(names, acc, strict=True):
        if a.measured_static_p50_us is None:
            fig.add_annotation(
                x=name,
                y=0,
                yanchor="bottom",
                text="not measured",
                showarrow=False,
                textangle=-90,
                font={"size": 10, "color": "#6b7580"},
                xshift=14,
            )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title="compute time, ms", rangemode="tozero")
    fig.update_xaxes(title="input shape", tickangle=-20, automargin=True)
    return charts.layout(fig, "Predicted versus measured compute per shape")


def figures(v: AccuracyView) -> Mapping[str, go.Figure]:
    """Its chart."""
    return {"predicted_vs_measured": predicted_vs_measured(v.shapes)}


SECTION = Section(
    "accuracy",
    "Compile-time mapping accuracy",
    read,
    view,
    fragment,
    figures,
    ("predicted_vs_measured",),
    captions={
        "predicted_vs_measured": (
            "Labels are the signed error of the prediction against the measured static p50 (+: "
            "the plan predicted more time than was measured); “not measured” marks a shape whose "
            "static plan did not run."
        ),
    },
    needs_requests=True,
    needs_plan=True,
)
