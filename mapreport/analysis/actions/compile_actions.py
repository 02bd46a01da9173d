"""The action a compile log calls for on its own: a frame that recompiled for the shapes it met
(dynamo's guards failed on them) until it reached, or came close to, its recompile limit. What
to change follows from the guard that failed: a size that varies is a dim to mark dynamic or
to bucket; another guard is a value to hold constant, or a limit to raise when every variant is
wanted. A serving slice whose requests waited behind those recompiles gets the blocking action
instead (one cause, one owner: `planning.plan_actions`)."""

from __future__ import annotations

from collections.abc import Sequence

from mapreport.analysis.actions.action_params import ActionParams, Dim, owners
from mapreport.analysis.actions.actions import (
    NO_ROLLBACK,
    SLICE_WIDE,
    Action,
    Scope,
    ValidationRow,
    make_action,
)
from mapreport.analysis.base.common import Evidence, Interval
from mapreport.analysis.serving.compiles import RECOMPILE_LIMIT, RecompiledFrame
from mapreport.core.kinds import ActionKind, Criterion, OwnerRole


class Recompiled(ActionParams, frozen=True):
    """A compiled frame that recompiled for the shapes it met: how often, against the limit,
    the dims whose sizes changed, and the guards that failed (first of each)."""

    OWNERS = owners({ActionKind.DYNAMIC_SHAPES: OwnerRole.COMPILER_LEAD})

    frame: str
    recompiles: int
    refused: int
    """Attempts refused at the recompile limit (those calls ran eagerly)."""
    attempts: int
    limit: int
    dims: tuple[Dim, ...]
    reasons: tuple[str, ...]


REASONS = 3
"""The distinct failed guards an action names (the first ones, in the order they came)."""


def recompile_action(
    s: Scope, frames: Sequence[RecompiledFrame], sources: tuple[str, ...]
) -> Action | None:
    """The most recompiled frame's action, when it recompiled RECOMPILE_LIMIT times or more or
    had an attempt refused at the limit (the compiles judgement's rule: `compiles.judge`).
    The count is exact (a log's records, not a sample): its interval is the count itself."""
    if not frames:
        return None
    top = max(frames, key=lambda f: (f.recompiles + f.refused, f.frame))
    if top.recompiles < RECOMPILE_LIMIT and not top.refused:
        return None
    count = float(top.recompiles)
    ev = Evidence("frame_recompiles", count, top.attempts, Interval(count, count), sources)
    row = ValidationRow(SLICE_WIDE, "frame_recompiles", count, Criterion.HALVED)
    params = Recompiled(
        top.frame,
        top.recompiles,
        top.refused,
        top.attempts,
        RECOMPILE_LIMIT,
        tuple(Dim(d.tensor, d.dim, d.low, d.high) for d in top.dims),
        top.reasons[:REASONS],
    )
    impact = (top.recompiles + top.refused) / top.attempts if top.attempts else 0.0
    return make_action(
        s, SLICE_WIDE, ActionKind.DYNAMIC_SHAPES, ev, NO_ROLLBACK, (row,), impact, params
    )
