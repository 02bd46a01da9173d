"""The rows one run adds to the closed-loop history tables: a finished slice result as facts the
dataset stores (`dataset.history` writes them; `history` reads them back)."""

from __future__ import annotations

from typing import Any

from mapreport.analysis.actions.action_params import encode
from mapreport.analysis.loop.history import History, RunKey
from mapreport.analysis.serving.drift import in_force
from mapreport.analysis.steps.results import SliceResult


def history_rows(r: SliceResult, key: RunKey) -> dict[str, list[dict[str, Any]]]:
    """The rows this run adds to the history tables: facts only (an action's kind and typed
    params, never the report's words; the report words them when it prints)."""
    h = r.history
    assert h is not None
    quantiles = r.latency_quantiles
    row_key = {
        "run_id": key.run_id,
        "run_date": key.run_date,
        "workload": r.workload,
        "slice": r.slice,
    }
    lat = r.latency
    judged = [c.judged for c in r.sla if c.judged is not None]
    first_seen = {a.action_id: a.first_run_id for a in h.actions}
    return {
        "history_run": [
            {
                **row_key,
                "requests": r.requests,
                "latency_p50_us": lat.p50,
                "latency_p95_us": lat.p95,
                "latency_p99_us": lat.p99,
                "covered_traffic_share": r.coverage.covered_traffic_share,
                "mape_weighted": r.accuracy.mape_weighted,
                "actions": len(r.actions),
                "window": key.window.spec,
                "timezone": key.window.timezone,
                "window_start_us": key.window.start_us,
                "window_end_us": key.window.end_us,
                "inputs": key.inputs,
                "revision": key.revision,
                "recorded_at": key.recorded_at,
                "sla_met": all(judged) if judged else None,
            }
        ],
        "history_shape": [
            {
                **row_key,
                "shape": m.shape,
                "n": m.n,
                "latency_p50_us": m.latency.p50,
                "latency_p95_us": m.latency.p95,
                "latency_p99_us": m.latency.p99,
                "queue_p95_us": m.queue.p95,
                "compute_p50_us": m.compute.p50,
                "ape": m.accuracy.ape,
                "net_gain_p50": m.gain.net_gain_p50,
                "fallback_share": m.fallback_share,
                "error_rate": m.error_rate,
                "decision": m.decision.value,
                "bottleneck_class": m.diagnosis.cls.value,
                "latency_quantiles_us": list(quantiles.get(m.shape, ())),
                "plan_id": m.plan_id,
                "plan_version": in_force(r.plan.versions, m.plan_id),
                "signed_error": m.accuracy.signed_error,
                "signed_error_lo": ci.low if (ci := m.accuracy.signed_error_ci) else None,
                "signed_error_hi": ci.high if ci else None,
            }
            for m in r.shapes
        ],
        "history_op": [
            {
                **row_key,
                "plan_id": o.plan_id,
                "plan_version": in_force(r.plan.versions, o.plan_id),
                "op": o.op,
                "runs": o.runs,
                "measured_p50_us": o.measured_p50_us,
                "predicted_us": o.predicted_us,
                "signed_error": o.signed_error,
            }
            for o in (r.device.operators.rows if r.device.operators else ())
            if o.signed_error is not None
        ],
        "history_action": _action_rows(h, row_key, key, first_seen),
    }


def _action_rows(
    h: History, row_key: dict[str, str], key: RunKey, first_seen: dict[str, str]
) -> list[dict[str, Any]]:
    """The loop's rows of one run: each action's state and the facts a later night reads
    (its kind, typed params, rollback trigger and target as proposed)."""
    return [
        {
            **row_key,
            "action_id": a.action_id,
            "class": a.kind.value,
            "shape": a.shape,
            "title": a.title,
            "owner_role": a.owner_role.value,
            "state": a.state.value,
            "proposed": a.proposed,
            "first_run_id": first_seen.get(a.action_id) or key.run_id,
            "target_metric": a.target_metric,
            "target_baseline": a.target_baseline,
            "rollback_metric": a.rollback_metric,
            "rollback_threshold": a.rollback_threshold,
            "rollback_pre_change": a.rollback_pre_change,
            "rollback_sla_us": a.rollback_sla_us,
            "target_now": a.target_now,
            "rollback_now": a.rollback_now,
            "params": None if a.params is None else encode(a.params),
            "target_criterion": a.target_criterion.value if a.target_criterion else None,
            "target_limit": a.target_limit,
            "target_reference": a.target_reference,
        }
        for a in h.actions
    ]
