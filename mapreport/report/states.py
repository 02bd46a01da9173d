"""The closed loop's states in words: each action's state with the measured figure that decided
it (the loop's tables, page 1's changes, the packet)."""

from __future__ import annotations

from mapreport.analysis.loop.loop import ActionState
from mapreport.analysis.loop.targets import Bound
from mapreport.core.kinds import ActionState as State
from mapreport.report.filters import DASH, metric_value
from mapreport.report.words import label, metric

STATES: dict[State, str] = {
    State.NEW: "first proposed tonight",
    State.OPEN: "proposed on an earlier night and still now",
    State.ROLLBACK_DUE: "its rollback trigger is exceeded tonight: roll the change back; it is "
    "rolled back if the trigger holds on the next night too",
    State.ROLLED_BACK: "its rollback trigger held on two consecutive nights",
    State.VERIFIED: "no longer proposed, and its target met tonight with its whole 95% CI",
    State.DROPPED: "no longer proposed, but its target not met with its CI (or no figure "
    "with a CI to judge it)",
}
"""What each state means (the loop table's legend, docs/metrics.md)."""


def trigger(s: ActionState) -> str:
    """The rollback figure against its stored threshold: `p99 latency 6.35 s > 6.29 s`."""
    if s.rollback_threshold is None or s.rollback_metric is None:
        return DASH
    m = s.rollback_metric
    now = metric_value(s.rollback_now, m)
    sign = ">" if s.rollback_exceeded else "≤"
    return f"{metric(m)} {now} {sign} {metric_value(s.rollback_threshold, m)}"


def _range(b: Bound, m: str) -> str:
    low, high = b
    if low is not None and high is not None:
        return f"within {metric_value(low, m)} to {metric_value(high, m)}"
    if high is not None:
        return f"≤ {metric_value(high, m)}"
    return f"≥ {metric_value(low, m)}"


def target(s: ActionState) -> str:
    """The target figure tonight with its CI against the bound it must lie in."""
    m = s.target_metric
    if m is None:
        return DASH
    if s.target_bound is None:
        return f"{metric(m)} {metric_value(s.target_now, m)}"
    ci = s.target_ci
    within = (
        f" (95% CI {metric_value(ci.low, m)} to {metric_value(ci.high, m)})"
        if ci is not None
        else " (no CI: not judged)"
        if s.target_met is None
        else ""
    )
    verdict = {True: "met", False: "not met", None: "not judged"}[s.target_met]
    return (
        f"{metric(m)} {metric_value(s.target_now, m)}{within}, target "
        f"{_range(s.target_bound, m)}: {verdict}"
    )


def state_line(s: ActionState) -> str:
    """The state with the figure that decided it: `rollback due: p99 latency 6.35 s >
    6.29 s`."""
    name = "stays rolled back" if s.held else label(s.state)
    if s.state in (State.ROLLBACK_DUE, State.ROLLED_BACK) and not s.held:
        return f"{name}: {trigger(s)}"
    if s.state in (State.VERIFIED, State.DROPPED) and s.target_metric:
        return f"{name}: {target(s)}"
    return name
