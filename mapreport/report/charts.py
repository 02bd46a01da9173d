"""Charts: plotly figures built from results only. The same figure is shown interactive in
HTML and exported to SVG for the PDF."""

from __future__ import annotations

import copy
from functools import cache
from typing import TYPE_CHECKING, Any

from mapreport.analysis.base.common import Review

if TYPE_CHECKING:
    import plotly.graph_objects as go

# plotly is imported by the first chart drawn, here alone: a report that draws none (a trace's,
# a compile log's) does not load it (0.07-0.1 s of a small trace's 1.2 s report)

INSUFFICIENT = "#d9d9d9"
"""A statistic below its evidence threshold."""
SLA_LINE = {"dash": "dash", "color": "#b2182b", "width": 1.5}
FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"


TEMPLATE = "plotly_white"
"""The report's plotly template."""


def figure(**subplots: Any) -> go.Figure:
    """A new figure (with `subplots`: `make_subplots`'s grid) born with the report's template.
    A figure takes plotly's default template as it is made, as it is; given to a made figure
    (`update_layout(template=...)`), the template is validated and deep-copied three times:
    30-70 ms a chart, most of what the charts cost. The first call makes the report's
    template plotly's default for the process.

    The figure, and the traces `bar` and `scatter` make, set what they are given without
    plotly's validation of each property (`_validate=False`): the validators were most of the
    rest (the same JSON on the page, key order apart). What a report draws is validated in
    the tests instead: every chart of every golden case's pages (the demo's among them),
    read back into a validating figure (tests/test_golden.py)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    house = _house_template()
    if pio.templates.default is not house:
        pio.templates.default = house
    fig = go.Figure(_validate=False)
    if subplots:
        from plotly.subplots import make_subplots

        make_subplots(figure=fig, **subplots)
    fig._house = True  # `layout` need not give it the template
    return fig


@cache
def _house_template() -> Any:
    """The report's template as plotly's validator makes it of the name (a deep copy, its keys
    in the order a figure given the name holds them: the pages are the same bytes)."""
    import plotly.io as pio

    return copy.deepcopy(pio.templates[TEMPLATE])


def bar(**props: Any) -> go.Bar:
    """A bar trace of these properties (plotly's `go.Bar`, not validated: `figure`)."""
    import plotly.graph_objects as go

    return go.Bar(**props, _validate=False)


def scatter(**props: Any) -> go.Scatter:
    """A scatter trace of these properties (plotly's `go.Scatter`, not validated: `figure`)."""
    import plotly.graph_objects as go

    return go.Scatter(**props, _validate=False)


def layout(fig: go.Figure, title: str, height: int = 420) -> go.Figure:
    """The house style: template, title, font, size, margins, legend above the plot (a figure
    not made by `figure` is given the template here, at plotly's price)."""
    if not getattr(fig, "_house", False):
        fig.update_layout(template=TEMPLATE)
    fig.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left", "y": 0.98, "yanchor": "top"},
        title_font={"size": 15},
        font={"family": FONT, "size": 12},
        height=height,
        width=900,
        margin={"l": 90, "r": 30, "t": 80, "b": 60},
        # above the plot, under the title: clear of the x axis and its rotated labels
        legend={"orientation": "h", "x": 0.0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"},
    )
    return fig


def sla_lines(fig: go.Figure, review: Review, **where: object) -> None:
    """The slice's configured SLA targets as dashed horizontal lines, in ms, the p95's labelled
    at the left end and the p99's at the right: two targets close on the axis (9 and 12 ms
    under a 1.6 s bar) printed their labels over each other at the left."""
    for q, sla, side in (
        ("p95", review.sla_p95_us, "top left"),
        ("p99", review.sla_p99_us, "top right"),
    ):
        if sla:
            fig.add_hline(
                y=sla / 1000,
                line=SLA_LINE,
                annotation_text=f"SLA {q} {sla / 1000:g} ms",
                annotation_position=side,
                **where,
            )
