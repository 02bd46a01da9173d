"""Which shapes hold the requests over the slice's SLA target: the shape that drives a miss."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mapreport.analysis.base.common import Percentiles, Review, TailQuantile, Thresholds, within
from mapreport.analysis.base.query import ShapeRow


class OverTarget(msgspec.Struct, frozen=True):
    """One shape's ok requests above the target."""

    shape: str
    n_over: int
    n: int
    """The shape's ok requests."""
    share: float
    """Its part of all the slice's requests over the target."""


class OverSla(msgspec.Struct, frozen=True):
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


SLA_DRIVER_SHARE = 0.5
"""A shape holding at least this share of the requests over a missed SLA target drives the
miss: its action ranks first after the blockers."""


def sla_driver(over: OverSla | None, latency: Percentiles, th: Thresholds) -> str | None:
    """The shape that breaks the SLA: the one holding most (at least SLA_DRIVER_SHARE) of the
    requests over the target of a quantile the slice misses; None when the SLA is met, unset,
    or no shape holds most of the excess."""
    if over is None or not over.shapes:
        return None
    _, value = latency.tail(th.min_samples_p99)
    if within(value, over.target_us) is not False:
        return None
    top = over.shapes[0]
    return top.shape if top.share >= SLA_DRIVER_SHARE else None
