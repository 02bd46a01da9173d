"""View models: what each section shows, computed once from the result.

Templates loop over these and print; every sentence, table and chart that states a fact
reads it from here (or from the result it came from), so no two places decide it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from mapreport.analysis.actions.observe import MATERIAL_TRAFFIC
from mapreport.analysis.base.common import Regression, SlaCheck, TailQuantile
from mapreport.analysis.loop.history import RunPoint
from mapreport.analysis.loop.loop import ActionState
from mapreport.analysis.loop.targets import BACK_MARGIN
from mapreport.analysis.serving.blocking import MINOR_SHARE
from mapreport.analysis.serving.classify import DECIDING_SHARE
from mapreport.analysis.serving.drift import OpDrift
from mapreport.analysis.serving.scheduling import JAIN_IMBALANCE
from mapreport.analysis.steps.results import SliceResult
from mapreport.analysis.steps.status import TailChange
from mapreport.core.kinds import (
    ActionKind,
    Health,
    RegressionKind,
)
from mapreport.report import prose, words
from mapreport.report.judgements import JudgementRow
from mapreport.report.judgements import rows as judgement_rows
from mapreport.report.lines import ActionView, CheckLine, Row, ShapeLine
from mapreport.report.lines import anchor_key as anchor_key  # compare.py names shapes by it
from mapreport.report.period import period
from mapreport.report.sections import Assembled, assemble
from mapreport.report.sections.unit import Part
from mapreport.report.sources import source_paths
from mapreport.report.verdict import (
    Verdict,
    headline,
    health,
    tail_change,
    verdict,
)


@dataclass(frozen=True)
class StateView:
    """One action's state across nights: tonight's actions by their number (their title is
    in the actions section), an action gone tonight by the title it had."""

    s: ActionState
    title: str
    number: int | None = None
    """Its number among tonight's actions (None when it is no longer proposed)."""


@dataclass(frozen=True)
class ReportView:
    """Everything a report's sections print beyond the result's own figures."""

    name: str
    verdict: Verdict
    health: Health
    headline: tuple[str, float | None, float | None, bool | None]
    """The tail quantile the slice has the evidence for, its value, SLA and whether met."""
    tail_change: TailChange | None
    """That quantile against the previous recorded night (None on a first night)."""
    period: str
    """The time window the report covers (`period.period`)."""
    sla: tuple[SlaCheck, ...]
    summary: str
    actions: tuple[ActionView, ...]
    op_drifting: tuple[OpDrift, ...]
    ops_compared: int
    """Planned ops whose signed error has earlier nights of the same plan version."""
    shapes: tuple[ShapeLine, ...]
    decision_counts: dict[str, int]
    checklist: tuple[CheckLine, ...]
    checklist_count: str
    """How many items pass, fail and are not applicable (`3 pass, 1 fail, 1 not applicable`)."""
    checklist_failed: tuple[str, ...]
    pitfalls: tuple[Row, ...]
    signoffs: tuple[tuple[str, str, str, bool], ...]
    """(role, owner, signed by, signed) per role."""
    history_note: str
    recent_runs: tuple[RunPoint, ...]
    """The last HISTORY_ROWS recorded nights, tonight's last (the table; the trend has all)."""
    older_runs: int
    """Recorded nights before those."""
    states: tuple[StateView, ...]
    moved: tuple[Regression, ...]
    """Shapes whose p95 moved significantly against the compared run."""
    source_formats: str
    source_paths: dict[str, str]
    """Per source id: its path relative to that folder (`sources.source_paths`)."""
    limits: dict[str, float]
    """Thresholds the prose quotes."""
    sections: tuple[Part[Any], ...]
    """The sections with something to show, in order ("Not measured" among them when any
    other is not)."""
    not_measured: tuple[Part[Any], ...]
    """Each section without its data, with why and which input would add it."""
    accuracy_gap: str
    """Why no shape's prediction was checked ('' when one was)."""
    status_reason: str
    """Why the slice has its status, one line (`words.status_reason`)."""
    judgements: tuple[JudgementRow, ...]
    """Every family's judgement, most severe first, the deciding one marked."""
    open_sections: frozenset[str]
    """The sections the HTML report opens on (the packet's first pages); the rest fold."""
    mape_class: str
    """'bad' when the weighted MAPE is above the accuracy tolerance, 'ok' within it, ''
    when it is not measured."""
    assembled: Assembled
    """Every section's part, each read and viewed once."""


