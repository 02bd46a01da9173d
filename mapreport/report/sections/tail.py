"""Tail-latency drivers: for each shape and the slice, the excess of the requests above p95
taken apart by driver (blocking behind adaptation, queueing, fallback, memory, cores), and the
class the slice's pooled tail decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.actions.actions import SLICE_WIDE, class_id
from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.serving.classify import ShapeClass
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.analysis.serving.tail import DRIVERS, TailDrivers
from mapreport.core.kinds import BottleneckClass, Driver, JudgementFamily
from mapreport.report import charts, fragments, prose
from mapreport.report.fragments import Evidenced, Tail
from mapreport.report.sections.unit import Facts, Section, same
from mapreport.report.words import label

if TYPE_CHECKING:
    import plotly.graph_objects as go


class TailView(msgspec.Struct, frozen=True):
    """The slice's tail split and each shape's, and the class the pooled tail decides."""

    tail: TailDrivers | None
    shapes: tuple[ShapeMetrics, ...]
    tail_class: ShapeClass | None
    thresholds: Thresholds
    pack: str | None
    """The evidence pack of the pooled tail's class (None: a class without evidence)."""
    sentence: str
    """What drives the slice's tail, in words, when its pooled tail decides a class."""
    drivers: tuple[Driver, ...] = DRIVERS
    """The table's driver columns, in the order the excess is attributed."""


class Fragment(msgspec.Struct):
    """findings.json `tail_drivers`, `tail_class` and `tail_class_evidence` (null when the
    slice's tail is immaterial or unread)."""

    tail_drivers: Tail | None
    tail_class: BottleneckClass | None
    tail_class_evidence: Evidenced | None


def read(f: Facts) -> TailView:
    """The slice's tail, its shapes, its pooled class and the thresholds."""
    r = f.r
    pooled = r.tail_class is not None and r.tail_class.evidence is not None
    pack = class_id(r.workload, r.slice, SLICE_WIDE) if pooled else None
    sentence = prose.tail_sentence(r).strip()
    return TailView(r.tail, r.shapes, r.tail_class, r.thresholds, pack, sentence)


def fragment(v: TailView) -> Fragment:
    """The slice's split and the class its pooled tail decides, with the evidence."""
    c = v.tail_class
    return Fragment(
        fragments.tail(v.tail),
        None if c is None else c.cls,
        fragments.evidence(c.evidence) if c else None,
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


def tail_drivers(shapes: tuple[ShapeMetrics, ...], pooled: TailDrivers | None) -> go.Figure:
    """Each shape's (and the slice's) tail excess by driver: as shares (left) and in ms per
    tail request (right); rows whose tail is immaterial are grey and marked."""
    rows = [
        (m.shape + ("" if m.tail.material else " (noise)"), m.tail)
        for m in shapes
        if m.tail is not None and m.tail.shares
    ]
    if pooled is not None and pooled.shares:
        rows.append(("whole slice", pooled))
    fig = charts.figure(
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
                    charts.bar(
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
    return charts.layout(fig, "Tail-latency drivers", height=max(340, 120 + 34 * len(rows)))


def figures(v: TailView) -> Mapping[str, go.Figure]:
    """Its chart."""
    return {"tail_drivers": tail_drivers(v.shapes, v.tail)}


SECTION = Section(
    "tail",
    "Tail-latency drivers",
    read,
    same,
    fragment,
    figures,
    ("tail_drivers",),
    captions={
        "tail_drivers": (
            "Left: each driver's share of the tail excess (latency above p50 of the requests "
            "above p95). Right: the same in milliseconds per tail request, so a large share of a "
            "small excess reads small. Greyed rows are noise (the tail is immaterial)."
        ),
    },
    needs_requests=True,
    family=JudgementFamily.TAIL,
)
