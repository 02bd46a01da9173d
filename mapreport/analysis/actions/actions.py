"""Retuning actions: each finding that passes the evidence rules becomes at most one action per
(workload, shape, kind), with an owner, a rollback trigger and a validation matrix.

An action is a kind and the figures its finding rests on (`params`); the report says it in
words (`mapreport.report.words`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.analysis.actions import action_params as P
from mapreport.analysis.actions.action_params import ActionParams
from mapreport.analysis.base.common import SLICE_WIDE as SLICE_WIDE  # the actions' name for it
from mapreport.analysis.base.common import (
    Evidence,
    Interval,
    Percentiles,
    QualityGuard,
    Review,
    Thresholds,
    within,
)
from mapreport.analysis.mapping.consistency import QueueCheck
from mapreport.analysis.mapping.environment import EnvironmentCheck
from mapreport.analysis.serving.blocking import Blocking
from mapreport.core.kinds import (
    ActionKind,
    BlockingRemedy,
    BottleneckClass,
    ClassBasis,
    Criterion,
    Decision,
    GainBasis,
    GainState,
    OwnerRole,
    Reduction,
)
from mapreport.core.records import replace

if TYPE_CHECKING:
    from mapreport.analysis.base.common import Regression
    from mapreport.analysis.serving.classify import ShapeClass
    from mapreport.analysis.serving.drift import ShapeDrift
    from mapreport.analysis.serving.shape import ShapeMetrics

REMEDY_OWNERS: dict[BlockingRemedy, OwnerRole] = {
    BlockingRemedy.PRECOMPILE_IN_WARMUP: OwnerRole.MODEL_SERVING_ARCHITECT,
    BlockingRemedy.COMPILE_ASYNC: OwnerRole.RUNTIME_LEAD,
    BlockingRemedy.MARK_DYNAMIC: OwnerRole.COMPILER_LEAD,
    BlockingRemedy.COVER_IN_PLAN: OwnerRole.COMPILER_LEAD,
    BlockingRemedy.RAISE_RECOMPILE_LIMIT: OwnerRole.MODEL_SERVING_ARCHITECT,
}
"""Who owns a blocking action: whoever owns its remedy (the serving deployment's warm-up, the
runtime's compile path, the compiler's dynamic shapes and buckets)."""

ROLLBACK_RUNS = 2
"""A rollback trigger fires when its bound is crossed on this many consecutive nights."""
ROLLBACK_MARGIN = 0.10
"""A change is rolled back when the tail grows by more than this over its pre-change value."""
TAIL_KINDS = {
    BottleneckClass.QUEUEING: ActionKind.QUEUEING,
    BottleneckClass.CORE_IMBALANCE: ActionKind.CORE_IMBALANCE,
    BottleneckClass.MAPPING_FALLBACK: ActionKind.MAPPING_FALLBACK,
    BottleneckClass.MEMORY_BURST: ActionKind.MEMORY_BURST,
}
REPEATABLE = frozenset({ActionKind.OBSERVABILITY, ActionKind.PRECISION_WITHOUT_QUALITY})
"""Kinds of which one shape may carry several actions, told apart by their evidence metric."""
NEIGHBOURS = 2
"""The busiest other shapes a validation matrix guards against regressions."""


class ValidationRow(msgspec.Struct, frozen=True):
    """One cell row of a validation matrix: a shape, a metric, what passes."""

    shape: str
    metric: str
    baseline: float | None
    criterion: Criterion
    limit: float | None = None
    """The bound a criterion names (the APE tolerance, a quality max_drop)."""
    reference: float | None = None
    """The value a drop is measured from (a quality record's baseline)."""


def measured(
    m: ShapeMetrics, metric: str, criterion: Criterion, limit: float | None = None
) -> ValidationRow:
    """A shape's validation row with tonight's value of `metric` (`ShapeMetrics.metric`, the
    value the history compares later nights with)."""
    return ValidationRow(m.shape, metric, m.metric(metric), criterion, limit)


class RollbackTrigger(msgspec.Struct, frozen=True):
    """When to roll a change back: metric above threshold for `runs` consecutive nights.
    metric "none": not a runtime change, nothing to roll back."""

    metric: str
    threshold: float | None
    runs: int
    pre_change: float | None = None
    """The metric's value before the change (the +10% bound's base)."""
    sla_us: float | None = None
    """The SLA, when it bounds the trigger (the pre-change value meets it)."""
    since: str | None = None
    """The run date the trigger was fixed on: the night the action was proposed."""


NO_ROLLBACK = RollbackTrigger("none", None, 0)


class PackRequest(msgspec.Struct, frozen=True):
    """An evidence pack an action's kind asks for: its id, the evidence whose figure it
    reproduces, how that figure follows from the rows (`Reduction`), and the parameters
    (the reduction's `PackKind.params`) that select them."""

    id: str
    evidence: Evidence
    reduction: Reduction
    params: Any


class Action(msgspec.Struct, frozen=True):
    """A retuning action: what to change, who owns it, how to undo it, how to validate it."""

    id: str
    kind: ActionKind
    shape: str
    owner_role: OwnerRole
    owner: str | None
    evidence: Evidence
    rollback_trigger: RollbackTrigger
    validation_matrix: tuple[ValidationRow, ...]
    impact: float
    """Ordering key: traffic share times the size of the effect (0 for slice-wide actions)."""
    params: ActionParams
    """The figures the finding states, typed by kind (the report's title reads them)."""
    packs: tuple[PackRequest, ...] = ()
    """The evidence packs that reproduce the action's figures, where its kind states them;
    empty: the one its evidence's metric chooses (`steps.packs`)."""

    @property
    def missing_side(self) -> str | None:
        """The side ("compile", "runtime") whose environment record an observability action
        asks for (None for any other action)."""
        return self.params.side if isinstance(self.params, P.MissingSide) else None


class Scope(msgspec.Struct, frozen=True):
    """What every action of a slice is planned against."""

    workload: str
    slice: str
    thresholds: Thresholds
    review: Review
    shapes: tuple[ShapeMetrics, ...]
    guard: QualityGuard | None
    """The precision change whose quality guardrail the validation matrices carry."""
    latency: Percentiles
    """The slice's latency (slice-wide rollback triggers and matrices)."""
    blocking: Blocking
    tail_class: ShapeClass | None
    """The slice's pooled tail, read by the shapes' rule."""
    drifts: tuple[ShapeDrift, ...] = ()
    sla_driver: str | None = None
    """The shape that breaks the SLA (`sla.sla_driver`): its actions rank first after the
    blockers."""
    regressions: tuple[Regression, ...] = ()
    """Shapes' p95 against the compared night (`history.regressions_of`)."""


def action_id(workload: str, slice_: str, shape: str, kind: str) -> str:
    """Stable id: the same finding gets the same id on every night."""
    key = "\x1f".join((workload, slice_, shape, kind))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def class_id(workload: str, slice_: str, shape: str) -> str:
    """The evidence pack id of a shape's class (`*`: the slice's pooled tail), stable across
    nights like an action's."""
    return action_id(workload, slice_, shape, "class")


def _rollback(s: Scope, m: ShapeMetrics | None) -> RollbackTrigger:
    """The tail bound of a shape's change (of the slice's, for `m` None)."""
    lat = s.latency if m is None else m.latency
    q, value = lat.tail(s.thresholds.min_samples_p99)
    metric, sla = f"latency_{q}_us", s.review.sla(q)
    threshold = None if value is None else value * (1 + ROLLBACK_MARGIN)
    # the SLA is a rollback bound only while the pre-change value meets it
    bounds = within(value, sla) is True
    if bounds and threshold is not None and sla is not None:
        threshold = min(threshold, sla)
    return RollbackTrigger(metric, threshold, ROLLBACK_RUNS, value, sla if bounds else None)


def _matrix(s: Scope, m: ShapeMetrics, target: ValidationRow) -> tuple[ValidationRow, ...]:
    """The changed shape with its target metric, the shape's tail and the busiest other shapes
    as regression guards; a precision change adds the quality guardrail."""
    q, _ = m.latency.tail(s.thresholds.min_samples_p99)
    metric = f"latency_{q}_us"
    rows = [
        target,
        measured(m, metric, Criterion.NO_WORSE),
        measured(m, "error_rate", Criterion.NO_ERROR_INCREASE),
    ]
    others = sorted(
        (o for o in s.shapes if o.shape != m.shape and o.n >= s.thresholds.min_samples_p95),
        key=lambda o: -o.traffic_share,
    )[:NEIGHBOURS]
    rows += [measured(o, "latency_p95_us", Criterion.GUARDS_NEIGHBOUR) for o in others]
    g = s.guard
    if g is not None and g.metric is not None:
        rows.append(
            ValidationRow(
                SLICE_WIDE,
                f"quality {g.metric} ({g.precision})",
                g.value,
                Criterion.QUALITY_GUARD,
                g.max_drop,
                g.baseline,
            )
        )
    elif g is not None:
        rows.append(
            ValidationRow(SLICE_WIDE, f"quality ({g.precision})", None, Criterion.QUALITY_MAX_DROP)
        )
    return tuple(rows)


def make_action(
    s: Scope,
    shape: str,
    kind: ActionKind,
    evidence: Evidence,
    rollback: RollbackTrigger,
    matrix: tuple[ValidationRow, ...],
    impact: float,
    params: ActionParams,
    role: OwnerRole | None = None,
) -> Action:
    """An action of a slice, its owner resolved from the configuration."""
    role = role or P.owner(kind)
    # a slice may hold several findings of these kinds on one shape (both environment sides,
    # two missing fields, two precisions): what each asks for is part of its identity
    ident = f"{kind}:{evidence.metric}" if kind in REPEATABLE else str(kind)
    return Action(
        id=action_id(s.workload, s.slice, shape, ident),
        kind=kind,
        shape=shape,
        owner_role=role,
        owner=s.review.owners.get(role),
        evidence=evidence,
        rollback_trigger=rollback,
        validation_matrix=matrix,
        impact=impact,
        params=params,
    )


def _class_action(
    s: Scope, m: ShapeMetrics, slowest_core: tuple[int, float] | None
) -> tuple[ActionKind, ValidationRow, float, ActionParams] | None:
    """The action a shape's bottleneck class calls for: kind, target row, impact, params."""
    c, acc, gain = m.diagnosis, m.accuracy, m.gain
    ev = c.evidence
    if ev is None:
        return None
    kind = TAIL_KINDS.get(c.cls)
    if kind is not None:
        lat = m.latency
        tail_excess = (lat.p95 - lat.p50) / lat.p50 if lat.p95 and lat.p50 else 0.0
        impact = m.traffic_share * (ev.value or 0.0) * tail_excess
        params: ActionParams
        if kind == ActionKind.QUEUEING:
            params = P.Queueing(ev.value, m.queue.p95, m.queue.p50)
            target = measured(m, "queue_p95_us", Criterion.HALVED)
        elif kind == ActionKind.CORE_IMBALANCE:
            core, slowdown = slowest_core if slowest_core else (None, None)
            params = P.CoreImbalance(ev.value, core, slowdown)
            target = measured(m, "latency_p95_us", Criterion.TENTH_LOWER)
        elif kind == ActionKind.MAPPING_FALLBACK:
            significant = gain.state == GainState.SIGNIFICANT
            net = gain.net_gain_p50 if significant else None
            params = P.Fallback(ev.value, m.n_fallback, m.n, m.covered, net)
            target = measured(m, "fallback_share", Criterion.NO_FALLBACK)
        else:
            params = P.TailShare(ev.value)
            target = measured(m, "latency_p95_us", Criterion.TENTH_LOWER_IN_BUDGET)
        return kind, target, impact, params
    tol = s.thresholds.tolerance
    if c.cls == BottleneckClass.MAPPING_INACCURACY:
        wrong = P.Inaccuracy(acc.predicted_us, acc.measured_static_p50_us, acc.signed_error)
        target = measured(m, "ape", Criterion.APE_WITHIN, tol)
        return ActionKind.MAPPING_INACCURACY, target, m.traffic_share * (acc.ape or 0.0), wrong
    if c.cls == BottleneckClass.ADAPTATION_OVERHEAD:
        costly = P.Overhead(gain.cost_per_request_us, gain.net_gain_p50)
        target = measured(
            m, "compute_p50_us", Criterion.NOT_WORSE_THAN_STATIC, gain.baseline_p50_us
        )
        impact = m.traffic_share * abs(gain.net_gain_p50 or 0.0)
        return ActionKind.ADAPTATION_OVERHEAD, target, impact, costly
    return None


def _decision_action(
    s: Scope, m: ShapeMetrics
) -> tuple[ActionKind, ValidationRow, ActionParams] | None:
    """The action a shape's decision calls for, when its gain has a CI."""
    acc, gain = m.accuracy, m.gain
    if gain.net_gain_p50_ci is None:
        return None
    if m.decision == Decision.SPECIALISE:
        target = measured(m, "compute_p50_us", Criterion.AT_MOST_ADAPTED, gain.adapted_p50_us)
        return ActionKind.SPECIALISE, target, P.GainDecision(acc.signed_error, gain.net_gain_p50)
    fixed_by_class = m.diagnosis.cls in (
        BottleneckClass.MAPPING_FALLBACK,
        BottleneckClass.MAPPING_INACCURACY,
    )
    if m.decision == Decision.CLOSE_THE_LOOP and not fixed_by_class:
        tol = s.thresholds.tolerance
        target = measured(m, "ape", Criterion.APE_WITHIN_AFTER_UPDATE, tol)
        loop = P.GainDecision(acc.signed_error, gain.net_gain_p50, m.covered)
        return ActionKind.CLOSE_THE_LOOP, target, loop
    return None


def gain_evidence(m: ShapeMetrics, th: Thresholds) -> Evidence:
    """A shape's net gain as evidence: n counts its own requests on the path it ran; a gain
    compared with the other path pooled from comparable shapes says how many of theirs it
    pools (`pooled_n`)."""
    g = m.gain
    n, pooled = g.n_adapted, 0
    if g.basis == GainBasis.COMPARABLE_SHAPES:
        # the shape's own path is the one with the samples the evidence rules ask for
        own_adapted = m.n_adapted >= th.min_samples
        n, pooled = (g.n_adapted, g.n_baseline) if own_adapted else (g.n_baseline, g.n_adapted)
    return Evidence("net_gain_p50", g.net_gain_p50, n, g.net_gain_p50_ci, m.sources, pooled)


def shape_actions(
    s: Scope, m: ShapeMetrics, slowest_core: tuple[int, float] | None
) -> list[Action]:
    """The actions one shape's findings call for (none when the evidence is insufficient)."""
    out: list[Action] = []
    rb = _rollback(s, m)
    by_class = _class_action(s, m, slowest_core)
    if by_class is not None and m.diagnosis.evidence is not None:
        kind, target, impact, params = by_class
        out.append(
            make_action(
                s, m.shape, kind, m.diagnosis.evidence, rb, _matrix(s, m, target), impact, params
            )
        )
    by_decision = _decision_action(s, m)
    if by_decision is not None:
        kind, target, params = by_decision
        ev = gain_evidence(m, s.thresholds)
        impact = m.traffic_share * (m.gain.net_gain_p50 or 0.0)
        out.append(make_action(s, m.shape, kind, ev, rb, _matrix(s, m, target), impact, params))
    return out


def drift_action(s: Scope, m: ShapeMetrics, d: ShapeDrift) -> Action:
    """Re-fit the cost model for a shape whose signed error drifted from its plan's first
    nights (the plan is unchanged: the model went stale)."""
    now = d.now
    assert d.drift is not None
    assert d.baseline is not None
    ci = None if now.ci is None else Interval(now.ci.low - d.baseline, now.ci.high - d.baseline)
    ev = Evidence("signed_error_drift", d.drift, m.n_static, ci, m.sources)
    target = ValidationRow(
        m.shape,
        "signed_error",
        now.signed_error,
        Criterion.BACK_WITHIN_TOLERANCE,
        s.thresholds.tolerance,
        d.baseline,
    )
    return make_action(
        s,
        m.shape,
        ActionKind.COST_MODEL_DRIFT,
        ev,
        _rollback(s, m),
        _matrix(s, m, target),
        m.traffic_share * abs(d.drift),
        P.Drift(
            d.plan_id,
            d.baseline,
            d.baseline_nights,
            d.points[0].run_date,
            now.signed_error,
            d.drift,
        ),
    )


def regression_action(s: Scope, m: ShapeMetrics, g: Regression) -> Action:
    """Find what slowed a shape whose p95 rose beyond its CI since the compared night: the
    runtime's to bisect (the builds, configs and inputs between the two nights)."""
    ev = Evidence("latency_p95_change", g.change, m.n, g.ci, m.sources)
    target = ValidationRow(
        m.shape, "latency_p95_us", m.latency.p95, Criterion.BACK_TO_BEFORE, g.before_us
    )
    return make_action(
        s,
        m.shape,
        ActionKind.LATENCY_REGRESSION,
        ev,
        _rollback(s, m),
        _matrix(s, m, target),
        m.traffic_share * g.change,
        P.Regressed(g.against_run_date, g.before_us, g.now_us, g.change, g.ci.low, g.ci.high),
    )


BLOCKING_GUARDS = 2
"""The shapes most blocked, and the triggering shapes most blocking, a blocking action's
validation matrix names."""


def blocking_action(s: Scope, sources: tuple[str, ...]) -> Action | None:
    """The slice-wide action when blocking behind adaptation decides the slice's tail: its
    remedy and owner from what the adapting requests were (`Blocking.remedy`)."""
    c, b = s.tail_class, s.blocking
    remedy = b.remedy()
    if c is None or c.cls != BottleneckClass.BLOCKED_BEHIND_ADAPTATION or remedy is None:
        return None
    assert c.evidence is not None
    lat = s.latency
    q, value = lat.tail(s.thresholds.min_samples_p99)
    by_shape = {m.shape: m for m in s.shapes}
    victims = sorted(b.victims, key=lambda v: (-v.blocked, v.shape))[:BLOCKING_GUARDS]
    rows = [
        ValidationRow(SLICE_WIDE, "blocked_requests", float(b.blocked), Criterion.HALVED),
        ValidationRow(SLICE_WIDE, f"latency_{q}_us", value, Criterion.NO_WORSE),
    ]
    # a victim whose tail is the blocking must see its queue wait fall; any other, not rise
    rows += [
        measured(
            m,
            "queue_p95_us",
            Criterion.HALVED
            if m.diagnosis.cls == BottleneckClass.BLOCKED_BEHIND_ADAPTATION
            else Criterion.NO_WORSE,
        )
        for v in victims
        if (m := by_shape.get(v.shape)) is not None
    ]
    rows += [
        measured(by_shape[t], "latency_p95_us", Criterion.NO_WORSE)
        for t in b.triggers[:BLOCKING_GUARDS]
        if t in by_shape
    ]
    excess = (lat.p95 - lat.p50) / lat.p50 if lat.p95 and lat.p50 else 0.0
    events = b.material
    ev = replace(c.evidence, sources=sources)
    return make_action(
        s,
        SLICE_WIDE,
        ActionKind.ADAPTATION_BLOCKING,
        ev,
        _rollback(s, None),
        tuple(rows),
        (c.evidence.value or 0.0) * excess,
        P.Blocking(
            remedy=remedy,
            share=c.evidence.value,
            of_requests=c.basis == ClassBasis.BLOCKED_SHARE,
            blocked=sum(e.blocked for e in events),
            wait_us=math.fsum(e.wait_us or 0.0 for e in events) if b.wait_known else None,
            events=len(events),
            triggers=b.triggers,
            hows=tuple(sorted({e.how for e in events})),
            stall_min_us=min(e.duration_us for e in events),
            stall_max_us=max(e.duration_us for e in events),
            victim_shapes=len({v for e in events for v in e.shapes}),
            dims=tuple(P.Dim(d.tensor, d.dim, d.low, d.high) for d in b.varying),
        ),
        REMEDY_OWNERS[remedy],
    )


def slice_actions(
    s: Scope,
    env: EnvironmentCheck,
    missing_quality: Sequence[str],
    unmeasured: Sequence[tuple[str, str]],
    sources: tuple[str, ...],
) -> list[Action]:
    """Slice-wide actions: telemetry that is missing, environments that differ, precision
    changes without quality evidence."""
    out: list[Action] = []
    obs = ActionKind.OBSERVABILITY
    for side in env.missing_sides:
        ev = Evidence(f"environment.{side}", None, 0, None, sources)
        row = ValidationRow(
            SLICE_WIDE, f"environment.{side}", None, Criterion.PRESENT_IN_EVERY_FILE
        )
        out.append(
            make_action(s, SLICE_WIDE, obs, ev, NO_ROLLBACK, (row,), 0.0, P.MissingSide(side))
        )
    for shape, field in unmeasured:
        ev = Evidence(f"missing.{field}", None, 0, None, sources)
        row = ValidationRow(shape, field, None, Criterion.PRESENT_ON_EVERY_REQUEST)
        out.append(make_action(s, shape, obs, ev, NO_ROLLBACK, (row,), 0.0, P.MissingField(field)))
    if env.mismatches:
        ev = Evidence("environment.mismatches", float(len(env.mismatches)), 0, None, sources)
        rows = tuple(
            ValidationRow(SLICE_WIDE, f"environment.{m.key}", None, Criterion.SAME_ON_BOTH_SIDES)
            for m in env.mismatches
        )
        kind = ActionKind.ENVIRONMENT_MISMATCH
        differ = tuple((m.key, m.compile, m.runtime) for m in env.mismatches)
        out.append(make_action(s, SLICE_WIDE, kind, ev, NO_ROLLBACK, rows, 0.0, P.Mismatch(differ)))
    for precision in missing_quality:
        ev = Evidence(f"quality.{precision}", None, 0, None, sources)
        row = ValidationRow(SLICE_WIDE, f"quality ({precision})", None, Criterion.QUALITY_MAX_DROP)
        kind = ActionKind.PRECISION_WITHOUT_QUALITY
        quality = P.Quality(precision)
        out.append(make_action(s, SLICE_WIDE, kind, ev, NO_ROLLBACK, (row,), 0.0, quality))
    return out


def consistency_action(s: Scope, q: QueueCheck, sources: tuple[str, ...]) -> Action:
    """The per-request records and the server's counters disagree on the mean queue wait
    over the same window: a data-quality finding before either is trusted."""
    ev = Evidence("consistency.queue_mean_us", q.difference, q.records_n, None, sources)
    row = ValidationRow(
        SLICE_WIDE, "queue_mean_us", q.difference, Criterion.AGREES_WITHIN, q.tolerance
    )
    return make_action(
        s,
        SLICE_WIDE,
        ActionKind.OBSERVABILITY,
        ev,
        NO_ROLLBACK,
        (row,),
        0.0,
        P.Consistency(
            "queue_mean_us", q.records_mean_us, q.metrics_mean_us, q.difference, q.tolerance
        ),
    )
