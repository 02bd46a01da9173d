"""Charts: plotly figures built from results only. The same figure is shown interactive in
HTML and exported to SVG for the PDF."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mapreport.analysis.base.common import Review
from mapreport.analysis.serving.tail import DRIVERS
from mapreport.analysis.steps.results import SliceResult
from mapreport.report.words import label

INSUFFICIENT = "#d9d9d9"
"""A statistic below its evidence threshold."""
SLA_LINE = {"dash": "dash", "color": "#b2182b", "width": 1.5}
FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"

CAPTIONS = {
    "accuracy_vs_gain": "One point per shape with a prediction and a measured gain: its signed "
    "prediction error against the net p50 gain of adaptation, sized by traffic share, coloured "
    "by decision; the band is the accuracy tolerance, the bars the gain's 95% CI; a downward "
    "triangle is a shape adaptation makes slower (CI below zero).",
    "latency_percentiles": "Grey bars are below their evidence threshold; dashed lines are the "
    "slice's SLA targets.",
    "predicted_vs_measured": "Labels are the signed error of the prediction against the "
    "measured static p50 (+: the plan predicted more time than was measured); “not measured” "
    "marks a shape whose static plan did not run.",
    "tail_drivers": "Left: each driver's share of the tail excess (latency above p50 of the "
    "requests above p95). Right: the same in milliseconds per tail request, so a large share of "
    "a small excess reads small. Greyed rows are noise (the tail is immaterial).",
    "queue_ccdf": "Share of a shape's requests that waited longer than x, on log axes: a "
    "queueing burst is the curve that stays high to the right. Dashed: fewer than the p99 "
    "evidence threshold of requests.",
    "trend": "The slice's latency on each recorded night, with its SLA targets.",
    "error_trend": "Each shape's signed prediction error (predicted − measured static p50, over "
    "measured) on each recorded night of the plan version in force, with its 95% CI; a shape "
    "whose error left its first nights' band (± the accuracy tolerance, shaded) is drifting "
    "and drawn bold.",
}
"""What each chart shows, printed under it (a caption wraps on a phone; a plotly title does
not), so chart titles stay short."""


def layout(fig: go.Figure, title: str, height: int = 420) -> go.Figure:
    """The house style: title, font, size, margins, legend above the plot."""
    fig.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left", "y": 0.98, "yanchor": "top"},
        title_font={"size": 15},
        template="plotly_white",
        font={"family": FONT, "size": 12},
        height=height,
        width=900,
        margin={"l": 90, "r": 30, "t": 80, "b": 60},
        # above the plot, under the title: clear of the x axis and its rotated labels
        legend={"orientation": "h", "x": 0.0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"},
    )
    return fig


def sla_lines(fig: go.Figure, review: Review, **where: object) -> None:
    """The slice's configured SLA targets as dashed horizontal lines, in ms."""
    for q, sla in (("p95", review.sla_p95_us), ("p99", review.sla_p99_us)):
        if sla:
            fig.add_hline(
                y=sla / 1000,
                line=SLA_LINE,
                annotation_text=f"SLA {q} {sla / 1000:g} ms",
                annotation_position="top left",
                **where,
            )


DRIVER_COLORS = {
    "blocked_behind_adaptation": "#a50f15",
    "queueing": "#e6550d",
    "mapping_fallback": "#756bb1",
    "memory_burst": "#31a354",
    "core_imbalance": "#3182bd",
    "residual": "#bdbdbd",
}


NOISE_COLORS = {
    "blocked_behind_adaptation": "#969696",
    "queueing": "#bdbdbd",
    "mapping_fallback": "#a3a3a3",
    "memory_burst": "#cfcfcf",
    "core_imbalance": "#b0b0b0",
    "residual": "#e0e0e0",
}
"""Drivers of a row whose tail is immaterial: grey, so noise never reads as an alarm."""


