"""The finished analysis of one shape: the per-shape record every later family reads (actions,
checklist, drift, history, what to profile next) and the slice result nests."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import Percentiles
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.mapping.accuracy import ShapeAccuracy
from mapreport.analysis.serving.adaptation import ShapeGain
from mapreport.analysis.serving.classify import ShapeClass
from mapreport.analysis.serving.tail import TailDrivers
from mapreport.core.kinds import (
    Decision,
    FallbackCause,
    FigureUnit,
    JudgementFamily,
    Status,
    StatusReason,
)


class ShapeMetrics(msgspec.Struct, frozen=True):
    """Everything measured for one input shape of one workload slice."""

    shape: str
    n_total: int
    n: int
    n_failed: int
    traffic_share: float
    covered: bool
    plan_id: str | None
    bucket: str | None
    latency: Percentiles
    queue: Percentiles
    compute: Percentiles
    n_static: int
    n_adapted: int
    n_fallback: int
    accuracy: ShapeAccuracy
    gain: ShapeGain
    decision: Decision
    insufficient: tuple[str, ...]
    """Statistics shown but below their evidence threshold (METRICS.md evidence rules)."""
    sources: tuple[str, ...]
    tail: TailDrivers | None
    diagnosis: ShapeClass
    fallback_cause: FallbackCause | None = None
    """Why its fallback requests ran eagerly (None: it has none)."""

    @property
    def error_rate(self) -> float | None:
        """Failed requests over all requests of the shape."""
        return self.n_failed / self.n_total if self.n_total else None

    @property
    def fallback_share(self) -> float | None:
        """Requests that ran the generic fallback path over the shape's ok requests."""
        return self.n_fallback / self.n if self.n else None

    def metric(self, name: str) -> float | None:
        """The current value of a named per-shape metric: the names validation matrices and
        rollback triggers use, so a matrix's "now" and the history's read one value."""
        values: dict[str, float | None] = {
            "latency_p50_us": self.latency.p50,
            "latency_p95_us": self.latency.p95,
            "latency_p99_us": self.latency.p99,
            "queue_p95_us": self.queue.p95,
            "compute_p50_us": self.compute.p50,
            "ape": self.accuracy.ape,
            "signed_error": self.accuracy.signed_error,
            "fallback_share": self.fallback_share,
            "error_rate": self.error_rate,
        }
        return values.get(name)


FALLBACK_MATERIAL = 0.05
"""A share of requests run on the generic (eager) path from which the slice is at risk."""


def judge_fallback(shapes: tuple[ShapeMetrics, ...]) -> Judgement | None:
    """Requests that ran the generic path: at risk when they are FALLBACK_MATERIAL of the
    slice's requests or more, healthy below (None: no request)."""
    total = sum(m.n for m in shapes)
    if not total:
        return None
    eager = sum(m.n_fallback for m in shapes)
    share = eager / total
    most = max(shapes, key=lambda m: m.n_fallback)
    state = Status.AT_RISK if share >= FALLBACK_MATERIAL else Status.HEALTHY
    return Judgement(
        JudgementFamily.EAGER_FALLBACK,
        state,
        StatusReason.EAGER_REQUESTS if eager else StatusReason.NO_EAGER_REQUESTS,
        share,
        FigureUnit.SHARE,
        FALLBACK_MATERIAL,
        total,
        subject=most.shape if eager else "",
    )
