"""findings.json: the machine-readable twin of a report (schema in findings.schema.json)."""

from __future__ import annotations

import dataclasses
from typing import Any

from mapreport import __version__
from mapreport.analysis.decision import ACTIONS
from mapreport.analysis.results import (
    Action,
    Evidence,
    Interval,
    Percentiles,
    Scheduling,
    ShapeMetrics,
    SliceResult,
    TailDrivers,
)
from mapreport.config import SliceConfig

FINDINGS_SCHEMA_VERSION = "1.2"


def _iv(iv: Interval | None) -> list[float] | None:
    return None if iv is None else [iv.low, iv.high]


def _pct(prefix: str, p: Percentiles) -> dict[str, float | None]:
    return {f"{prefix}_p50_us": p.p50, f"{prefix}_p95_us": p.p95, f"{prefix}_p99_us": p.p99}


def _evidence(e: Evidence | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "metric": e.metric,
        "value": e.value,
        "n": e.n,
        "ci": _iv(e.ci),
        "sources": list(e.sources),
        "note": e.note,
    }


def _tail(t: TailDrivers | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {
        "shares": t.shares,
        "share_ci": {k: _iv(v) for k, v in t.share_ci.items()},
        "material": t.material,
        "n": t.n,
        "n_tail": t.n_tail,
        "excess_us": t.excess_us,
        "unmeasured": list(t.unmeasured),
    }


def _action(a: Action) -> dict[str, Any]:
    return {
        "id": a.id,
        "title": a.title,
        "shape": a.shape,
        "class": a.cls,
        "owner_role": a.owner_role,
        "owner": a.owner,
        "evidence": _evidence(a.evidence),
        "rollback_trigger": dataclasses.asdict(a.rollback_trigger),
        "validation_matrix": [dataclasses.asdict(v) for v in a.validation_matrix],
        "impact": a.impact,
    }


def _scheduling(s: Scheduling | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "queue_by_stream": [dataclasses.asdict(q) for q in s.queue_by_stream],
        "batch_impact": [dataclasses.asdict(b) for b in s.batch_impact],
        "cores": [dataclasses.asdict(c) for c in s.cores],
        "jain_index_cores": s.jain_index_cores,
        "stream_fairness": {
            "streams": [dataclasses.asdict(x) for x in s.streams],
            "jain_index": s.jain_index_streams,
        },
        "fusion_effect": {
            "groups": [dataclasses.asdict(f) for f in s.fusion],
            "note": s.fusion_note,
        },
    }


def _history(r: SliceResult) -> dict[str, Any] | None:
    h = r.history
    if h is None:
        return None
    return {
        "compared_to": h.compared_to,
        "note": h.note,
        "runs": [dataclasses.asdict(p) for p in h.runs],
        "actions": [dataclasses.asdict(a) for a in h.actions],
        "regressions": [{**dataclasses.asdict(g), "ci": _iv(g.ci)} for g in h.regressions],
    }


def shape_findings(m: ShapeMetrics) -> dict[str, Any]:
    """One shape's entry of `shapes`."""
    return {
        "shape": m.shape,
        "n": m.n,
        "n_total": m.n_total,
        "n_failed": m.n_failed,
        "error_rate": m.n_failed / m.n_total if m.n_total else 0.0,
        "traffic_share": m.traffic_share,
        "covered": m.covered,
        "plan_id": m.plan_id,
        "bucket": m.bucket,
        **_pct("latency", m.latency),
        **_pct("queue", m.queue),
        **_pct("compute", m.compute),
        "n_static": m.n_static,
        "n_adapted": m.n_adapted,
        "n_fallback": m.n_fallback,
        "predicted_us": m.predicted_us,
        "measured_static_p50_us": m.measured_static_p50_us,
        "signed_error": m.signed_error,
        "ape": m.ape,
        "accuracy": m.accuracy,
        "baseline_variant": m.baseline_variant,
        "baseline_p50_us": m.baseline_p50_us,
        "adapted_p50_us": m.adapted_p50_us,
        "gain_p50": m.gain_p50,
        "gain_p50_ci": _iv(m.gain_p50_ci),
        "gain_p95": m.gain_p95,
        "gain_p95_ci": _iv(m.gain_p95_ci),
        "adaptation_events": m.adaptation_events,
        "adaptation_cost_us": m.adaptation_cost_us,
        "adaptation_cost_per_request_us": m.adaptation_cost_per_request_us,
        "net_gain_p50": m.net_gain_p50,
        "net_gain_p50_ci": _iv(m.net_gain_p50_ci),
        "gain": m.gain,
        "decision": m.decision,
        "decision_reason": m.decision_reason,
        "insufficient_evidence": list(m.insufficient),
        "sources": list(m.sources),
        "signed_error_ci": _iv(m.signed_error_ci),
        "tail_drivers": m.tail.shares if m.tail else None,
        "tail": _tail(m.tail),
        "bottleneck_class": m.bottleneck_class,
        "class_evidence": _evidence(m.class_evidence),
        "class_reason": m.class_reason,
    }


def findings(r: SliceResult, sla: SliceConfig | None, generated_at: str) -> dict[str, Any]:
    """The whole findings document of one slice."""
    env = r.environment
    return {
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "generator": f"mapreport {__version__}",
        "generated_at": generated_at,
        "workload": r.workload,
        "slice": r.slice,
        "summary": r.summary,
        "scope": {
            "requests": r.requests,
            "failed": r.failed,
            "window_start_us": r.window_start_us,
            "window_end_us": r.window_end_us,
            **_pct("latency", r.latency),
            "sla_p95_us": sla.sla_p95_us if sla else None,
            "sla_p99_us": sla.sla_p99_us if sla else None,
        },
        "thresholds": dataclasses.asdict(r.thresholds),
        "environment": {
            "compile": env.compile,
            "runtime": env.runtime,
            "locked": env.locked,
            "missing_sides": list(env.missing_sides),
            "compared_keys": list(env.compared_keys),
            "mismatches": [
                {"key": m.key, "compile": list(m.compile), "runtime": list(m.runtime)}
                for m in env.mismatches
            ],
        },
        "coverage": {
            "covered_traffic_share": r.coverage.covered_traffic_share,
            "plans": list(r.coverage.plans),
            "buckets": r.coverage.buckets,
            "uncovered_shapes": [dataclasses.asdict(u) for u in r.coverage.uncovered_shapes],
            "synthetic_only_buckets": [
                dataclasses.asdict(b) for b in r.coverage.synthetic_only_buckets
            ],
        },
        "accuracy": dataclasses.asdict(r.accuracy),
        "decisions": {
            d: {"shapes": [m.shape for m in r.shapes if m.decision == d], "meaning": text}
            for d, text in ACTIONS.items()
        },
        "shapes": [shape_findings(m) for m in r.shapes],
        "tail_drivers": _tail(r.tail),
        "scheduling": _scheduling(r.scheduling),
        "actions": [_action(a) for a in r.actions],
        "checklist": [dataclasses.asdict(c) for c in r.checklist],
        "pitfalls": [dataclasses.asdict(p) for p in r.pitfalls],
        "history": _history(r),
        "operators": dataclasses.asdict(r.operators) if r.operators else None,
        "compiles": dataclasses.asdict(r.compiles) if r.compiles else None,
        "load_sweep": dataclasses.asdict(r.sweep) if r.sweep else None,
        "sources": [dataclasses.asdict(s) for s in r.sources],
    }