def tail_drivers(r: SliceResult) -> go.Figure:
    """Each shape's (and the slice's) tail excess by driver: as shares (left) and in ms per
    tail request (right); rows whose tail is immaterial are grey and marked."""
    rows = [
        (m.shape + ("" if m.tail.material else " (noise)"), m.tail)
        for m in r.shapes
        if m.tail is not None and m.tail.shares
    ]
    if r.tail is not None and r.tail.shares:
        rows.append(("whole slice", r.tail))
    fig = make_subplots(
        rows=1, cols=2, shared_yaxes=True, column_widths=[0.62, 0.38], horizontal_spacing=0.04
    )
    for d in DRIVERS:
        for material in (True, False):
            pick = [(name, t) for name, t in rows if t.material == material]
            if not pick:
                continue
            shares = [t.shares.get(d, 0.0) * 100 for _, t in pick]
            per_request = [
                t.shares.get(d, 0.0) * t.excess_us / t.n_tail / 1000 if t.n_tail else 0.0
                for _, t in pick
            ]
            color = DRIVER_COLORS[d] if material else NOISE_COLORS[d]
            for col, x, unit in ((1, shares, "%"), (2, per_request, " ms")):
                fig.add_trace(
                    go.Bar(
                        y=[name for name, _ in pick],
                        x=x,
                        name=label(d),
                        legendgroup=d,
                        # the legend shows each driver once, in its alarm colour
                        showlegend=col == 1 and material,
                        orientation="h",
                        marker={"color": color},
                        hovertemplate=f"%{{y}}<br>{label(d)} %{{x:.1f}}{unit}<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="share of tail excess, %", range=[0, 100], row=1, col=1)
    fig.update_xaxes(title="excess per tail request, ms", rangemode="tozero", row=1, col=2)
    names = [name for name, _ in rows]
    fig.update_yaxes(
        categoryorder="array", categoryarray=names, autorange="reversed", automargin=True
    )
    return layout(fig, "Tail-latency drivers", height=max(340, 120 + 34 * len(rows)))


TREND_NIGHTS = 2
"""Nights a trend needs: one point is a number, not a trend (the table has it)."""


def trend(r: SliceResult) -> go.Figure | None:
    """The slice's latency p50/p95/p99 across recorded nights, with the SLA targets; None
    before the second recorded night."""
    runs = r.history.runs if r.history else ()
    if len(runs) < TREND_NIGHTS:
        return None
    fig = go.Figure()
    x = [
        p.run_date + (" (this run)" if p.current else "") + (" revised" if p.revised else "")
        for p in runs
    ]
    for q, color in (("p50", "#9ecae1"), ("p95", "#4292c6"), ("p99", "#08519c")):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[
                    None if (v := getattr(p, f"latency_{q}_us")) is None else v / 1000 for p in runs
                ],
                mode="lines+markers",
                name=q,
                line={"color": color},
            )
        )
    sla_lines(fig, r.review)
    fig.update_xaxes(title="run date", type="category")
    fig.update_yaxes(title="end-to-end latency, ms", rangemode="tozero")
    return layout(fig, "Latency across nights")


def error_trend(r: SliceResult) -> go.Figure | None:
    """Per shape, its signed error across the nights of its plan version, drifting shapes
    bold with their baseline band; None before any shape has two nights."""
    shown = [d for d in r.drifts if len(d.points) >= TREND_NIGHTS]
    if not shown:
        return None
    fig = go.Figure()
    tol = r.thresholds.tolerance
    for d in shown:
        x = [p.run_date + (" (this run)" if p.current else "") for p in d.points]
        y = [p.signed_error * 100 for p in d.points]
        up = [(p.ci.high - p.signed_error) * 100 if p.ci else 0.0 for p in d.points]
        down = [(p.signed_error - p.ci.low) * 100 if p.ci else 0.0 for p in d.points]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers",
                name=d.shape + (" (drifting)" if d.drifting else ""),
                line={"width": 3 if d.drifting else 1},
                opacity=1.0 if d.drifting else 0.55,
                error_y={"type": "data", "array": up, "arrayminus": down, "visible": True},
            )
        )
        if d.drifting and d.baseline is not None:
            fig.add_hrect(
                y0=(d.baseline - tol) * 100,
                y1=(d.baseline + tol) * 100,
                fillcolor="#fdd0a2",
                opacity=0.35,
                line_width=0,
            )
    fig.update_xaxes(title="run date", type="category")
    fig.update_yaxes(title="signed prediction error, %", zeroline=True)
    return layout(fig, "Cost-model error across nights")


CHARTS = {
    "trend": trend,
    "error_trend": error_trend,
    "tail_drivers": tail_drivers,
}
"""Chart id -> builder. Sections name the charts they show by id."""

REQUEST_CHARTS = frozenset(
    {
        "tail_drivers",
        "error_trend",
    }
)
"""Charts drawn from request telemetry: not drawn for a slice without requests."""


def build_charts(r: SliceResult) -> dict[str, go.Figure]:
    """Every chart that has something to draw for this slice, by id."""
    out = {}
    for cid, build in CHARTS.items():
        if cid in REQUEST_CHARTS and not r.requests:
            continue
        fig = build(r)
        if fig is not None:
            out[cid] = fig
    return out
