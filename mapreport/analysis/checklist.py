"""The review checklist and the known pitfalls, evaluated from data and configuration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mapreport.analysis.results import (
    OWNER_ROLES,
    Action,
    ChecklistItem,
    Pitfall,
    ShapeMetrics,
    SliceResult,
)
from mapreport.units import duration

REFERENCE_PRECISIONS = frozenset({"fp32", "tf32", "float32"})
"""Precisions that are not a change; any other plan precision needs quality evidence."""

EVIDENCE_FREE = frozenset({"observability", "environment_mismatch", "precision_without_quality"})
"""Action kinds that rest on a missing or differing record, not on a statistic."""


def precision_changes(
    plan_precisions: Sequence[str], quality: Sequence[dict[str, Any]]
) -> tuple[list[str], list[str], list[str]]:
    """Precision changes of a slice's plans: (with passing evidence, without evidence, with
    evidence that fails its max_drop)."""
    changed = sorted({p for p in plan_precisions if p and p.lower() not in REFERENCE_PRECISIONS})
    ok, missing, failing = [], [], []
    for p in changed:
        recs = [q for q in quality if q["precision"] == p]
        if not recs:
            missing.append(p)
        elif all(
            q["max_drop"] is None or q["baseline"] - q["value"] <= q["max_drop"] for q in recs
        ):
            ok.append(p)
        else:
            failing.append(p)
    return ok, missing, failing


def _meets_evidence_rules(a: Action, r: SliceResult) -> str | None:
    """Why an action breaks the evidence rules, or None."""
    if a.cls in EVIDENCE_FREE:
        return None
    ev = a.evidence
    if ev.ci is None or not ev.ci.excludes_zero():
        return f"{a.id} ({a.cls} at {a.shape}): confidence interval missing or includes zero"
    # a tail share counts tail requests; its shape already passed min_samples_p95 in classify
    if not ev.metric.startswith("tail_share") and ev.n < r.thresholds.min_samples:
        return f"{a.id}: n = {ev.n} below {r.thresholds.min_samples}"
    return None


def checklist(r: SliceResult, actions: Sequence[Action]) -> list[ChecklistItem]:
    """The five review items of METRICS.md, each passed or failed with its reason."""
    sla = [
        f"p95 {duration(r.review.sla_p95_us)}" if r.review.sla_p95_us else "",
        f"p99 {duration(r.review.sla_p99_us)}" if r.review.sla_p99_us else "",
    ]
    sla_text = ", ".join(s for s in sla if s)
    env = r.environment
    env_reason = (
        f"both sides match on {', '.join(env.compared_keys)}"
        if env.locked
        else "; ".join(
            [f"no environment record on the {s} side" for s in env.missing_sides]
            + [
                f"{m.key} differs ({'/'.join(m.compile) or '-'} vs {'/'.join(m.runtime) or '-'})"
                for m in env.mismatches
            ]
        )
    )
    broken = [why for a in actions if (why := _meets_evidence_rules(a, r))]
    unowned = sorted({a.owner_role for a in actions if not a.owner})
    unsigned = [role for role in OWNER_ROLES if role not in r.review.signoffs]
    return [
        ChecklistItem(
            "Workload scope and SLA targets are explicit",
            bool(sla_text),
            f"SLA configured: {sla_text}"
            if sla_text
            else f"no SLA target configured for {r.name} ([[slices]] in the config)",
        ),
        ChecklistItem("Environment metadata is locked and reproducible", env.locked, env_reason),
        ChecklistItem(
            "Mechanism classification is evidence-backed",
            not broken,
            "every action rests on n and a CI that excludes zero"
            if not broken
            else "; ".join(broken),
        ),
        ChecklistItem(
            "Owner, rollback trigger and validation matrix documented for every action",
            not unowned and all(a.validation_matrix for a in actions),
            f"{len(actions)} action(s), each with an owner, a rollback trigger and a validation "
            "matrix"
            if not unowned
            else "no owner configured for role(s): "
            + ", ".join(unowned)
            + " ([owners] in the config)",
        ),
        ChecklistItem(
            "Owners signed",
            not unsigned,
            "signed by " + ", ".join(f"{k}: {v}" for k, v in sorted(r.review.signoffs.items()))
            if not unsigned
            else "missing sign-off: " + ", ".join(unsigned),
        ),
    ]


def pitfalls(
    r: SliceResult,
    actions: Sequence[Action],
    shapes: Sequence[ShapeMetrics],
    missing_quality: Sequence[str],
    failing_quality: Sequence[str],
) -> list[Pitfall]:
    """The seed's pitfalls: synthetic-only shapes, average-only claims, precision changes
    without quality evidence."""
    synthetic = r.coverage.synthetic_only_buckets
    by_shape = {m.shape: m for m in shapes}
    average_only = [
        a
        for a in actions
        if a.shape in by_shape and "latency_p95_us" in by_shape[a.shape].insufficient
    ]
    return [
        Pitfall(
            "Optimising synthetic kernels without production-shape validation",
            bool(synthetic),
            ", ".join(f"{b.plan_id}: {b.bucket}" for b in synthetic) + " compiled, never served"
            if synthetic
            else "every compiled bucket served production traffic",
        ),
        Pitfall(
            "Average-only claims (no tail statistic behind a claim)",
            bool(average_only),
            ", ".join(f"{a.id} at {a.shape}" for a in average_only) + " rest on shapes without "
            "a p95"
            if average_only
            else "every action's shape has a p95 with enough samples",
        ),
        Pitfall(
            "Precision change without quality evidence",
            bool(missing_quality or failing_quality),
            "; ".join(
                [f"{p}: no quality record" for p in missing_quality]
                + [f"{p}: quality drop exceeds max_drop" for p in failing_quality]
            )
            or "every precision change has passing quality evidence",
        ),
    ]
