"""The verdict: what page 1 and the index say of a slice before anything else (each SLA
target met or missed, the shape that drives a miss, the first actions, what fails, what
changed), from the facts the sections state in full."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.base.common import SlaCheck, TailQuantile
from mapreport.analysis.loop.history import History
from mapreport.analysis.serving.sla import OverSla, OverTarget
from mapreport.analysis.steps.results import SliceResult
from mapreport.analysis.steps.status import TailChange
from mapreport.analysis.steps.status import tail_change as status_tail_change
from mapreport.core.kinds import BLOCKERS, Health, RegressionKind
from mapreport.core.kinds import ActionState as State
from mapreport.report import states, words
from mapreport.report.lines import ActionView, CheckLine, Row

if TYPE_CHECKING:
    pass


class Verdict(msgspec.Struct, frozen=True):
    """What page 1 says before anything else: the SLA, what drives a miss, what to do, what
    fails, and what changed since the compared night."""

    sla: tuple[SlaCheck, ...]
    """The configured targets only."""
    driver: OverTarget | None
    """The shape holding the most requests over the headline target, when it is missed."""
    over: OverSla | None
    actions: tuple[ActionView, ...]
    blockers: int
    """How many of `actions` are blockers (they come first)."""
    failed: tuple[str, ...]
    """Checklist items that fail."""
    pitfalls: tuple[str, ...]
    """Pitfalls found."""
    changes: dict[State, int]
    """Actions by state since the compared night (empty on a first night)."""
    regressions: int
    compared_to: str | None
    """The night compared with (None on a first night)."""
    tail: str = ""
    """What drives the slice's tail, when its pooled tail decides a class."""
    rollback_due: tuple[str, ...] = ()
    """Each action whose rollback trigger is exceeded tonight, with the figure."""
    ranking: str = ""
    """What the tuning records say, when the tuning choices decide the slice's status."""


def headline(r: SliceResult) -> tuple[str, float | None, float | None, bool | None]:
    """The tail statistic the slice has the evidence for (`Percentiles.tail`), its value, its
    SLA and whether it is met: the analysis's judgement of that quantile."""
    q, value = r.latency.tail(r.thresholds.min_samples_p99)
    check = next((c for c in r.sla if c.quantile == q), None)
    if check is None:
        return q, value, r.review.sla(q), None
    return q, check.value_us, check.target_us, check.met


def sla_missed(sla: tuple[SlaCheck, ...]) -> bool:
    """Whether the slice misses a configured target it has the evidence to judge (a p99 of
    too few requests is not stated by the headline, so it fails nothing here either)."""
    return any(s.judged is False for s in sla)


def holding(
    locked: bool, sla: tuple[SlaCheck, ...], checks: tuple[CheckLine, ...]
) -> tuple[Health, ...]:
    """Every state that holds of the slice, most severe first (healthy when none does)."""
    held = [
        h
        for h, holds in (
            (Health.SLA_MISSED, sla_missed(sla)),
            (Health.ENVIRONMENT_UNLOCKED, not locked),
            (Health.CHECKLIST_FAILING, any(c.failed for c in checks)),
        )
        if holds
    ]
    return tuple(held) or (Health.HEALTHY,)


def health(locked: bool, sla: tuple[SlaCheck, ...], checks: tuple[CheckLine, ...]) -> Health:
    """The slice's state on the index: the first of SLA missed, environment unlocked,
    checklist failing, healthy."""
    return holding(locked, sla, checks)[0]


def tail_change(r: SliceResult, q: TailQuantile) -> TailChange | None:
    """Tonight's headline quantile against its baseline night (`status.tail_change`)."""
    return status_tail_change(r.history, q, r.review.sla(q))


VERDICT_ACTIONS = 3
"""Actions page 1 names (blockers first); the actions section lists every one."""


def verdict(
    sla: tuple[SlaCheck, ...],
    actions: tuple[ActionView, ...],
    checks: tuple[CheckLine, ...],
    pitfalls: tuple[Row, ...],
    h: History | None,
    over: OverSla | None,
    tail: str,
    ranking: str = "",
) -> Verdict:
    """Page 1 of the report, from the facts the sections state in full: the SLA checks, the
    actions, the checklist and its pitfalls, the history, the requests over the SLA, what
    drives the slice's tail and, when they decide its status, the tuning choices, in words."""
    compared = h is not None and h.compared_to is not None
    moved = h.regressions if h is not None and compared else ()
    return Verdict(
        sla=tuple(s for s in sla if s.target_us),
        driver=over.shapes[0] if over and over.shapes and sla_missed(sla) else None,
        over=over,
        actions=actions[:VERDICT_ACTIONS],
        blockers=sum(1 for a in actions if a.a.kind in BLOCKERS),
        failed=tuple(c.name for c in checks if c.failed),
        pitfalls=tuple(p.name for p in pitfalls if p.flag),
        changes=dict(Counter(s.state for s in h.actions)) if h and compared else {},
        regressions=sum(1 for g in moved if g.kind == RegressionKind.REGRESSION),
        compared_to=h.compared_night if h and h.compared_to else None,
        tail=tail,
        ranking=ranking,
        rollback_due=tuple(
            f"{words.label(s.kind)} at {words.shape_name(s.shape)}: {states.trigger(s)}"
            for s in (h.actions if h is not None else ())
            if s.state == State.ROLLBACK_DUE
        ),
    )
