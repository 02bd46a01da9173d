"""A slice's status: failing, at risk or healthy, with what decided it. Read by page 1, the
board and findings.json (`status`, `status_reason`), decided once here."""

from __future__ import annotations

from dataclasses import dataclass

from mapreport.analysis.common import SlaCheck
from mapreport.analysis.history import History
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

    @property
    def headroom(self) -> float | None:
        """How far below its target the deciding quantile is, as a share of the target."""
        excess = self.check.excess if self.check is not None else None
        return None if excess is None else -excess


def slice_status(sla: tuple[SlaCheck, ...], history: History | None) -> SliceStatus:
    """Failing when a judged target is missed; at risk when a met one has under
    AT_RISK_HEADROOM of headroom, or shapes regressed beyond their CIs since the compared
    night; else healthy (or, without a judged target, healthy for want of one)."""
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
    reason = StatusReason.WITHIN_SLA if closest is not None else StatusReason.NO_SLA
    return SliceStatus(Status.HEALTHY, reason, closest, regressed, night)
