"""A slice's status: failing, at risk or healthy, with what decided it. Read by page 1, the
board and findings.json (`status`, `status_reason`), decided once here."""

from __future__ import annotations

from dataclasses import dataclass

from mapreport.analysis.changepoints import ChangePoint
from mapreport.analysis.common import SlaCheck, TailQuantile
from mapreport.analysis.history import History, RunPoint
from mapreport.core.kinds import RegressionKind, Status, StatusReason

AT_RISK_HEADROOM = 0.10
"""A met target with less headroom than this share of it is at risk."""


@dataclass(frozen=True)
class SliceStatus:
    """The slice's status and what decided it."""

    status: Status
    reason: StatusReason
    check: SlaCheck | None
    """The target that decided it (missed, or the one with the least headroom)."""
    regressed: tuple[str, ...] = ()
    """Shapes whose p95 rose beyond their CI against the compared night."""
    compared_night: str | None = None
    shift: ChangePoint | None = None
    """The slice's upward change point that put it at risk (reason rising)."""

    @property
    def headroom(self) -> float | None:
        """How far below its target the deciding quantile is, as a share of the target."""
        excess = self.check.excess if self.check is not None else None
        return None if excess is None else -excess


def slice_status(
    sla: tuple[SlaCheck, ...], history: History | None, requests: int = 1
) -> SliceStatus:
    """Failing when a judged target is missed; at risk when a met one has under
    AT_RISK_HEADROOM of headroom, when shapes regressed beyond their CIs since the compared
    night, or when the slice's tail shifted up at its latest change point; else healthy (or,
    without a judged target, healthy for want of one)."""
    judged = [s for s in sla if s.judged is not None and s.excess is not None]
    missed = [s for s in judged if s.judged is False]
    if missed:
        worst = max(missed, key=lambda s: s.excess or 0.0)
        return SliceStatus(Status.FAILING, StatusReason.SLA_MISSED, worst)
    closest = max(judged, key=lambda s: s.excess or -1.0) if judged else None
    night = history.compared_night if history is not None and history.compared_to else None
    regressed = tuple(
        g.shape
        for g in (history.regressions if history is not None and night else ())
        if g.kind == RegressionKind.REGRESSION
    )
    if closest is not None and -(closest.excess or 0.0) < AT_RISK_HEADROOM:
        return SliceStatus(Status.AT_RISK, StatusReason.LITTLE_HEADROOM, closest, regressed, night)
    if regressed:
        return SliceStatus(Status.AT_RISK, StatusReason.REGRESSED, closest, regressed, night)
    rising = history.rising if history is not None else None
    if rising is not None and closest is not None:
        return SliceStatus(Status.AT_RISK, StatusReason.RISING, closest, regressed, night, rising)
    reason = StatusReason.WITHIN_SLA if closest is not None else StatusReason.NO_SLA
    if closest is None and not requests:
        reason = StatusReason.NO_REQUESTS
    return SliceStatus(Status.HEALTHY, reason, closest, regressed, night)


@dataclass(frozen=True)
class TailChange:
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
