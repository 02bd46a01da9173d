"""Charts: every figure is made by `charts.figure`, born with the report's template as plotly's
validator makes it of the name (given to a made figure, plotly validates and deep-copies it:
most of what the charts cost), and every chart of the pages holds that template."""

from __future__ import annotations

import json
import re
from pathlib import Path

import plotly.graph_objects as go

from mapreport.report import charts

PAYLOAD = re.compile(r'var s=(\{.*?\});Plotly\.newPlot\("chart-([a-z_]+)"')
"""A chart of a page: its figure's JSON and its id (`html.interactive_chart`)."""


def test_every_chart_holds_the_report_template(demo_html: Path) -> None:
    named = go.Figure().update_layout(template=charts.TEMPLATE).to_plotly_json()
    want = json.dumps(named["layout"]["template"])
    drawn = set()
    for page in demo_html.rglob("report.html"):
        for payload, chart in PAYLOAD.findall(page.read_text(encoding="utf-8")):
            # key order too: the page is the bytes it was when each figure was given the name
            assert json.dumps(json.loads(payload)["layout"]["template"]) == want, (page, chart)
            drawn.add(chart)
    assert {"tail_drivers", "latency_percentiles", "accuracy_vs_gain"} <= drawn


def test_figures_are_made_with_the_template() -> None:
    made_elsewhere = re.compile(r"\bgo\.Figure\(|\bmake_subplots\(")
    report = Path(charts.__file__).parent
    for source in sorted(report.rglob("*.py")):
        if source.name != "charts.py":
            assert not made_elsewhere.search(source.read_text(encoding="utf-8")), source
    fig = charts.figure()
    assert json.dumps(charts.layout(fig, "t").to_plotly_json()["layout"]["template"]) == (
        json.dumps(
            go.Figure().update_layout(template=charts.TEMPLATE).layout.template.to_plotly_json()
        )
    )


def test_two_sla_targets_are_labelled_apart() -> None:
    """The p95 target's label at the left end of its line, the p99's at the right: 9 and 12 ms
    under a 1.6 s bar printed over each other when both stood at the left."""
    from mapreport.analysis.base.common import Review

    fig = charts.figure()
    fig.add_trace(charts.bar(x=["a"], y=[1600.0]))
    charts.sla_lines(fig, Review(sla_p95_us=9_000.0, sla_p99_us=12_000.0))
    notes = fig.to_plotly_json()["layout"]["annotations"]
    assert [n["text"] for n in notes] == ["SLA p95 9 ms", "SLA p99 12 ms"]
    assert [(n["x"], n["xanchor"]) for n in notes] == [(0, "left"), (1, "right")]
