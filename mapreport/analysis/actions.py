"""Retuning actions: each finding that passes the evidence rules becomes at most one action per
(workload, shape, class), with an owner, a rollback trigger and a validation matrix."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from mapreport.analysis.results import (
    Action,
    EnvironmentCheck,
    Evidence,
    OwnerRole,
    RollbackTrigger,
    ShapeMetrics,
    SliceResult,
    ValidationRow,
)
from mapreport.units import duration as duration_text
from mapreport.units import pct as share_text
from mapreport.units import signed_pct as pct_text

OWNERS: dict[str, OwnerRole] = {
    "queueing": "model_serving_architect",
    "core_imbalance": "runtime_lead",
    "mapping_fallback": "compiler_lead",
    "memory_burst": "compiler_lead",
    "mapping_inaccuracy": "compiler_lead",
    "adaptation_overhead": "runtime_lead",
    "specialise": "compiler_lead",
    "close_the_loop": "compiler_lead",
    "observability": "observability_engineer",
    "precision_without_quality": "model_serving_architect",
    "environment_mismatch": "runtime_lead",
}
"""Who owns each kind of action (METRICS.md roles); the configuration names the person."""

SLICE_WIDE = "*"
"""The `shape` of an action that concerns the whole slice."""


def action_id(workload: str, slice_: str, shape: str, cls: str) -> str:
    """Stable id: the same finding gets the same id on every night."""
    key = "\x1f".join((workload, slice_, shape, cls))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def _tail_metric(m: ShapeMetrics, min_p99: int) -> tuple[str, float | None]:
    return (
        ("latency_p99_us", m.latency.p99) if m.n >= min_p99 else ("latency_p95_us", m.latency.p95)
    )


def _rollback(r: SliceResult, m: ShapeMetrics) -> RollbackTrigger:
    metric, value = _tail_metric(m, r.thresholds.min_samples_p99)
    sla = r.review.sla_p99_us if metric == "latency_p99_us" else r.review.sla_p95_us
    threshold = None if value is None else value * 1.10
    sla_bounds = sla is not None and value is not None and value <= sla
    if sla_bounds and threshold is not None and sla is not None:
        # the SLA is a rollback bound only while the pre-change value meets it
        threshold = min(threshold, sla)
    bound = (
        f"> SLA {duration_text(sla)} or " if sla_bounds else "> "
    ) + f"+10% over the pre-change {duration_text(value)}"
    return RollbackTrigger(
        metric=metric,
        threshold=threshold,
        window="2 consecutive nightly runs",
        text=f"{metric.removesuffix('_us').replace('_', ' ')} of {r.name} at {m.shape} {bound} "
        "for 2 consecutive nightly runs",
    )


def _matrix(
    r: SliceResult,
    m: ShapeMetrics,
    target: str,
    criterion: str,
    baseline: float | None,
    precision: str | None,
) -> tuple[ValidationRow, ...]:
    """The changed shape with its target metric, the shape's tail and the busiest other shapes
    as regression guards; a precision change adds the quality guardrail."""
    metric, value = _tail_metric(m, r.thresholds.min_samples_p99)
    rows = [
        ValidationRow(m.shape, target, baseline, criterion),
        ValidationRow(
            m.shape,
            metric,
            value,
            "no worse than before (CI of the change includes or is below zero)",
        ),
        ValidationRow(
            m.shape, "error_rate", m.n_failed / m.n_total if m.n_total else None, "no increase"
        ),
    ]
    others = sorted(
        (o for o in r.shapes if o.shape != m.shape and o.n >= r.thresholds.min_samples_p95),
        key=lambda o: -o.traffic_share,
    )[:2]
    for o in others:
        rows.append(
            ValidationRow(
                o.shape,
                "latency_p95_us",
                o.latency.p95,
                "no regression > 2% (guards the neighbours)",
            )
        )
    if precision is not None:
        rows.append(
            ValidationRow(
                SLICE_WIDE,
                f"quality ({precision})",
                None,
                "drop versus baseline <= the configured max_drop",
            )
        )
    return tuple(rows)


def _make(
    r: SliceResult,
    shape: str,
    cls: str,
    title: str,
    evidence: Evidence,
    rollback: RollbackTrigger,
    matrix: tuple[ValidationRow, ...],
    impact: float,
) -> Action:
    role = OWNERS[cls]
    return Action(
        id=action_id(r.workload, r.slice, shape, cls),
        title=title,
        shape=shape,
        cls=cls,
        owner_role=role,
        owner=r.review.owners.get(role),
        evidence=evidence,
        rollback_trigger=rollback,
        validation_matrix=matrix,
        impact=impact,
    )


def shape_actions(
    r: SliceResult, m: ShapeMetrics, precision: str | None, slowest_core: tuple[int, float] | None
) -> list[Action]:
    """The actions one shape's findings call for (none when the evidence is insufficient)."""
    out: list[Action] = []
    cls, ev = m.bottleneck_class, m.class_evidence
    rb = _rollback(r, m)
    tail_excess = (
        (m.latency.p95 - m.latency.p50) / m.latency.p50 if m.latency.p95 and m.latency.p50 else 0.0
    )
    if ev is not None and cls in ("queueing", "core_imbalance", "mapping_fallback", "memory_burst"):
        share = share_text(ev.value, 0)
        if cls == "queueing":
            title = (
                f"Cut queueing delay for {m.shape}: queue wait drives {share} of its tail "
                f"(queue p95 {duration_text(m.queue.p95)} vs p50 "
                f"{duration_text(m.queue.p50)}); revisit admission, batching window and "
                "replica count"
            )
            target, crit, base = "queue_p95_us", "at most half the current value", m.queue.p95
        elif cls == "core_imbalance":
            where = (
                f"core {slowest_core[0]} runs it {slowest_core[1]:.0%} slower than the median core"
                if slowest_core
                else "per-core compute differs"
            )
            title = (
                f"Rebalance core placement for {m.shape}: {where}; core imbalance drives "
                f"{share} of its tail"
            )
            target, crit, base = "latency_p95_us", "<= 0.9 x current", m.latency.p95
        elif cls == "mapping_fallback":
            title = (
                f"Compile a mapping for {m.shape}: {m.n_fallback} of its {m.n} requests ran "
                f"the generic fallback path, which drives {share} of its tail"
            )
            if not m.covered:
                title += " (no compile bucket holds it)"
            if m.gain == "significant" and m.net_gain_p50 is not None:
                title += (
                    f"; seed the new bucket with the adapted mapping (net gain "
                    f"{pct_text(m.net_gain_p50)})"
                )
            target, crit, base = (
                "fallback_share",
                "0 requests on the fallback path",
                (m.n_fallback / m.n if m.n else None),
            )
        else:
            title = (
                f"Re-plan fusion and tiling memory for {m.shape}: requests above its "
                f"memory budget drive {share} of its tail"
            )
            target, crit, base = (
                "latency_p95_us",
                "<= 0.9 x current, no request over budget",
                (m.latency.p95),
            )
        out.append(
            _make(
                r,
                m.shape,
                cls,
                title,
                ev,
                rb,
                _matrix(r, m, target, crit, base, precision),
                m.traffic_share * (ev.value or 0.0) * tail_excess,
            )
        )
    elif ev is not None and cls == "mapping_inaccuracy":
        title = (
            f"Recalibrate the cost model for {m.shape}: predicted "
            f"{duration_text(m.predicted_us)}, measured {duration_text(m.measured_static_p50_us)}"
            f" ({m.signed_error:+.0%}); adaptation does not recover it"
        )
        out.append(
            _make(
                r,
                m.shape,
                cls,
                title,
                ev,
                rb,
                _matrix(r, m, "ape", f"<= {r.thresholds.tolerance:.0%}", m.ape, precision),
                m.traffic_share * (m.ape or 0.0),
            )
        )
    elif ev is not None and cls == "adaptation_overhead":
        title = (
            f"Disable runtime adaptation for {m.shape}: it costs "
            f"{duration_text(m.adaptation_cost_per_request_us)} per adapted request and "
            f"the net p50 gain is {pct_text(m.net_gain_p50)}"
        )
        out.append(
            _make(
                r,
                m.shape,
                cls,
                title,
                ev,
                rb,
                _matrix(
                    r,
                    m,
                    "compute_p50_us",
                    "no worse than the static plan",
                    m.baseline_p50_us,
                    precision,
                ),
                m.traffic_share * abs(m.net_gain_p50 or 0.0),
            )
        )
    gain_ev = Evidence("net_gain_p50", m.net_gain_p50, m.n_adapted, m.net_gain_p50_ci, m.sources)
    if m.decision == "specialise" and m.net_gain_p50_ci is not None:
        title = (
            f"Add a compile bucket for {m.shape}: the cost model is right "
            f"({m.signed_error:+.0%}) but the plan is not specialised; the adapted mapping "
            f"gains {pct_text(m.net_gain_p50)} net"
        )
        out.append(
            _make(
                r,
                m.shape,
                "specialise",
                title,
                gain_ev,
                rb,
                _matrix(
                    r,
                    m,
                    "compute_p50_us",
                    "<= adapted p50 (no adaptation needed)",
                    m.adapted_p50_us,
                    precision,
                ),
                m.traffic_share * (m.net_gain_p50 or 0.0),
            )
        )
    if (
        m.decision == "close_the_loop"
        and m.net_gain_p50_ci is not None
        and cls not in ("mapping_fallback", "mapping_inaccuracy")
    ):
        miss = "no bucket holds it" if not m.covered else f"prediction off by {m.signed_error:+.0%}"
        title = (
            f"Feed the adapted mapping for {m.shape} back into the compile plan and cost "
            f"model: {miss}, and adaptation gains {pct_text(m.net_gain_p50)} net"
        )
        out.append(
            _make(
                r,
                m.shape,
                "close_the_loop",
                title,
                gain_ev,
                rb,
                _matrix(
                    r,
                    m,
                    "ape",
                    f"<= {r.thresholds.tolerance:.0%} after the cost model update",
                    m.ape,
                    precision,
                ),
                m.traffic_share * (m.net_gain_p50 or 0.0),
            )
        )
    return out


