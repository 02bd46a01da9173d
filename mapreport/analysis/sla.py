"""Which shapes hold the requests over the slice's SLA target: the shape that drives a miss."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mapreport.analysis.common import Percentiles, Review, TailQuantile, Thresholds
from mapreport.analysis.query import ShapeRow


@dataclass(frozen=True)
class OverTarget:
    """One shape's ok requests above the target."""

    shape: str
    n_over: int
    n: int
    """The shape's ok requests."""
    share: float
    """Its part of all the slice's requests over the target."""


@dataclass(frozen=True)
class OverSla:
    """The slice's ok requests above the SLA target of its headline tail quantile."""

    quantile: TailQuantile
    target_us: float
    n_over: int
    shapes: tuple[OverTarget, ...]
    """Shapes with requests over the target, most first (ties: shape)."""


def over_sla(
    rows: Sequence[ShapeRow], latency: Percentiles, review: Review, th: Thresholds
) -> OverSla | None:
    """Per shape, the ok requests whose latency exceeds the SLA target of the tail quantile
    the slice has the evidence for (None without such a target). The counts come from
    `shape_rows`, in the scan that computes the percentiles."""
    q, _ = latency.tail(th.min_samples_p99)
    target = review.sla(q)
    if not target:
        return None
    total = sum(r.over.get(q, 0) for r in rows)
    shapes = tuple(
        sorted(
            (OverTarget(r.shape, r.over[q], r.n, r.over[q] / total) for r in rows if r.over.get(q)),
            key=lambda o: (-o.n_over, o.shape),
        )
    )
    return OverSla(q, float(target), total, shapes)
