"""Planning a slice's actions: every finding's action, and their order (blockers first, then
the shape that breaks the SLA, then by impact)."""

from __future__ import annotations

from collections.abc import Sequence

from mapreport.analysis.actions.actions import (
    SLICE_WIDE,
    Action,
    Scope,
    blocking_action,
    consistency_action,
    drift_action,
    regression_action,
    shape_actions,
    slice_actions,
)
from mapreport.analysis.mapping.consistency import QueueCheck
from mapreport.analysis.mapping.environment import EnvironmentCheck
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.core.kinds import BLOCKERS, ActionKind, BottleneckClass, Driver, RegressionKind

UNMEASURED_FIELDS = {
    Driver.BLOCKED_BEHIND_ADAPTATION: "queue_start_us",
    Driver.QUEUEING: "queue_start_us",
    Driver.MAPPING_FALLBACK: "compute_start_us",
    Driver.CORE_IMBALANCE: "core",
    Driver.MEMORY_BURST: "mem_peak_bytes",
}
"""The request field a tail driver needs, when it could not be measured (client-side timing
has no server-side queue start or compute start)."""


FITS_MODEL = frozenset(
    {ActionKind.COST_MODEL_DRIFT, ActionKind.MAPPING_INACCURACY, ActionKind.CLOSE_THE_LOOP}
)
"""Actions that fit the cost model (or the plan) to a shape's measured figures: none is
proposed on a shape whose p95 regressed (it would fit the model to the regressed figure; the
regression's action is the one proposed)."""
CAUSES: dict[ActionKind, str] = dict.fromkeys(FITS_MODEL, "cost_model")
"""Kinds that name one cause on a shape (the cost model's figures for it): one action, one
owner, per shape and cause. Every other kind is its own cause."""


def one_owner(actions: Sequence[Action], regressed: set[str]) -> list[Action]:
    """Tonight's actions with one per shape and cause (the first in rank order), and none that
    fits a model to a regressed shape's figures."""
    seen: set[tuple[str, str]] = set()
    out = []
    for a in actions:
        if a.kind in FITS_MODEL and a.shape in regressed:
            continue
        cause = (a.shape, CAUSES.get(a.kind, f"{a.kind}:{a.id}"))
        if cause not in seen:
            seen.add(cause)
            out.append(a)
    return out


def _unmeasured(shapes: Sequence[ShapeMetrics]) -> list[tuple[str, str]]:
    """(shape, field) of the request fields whose absence leaves a material tail unexplained;
    a field no shape with a tail carries is one slice-wide finding (the source never records
    it), not one per shape."""
    pairs = list(
        dict.fromkeys(
            (m.shape, UNMEASURED_FIELDS[u])
            for m in shapes
            if m.tail is not None
            and m.tail.material
            and m.diagnosis.cls == BottleneckClass.INSUFFICIENT_EVIDENCE
            for u in m.tail.unmeasured
        )
    )
    with_tail = [m for m in shapes if m.tail is not None]
    out: list[tuple[str, str]] = []
    for field in dict.fromkeys(f for _, f in pairs):
        shapes_missing = [sh for sh, f in pairs if f == field]
        drivers = [d for d, f in UNMEASURED_FIELDS.items() if f == field]
        nowhere = all(
            m.tail is not None and any(d in m.tail.unmeasured for d in drivers) for m in with_tail
        )
        if len(shapes_missing) > 1 and nowhere:
            out.append((SLICE_WIDE, field))
        else:
            out += [(sh, field) for sh in shapes_missing]
    return out


def plan_actions(
    s: Scope,
    env: EnvironmentCheck,
    missing_quality: Sequence[str],
    slowest: dict[str, tuple[int, float]],
    sources: tuple[str, ...],
    queue: QueueCheck | None = None,
    device: Sequence[Action] = (),
) -> tuple[Action, ...]:
    """Every action of a slice: blockers first (`BLOCKERS`, in that order), then those on the
    shape that breaks the SLA, then the other tuning actions, most impact first (ties: shape,
    kind); one per shape and cause, and no model fitted to a regressed shape (`one_owner`).
    `device`: the actions of the slice's device time (`device_actions`)."""
    actions = [*device, *(a for m in s.shapes for a in shape_actions(s, m, slowest.get(m.shape)))]
    unmeasured = _unmeasured(s.shapes)
    actions += slice_actions(s, env, missing_quality, unmeasured, sources)
    if queue is not None and queue.disagrees:
        actions.append(consistency_action(s, queue, sources))
    blocked = blocking_action(s, sources)
    if blocked is not None:
        # its requests waited behind the recompiles: the blocking action names the varying
        # dims too, and one cause has one owner
        actions = [a for a in actions if a.kind != ActionKind.DYNAMIC_SHAPES]
        actions.append(blocked)
    by_shape = {m.shape: m for m in s.shapes}
    actions += [drift_action(s, by_shape[d.shape], d) for d in s.drifts if d.drifting]
    regressed = [
        g for g in s.regressions if g.kind == RegressionKind.REGRESSION and g.shape in by_shape
    ]
    actions += [regression_action(s, by_shape[g.shape], g) for g in regressed]
    ranked = sorted(actions, key=lambda a: _rank(a, s.sla_driver))
    return tuple(one_owner(ranked, {g.shape for g in regressed}))


def _rank(a: Action, sla_driver: str | None) -> tuple[int, bool, float, str, str]:
    blocker = BLOCKERS.index(a.kind) if a.kind in BLOCKERS else len(BLOCKERS)
    return blocker, a.shape != sla_driver, -a.impact, a.shape, a.kind
