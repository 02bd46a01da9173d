"""Head-of-line blocking behind adaptation: requests of any shape that waited because an earlier
request on the same worker adapted (recompiled, re-tuned, re-mapped, ran the fallback path).

A worker is a request's `core` (one worker for the slice when requests name none). Its busy
periods follow from the requests in the order they started computing: a period starts with a
request that arrives when every earlier request on the worker has finished. A request adapted
when an adaptation event of its slice (recompile, retune, remap, fallback_enter; a compile of
TORCH_TRACE, failed or not) of its shape, or naming none, on its worker, or naming none,
overlaps its compute, or when it ran the fallback variant. A request is blocked when an
earlier request of its busy period adapted. It is credited to the adapting request that held
the worker while it waited last: the latest whose compute overlapped its wait, else the latest
before it arrived. Without a recorded arrival the wait is inferred: the period's requests are
taken to have arrived at the worker's mean rate from the period's start, in the order they were
served (FIFO), and credited by the same rule from that time.
Computed in SQL over the slice view (`query.load_slice`), one row per blocking event back to
Python.
"""

from __future__ import annotations

import math
from functools import cached_property

import msgspec

from mapreport.analysis.base.query import BLOCKED_TABLE, HELD_TABLE, SLICE_TABLE, create, literal
from mapreport.analysis.serving.compiles import VaryingDim
from mapreport.core.connection import Connection
from mapreport.core.kinds import BlockingRemedy

ADAPTING_EVENTS = ("recompile", "retune", "remap", "fallback_enter")
"""Adaptation events that occupy the worker while they run."""

_EVENTS = ", ".join(f"'{e}'" for e in ADAPTING_EVENTS)
BACK_TO_BACK_US = 1000.0
"""The least gap that separates two busy periods when no arrival is recorded."""
IDLE_ARRIVAL_SHARE = 0.05
"""Without a recorded arrival, a request that starts within this share of its worker's mean
gap between request starts after the one before it ended had been waiting: a request arriving
at an idle worker lands that close to the previous end with a probability of about this share
(arrivals spread as a Poisson process), so a shorter gap is a wait, not chance. On a loaded
machine a queued request starts milliseconds after the one before it, not within 1 ms."""

CREDIT_CANDIDATES = 16
"""The latest adapting requests of its busy period a blocked request is weighed against (the
ones that held the worker while it waited are among the latest before it). Bounded so the
credit stays linear in the requests: on one saturated worker of 50,000 requests, a fifth of
them on the fallback path, weighing every earlier adapting request took 4.7 s, 16 of them
0.72 s (the last-adapting rule before it: 0.24 s), and 64 gave 9,200 blocking events
against 9,208 with 16."""
_OFFSETS = ", ".join(f"({i})" for i in range(CREDIT_CANDIDATES))
PACK = 2**32
"""Two counts in one window sum: the adapting requests times PACK plus the requests (a worker
serves fewer than 2**32 requests in a slice)."""

