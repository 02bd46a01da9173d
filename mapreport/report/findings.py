"""findings.json: the machine-readable twin of a report (schema in findings.schema.json).

Built from the result types with `msgspec.to_builtins` (enums become their values); where the
document's layout differs from a type (flattened percentiles, renamed keys) or states words,
the mapping is declared here, once, and reads the same view the HTML does.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from mapreport import __version__
from mapreport.analysis.base.common import Evidence, Percentiles
from mapreport.analysis.serving.tail import TailDrivers
from mapreport.analysis.steps.results import SliceResult
from mapreport.report import judgements, prose, ranking_findings, words
from mapreport.report.lines import ActionView
from mapreport.report.view import ReportView

FINDINGS_SCHEMA_VERSION = "2.0"


def strict(doc: Any) -> Any:
    """`doc` with every non-finite float as null: findings.json is strict JSON (RFC 8259 has
    no NaN or Infinity, and JSON.parse refuses them), whatever a figure came to."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: strict(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [strict(v) for v in doc]
    return doc


def plain(x: Any) -> Any:
    """A result value as JSON-ready builtins (dataclasses to objects, enums to strings)."""
    return msgspec.to_builtins(x)


def _pct(prefix: str, p: Percentiles) -> dict[str, float | None]:
    return {f"{prefix}_p50_us": p.p50, f"{prefix}_p95_us": p.p95, f"{prefix}_p99_us": p.p99}


def _evidence(e: Evidence | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {**plain(e), "note": words.evidence_note(e)}


TAIL_KEYS = ("shares", "share_ci", "material", "n", "n_tail", "excess_us", "unmeasured")
"""What a tail split states (its p50 and p95 are the shape's or the slice's own)."""


def _tail(t: TailDrivers | None) -> dict[str, Any] | None:
    if t is None:
        return None
    d = plain(t)
    return {k: d[k] for k in TAIL_KEYS}


def _action(v: ActionView) -> dict[str, Any]:
    a = v.a
    rb = a.rollback_trigger
    return {
        "id": a.id,
        "title": v.title,
        "shape": a.shape,
        "class": a.kind.value,
        "owner_role": a.owner_role.value,
        "owner": a.owner,
        "evidence": _evidence(a.evidence),
        "rollback_trigger": {
            "metric": rb.metric,
            "threshold": rb.threshold,
            "window": prose.rollback_window(rb),
            "text": v.rollback,
        },
        "validation_matrix": [
            {
                "shape": x.shape,
                "metric": x.metric,
                "baseline": x.baseline,
                "criterion": words.criterion(x),
            }
            for x in a.validation_matrix
        ],
        "impact": {**plain(v.impact), "text": v.impact_text},
    }


ORDER = (
    *("schema_version", "generator", "generated_at", "workload", "slice", "summary", "status"),
    *("status_reason", "judgements", "scope", "thresholds", "environment", "coverage"),
    *("accuracy", "decisions", "shapes", "over_sla", "tail_drivers", "tail_class"),
    *("tail_class_evidence", "scheduling", "actions", "checklist", "pitfalls", "history"),
    *("blocking", "drift", "op_drift", "profile_next", "operators", "compiles", "load_sweep"),
    *("telemetry", "queue_check", "token_timing", "token_rate", "loadgen", "sources", "ops"),
    *("device", "timeline", "graph_buckets", "ranking"),
)
"""The document's keys in the order schema 2.0 wrote them; a section's keys not listed here
follow in page order."""


def findings(r: SliceResult, view: ReportView, generated_at: str) -> dict[str, Any]:
    """The whole findings document of one slice: the sections' fragments, in `ORDER`."""
    doc = _legacy(r, view, generated_at)
    for p in view.assembled.parts:
        fragment = p.fragment()
        if fragment is not None:
            doc |= plain(fragment)
    ordered = {k: doc[k] for k in ORDER if k in doc}
    return ordered | {k: x for k, x in doc.items() if k not in ordered}


def _legacy(r: SliceResult, view: ReportView, generated_at: str) -> dict[str, Any]:
    """The keys of the sections whose fragments are not yet their own."""
    return {
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "generator": f"mapreport {__version__}",
        "generated_at": generated_at,
        "workload": r.workload,
        "slice": r.slice,
        "summary": view.summary,
        "status": r.status.status.value if r.status else None,
        "status_reason": view.status_reason,
        "judgements": judgements.fragment(r),
        "over_sla": plain(r.over_sla),
        "actions": [_action(v) for v in view.actions],
        **ranking_findings.fragment(r.ranking),
    }
