"""Per-operator mapping: the compile plan's ops joined by name with their measured runtime,
their prediction error, and what the plan does not name or never ran (a compile plan that
names ops, with a runtime profile of the same ops)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.device.operators import Operators
from mapreport.report import charts
from mapreport.report.decisions import PREDICTION_GAPS_SHORT
from mapreport.report.sections.unit import Facts, Section

if TYPE_CHECKING:
    import plotly.graph_objects as go

PRECISION_COLORS = {"fp32": "#4292c6", "fp16": "#41ab5d", "int8": "#ef6548", "fp8": "#807dba"}


class PerOpSum(msgspec.Struct, frozen=True):
    """Sum of a plan's per-op medians against its end-to-end median compute."""

    plan_id: str
    ops_us: float
    compute_us: float

    @property
    def change(self) -> float:
        """Per-op sum over end-to-end, minus one."""
        return self.ops_us / self.compute_us - 1

    @property
    def serialised(self) -> bool:
        """The per-op sum exceeds end-to-end: profiling serialised the ops."""
        return self.ops_us > self.compute_us


class OperatorsView(msgspec.Struct, frozen=True):
    """The per-op join with what its tables flag."""

    o: Operators | None
    planned: bool
    """A compile plan names the slice (without per-op timings, that is what is missing)."""
    min_samples: int
    """Runs an op needs before its prediction error is stated."""
    per_op_sums: tuple[PerOpSum, ...] = ()
    prediction_gap: str = ""
    """Why no op has a prediction ('' when some have)."""
    by_plan: bool = False
    """The join spans several plans (a graph per shape): its tables name each op's."""


class Fragment(msgspec.Struct):
    """findings.json `operators` (null without a per-op join)."""

    operators: Operators | None


def read(f: Facts) -> tuple[Operators | None, bool, int]:
    """The per-op join, whether a plan names the slice, and the evidence threshold."""
    r = f.r
    return r.device.operators, bool(r.coverage.plans), r.thresholds.min_samples


def view(x: tuple[Operators | None, bool, int]) -> OperatorsView:
    """The join with its per-plan sums and why no op has a prediction."""
    o, planned, min_samples = x
    if not o:
        return OperatorsView(None, planned, min_samples)
    sums = tuple(PerOpSum(pid, a, b) for pid, (a, b) in o.layer_sum_vs_compute.items())
    gap = PREDICTION_GAPS_SHORT[o.prediction_gap] if o.prediction_gap else ""
    return OperatorsView(o, planned, min_samples, sums, gap, len(o.plans) > 1)


def fragment(v: OperatorsView) -> Fragment:
    """The join as it is."""
    return Fragment(v.o)


def op_times(ops: Operators) -> go.Figure | None:
    """The ops that took the most measured time, coloured by precision, with the plan's
    prediction as a marker where it states one; None without joined rows."""
    if not ops.rows:
        return None
    rows = list(reversed(ops.rows[:20]))
    # one op name in several plans (a graph per shape) is several bars: the plan tells them apart
    label = [f"{o.plan_id} {o.op}" if len(ops.plans) > 1 else o.op for o in rows]
    names = [(n if len(n) <= 48 else n[:22] + "…" + n[-25:]) for n in label]
    fig = charts.figure()
    for precision in dict.fromkeys(o.precision or "unknown" for o in rows):
        pick = [i for i, o in enumerate(rows) if (o.precision or "unknown") == precision]
        fig.add_trace(
            charts.bar(
                x=[rows[i].measured_p50_us for i in pick],
                y=[names[i] for i in pick],
                orientation="h",
                name=f"measured ({precision})",
                marker={"color": PRECISION_COLORS.get(precision, "#9e9e9e")},
                customdata=[[rows[i].op, rows[i].kernel or ""] for i in pick],
                hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>%{x:.1f} µs<extra></extra>",
            )
        )
    pred = [i for i, o in enumerate(rows) if o.predicted_us is not None]
    if pred:
        fig.add_trace(
            charts.scatter(
                x=[rows[i].predicted_us for i in pred],
                y=[names[i] for i in pred],
                mode="markers",
                name="predicted",
                marker={"symbol": "diamond", "size": 9, "color": "#222"},
            )
        )
    fig.update_xaxes(title="median time per execution, µs", rangemode="tozero")
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=names, automargin=True)
    fig = charts.layout(fig, "Measured time of the 20 largest ops", height=140 + 24 * len(rows))
    fig.update_layout(barmode="overlay", margin={"l": 20})
    return fig


def figures(v: OperatorsView) -> Mapping[str, go.Figure]:
    """Its chart, when the join has rows."""
    fig = op_times(v.o) if v.o else None
    return {"op_times": fig} if fig else {}


def missing(v: OperatorsView) -> str:
    """What the slice lacks for a per-op join, and what adds it."""
    has = "a compile plan but no per-op runtime timings" if v.planned else "no per-op compile plan"
    return (
        f"this slice has {has}; a compile plan that names ops (native op lines, TensorRT "
        "--exportLayerInfo, TORCH_TRACE inductor_runtime_and_tensor_meta) and a runtime "
        "profile of the same ops (a profiler trace, TensorRT --exportProfile) add it"
    )


SECTION = Section(
    "operators",
    "Per-operator mapping",
    read,
    view,
    fragment,
    figures,
    ("op_times",),
    has=lambda v: v.o is not None,
    missing=missing,
)