_HELD = f"""
WITH r AS (
    SELECT *, compute_end_us - compute_us AS compute_start_us, coalesce(core, -1) AS worker,
        source_id || ':' || CAST(line AS VARCHAR) AS rid
    FROM {SLICE_TABLE} WHERE status = 'ok' AND compute_us IS NOT NULL
), ev AS (
    SELECT event, shape, core, ts_us, ts_us + coalesce(dur_us, 0) AS end_us
    FROM adaptation_event
    WHERE workload = {{w}} AND slice = {{s}} AND event IN ({_EVENTS})
    UNION ALL  -- a compile's own log (TORCH_TRACE): its shapes are tensors', so it names none
    SELECT CASE WHEN (outcome = 'compiled' OR outcome IS NULL) AND cache_hit
                THEN 'compile_cache_hit'  -- served from the FX graph cache: it still stalls
            WHEN outcome = 'compiled' OR outcome IS NULL THEN 'recompile'
            ELSE 'compile_' || outcome END,
        NULL, core, ts_us, ts_us + compile_ms * 1000
    FROM compile_event
    WHERE workload = {{w}} AND slice = {{s}} AND ts_us IS NOT NULL AND compile_ms IS NOT NULL
), adapting AS (
    -- an event of the request's shape (an equality join), or one naming no shape: with the
    -- two ORed in one condition the join was a merge join over every request's times (71 ms
    -- of CPU on a slice of 188,000 requests; 6 ms this way)
    SELECT rid, min(event) AS event FROM (
        SELECT r.rid, ev.event FROM r JOIN ev ON ev.shape = r.shape
            AND ev.ts_us < r.compute_end_us AND ev.end_us > r.compute_start_us
            AND (ev.core IS NULL OR r.core IS NULL OR ev.core = r.core)
        UNION ALL
        SELECT r.rid, ev.event FROM r JOIN ev ON ev.shape IS NULL
            AND ev.ts_us < r.compute_end_us AND ev.end_us > r.compute_start_us
            AND (ev.core IS NULL OR r.core IS NULL OR ev.core = r.core)
    ) GROUP BY rid
), marked AS (
    SELECT r.rid, r.worker, r.compute_start_us, r.compute_end_us, r.arrival_known,
        r.arrival_us, a.event IS NOT NULL OR r.variant = 'fallback' AS adapted,
        coalesce(a.event, CASE WHEN r.variant = 'fallback' THEN 'fallback' END) AS how
    FROM r LEFT JOIN adapting a USING (rid)
), firsts AS (
    -- per shape and worker in one pass over the requests: its first start (a shape seen
    -- before on its worker), and what the worker's mean gap between starts is made of
    SELECT shape, worker, min(compute_start_us) AS first_us,
        max(compute_start_us) AS last_us, count(*) AS n
    FROM r GROUP BY shape, worker
), gaps AS (
    SELECT worker, (max(last_us) - min(first_us)) / greatest(sum(n) - 1, 1) AS mean_gap_us
    FROM firsts GROUP BY worker
), ordered AS (
    -- in the worker's order, one sort: what ran before each request (busy_until), and the
    -- requests and adapting requests before it, counted in one sum (PACK: adapting ones in
    -- the high bits). A window sorts every column it carries (0.41 s of CPU against 0.23 s
    -- on a slice of 188,000 requests), so the windows carry what they read and the requests
    -- held take the rest from `r` at the end
    SELECT m.*,
        max(m.compute_end_us) OVER (
            PARTITION BY m.worker ORDER BY m.compute_start_us, m.rid
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS busy_until,
        CAST(coalesce(sum(CASE WHEN m.adapted THEN {PACK + 1} ELSE 1 END) OVER (
            PARTITION BY m.worker ORDER BY m.compute_start_us, m.rid
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ), 0) AS BIGINT) AS before
    FROM marked m
), opened AS (
    SELECT o.rid, o.worker, o.before, o.adapted, o.how, o.compute_start_us, g.mean_gap_us,
        CASE
            WHEN o.busy_until IS NULL THEN true
            WHEN o.arrival_known THEN o.arrival_us >= o.busy_until
            -- no arrival recorded: a request that starts when its worker frees had waited
            ELSE o.compute_start_us - o.busy_until
                > greatest({BACK_TO_BACK_US}, {IDLE_ARRIVAL_SHARE} * g.mean_gap_us)
        END AS opens
    FROM ordered o JOIN gaps g USING (worker)
), periods AS (
    -- each request's busy period, named by what came before the request that opened it
    -- (unique on the worker), and that request's start. `before` grows along the worker's
    -- order, so it orders the window alone: one number to sort by, not a time and a text
    SELECT rid, worker, before, adapted, how, mean_gap_us,
        max(CASE WHEN opens THEN before END) OVER w AS period,
        max(CASE WHEN opens THEN compute_start_us END) OVER w AS first_us
    FROM opened
    WINDOW w AS (PARTITION BY worker ORDER BY before)
), held AS (
    -- only an adapting request and one after an adapting request of its busy period can hold
    -- the worker or wait behind one
    SELECT rid, worker, period, first_us, adapted, how, mean_gap_us,
        before // {PACK} - period // {PACK} AS adapting_before,
        before % {PACK} - period % {PACK} AS served_before
    FROM periods
    WHERE adapted OR before // {PACK} > period // {PACK}
)
-- without a recorded arrival, requests of a busy period are taken to have arrived at the
-- worker's mean rate from the period's start, in the order they were served (FIFO)
SELECT r.source_id, r.line, h.rid, r.shape, r.plan_id, h.how, h.adapted,
    f.first_us < r.compute_start_us AS seen_before, h.worker, h.period, r.compute_start_us,
    r.compute_end_us, r.compute_us, r.queue_us,
    CASE WHEN r.arrival_known THEN r.arrival_us
        ELSE least(r.compute_start_us, h.first_us + h.mean_gap_us * h.served_before)
    END AS ready_us,
    h.adapting_before
FROM held h JOIN r USING (rid)
JOIN firsts f ON f.shape = r.shape AND f.worker = r.worker
"""

