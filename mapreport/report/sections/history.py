"""Closed loop across nights: the recorded nights, each action's state with the figure that
decided it, the shapes that regressed or improved, and the cost model's drift per op."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.base.changepoints import ChangePoint
from mapreport.analysis.base.common import Interval, Regression, Review
from mapreport.analysis.loop.history import History, RunPoint
from mapreport.analysis.loop.loop import ActionState
from mapreport.analysis.loop.targets import BACK_MARGIN
from mapreport.analysis.serving.drift import OpDrift, ShapeDrift
from mapreport.core.kinds import (
    ActionKind,
    Criterion,
    HistoryNote,
    JudgementFamily,
    OwnerRole,
    RegressionKind,
)
from mapreport.core.kinds import ActionState as State
from mapreport.report import charts
from mapreport.report.sections.unit import Facts, Section
from mapreport.report.titles import title_of

if TYPE_CHECKING:
    import plotly.graph_objects as go

HISTORY_ROWS = 14
"""Nights the history table lists: a report's size does not grow with the history kept (the
trend chart and findings.json hold every night)."""
HISTORY_NOTES: dict[HistoryNote, str] = {
    HistoryNote.FIRST_RUN: "first recorded run: no earlier night to compare with",
    HistoryNote.BASELINE_MISSING: "baseline run {baseline!r} is not in the history; compared "
    "with the last run",
}
"""What limits tonight's comparison with earlier nights."""


class StateView(msgspec.Struct, frozen=True):
    """One action's state across nights: tonight's actions by their number (their title is
    in the actions section), an action gone tonight by the title it had."""

    s: ActionState
    title: str
    number: int | None = None
    """Its number among tonight's actions (None when it is no longer proposed)."""


class LoopFacts(msgspec.Struct, frozen=True):
    """What the section reads: the history, the drifts, the SLA and each action's state."""

    h: History | None
    states: tuple[StateView, ...]
    drifts: tuple[ShapeDrift, ...]
    op_drifts: tuple[OpDrift, ...]
    review: Review
    tolerance: float
    requests: int


class HistoryView(msgspec.Struct, frozen=True):
    """The recorded nights, the action states, what moved, and the per-op drift."""

    f: LoopFacts
    note: str
    """What limits tonight's comparison ('' when nothing does)."""
    recent_runs: tuple[RunPoint, ...]
    """The last HISTORY_ROWS recorded nights, tonight's last (the table; the trend has all)."""
    older_runs: int
    """Recorded nights before those."""
    moved: tuple[Regression, ...]
    """Shapes whose p95 moved significantly against the compared run."""
    op_drifting: tuple[OpDrift, ...]
    ops_compared: int
    """Planned ops whose signed error has earlier nights of the same plan version."""
    back_margin: float = BACK_MARGIN
    """How close to its value before a regression a shape's p95 must come back."""

    @property
    def h(self) -> History | None:
        """The history, None when it was not loaded."""
        return self.f.h

    @property
    def states(self) -> tuple[StateView, ...]:
        """Each action's state across nights."""
        return self.f.states

    @property
    def tolerance(self) -> float:
        """The accuracy tolerance the per-op drift is held to."""
        return self.f.tolerance


class LoopAction(msgspec.Struct):
    """One action of findings.json `history.actions` (`ActionState` without its params; its
    kind is `cls`, its title in today's words)."""

    action_id: str
    cls: ActionKind
    shape: str
    title: str
    owner_role: OwnerRole
    state: State
    first_run_id: str
    first_run_date: str
    runs_seen: int
    target_metric: str | None
    target_baseline: float | None
    target_now: float | None
    rollback_metric: str | None
    rollback_threshold: float | None
    rollback_now: float | None
    rollback_pre_change: float | None
    rollback_sla_us: float | None
    held: bool
    proposed: bool
    target_criterion: Criterion | None
    target_limit: float | None
    target_reference: float | None
    target_ci: Interval | None
    target_bound: tuple[float | None, float | None] | None
    target_met: bool | None


class Loop(msgspec.Struct):
    """findings.json `history`: the recorded nights and what changed across them."""

    compared_to: str | None
    compared_night: str | None
    note: str
    runs: tuple[RunPoint, ...]
    actions: tuple[LoopAction, ...]
    regressions: tuple[Regression, ...]
    change_points: tuple[ChangePoint, ...]


class Fragment(msgspec.Struct):
    """findings.json `history` (null when not loaded), `drift` and `op_drift`."""

    history: Loop | None
    drift: tuple[ShapeDrift, ...]
    op_drift: tuple[OpDrift, ...]


def states(f: Facts) -> tuple[StateView, ...]:
    """Each action's state across nights, with tonight's words and number for tonight's; an
    action gone tonight is worded from the params the history kept (a night recorded before
    params were kept: the words it stored)."""
    r = f.r
    titles = {v.a.id: v.title for v in f.actions}
    numbers = {v.a.id: i for i, v in enumerate(f.actions, 1)}

    def title(s: ActionState) -> str:
        if s.action_id in titles:
            return titles[s.action_id]
        if s.params is not None:
            return title_of(s.kind, s.shape, s.params, r.name)
        return s.title or ""

    return tuple(
        StateView(s, title(s), numbers.get(s.action_id))
        for s in (r.history.actions if r.history else ())
    )


