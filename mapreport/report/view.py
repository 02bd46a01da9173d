"""The page's view: what the cover, the verdict, the contents and the packet print of one slice,
read from its sections' views (`sections.assemble`, made once); each section's own partial
prints its own view.

Templates loop over these and print; every sentence, table and chart that states a fact
reads it from a view, so no two places decide it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from mapreport.analysis.actions.observe import MATERIAL_TRAFFIC
from mapreport.analysis.base.common import Regression, SlaCheck
from mapreport.analysis.loop.history import RunPoint
from mapreport.analysis.steps.results import SliceResult
from mapreport.analysis.steps.status import SliceStatus, TailChange
from mapreport.core.kinds import Health
from mapreport.report import sections
from mapreport.report.judgements import JudgementRow
from mapreport.report.lines import ActionView, CheckLine, Row, ShapeLine
from mapreport.report.lines import anchor_key as anchor_key  # compare.py names shapes by it
from mapreport.report.sections import Assembled, assemble
from mapreport.report.sections.history import StateView
from mapreport.report.sections.unit import Part
from mapreport.report.verdict import Verdict, health, verdict


class ReportView(msgspec.Struct, frozen=True):
    """Everything the page prints beyond its sections' own views."""

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
    shapes: tuple[ShapeLine, ...]
    decision_counts: dict[str, int]
    checklist: tuple[CheckLine, ...]
    checklist_count: str
    """How many items pass, fail and are not applicable (`3 pass, 1 fail, 1 not applicable`)."""
    checklist_failed: tuple[str, ...]
    pitfalls: tuple[Row, ...]
    signoffs: tuple[tuple[str, str, str, bool], ...]
    """(role, owner, signed by, signed) per role."""
    recent_runs: tuple[RunPoint, ...]
    """The last recorded nights, tonight's last (`history.HISTORY_ROWS`)."""
    states: tuple[StateView, ...]
    moved: tuple[Regression, ...]
    """Shapes whose p95 moved significantly against the compared run."""
    limits: dict[str, float]
    """Thresholds the prose quotes."""
    sections: tuple[Part[Any], ...]
    """The sections with something to show, in order ("Not measured" among them when any
    other is not)."""
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
    of: dict[str, Any]
    """Each section's view by its id: what the page and the packet print of the sections."""
    requests: int
    """The slice's requests (none: a compile log, a profile or a sweep alone)."""
    status: SliceStatus | None
    """Failing, at risk or healthy, and what decided it."""


def mape_class(within_tolerance: bool | None) -> str:
    """The weighted MAPE's style against the tolerance, as the analysis judged it ('' when
    not measured)."""
    return "" if within_tolerance is None else "ok" if within_tolerance else "bad"


OPEN_SECTIONS = frozenset({"summary", "tail", "blocking", "shapes", "decisions", "actions"})
"""What the HTML report opens on: the decision and why the tail (the packet's pages 1-2), the
decisions and the actions; every other section folds."""


def page(a: Assembled) -> ReportView:
    """The page of one slice, from its sections' views."""
    of = {p.id: p.v for p in a.parts}
    summary, checklist = a.of(sections.summary.SECTION), a.of(sections.checklist.SECTION)
    history, scope = a.of(sections.history.SECTION), a.of(sections.scope.SECTION)
    actions = a.of(sections.actions.SECTION).actions
    checks = checklist.checklist
    sla = scope.s.sla  # judged once, by the analysis
    locked = a.of(sections.environment.SECTION).env.locked
    tail = a.of(sections.tail.SECTION).sentence
    accuracy = a.of(sections.accuracy.SECTION)
    return ReportView(
        name=f"{scope.s.workload}/{scope.s.slice}" if scope.s.slice else scope.s.workload,
        verdict=verdict(
            sla,
            actions,
            checks,
            checklist.pitfalls,
            history.h,
            summary.over_sla,
            tail,
            a.of(sections.ranking.SECTION).sentence,
        ),
        health=health(locked, sla, checks),
        headline=summary.headline,
        tail_change=summary.tail_change,
        period=scope.period,
        sla=sla,
        summary=summary.text,
        actions=actions,
        shapes=a.of(sections.shapes.SECTION).shapes,
        decision_counts=a.of(sections.decisions.SECTION).counts,
        checklist=checks,
        checklist_count=checklist.count,
        checklist_failed=checklist.failed,
        pitfalls=checklist.pitfalls,
        signoffs=checklist.signoffs,
        recent_runs=history.recent_runs,
        states=history.states,
        moved=history.moved,
        limits={"material_traffic": MATERIAL_TRAFFIC},
        sections=a.shown,
        accuracy_gap=accuracy.gap,
        status_reason=summary.status_reason,
        judgements=summary.judged,
        open_sections=OPEN_SECTIONS,
        mape_class=mape_class(accuracy.a.mape_within),
        assembled=a,
        of=of,
        requests=scope.s.requests,
        status=summary.status,
    )


def build(r: SliceResult) -> ReportView:
    """The view of one slice's report: its sections assembled, then its page."""
    return page(assemble(r))