_BLOCKED = f"""
WITH holders AS (
    SELECT *, adapting_before + 1 AS seq FROM {HELD_TABLE} WHERE adapted
), wanted AS (
    -- each blocked request against the latest CREDIT_CANDIDATES adapting ones before it (an
    -- equality join: linear in the requests, however long a saturated busy period runs)
    SELECT v.rid, v.worker, v.period, v.ready_us, v.compute_start_us,
        v.adapting_before - o.i AS seq
    FROM {HELD_TABLE} v CROSS JOIN (VALUES {_OFFSETS}) AS o(i)
    WHERE v.adapting_before > o.i
), credit AS (
    -- the last adaptation its wait overlapped (a short cache hit after a long compile holds
    -- the worker last, and is what the request still waited on); when none overlapped it (it
    -- arrived after they ended, into their backlog), the latest that started before it arrived
    SELECT v.rid, b.rid AS blocked_by, row_number() OVER (
            PARTITION BY v.rid
            ORDER BY b.compute_end_us > v.ready_us DESC, b.compute_start_us DESC, b.rid
        ) AS k
    FROM wanted v JOIN holders b ON b.worker = v.worker AND b.period = v.period AND b.seq = v.seq
)
SELECT p.source_id, p.line, p.rid, p.shape, p.plan_id, p.how, p.adapted, p.seen_before,
    p.worker, p.compute_start_us, p.compute_us, p.queue_us, c.blocked_by
FROM {HELD_TABLE} p LEFT JOIN credit c ON c.rid = p.rid AND c.k = 1
WHERE p.adapted OR c.blocked_by IS NOT NULL
"""


def blocking_definitions(workload: str, slice_: str) -> list[tuple[str, str, str]]:
    """(kind, name, SELECT) of the slice's blocking marks over the slice view of
    `query.load_slice`, in dependency order: the requests of busy periods an adapting request
    held (HELD_TABLE), then the adapting requests and those blocked behind them
    (BLOCKED_TABLE). Two tables, not one statement: Spark computes a CTE again for each of
    its readers, and the busy periods' windows over every request ran six times each (a
    slice of 1.88M requests on local[2]: 25.4 s as one statement, 15.3 s as two)."""
    return [
        ("TABLE", HELD_TABLE, _HELD.format(w=literal(workload), s=literal(slice_))),
        ("TABLE", BLOCKED_TABLE, _BLOCKED),
    ]


EVENTS_SQL = f"""
SELECT b.rid, b.shape, b.plan_id, b.how, b.seen_before, b.worker, b.compute_start_us,
    b.compute_us,
    count(v.rid) AS blocked, fsum(v.queue_us) AS wait_us,
    quantile_cont(v.queue_us, 0.95) AS wait_p95_us,
    list(DISTINCT v.shape ORDER BY v.shape) AS shapes
FROM {BLOCKED_TABLE} b JOIN {BLOCKED_TABLE} v ON v.blocked_by = b.rid
GROUP BY b.rid, b.shape, b.plan_id, b.how, b.seen_before, b.worker, b.compute_start_us,
    b.compute_us
ORDER BY b.compute_start_us, b.rid
"""

