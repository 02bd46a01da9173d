"""Head-of-line blocking behind adaptation: requests of any shape that waited because an earlier
request on the same worker adapted (recompiled, re-tuned, re-mapped, ran the fallback path).

A worker is a request's `core` (one worker for the slice when requests name none). Its busy
periods follow from the requests in the order they started computing: a period starts with a
request that arrives when every earlier request on the worker has finished. A request adapted
when an adaptation event of its slice (recompile, retune, remap, fallback_enter) of its shape,
or naming none, overlaps its compute, or when it ran the fallback variant. A request is
blocked when an earlier request of its busy period adapted; it is attributed to the latest
such request before it (the blocking event). Computed in SQL over the slice view
(`query.load_slice`), one row per blocking event back to Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from mapreport.analysis.query import SLICE_TABLE

ADAPTING_EVENTS = ("recompile", "retune", "remap", "fallback_enter")
"""Adaptation events that occupy the worker while they run."""

_EVENTS = ", ".join(f"'{e}'" for e in ADAPTING_EVENTS)

BLOCKING_SQL = f"""
WITH r AS (
    SELECT *, compute_end_us - compute_us AS compute_start_us, coalesce(core, -1) AS worker,
        source_id || ':' || CAST(line AS VARCHAR) AS rid
    FROM {SLICE_TABLE} WHERE status = 'ok' AND compute_us IS NOT NULL
), ev AS (
    SELECT event, shape, ts_us, ts_us + coalesce(dur_us, 0) AS end_us
    FROM adaptation_event
    WHERE workload = $w AND slice = $s AND event IN ({_EVENTS})
), adapting AS (
    SELECT r.rid, min(ev.event) AS event
    FROM r JOIN ev ON ev.ts_us < r.compute_end_us AND ev.end_us > r.compute_start_us
        AND (ev.shape IS NULL OR ev.shape = r.shape)
    GROUP BY r.rid
), ordered AS (
    SELECT r.*, a.event IS NOT NULL OR r.variant = 'fallback' AS adapted,
        coalesce(a.event, CASE WHEN r.variant = 'fallback' THEN 'fallback' END) AS how,
        max(r.compute_end_us) OVER (
            PARTITION BY r.worker ORDER BY r.compute_start_us, r.rid
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS busy_until
    FROM r LEFT JOIN adapting a USING (rid)
), periods AS (
    SELECT *, sum(CASE WHEN busy_until IS NULL OR arrival_us >= busy_until THEN 1 ELSE 0 END)
        OVER (PARTITION BY worker ORDER BY compute_start_us, rid) AS period
    FROM ordered
), attributed AS (
    SELECT *, last_value(CASE WHEN adapted THEN rid END IGNORE NULLS) OVER (
            PARTITION BY worker, period ORDER BY compute_start_us, rid
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS blocked_by
    FROM periods
)
SELECT b.rid, b.shape, b.how, b.worker, b.compute_start_us, b.compute_us,
    count(v.rid) AS blocked, coalesce(sum(v.queue_us), 0) AS wait_us,
    quantile_cont(v.queue_us, 0.95) AS wait_p95_us,
    list(DISTINCT v.shape ORDER BY v.shape) FILTER (WHERE v.rid IS NOT NULL) AS shapes
FROM attributed b JOIN attributed v ON v.blocked_by = b.rid
GROUP BY b.rid, b.shape, b.how, b.worker, b.compute_start_us, b.compute_us
ORDER BY b.compute_start_us, b.rid
"""


@dataclass(frozen=True)
class BlockingEvent:
    """One adapting request and the requests that waited behind it."""

    source: str
    """`source_id:line` of the adapting request."""
    shape: str
    how: str
    """The adaptation: recompile, retune, remap, fallback_enter or fallback (the variant)."""
    worker: int
    """Its core (-1: the requests name none, one worker for the slice)."""
    start_us: float
    duration_us: float
    """Its compute time: how long the worker was held."""
    blocked: int
    wait_us: float
    """Summed queue wait of the requests blocked behind it."""
    wait_p95_us: float | None
    shapes: tuple[str, ...]
    """The shapes of the blocked requests."""


@dataclass(frozen=True)
class Blocking:
    """Head-of-line blocking behind adaptation in one slice."""

    events: tuple[BlockingEvent, ...]
    blocked: int
    """Requests blocked behind any adapting request."""
    wait_us: float


def blocking(con: duckdb.DuckDBPyConnection, workload: str, slice_: str) -> Blocking:
    """The slice's blocking events (of the loaded slice view), oldest first."""
    rows = con.execute(BLOCKING_SQL, {"w": workload, "s": slice_}).fetchall()
    events = tuple(
        BlockingEvent(
            str(src),
            str(shape),
            str(how),
            int(worker),
            float(start),
            float(dur),
            int(n),
            float(wait),
            None if p95 is None else float(p95),
            tuple(shapes or ()),
        )
        for src, shape, how, worker, start, dur, n, wait, p95, shapes in rows
    )
    return Blocking(events, sum(e.blocked for e in events), sum(e.wait_us for e in events))
