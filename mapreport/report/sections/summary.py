"""Executive summary: the slice in a few sentences, how many actions it calls for and how its
checklist stands; and findings.json's status, its reason and every family's judgement."""

from __future__ import annotations

from typing import cast

import msgspec

from mapreport.analysis.base.common import TailQuantile
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.serving.sla import OverSla
from mapreport.analysis.steps.status import SliceStatus, TailChange
from mapreport.core.kinds import FigureUnit, JudgementFamily, Status, StatusReason
from mapreport.report import devicetime, prose, words
from mapreport.report.judgements import JudgementRow, line, rows
from mapreport.report.lines import ActionView
from mapreport.report.sections import checklist
from mapreport.report.sections.unit import Facts, Section, same
from mapreport.report.verdict import headline, tail_change


class SummaryView(msgspec.Struct, frozen=True):
    """The summary's sentences, the actions it points to and the checklist's standing."""

    text: str
    actions: tuple[ActionView, ...]
    checks: checklist.ChecklistView
    status: SliceStatus | None
    status_reason: str
    """Why the slice has its status, one line (`words.status_reason`)."""
    over_sla: OverSla | None
    device: str
    """Where a trace's device time went, in one sentence ('' without device time)."""
    headline: tuple[str, float | None, float | None, bool | None]
    """The tail quantile the slice has the evidence for, its value, SLA and whether met."""
    tail_change: TailChange | None
    """That quantile against its baseline night (None on a first night)."""
    judged: tuple[JudgementRow, ...]
    """Every family's judgement in words, most severe first, the deciding one marked."""

    @property
    def checklist_count(self) -> str:
        """How many checklist items pass, fail and are not applicable."""
        return self.checks.count

    @property
    def checklist_failed(self) -> tuple[str, ...]:
        """The checklist items that fail, by name."""
        return self.checks.failed


class JudgementLine(msgspec.Struct):
    """One family's judgement of findings.json `judgements`, judged or not."""

    family: JudgementFamily
    state: Status
    reason: StatusReason
    words: str
    figure: float | None
    unit: FigureUnit
    bound: float | None
    n: int | None
    ci: tuple[float, float] | None
    subject: str | None
    deciding: bool


class Fragment(msgspec.Struct):
    """findings.json `summary`, `status`, `status_reason`, `judgements` and `over_sla`."""

    summary: str
    status: Status | None
    status_reason: str
    judgements: tuple[JudgementLine, ...]
    over_sla: OverSla | None


def read(f: Facts) -> SummaryView:
    """The summary's words, the actions, the checklist, the status and why."""
    r = f.r
    head = headline(r)
    return SummaryView(
        prose.summary(r, head),
        f.actions,
        f.share(checklist.read),
        r.status,
        words.status_reason(r),
        r.over_sla,
        devicetime.summary(r) or "",
        head,
        tail_change(r, cast(TailQuantile, head[0])),
        rows(r),
    )


def _judgement(j: Judgement, deciding: Judgement | None) -> JudgementLine:
    return JudgementLine(
        j.family,
        j.state,
        j.reason,
        line(j),
        j.figure,
        j.unit,
        j.bound,
        j.n,
        j.ci,
        j.subject or None,
        j is deciding,
    )


def fragment(v: SummaryView) -> Fragment:
    """The summary, the status with its reason and every judgement, the requests over SLA."""
    st = v.status
    return Fragment(
        v.text,
        st.status if st else None,
        v.status_reason,
        tuple(_judgement(j, st.deciding) for j in st.judgements) if st else (),
        v.over_sla,
    )


SECTION = Section("summary", "Executive summary", read, same, fragment)