VICTIMS_SQL = f"""
WITH v AS (
    SELECT shape, count(*) AS n, fsum(queue_us) AS wait FROM {BLOCKED_TABLE}
    WHERE blocked_by IS NOT NULL GROUP BY shape
), whole AS (
    SELECT (SELECT count(*) FROM {BLOCKED_TABLE} WHERE how = $how) AS hits,
        (SELECT quantile_cont(r.latency_us, 0.5) FROM {SLICE_TABLE} r
         LEFT JOIN {BLOCKED_TABLE} b ON b.source_id = r.source_id AND b.line = r.line
            AND b.blocked_by IS NOT NULL
         WHERE r.status = 'ok' AND b.rid IS NULL) AS unblocked_p50,
        (SELECT count(*) FROM {BLOCKED_TABLE} WHERE adapted) AS adapting
)
SELECT whole.*, v.shape, v.n, v.wait FROM whole LEFT JOIN v ON true ORDER BY v.shape
"""
"""The slice's figures (its limit hits, the median latency of its requests not blocked, its
adapting requests) on every row, with each victim shape's blocked requests and their wait (a
row without a shape: none was blocked)."""


class BlockingEvent(msgspec.Struct, frozen=True):
    """One adapting request and the requests that waited behind it."""

    source: str
    """`source_id:line` of the adapting request."""
    shape: str
    plan: str | None
    """The plan the adapting request ran (None: it names none)."""
    how: str
    """The adaptation: recompile, retune, remap, fallback_enter or fallback (the variant); from
    TORCH_TRACE: recompile, compile_cache_hit, compile_failed or compile_limit_hit."""
    seen_before: bool
    """An earlier request of its shape ran on its worker in the window: the shape was not new
    to that worker (each worker keeps its own compiled shapes)."""
    worker: int
    """Its core (-1: the requests name none, one worker for the slice)."""
    start_us: float
    duration_us: float
    """Its compute time: how long the worker was held."""
    blocked: int
    wait_us: float | None
    """Summed queue wait of the requests blocked behind it (None: no arrival recorded)."""
    wait_p95_us: float | None
    shapes: tuple[str, ...]
    """The shapes of the blocked requests."""


class Victims(msgspec.Struct, frozen=True):
    """The blocked requests of one shape."""

    shape: str
    blocked: int
    wait_us: float | None
    """None when the requests record no arrival (their wait is not measured)."""


MINOR_SHARE = 0.01
"""A blocking event below this share of the slice's blocked wait is minor (not named)."""
PRECOMPILE_MAX = 8
"""Distinct new adapting shapes up to which pre-compiling them in warm-up is the remedy; above
it, compiling off the serving path is."""


