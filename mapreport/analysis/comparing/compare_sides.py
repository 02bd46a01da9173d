"""What a compared side's requests give the comparison (docs/compare.md, "How a shape is
compared"): each shape's latencies in time order with their queue wait and compute, the
latency basis both sides share, and the block length of the side's bursts."""

from __future__ import annotations

import msgspec
import numpy as np

from mapreport.analysis.comparing.compare import SAMPLES, side_params
from mapreport.analysis.comparing.compare_stats import (
    INDEPENDENT,
    BlockChoice,
    LatencyBasis,
    choose_block,
    residuals,
)
from mapreport.core.connection import Connection

_PARTS = f"""
    SELECT shape,
        quantile_cont(latency_us, [0.5, 0.95, 0.99]),
        quantile_cont(queue_us, [0.5, 0.95, 0.99]),
        quantile_cont(compute_us, [0.5, 0.95, 0.99])
    FROM ({SAMPLES}) GROUP BY shape
"""
PARTS = ("latency", "queue", "compute")
"""What a request's time splits into, each with its p50, p95 and p99 per side."""

_ARRIVALS = """
    SELECT count(*) FILTER (WHERE arrival_known IS FALSE), count(*) FROM request
    WHERE workload = $w AND slice = $s AND status = 'ok'
        AND ($start IS NULL OR arrival_us >= $start) AND ($end IS NULL OR arrival_us < $end)
"""


def side_basis(
    con: Connection, workload: str, slice_: str, start_us: float | None, end_us: float | None
) -> LatencyBasis:
    """END_TO_END when every ok request of the side has its arrival recorded (a server's log,
    a client's export), else SPAN (a profiler trace's request spans have none)."""
    params = side_params(workload, slice_, start_us, end_us)
    params.pop("span")
    unknown, _ = con.execute(_ARRIVALS, params).fetchone() or (0, 0)
    return LatencyBasis.SPAN if unknown else LatencyBasis.END_TO_END


def shared_basis(a: LatencyBasis, b: LatencyBasis, span: bool = False) -> LatencyBasis:
    """What both sides' latencies are: end to end only where both record arrivals (and the
    span is not asked for); else every request's span on both sides."""
    both = a == b == LatencyBasis.END_TO_END
    return LatencyBasis.END_TO_END if both and not span else LatencyBasis.SPAN


class SideSamples(msgspec.Struct, frozen=True):
    """One side's ok requests by shape, each shape's in time order."""

    latency: dict[str, np.ndarray]
    queue: dict[str, np.ndarray] = msgspec.field(default_factory=dict)
    """Per shape, aligned with `latency`: queue wait (NaN where not recorded)."""
    compute: dict[str, np.ndarray] = msgspec.field(default_factory=dict)
    pooled: np.ndarray | None = None
    """Every shape's latency in time order (the slice's series)."""
    block: BlockChoice = INDEPENDENT


def side_samples(
    con: Connection,
    workload: str,
    slice_: str,
    start_us: float | None = None,
    end_us: float | None = None,
    basis: LatencyBasis = LatencyBasis.END_TO_END,
) -> SideSamples:
    """Each shape's latencies of ok requests (arrivals in [start, end) when given) in time
    order, with their queue wait and compute, and the block length of the side's series."""
    span = basis == LatencyBasis.SPAN
    rows = con.execute(SAMPLES, side_params(workload, slice_, start_us, end_us, span)).fetchall()
    names = [str(r[0]) for r in rows]
    lat = np.asarray([float(r[1]) for r in rows], dtype=np.float64)
    queue = np.asarray([np.nan if r[2] is None else float(r[2]) for r in rows], dtype=np.float64)
    comp = np.asarray([np.nan if r[3] is None else float(r[3]) for r in rows], dtype=np.float64)
    codes: dict[str, int] = {}
    code = np.asarray([codes.setdefault(n, len(codes)) for n in names], dtype=np.int64)
    if not len(rows):
        return SideSamples({})
    picks = {n: np.flatnonzero(code == c) for n, c in codes.items()}
    series = residuals(np.log(np.maximum(lat, 1e-3)), code)
    return SideSamples(
        {n: lat[i] for n, i in picks.items()},
        {n: queue[i] for n, i in picks.items()},
        {n: comp[i] for n, i in picks.items()},
        lat,
        choose_block(series),
    )


def side_parts(
    con: Connection,
    workload: str,
    slice_: str,
    start_us: float | None = None,
    end_us: float | None = None,
    basis: LatencyBasis = LatencyBasis.END_TO_END,
) -> dict[str, dict[str, tuple[float, float, float] | None]]:
    """Per shape: latency, queue wait and compute p50/p95/p99 of ok requests (None where the
    records do not measure it: client-side timing has no queue or compute; a span no queue)."""
    span = basis == LatencyBasis.SPAN
    rows = con.execute(_PARTS, side_params(workload, slice_, start_us, end_us, span)).fetchall()
    return {
        str(shape): {
            part: None if q is None else (float(q[0]), float(q[1]), float(q[2]))
            for part, q in zip(PARTS, quantiles, strict=True)
        }
        for shape, *quantiles in rows
    }
