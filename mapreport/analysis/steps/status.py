"""A slice's status: the worst of its judgements, with what decided it. Read by page 1, the
board and findings.json (`status`, `status_reason`, `judgements`), decided once here. The
latency, regression and loop rules live here (their figures are the slice's SLA checks and
its history); each other family's rule lives beside its figure (docs/metrics.md,
"Judgements")."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mapreport.analysis.actions.checklist import PrecisionCheck, judge_quality
from mapreport.analysis.actions.device_actions import judge_idle
from mapreport.analysis.base.changepoints import ChangePoint
from mapreport.analysis.base.common import Evidence, Percentiles, SlaCheck, TailQuantile, Thresholds
from mapreport.analysis.base.judgement import Judgement, ordered, worst
from mapreport.analysis.device import graphs, roofline
from mapreport.analysis.loop.history import History, RunPoint
from mapreport.analysis.mapping import environment
from mapreport.analysis.mapping.environment import EnvironmentCheck
from mapreport.analysis.serving import compiles, tail
from mapreport.analysis.serving.shape import ShapeMetrics, judge_fallback
from mapreport.analysis.steps.families import CompiledFound, DeviceFound
from mapreport.analysis.tuning import ranking, transfer
from mapreport.core.kinds import (
    ActionState,
    BottleneckClass,
    FigureUnit,
    JudgementFamily,
    RegressionKind,
    Status,
    StatusReason,
)

AT_RISK_HEADROOM = 0.10
"""A met target with less headroom than this share of it is at risk."""
CLOSED = frozenset({ActionState.ROLLED_BACK, ActionState.DROPPED, ActionState.VERIFIED})
"""Action states the loop no longer holds to a rollback trigger."""


class SliceStatus(msgspec.Struct, frozen=True):
    """The slice's status, what decided it, and every judgement it rests on."""

    status: Status
    reason: StatusReason
    check: SlaCheck | None
    """The target that decided the latency judgement (missed, or the one with the least
    headroom)."""
    regressed: tuple[str, ...] = ()
    """Shapes whose p95 rose beyond their CI against the compared night."""
    compared_night: str | None = None
    shift: ChangePoint | None = None
    """The slice's upward change point that put it at risk (reason rising)."""
    judgements: tuple[Judgement, ...] = ()
    """Every family's judgement, most severe first (not_judged last)."""
    deciding: Judgement | None = None
    """The judgement the status is (the latency one, not judged, when nothing else decides)."""

    @property
    def headroom(self) -> float | None:
        """How far below its target the deciding quantile is, as a share of the target
        (positive: room to spare)."""
        excess = self.check.excess if self.check is not None else None
        return None if excess is None else -excess

    @property
    def others(self) -> tuple[Judgement, ...]:
        """The judgements beside the deciding one (judged first)."""
        return tuple(j for j in self.judgements if j is not self.deciding)


def deciding_check(sla: Sequence[SlaCheck]) -> SlaCheck | None:
    """The target the latency judgement rests on: the most missed one, else the one with the
    least headroom (None: no target the samples can state)."""
    judged = [s for s in sla if s.judged is not None and s.excess is not None]
    missed = [s for s in judged if s.judged is False]
    return max(missed or judged, key=lambda s: s.excess or 0.0) if judged else None