class Blocking(msgspec.Struct, frozen=True, dict=True):
    """Head-of-line blocking behind adaptation in one slice."""

    events: tuple[BlockingEvent, ...]
    victims: tuple[Victims, ...] = ()
    """Per shape, its requests blocked behind any adapting request."""
    unblocked_p50_us: float | None = None
    """Median latency of the ok requests not blocked behind adaptation (None: none, or no
    arrival recorded): the tail's reference where most requests are blocked."""
    limit_hits: int = 0
    """Requests whose compile the compiler refused at its recompile limit (they ran eagerly,
    and so does every later new shape of their worker)."""
    varying: tuple[VaryingDim, ...] = ()
    """The input dims whose size changes caused the serving-time compiles (TORCH_TRACE)."""
    adapting: int = 0
    """Requests that adapted (blocking anyone or not): 0 means nothing could block."""

    def caused_waits(self) -> dict[str, float]:
        """Per shape: the queue wait its adapting requests held others of their worker in
        (where arrivals are recorded). Fallback runs are the baseline of an uncovered shape,
        not an adaptation: their waits are not charged to its gain."""
        waits: dict[str, float] = {}
        for e in self.events:
            if e.how not in FALLBACK_HOWS and e.wait_us is not None:
                waits[e.shape] = waits.get(e.shape, 0.0) + e.wait_us
        return waits

    @property
    def blocked(self) -> int:
        """Requests blocked behind any adapting request."""
        return sum(v.blocked for v in self.victims)

    @property
    def wait_us(self) -> float | None:
        """Their summed queue wait (None when no blocked request records its arrival)."""
        known = [v.wait_us for v in self.victims if v.wait_us is not None]
        return math.fsum(known) if known else None

    @property
    def wait_known(self) -> bool:
        """Every blocking event's wait is measured (its requests record their arrival)."""
        return all(e.wait_us is not None for e in self.events)

    @cached_property
    def material(self) -> tuple[BlockingEvent, ...]:
        """The events behind at least MINOR_SHARE of the blocked wait (of the blocked
        requests, when a wait is not measured): what the finding names (a fallback run that
        held one request for 170 µs beside 1.5 s recompiles is not). Computed once: the
        report reads it dozens of times a slice, each a pass over every event (1.46M weights
        for the 1M benchmark's six slices)."""
        known = self.wait_known
        weights = [
            e.wait_us if known and e.wait_us is not None else float(e.blocked) for e in self.events
        ]
        total = math.fsum(weights)
        if total <= 0:
            return ()
        bar = MINOR_SHARE * total
        return tuple(e for e, w in zip(self.events, weights, strict=True) if w >= bar)

    @property
    def material_blocked(self) -> int:
        """Requests blocked behind the material events (the finding's count)."""
        return sum(e.blocked for e in self.material)

    @property
    def triggers(self) -> tuple[str, ...]:
        """The shapes of the material events' adapting requests, most blocked first."""
        count: dict[str, int] = {}
        for e in self.material:
            count[e.shape] = count.get(e.shape, 0) + e.blocked
        return tuple(sorted(count, key=lambda s: (-count[s], s)))

    def remedy(self) -> BlockingRemedy | None:
        """What the evidence supports removing the blocking with, read from the material
        events (None without any): fallback only: cover the shapes in the plan; a shape its
        worker served before adapted again, or every serving-time recompile changed the size of
        one and the same dim: mark the dimension dynamic; the compiler refused a
        compile at its recompile limit: raise the limit or bucket the dimension; new shapes:
        pre-compile them in warm-up when at most PRECOMPILE_MAX, else compile asynchronously."""
        adapting = [e for e in self.material if e.how not in FALLBACK_HOWS]
        if not self.material:
            return None
        if self.limit_hits:
            return BlockingRemedy.RAISE_RECOMPILE_LIMIT
        if not adapting:
            return BlockingRemedy.COVER_IN_PLAN
        if any(e.seen_before for e in adapting) or len(self.varying) == 1:
            return BlockingRemedy.MARK_DYNAMIC
        if len({e.shape for e in adapting}) <= PRECOMPILE_MAX:
            return BlockingRemedy.PRECOMPILE_IN_WARMUP
        return BlockingRemedy.COMPILE_ASYNC


LIMIT_HIT = "compile_limit_hit"
"""How a request adapted when the compiler refused its compile at the recompile limit."""
FALLBACK_HOWS = ("fallback", "fallback_enter", "compile_failed", LIMIT_HIT)
"""Adaptations that are a run on the generic path, not a compile."""


def load_blocking(con: Connection, workload: str, slice_: str) -> None:
    """Mark the slice's adapting and blocked requests over the slice view (HELD_TABLE, then
    BLOCKED_TABLE: `blocking_definitions`)."""
    create(con, blocking_definitions(workload, slice_))


def blocking(con: Connection) -> Blocking:
    """The slice's blocking events (of `load_blocking`), oldest first, and its victims."""
    events = tuple(
        BlockingEvent(
            str(src),
            str(shape),
            None if plan is None else str(plan),
            str(how),
            bool(seen),
            int(worker),
            float(start),
            float(dur),
            int(n),
            None if wait is None else float(wait),
            None if p95 is None else float(p95),
            tuple(shapes or ()),
        )
        for src, shape, plan, how, seen, worker, start, dur, n, wait, p95, shapes in con.execute(
            EVENTS_SQL
        ).fetchall()
    )
    rows = con.execute(VICTIMS_SQL, {"how": LIMIT_HIT}).fetchall()
    hits, p50, adapting = rows[0][:3]
    victims = tuple(
        Victims(str(shape), int(n), None if wait is None else float(wait))
        for *_, shape, n, wait in rows
        if shape is not None
    )
    return Blocking(
        events,
        victims,
        None if p50 is None else float(p50),
        int(hits),
        adapting=int(adapting),
    )
