"""Batch policy across configs: each config's load sweep, its best throughput within the p99
SLA and where it saturates (perf_analyzer or AIPerf exports at several loads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.mapping.sweep import LoadSweep, config_key
from mapreport.report import charts
from mapreport.report.sections.unit import Facts, Section, present, same

if TYPE_CHECKING:
    import plotly.graph_objects as go


class Fragment(msgspec.Struct):
    """findings.json `load_sweep` (null without a sweep)."""

    load_sweep: LoadSweep | None


def read(f: Facts) -> LoadSweep | None:
    """The slice's load sweep."""
    return f.r.serving.sweep


def fragment(w: LoadSweep | None) -> Fragment:
    """The sweep as it is."""
    return Fragment(w)


def sweep_curves(sweep: LoadSweep) -> go.Figure | None:
    """p99 latency against throughput across each config's load sweep (the eight configs with
    the best throughput), one line per config and batch size; None without curves."""
    if not sweep.curves:
        return None
    lines: dict[tuple[str, int | None], list[tuple[float, float, str]]] = {}
    # a name a checkpoint reused for another configuration is another line (`sweep.config_key`)
    kinds: dict[str, set[tuple[object, ...]]] = {}
    for p in sweep.curves:
        kinds.setdefault(p.config, set()).add(config_key(p))
    for p in sweep.curves:
        if p.latency_p99_us is None:
            continue
        load = (
            f"concurrency {p.concurrency}" if p.concurrency is not None else f"{p.request_rate:g}/s"
        )
        name = p.config
        if len(kinds[p.config]) > 1:
            name += f", max batch {p.max_batch_size}, {p.instance_count}x {p.instance_kind}"
            name += ", dynamic" if p.dynamic_batching else ""
        lines.setdefault((name, p.batch_size), []).append(
            (p.throughput_per_s, p.latency_p99_us / 1000, load)
        )
    fig = charts.figure()
    for (config, batch), pts in lines.items():
        pts.sort()
        fig.add_trace(
            charts.scatter(
                x=[x for x, _, _ in pts],
                y=[y for _, y, _ in pts],
                text=[t for _, _, t in pts],
                mode="lines+markers",
                name=f"{config} (batch {batch})" if batch is not None else config,
                hovertemplate="%{text}<br>%{x:.0f} infer/s<br>p99 %{y:.2f} ms<extra></extra>",
            )
        )
    if sweep.sla_p99_us is not None:
        fig.add_hline(
            y=sweep.sla_p99_us / 1000,
            line=charts.SLA_LINE,
            annotation_text="SLA p99",
            annotation_position="top left",
        )
    fig.update_xaxes(title="throughput, inferences / s", rangemode="tozero")
    fig.update_yaxes(title="p99 latency, ms", type="log")
    fig = charts.layout(fig, "Throughput against p99 latency per config", height=520)
    fig.update_layout(legend={"orientation": "v", "y": 1.0, "x": 1.02, "font": {"size": 9}})
    fig.update_layout(margin={"r": 230})
    return fig


def figures(w: LoadSweep | None) -> Mapping[str, go.Figure]:
    """Its chart, when the sweep has curves."""
    fig = sweep_curves(w) if w else None
    return {"sweep_curves": fig} if fig else {}


SECTION = Section(
    "batch_policy",
    "Batch policy across configs",
    read,
    same,
    fragment,
    figures,
    ("sweep_curves",),
    has=present,
    missing="no load sweep; perf_analyzer -f CSVs or AIPerf aggregate exports at several loads "
    "add one (so do Triton Model Analyzer checkpoints, a tool its authors deprecated; "
    "the request-level batch impact is under “Scheduling quality”)",
)