def judge_latency(sla: Sequence[SlaCheck], latency: Percentiles) -> Judgement:
    """Latency against its SLA: failing when a target the samples can state is missed; at
    risk when met with under AT_RISK_HEADROOM to spare; healthy when met with more; not
    judged without requests, without a target (the tail is stated, never called healthy), or
    with too few samples for any targeted quantile."""
    family = JudgementFamily.SLA
    if not latency.n or latency.p95 is None:  # no request, or none with a measured latency
        return Judgement(family, Status.NOT_JUDGED, StatusReason.NO_REQUESTS, n=latency.n)
    targeted = [s for s in sla if s.target_us]
    if not targeted:
        return Judgement(
            family, Status.NOT_JUDGED, StatusReason.NO_SLA, latency.p95, FigureUnit.US, n=latency.n
        )
    deciding = deciding_check(sla)
    if deciding is None:
        first = targeted[0]
        return Judgement(
            family,
            Status.NOT_JUDGED,
            StatusReason.TOO_FEW_SAMPLES,
            first.value_us,
            FigureUnit.US,
            first.target_us,
            latency.n,
            subject=first.quantile,
        )
    if deciding.judged is False:
        state, reason = Status.FAILING, StatusReason.SLA_MISSED
    elif -(deciding.excess or 0.0) < AT_RISK_HEADROOM:
        state, reason = Status.AT_RISK, StatusReason.LITTLE_HEADROOM
    else:
        state, reason = Status.HEALTHY, StatusReason.WITHIN_SLA
    return Judgement(
        family,
        state,
        reason,
        deciding.value_us,
        FigureUnit.US,
        deciding.target_us,
        latency.n,
        subject=deciding.quantile,
    )


def judge_regression(history: History | None) -> Judgement | None:
    """Shapes' p95 against the compared night (beyond their CIs) and the slice's latest
    upward change point: at risk when either moved up; healthy when a night was compared and
    nothing did; not judged on a first night (None without a history at all)."""
    family = JudgementFamily.REGRESSION
    if history is None:
        return None
    night = history.compared_night if history.compared_to else None
    if night is None:
        return Judgement(family, Status.NOT_JUDGED, StatusReason.FIRST_NIGHT)
    regressed = [g for g in history.regressions if g.kind == RegressionKind.REGRESSION]
    if regressed:
        # each regression is measured against its own reference night (the last within the
        # SLA before it): name that night, or the earliest when they differ
        against = min(g.against_run_date for g in regressed)
        return Judgement(
            family,
            Status.AT_RISK,
            StatusReason.REGRESSED,
            float(len(regressed)),
            FigureUnit.COUNT,
            subject=against,
        )
    rising = history.rising
    if rising is not None:
        return Judgement(
            family, Status.AT_RISK, StatusReason.RISING, rising.change, FigureUnit.SHARE
        )
    return Judgement(family, Status.HEALTHY, StatusReason.NO_REGRESSION, 0.0, subject=night)


def judge_loop(history: History | None) -> Judgement | None:
    """The loop's open actions against tonight's figures: failing when any one's rollback
    trigger is exceeded tonight (the figure above its threshold: the change it asked for is
    hurting); healthy when every open action is within its trigger (None: no tracked action)."""
    family = JudgementFamily.LOOP
    tracked = [a for a in history.actions if a.state not in CLOSED] if history else []
    if not tracked:
        return None
    exceeded = [
        a
        for a in tracked
        if a.rollback_threshold is not None
        and a.rollback_now is not None
        and a.rollback_now > a.rollback_threshold
    ]
    tracked = [a for a in tracked if a.state is not ActionState.NEW]  # proposed tonight
    if exceeded:
        worst_one = max(
            exceeded, key=lambda a: (a.rollback_now or 0.0) / (a.rollback_threshold or 1)
        )
        return Judgement(
            family,
            Status.FAILING,
            StatusReason.ROLLBACK_DUE,
            worst_one.rollback_now,
            FigureUnit.US,
            worst_one.rollback_threshold,
            len(exceeded),
            subject=worst_one.shape,
        )
    if not tracked:
        return None
    return Judgement(
        family, Status.HEALTHY, StatusReason.LOOP_ON_TRACK, float(len(tracked)), n=len(tracked)
    )


