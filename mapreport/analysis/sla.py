"""Which shapes hold the requests over the slice's SLA target: the shape that drives a miss."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from mapreport.analysis.common import Percentiles, Review, TailQuantile, Thresholds
from mapreport.analysis.query import REQUESTS


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
    con: duckdb.DuckDBPyConnection, latency: Percentiles, review: Review, th: Thresholds
) -> OverSla | None:
    """Of the loaded slice: per shape, the ok requests whose latency exceeds the SLA target of
    the tail quantile the slice has the evidence for (None without such a target)."""
    q, _ = latency.tail(th.min_samples_p99)
    target = review.sla(q)
    if not target:
        return None
    rows = con.execute(
        f"""
        SELECT shape, count(*) FILTER (WHERE latency_us > $t), count(*)
        FROM ({REQUESTS}) WHERE status = 'ok' GROUP BY shape
        """,
        {"t": target},
    ).fetchall()
    total = sum(int(n_over) for _, n_over, _ in rows)
    shapes = tuple(
        sorted(
            (
                OverTarget(str(s), int(n_over), int(n), int(n_over) / total)
                for s, n_over, n in rows
                if n_over
            ),
            key=lambda o: (-o.n_over, o.shape),
        )
    )
    return OverSla(q, float(target), total, shapes)
