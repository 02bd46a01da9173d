"""The aggregates of a loaded slice's requests (`query.load_slice`) that several families read,
each computed once (issue 38).

The per-shape figures and the per-(shape, core) compute medians are tables of the loaded slice
(`query.SHAPE_STATS`, `query.CORE_STATS`: an evidence pack defines them as CTEs of the same
text). The slice-wide figures (`SliceTotals`: the request counts, the latency quantiles, the
window and the token totals, from which the slice's latency, its token rate and the batch
throughputs follow) and the per-stream, per-batch and per-core rows the scheduling figures
follow from are `SliceGrains`, read in one statement.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from mapreport.analysis.base.common import Percentiles
from mapreport.analysis.base.query import CDF_POINTS, QS, SLICE_TABLE, pct_of
from mapreport.core.connection import Connection

_GRAINS = f"""
WITH r AS (
    SELECT stream, batch_size, core, status, arrival_us, compute_end_us, latency_us, queue_us,
        compute_us, output_tokens
    FROM {SLICE_TABLE}
)
SELECT 'slice' AS grain, NULL AS stream, NULL::BIGINT AS k, count(*) AS n,
    count(*) FILTER (WHERE status = 'ok') AS n_ok, NULL::BIGINT AS n_queue,
    quantile_cont(latency_us, {QS}) FILTER (WHERE status = 'ok') AS q,
    NULL::BIGINT AS items, NULL::DOUBLE AS busy,
    min(arrival_us) AS t0, max(compute_end_us) AS t1,
    count(*) FILTER (WHERE status = 'ok' AND output_tokens IS NOT NULL) AS n_tok,
    sum(output_tokens) FILTER (WHERE status = 'ok') AS tokens,
    min(arrival_us) FILTER (WHERE status = 'ok' AND output_tokens IS NOT NULL) AS tok0,
    max(compute_end_us) FILTER (WHERE status = 'ok' AND output_tokens IS NOT NULL) AS tok1
FROM r
UNION ALL
SELECT 'stream', coalesce(stream, '(none)'), NULL, count(*),
    count(*) FILTER (WHERE status = 'ok'), count(queue_us) FILTER (WHERE status = 'ok'),
    quantile_cont(queue_us, {CDF_POINTS}) FILTER (WHERE status = 'ok'),
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM r GROUP BY stream
UNION ALL
SELECT 'batch', NULL, batch_size, count(*), NULL, NULL, quantile_cont(latency_us, [0.5, 0.95]),
    sum(batch_size), NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM r WHERE status = 'ok' AND batch_size IS NOT NULL GROUP BY batch_size
UNION ALL
SELECT 'core', NULL, core, count(*), NULL, NULL, [quantile_cont(compute_us, 0.5)], NULL,
    fsum(compute_us), NULL, NULL, NULL, NULL, NULL, NULL
FROM r WHERE core IS NOT NULL GROUP BY core
ORDER BY grain, stream, k
"""
"""The grains of the loaded slice's requests in one statement (one scan): the slice (its
counts, latency, window and token totals), each stream (its requests, ok ones and the
queue-wait profile of those that measure a wait), each batch size (ok requests: latency
p50/p95 and the items) and each core (every request: busy time and median compute)."""


class SliceTotals(msgspec.Struct, frozen=True):
    """The loaded slice's requests, every shape together."""

    requests: int
    ok: int
    latency: Percentiles
    """p50/p95/p99 of ok requests' end-to-end latency."""
    first_arrival_us: float | None
    last_end_us: float | None
    """The window: the first arrival and the last completion of any request."""
    token_requests: int
    """Ok requests that state their output tokens."""
    output_tokens: int | None
    token_first_us: float | None
    token_last_us: float | None
    """The window of the ok requests that state their output tokens."""

    @property
    def window_s(self) -> float | None:
        """The window in seconds (None without requests)."""
        if self.first_arrival_us is None or self.last_end_us is None:
            return None
        return (float(self.last_end_us) - float(self.first_arrival_us)) / 1e6


class StreamRow(NamedTuple):
    """One stream's requests."""

    stream: str
    """Its name ("(none)": the requests that name none)."""
    n: int
    ok: int
    n_queue: int
    """Ok requests that measure their queue wait."""
    queue: tuple[float, ...]
    """Their queue wait at each quantile of `query.CDF_GRID` (empty without one)."""


class BatchRow(NamedTuple):
    """The ok requests of one batch size."""

    batch_size: int
    n: int
    latency_p50_us: float
    latency_p95_us: float
    items: int
    """The items they carried (the batch sizes summed)."""


class CoreRow(NamedTuple):
    """The requests one core ran."""

    core: int
    n: int
    busy_us: float
    compute_p50_us: float


class SliceGrains(msgspec.Struct, frozen=True):
    """The loaded slice's requests at the grains of `_GRAINS`, read in one statement."""

    totals: SliceTotals
    streams: tuple[StreamRow, ...]
    batches: tuple[BatchRow, ...]
    cores: tuple[CoreRow, ...]


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def slice_grains(con: Connection) -> SliceGrains:
    """The loaded slice's totals and its stream, batch and core rows, in one statement."""
    totals = None
    streams, batches, cores = [], [], []
    for grain, stream, k, n, n_ok, n_queue, q, items, busy, *window in con.execute(
        _GRAINS
    ).fetchall():
        if grain == "slice":
            t0, t1, n_tok, tokens, tok0, tok1 = window
            totals = SliceTotals(
                requests=int(n),
                ok=int(n_ok),
                latency=pct_of(int(n_ok), q),
                first_arrival_us=_float(t0),
                last_end_us=_float(t1),
                token_requests=int(n_tok),
                output_tokens=None if tokens is None else int(tokens),
                token_first_us=_float(tok0),
                token_last_us=_float(tok1),
            )
        elif grain == "stream":
            queue = tuple(float(v) for v in q or ())
            streams.append(StreamRow(str(stream), int(n), int(n_ok), int(n_queue), queue))
        elif grain == "batch":
            batches.append(BatchRow(int(k), int(n), float(q[0]), float(q[1]), int(items)))
        else:
            cores.append(CoreRow(int(k), int(n), float(busy), float(q[0])))
    if totals is None:  # an aggregate without GROUP BY gives its row, whatever the slice holds
        raise ValueError("the slice's grains came back without the slice's own row")
    return SliceGrains(totals, tuple(streams), tuple(batches), tuple(cores))


def slice_latency(t: SliceTotals) -> dict[str, Any]:
    """The slice's request counts, time window and latency percentiles (ok requests)."""
    return {
        "requests": t.requests,
        "failed": t.requests - t.ok,
        "latency": t.latency,
        "window": (t.first_arrival_us, t.last_end_us),
    }