def family_judgements(
    shapes: tuple[ShapeMetrics, ...],
    env: EnvironmentCheck,
    precision: PrecisionCheck,
    found: tuple[DeviceFound, CompiledFound],
    scope: tuple[Thresholds, str, str],
    tail_of: tuple[tail.TailRatio | None, BottleneckClass | None, Evidence | None] = (
        None,
        None,
        None,
    ),
) -> tuple[Judgement | None, ...]:
    """The judgements of every family whose rule lives beside its figure (None: a family the
    slice holds no figure of); `scope`: the thresholds, workload and slice; `tail_of`: the
    slice's tail ratio, its pooled tail's class, and the blocked share's evidence where that
    share decided the class (no latency recorded)."""
    th, workload, slice_ = scope
    device, compiled = found
    return (
        tail.judge(tail_of[0], tail_of[1], th, tail_of[2]),
        compiles.judge(compiled.compiles),
        judge_idle(device.timeline, th, workload, slice_),
        judge_quality(precision),
        judge_fallback(shapes),
        roofline.judge(device.roofline),
        graphs.judge(device.graphs),
        compiles.judge_breaks(compiled.compiles),
        environment.judge(env),
        transfer.judge(ranking.judge(compiled.ranking), compiled.transfer),
    )


def slice_status(
    sla: Sequence[SlaCheck],
    latency: Percentiles,
    history: History | None,
    others: Sequence[Judgement | None] = (),
) -> SliceStatus:
    """The worst of the slice's judgements (latency, regression, the loop, and the other
    families' `others`), with the latency judgement's check and the history's regressed
    shapes and shift for the words; not_judged when no rule could check anything, or when
    nothing is wrong but the slice's requests were judged against no target (a slice is
    healthy only on the latency it was checked for, or, without requests, on its other
    figures)."""
    latency_judgement = judge_latency(sla, latency)
    found = [latency_judgement, judge_regression(history), judge_loop(history), *others]
    judgements = ordered([j for j in found if j is not None])
    deciding = worst(judgements)
    if deciding is None or (
        deciding.state is Status.HEALTHY
        and latency_judgement.state is Status.NOT_JUDGED
        and latency_judgement.reason is not StatusReason.NO_REQUESTS
    ):
        # requests whose latency no target judged: never healthy on the other families alone
        deciding = latency_judgement
    check = deciding_check(sla)
    night = history.compared_night if history is not None and history.compared_to else None
    regressed = tuple(
        g.shape
        for g in (history.regressions if history is not None and night else ())
        if g.kind == RegressionKind.REGRESSION
    )
    shift = history.rising if history is not None else None
    return SliceStatus(
        deciding.state,
        deciding.reason,
        check,
        regressed,
        night,
        shift if deciding.reason == StatusReason.RISING else None,
        judgements,
        deciding,
    )


class TailChange(msgspec.Struct, frozen=True):
    """Tonight's tail against its baseline night."""

    quantile: TailQuantile
    night: str
    """The baseline: the last earlier night within its SLA target, else the previous night."""
    within_sla: bool
    """The baseline night met the target (False: no target, or none met it)."""
    change: float


def tail_change(
    history: History | None, quantile: TailQuantile, target_us: float | None
) -> TailChange | None:
    """Tonight's `quantile` against the last earlier night that met `target_us` (a slide from
    met to missed stays a slide on the nights after it: 7.94 -> 16.20 -> 12.76 ms is +61%,
    not -21%), else against the previous night; None on a first night."""
    runs = history.runs if history is not None else ()
    tonight = [p for p in runs if p.current]
    earlier = [p for p in runs if not p.current and _value(p, quantile)]
    if not tonight or not earlier or not _value(tonight[-1], quantile):
        return None
    met = [p for p in earlier if target_us and (_value(p, quantile) or 0.0) <= target_us]
    base = met[-1] if met else earlier[-1]
    now, before = _value(tonight[-1], quantile), _value(base, quantile)
    assert now is not None
    assert before is not None
    return TailChange(quantile, base.run_date, bool(met), now / before - 1)


def _value(p: RunPoint, quantile: TailQuantile) -> float | None:
    return p.latency_p99_us if quantile == "p99" else p.latency_p95_us