def slice_actions(
    r: SliceResult,
    env: EnvironmentCheck,
    missing_quality: Sequence[str],
    unmeasured: Sequence[tuple[str, str]],
) -> list[Action]:
    """Slice-wide actions: telemetry that is missing, environments that differ, precision
    changes without quality evidence."""
    out: list[Action] = []
    sources = tuple(s.source_id for s in r.sources)
    no_rollback = RollbackTrigger("none", None, "-", "not a runtime change: nothing to roll back")
    for side in env.missing_sides:
        out.append(
            _make(
                r,
                SLICE_WIDE,
                "observability",
                f"Export the environment record with the {side}-side files of {r.name}: without it "
                "the environment lock cannot be checked",
                Evidence(f"environment.{side}", None, 0, None, sources, "record missing"),
                no_rollback,
                (ValidationRow(SLICE_WIDE, f"environment.{side}", None, "present in every file"),),
                0.0,
            )
        )
    for shape, field in unmeasured:
        out.append(
            _make(
                r,
                shape,
                "observability",
                f"Record {field} on the requests of {shape}: "
                "its tail cannot be attributed without it",
                Evidence(f"missing.{field}", None, 0, None, sources),
                no_rollback,
                (ValidationRow(shape, field, None, "present on every request"),),
                0.0,
            )
        )
    if env.mismatches:
        keys = ", ".join(
            f"{m.key} ({'/'.join(m.compile) or '-'} vs {'/'.join(m.runtime) or '-'})"
            for m in env.mismatches
        )
        out.append(
            _make(
                r,
                SLICE_WIDE,
                "environment_mismatch",
                f"Re-lock the environment of {r.name}: {keys} "
                f"{'differs' if len(env.mismatches) == 1 else 'differ'} between compile and "
                "runtime; rebuild the plan on the serving environment or pin it",
                Evidence("environment.mismatches", float(len(env.mismatches)), 0, None, sources),
                no_rollback,
                tuple(
                    ValidationRow(SLICE_WIDE, f"environment.{m.key}", None, "same on both sides")
                    for m in env.mismatches
                ),
                0.0,
            )
        )
    for precision in missing_quality:
        out.append(
            _make(
                r,
                SLICE_WIDE,
                "precision_without_quality",
                f"Run the quality evaluation of the {precision} plan on {r.name} before relying on "
                "it: there is no quality evidence for this precision change",
                Evidence(f"quality.{precision}", None, 0, None, sources, "no quality record"),
                no_rollback,
                (
                    ValidationRow(
                        SLICE_WIDE,
                        f"quality ({precision})",
                        None,
                        "drop versus baseline <= max_drop",
                    ),
                ),
                0.0,
            )
        )
    return out