def history_note(h: History) -> str:
    """What limits tonight's comparison with earlier nights ('' when nothing does)."""
    return "" if h.note is None else HISTORY_NOTES[h.note].format(baseline=h.baseline_run)


def read(f: Facts) -> LoopFacts:
    """The history with each action's state, the drifts, the SLA and the tolerance."""
    r = f.r
    return LoopFacts(
        r.history,
        states(f),
        r.plan.drifts,
        r.plan.op_drifts,
        r.review,
        r.thresholds.tolerance,
        r.requests,
    )


def view(x: LoopFacts) -> HistoryView:
    """The latest nights, what moved, and the ops that drifted."""
    h = x.h
    runs = h.runs if h else ()
    return HistoryView(
        x,
        history_note(h) if h else "",
        runs[-HISTORY_ROWS:],
        max(0, len(runs) - HISTORY_ROWS),
        tuple(g for g in (h.regressions if h else ()) if g.kind != RegressionKind.NO_CHANGE),
        tuple(d for d in x.op_drifts if d.drifting),
        sum(1 for d in x.op_drifts if d.baseline is not None),
    )


def _action(sv: StateView) -> LoopAction:
    s = sv.s
    return LoopAction(
        s.action_id, s.kind, s.shape, sv.title, s.owner_role, s.state, s.first_run_id,
        s.first_run_date, s.runs_seen, s.target_metric, s.target_baseline, s.target_now,
        s.rollback_metric, s.rollback_threshold, s.rollback_now, s.rollback_pre_change,
        s.rollback_sla_us, s.held, s.proposed, s.target_criterion, s.target_limit,
        s.target_reference, s.target_ci, s.target_bound, s.target_met,
    )  # fmt: skip


def fragment(v: HistoryView) -> Fragment:
    """Every night, every action's state, the regressions and the change points; the drifts."""
    h = v.h
    loop = None
    if h is not None:
        loop = Loop(
            h.compared_to,
            h.compared_night,
            v.note,
            h.runs,
            tuple(_action(sv) for sv in v.states),
            h.regressions,
            h.change_points,
        )
    return Fragment(loop, v.f.drifts, v.f.op_drifts)


TREND_NIGHTS = 2
"""Nights a trend needs: one point is a number, not a trend (the table has it)."""


def trend(runs: tuple[RunPoint, ...], review: Review) -> go.Figure | None:
    """The slice's latency p50/p95/p99 across recorded nights, with the SLA targets; None
    before the second recorded night."""
    if len(runs) < TREND_NIGHTS:
        return None
    fig = charts.figure()
    x = [
        p.run_date + (" (this run)" if p.current else "") + (" revised" if p.revised else "")
        for p in runs
    ]
    for q, color in (("p50", "#9ecae1"), ("p95", "#4292c6"), ("p99", "#08519c")):
        fig.add_trace(
            charts.scatter(
                x=x,
                y=[
                    None if (v := getattr(p, f"latency_{q}_us")) is None else v / 1000 for p in runs
                ],
                mode="lines+markers",
                name=q,
                line={"color": color},
            )
        )
    charts.sla_lines(fig, review)
    fig.update_xaxes(title="run date", type="category")
    fig.update_yaxes(title="end-to-end latency, ms", rangemode="tozero")
    return charts.layout(fig, "Latency across nights")


def error_trend(drifts: tuple[ShapeDrift, ...], tol: float) -> go.Figure | None:
    """Per shape, its signed error across the nights of its plan version, drifting shapes
    bold with their baseline band; None before any shape has two nights."""
    shown = [d for d in drifts if len(d.points) >= TREND_NIGHTS]
    if not shown:
        return None
    fig = charts.figure()
    for d in shown:
        x = [p.run_date + (" (this run)" if p.current else "") for p in d.points]
        y = [p.signed_error * 100 for p in d.points]
        up = [(p.ci.high - p.signed_error) * 100 if p.ci else 0.0 for p in d.points]
        down = [(p.signed_error - p.ci.low) * 100 if p.ci else 0.0 for p in d.points]
        fig.add_trace(
            charts.scatter(
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
    return charts.layout(fig, "Cost-model error across nights")


def figures(v: HistoryView) -> Mapping[str, go.Figure]:
    """The latency trend from the second night; the error trend where requests were measured."""
    out = {}
    if (fig := trend(v.h.runs if v.h else (), v.f.review)) is not None:
        out["trend"] = fig
    if v.f.requests and (fig := error_trend(v.f.drifts, v.tolerance)) is not None:
        out["error_trend"] = fig
    return out


SECTION = Section(
    "history",
    "Closed loop across nights",
    read,
    view,
    fragment,
    figures,
    ("trend", "error_trend"),
    captions={
        "trend": "The slice's latency on each recorded night, with its SLA targets.",
        "error_trend": (
            "Each shape's signed prediction error (predicted − measured static p50, over "
            "measured) on each recorded night of the plan version in force, with its 95% CI; a "
            "shape whose error left its first nights' band (± the accuracy tolerance, shaded) is "
            "drifting and drawn bold."
        ),
    },
    family=JudgementFamily.LOOP,
)