HISTORY_ROWS = 14
"""Nights the history table lists: a report's size does not grow with the history kept (the
trend chart and findings.json hold every night)."""


def mape_class(within_tolerance: bool | None) -> str:
    """The weighted MAPE's style against the tolerance, as the analysis judged it ('' when
    not measured)."""
    return "" if within_tolerance is None else "ok" if within_tolerance else "bad"


def _states(r: SliceResult, actions: tuple[ActionView, ...]) -> tuple[StateView, ...]:
    """Each action's state across nights, with tonight's words and number for tonight's; an
    action gone tonight is worded from the params the history kept (a night recorded before
    params were kept: the words it stored)."""
    titles = {v.a.id: v.title for v in actions}
    numbers = {v.a.id: i for i, v in enumerate(actions, 1)}

    def title(s: ActionState) -> str:
        if s.action_id in titles:
            return titles[s.action_id]
        if s.params is not None:
            return prose.title_of(s.kind, s.shape, s.params, r.name)
        return s.title or ""

    return tuple(
        StateView(s, title(s), numbers.get(s.action_id))
        for s in (r.history.actions if r.history else ())
    )


def _numbered(r: SliceResult, kind: ActionKind) -> tuple[int, str] | None:
    """(number in the actions section, id) of the slice's first action of `kind`."""
    return next(((i, a.id) for i, a in enumerate(r.actions, 1) if a.kind == kind), None)


OPEN_SECTIONS = frozenset({"summary", "tail", "blocking", "shapes", "decisions", "actions"})
"""What the HTML report opens on: the decision and why the tail (the packet's pages 1-2), the
decisions and the actions; every other section folds."""


def _reasons(r: SliceResult) -> dict[str, Any]:
    """The one-line reasons the view states: why a figure is missing, why the status."""
    return {
        "status_reason": words.status_reason(r),
        "judgements": judgement_rows(r),
        "open_sections": OPEN_SECTIONS,
    }


def build(r: SliceResult) -> ReportView:
    """The view of one slice's report."""
    parts = assemble(r)
    facts = parts.facts
    actions = facts.actions
    lines = facts.shapes
    checklist = parts.view("checklist")
    checks = checklist.checklist
    h = r.history
    states = _states(r, actions)
    sla = r.sla  # judged once, by the analysis
    head = headline(r)
    formats = facts.formats
    runs = h.runs if h else ()
    return ReportView(
        name=r.name,
        verdict=verdict(r, sla, actions, checks),
        health=health(r, sla, checks),
        headline=head,
        tail_change=tail_change(r, cast(TailQuantile, head[0])),
        recent_runs=runs[-HISTORY_ROWS:],
        older_runs=max(0, len(runs) - HISTORY_ROWS),
        period=period(r.period),
        sla=sla,
        summary=prose.summary(r, head),
        actions=actions,
        op_drifting=tuple(d for d in r.op_drifts if d.drifting),
        ops_compared=sum(1 for d in r.op_drifts if d.baseline is not None),
        shapes=lines,
        decision_counts=parts.view("decisions").counts,
        accuracy_gap=parts.view("accuracy").gap,
        checklist=checks,
        checklist_count=checklist.count,
        checklist_failed=checklist.failed,
        pitfalls=checklist.pitfalls,
        signoffs=checklist.signoffs,
        history_note=words.history_note(h) if h else "",
        states=states,
        moved=tuple(g for g in (h.regressions if h else ()) if g.kind != RegressionKind.NO_CHANGE),
        source_formats=formats,
        source_paths=source_paths(r.sources),
        limits={
            "deciding_share": DECIDING_SHARE,
            "jain_imbalance": JAIN_IMBALANCE,
            "back_margin": BACK_MARGIN,
            "minor_share": MINOR_SHARE,
            "material_traffic": MATERIAL_TRAFFIC,
        },
        sections=parts.shown,
        not_measured=parts.missing,
        **_reasons(r),
        mape_class=mape_class(r.accuracy.mape_within),
        assembled=parts,
    )
