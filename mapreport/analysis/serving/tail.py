"""Tail-latency drivers: the excess of requests above p95 split into blocking behind
adaptation, load queueing, mapping fallback, memory burst, core imbalance and residual."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import msgspec
import numpy as np
import pyarrow as pa

from mapreport.analysis.base.common import Evidence, Interval, Review, Thresholds, within
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.base.query import (
    BLOCKED_TABLE,
    CORE_STATS,
    LAT_P50,
    LAT_P95,
    QUEUE_P50,
    SHAPE_STATS,
    SLICE_TABLE,
    ShapeRow,
    literal,
)
from mapreport.analysis.base.stats import (
    CI_LEVEL,
    FloatArray,
    IntArray,
    quantile,
    resampled_quantile,
    resampled_sums,
)
from mapreport.core.connection import Connection
from mapreport.core.kinds import (
    BottleneckClass,
    Driver,
    FigureUnit,
    JudgementFamily,
    Status,
    StatusReason,
)

DRIVERS: tuple[Driver, ...] = tuple(Driver)
"""Tail drivers in attribution order (see `Driver`)."""
COLUMNS = len(DRIVERS)
MEASURED_FROM: tuple[Driver, ...] = (
    Driver.BLOCKED_BEHIND_ADAPTATION,
    Driver.QUEUEING,
    Driver.MAPPING_FALLBACK,
    Driver.CORE_IMBALANCE,
    Driver.MEMORY_BURST,
)
"""The drivers a telemetry field measures, in the order a missing one is named."""


class TailDrivers(msgspec.Struct, frozen=True):
    """The excess of a shape's (or slice's) tail requests split by driver."""

    n: int
    """Requests measured (ok) behind the tail."""
    n_tail: int
    """Requests above the p95 latency."""
    excess_us: float
    """Summed excess (latency - p50 latency) of the tail requests."""
    shares: dict[Driver, float]
    share_ci: dict[Driver, Interval]
    material: bool
    """False when p95 <= tail_ratio x p50 and within the SLA: noise, not a bottleneck."""
    p50_us: float | None
    p95_us: float | None
    unmeasured: tuple[Driver, ...]
    """Drivers that could not be measured (missing telemetry: core, mem_peak_bytes; client-side
    timing has no queue or compute); they have no share."""


def attribute(raw: FloatArray) -> FloatArray:
    """Split each tail request's excess into the drivers, in DRIVERS order.

    Input rows: excess, blocked, queueing, fallback, memory, core. Each driver takes at most
    what the drivers before it left of the excess; the residual is the rest. Every part is
    non-negative and the parts of a row sum to its excess (clipped at zero).
    """
    raw = np.asarray(raw, dtype=np.float64).reshape(-1, COLUMNS)
    remaining = np.maximum(raw[:, 0], 0.0)
    out = np.empty((len(raw), COLUMNS))
    for i in range(COLUMNS - 1):
        take = np.minimum(np.maximum(raw[:, i + 1], 0.0), remaining)
        out[:, i] = take
        remaining = remaining - take
    out[:, COLUMNS - 1] = remaining
    return out


def shares(parts: FloatArray) -> dict[Driver, float] | None:
    """Each driver's share of the summed excess; None when there is no excess."""
    total = float(parts.sum())
    if total <= 0:
        return None
    sums = parts.sum(axis=0)
    return {d: min(1.0, float(sums[i] / total)) for i, d in enumerate(DRIVERS)}


EXACT_RESAMPLING_MAX = 1_000
"""Tail requests up to which each bootstrap resample is always drawn row by row."""
SUM_SKEW_MAX = 0.05
"""The skewness of a resampled column sum (a row's skewness / sqrt(k)) up to which the sums
may be drawn from their normal limit instead. A normal quantile then errs by about
skewness x (1.96^2 - 1) / 6 = 0.024 standard deviations at 2.5% (Cornish-Fisher), under
half the Monte Carlo error of the bootstrap's own 2.5% point with 2,000 resamples (0.06).
Tail parts are rarely that symmetric: in the 1M benchmark's 28 tails of 1,200-9,400 requests
the sums' skewness was 0.24-0.89, and the normal limit put the CI's ends up to 23% of its
width away from the resampled ones, where two seeds of the resampling differ by up to 8%."""


def sums_near_normal(parts: FloatArray) -> bool:
    """Whether the resampled column sums of `parts` are close enough to normal
    (EXACT_RESAMPLING_MAX, SUM_SKEW_MAX) that they may be drawn from their normal limit."""
    k = len(parts)
    if k <= EXACT_RESAMPLING_MAX:
        return False
    centred = parts - parts.mean(axis=0)
    var = (centred**2).mean(axis=0)
    third = (centred**3).mean(axis=0)
    live = var > 0
    skew = np.abs(third[live]) / var[live] ** 1.5 / math.sqrt(k)
    return bool(np.all(skew <= SUM_SKEW_MAX))


class Resampled(NamedTuple):
    """One shape's attributed tail parts, rows in canonical order, and the column sums of each
    of its bootstrap resamples (resamples x COLUMNS): the pooled tail's resamples are the
    shapes' added up (`pooled`)."""

    parts: FloatArray
    sums: FloatArray


def resample(parts: FloatArray, resamples: int, seed: int) -> Resampled:
    """Bootstrap resamples of a tail's rows, summed per column.

    Every resample is drawn row by row, unless the sums are near normal (`sums_near_normal`):
    then they are drawn from a normal with their exact bootstrap mean (k x column means) and
    covariance (k x the rows' covariance), and the cost no longer grows with the tail. A tail
    of one row, or without any excess, is every resample of itself."""
    parts = canonical_rows(parts)
    k = len(parts)
    if k < 2 or not parts.any():
        return Resampled(parts, np.tile(parts.sum(axis=0), (resamples, 1)))
    rng = np.random.default_rng(seed)
    if sums_near_normal(parts):
        mean = parts.mean(axis=0) * k
        cov = np.cov(parts, rowvar=False, bias=True) * k
        sums = rng.multivariate_normal(
            mean, cov, size=resamples, method="eigh", check_valid="ignore"
        )
        return Resampled(parts, sums)
    return Resampled(parts, resampled_sums(parts, resamples, rng))


def pooled(
    tails: Sequence[Resampled],
) -> tuple[FloatArray, dict[Driver, float] | None, dict[Driver, Interval]]:
    """The rows of one or more shapes' tails together (canonical order), their shares
    (`shares`) and the shares' percentile bootstrap 95% CIs. A share is a ratio of column
    sums; a resample of the pooled tail draws each shape's tail within the shape (stratified:
    each shape keeps its tail's size, as its own p95 fixed it) and adds the shapes' sums, so
    the slice's CIs reuse the shapes' resamples instead of drawing the whole pool again. No CI
    below two rows or without any excess."""
    pool = TailPool()
    for t in tails:
        pool.add(t)
    return pool.pooled()


class TailPool(msgspec.Struct):
    """Shapes' resampled tails pooled one by one (`pooled`): their rows, and the running sum
    of their resamples' sums, added in the order the shapes come. A slice's pool holds one
    resamples x COLUMNS array, not one per shape until the last (4,000 shapes held 370 MB)."""

    parts: list[FloatArray] = msgspec.field(default_factory=list)
    sums: FloatArray | None = None

    def add(self, tail: Resampled) -> None:
        """Pool one shape's resampled tail."""
        self.parts.append(tail.parts)
        if self.sums is None:
            self.sums = tail.sums.copy()
        else:
            self.sums += tail.sums

    def pooled(self) -> tuple[FloatArray, dict[Driver, float] | None, dict[Driver, Interval]]:
        """The pooled rows (canonical order), their shares and the shares' 95% CIs."""
        if self.sums is None:
            return np.zeros((0, COLUMNS)), None, {}
        rows = canonical_rows(np.concatenate(self.parts))
        sh = shares(rows)
        if len(rows) < 2 or sh is None:
            return rows, sh, {}
        totals = self.sums.sum(axis=1, keepdims=True)
        out = np.divide(self.sums, totals, out=np.zeros_like(self.sums), where=totals > 0)
        alpha = (1 - CI_LEVEL) / 2
        lo, hi = np.quantile(out, [alpha, 1 - alpha], axis=0)
        return rows, sh, {d: Interval(float(lo[i]), float(hi[i])) for i, d in enumerate(DRIVERS)}


def material(
    p50: float | None,
    p95: float | None,
    p99: float | None,
    n: int,
    th: Thresholds,
    review: Review,
    unblocked_p50: float | None = None,
) -> bool:
    """A tail matters when p95 > tail_ratio x p50, or a configured SLA is missed. The p50 is
    the lower of all requests' and of those not blocked behind adaptation: where most
    requests wait behind it, the wait raises the median too, and p95 / p50 alone would call
    a saturated tail immaterial."""
    if p50 is None or p95 is None:
        return False
    reference = p50 if unblocked_p50 is None else min(p50, unblocked_p50)
    if p95 > th.tail_ratio * reference:
        return True
    if within(p95, review.sla_p95_us) is False:
        return True
    return n >= th.min_samples_p99 and within(p99, review.sla_p99_us) is False


def canonical_rows(parts: FloatArray) -> FloatArray:
    """Rows in a canonical order, so the bootstrap does not depend on input row order."""
    if len(parts) == 0:
        return parts
    return parts[np.lexsort(parts.T[::-1])]


def _drivers(
    pool: TailPool,
    n: int,
    p50: float | None,
    p95: float | None,
    p99: float | None,
    unmeasured: Sequence[Driver],
    th: Thresholds,
    review: Review,
    unblocked_p50: float | None = None,
) -> TailDrivers:
    """Shares, their CIs and materiality of attributed tail parts."""
    parts, sh, ci = pool.pooled()
    # a driver not measured has no share: its zero would read as "measured, none"
    return TailDrivers(
        n=n,
        n_tail=len(parts),
        excess_us=float(parts.sum()),
        shares={d: v for d, v in (sh or {}).items() if d not in unmeasured},
        share_ci={d: v for d, v in ci.items() if d not in unmeasured},
        material=material(p50, p95, p99, n, th, review, unblocked_p50),
        p50_us=p50,
        p95_us=p95,
        unmeasured=tuple(unmeasured),
    )


def tail_drivers(
    t: TailRows, parts: FloatArray, th: Thresholds, review: Review, seed: int
) -> tuple[TailDrivers, Resampled] | None:
    """The tail drivers of one shape from its attributed parts, and its resampled tail (the
    pooled tail's stratum, `SliceTail`); None below the p95 evidence threshold or without
    latency (its requests record no arrival)."""
    if t.n < th.min_samples_p95 or t.p50_us is None:
        return None
    unmeasured = [d for d in MEASURED_FROM if t.measured(d) == 0]
    tail = resample(parts, th.bootstrap_resamples, seed)
    pool = TailPool()
    pool.add(tail)
    return _drivers(pool, t.n, t.p50_us, t.p95_us, t.p99_us, unmeasured, th, review), tail


RESAMPLING_THREADS = 4
"""Threads that resample a slice's shapes' tails at most (`shapes_drivers`), fewer on fewer
cores."""


def shapes_drivers(
    shapes: Sequence[tuple[TailRows, FloatArray, int]], th: Thresholds, review: Review
) -> list[tuple[TailDrivers, Resampled] | None]:
    """`tail_drivers` of each shape's (rows, attributed parts, seed), in their order. Two or
    more are resampled on threads: numpy's draws, counts and products release the GIL (the
    1M benchmark's 42 tails, 1.2 s on one core, take 1.5-1.9x less on two), and each shape
    draws from its own seed, so what a shape gets does not depend on the thread that ran it."""

    def one(shape: tuple[TailRows, FloatArray, int]) -> tuple[TailDrivers, Resampled] | None:
        rows, parts, seed = shape
        return tail_drivers(rows, parts, th, review, seed)

    threads = min(len(shapes), os.cpu_count() or 1, RESAMPLING_THREADS)
    if threads < 2:
        return [one(s) for s in shapes]
    with ThreadPoolExecutor(threads, thread_name_prefix="tail-resample") as pool:
        return list(pool.map(one, shapes))


class SliceTail(msgspec.Struct):
    """The slice's tail gathered shape by shape (`add`), for its drivers (`combine`): the
    evaluated shapes' resampled tails pooled as they come, and the drivers any of them left
    unmeasured."""

    pool: TailPool = msgspec.field(default_factory=TailPool)
    unmeasured: set[Driver] = msgspec.field(default_factory=set)

    def add(self, tail: Resampled, unmeasured: Sequence[Driver]) -> None:
        """One evaluated shape: its resampled tail (pooled when it has rows) and what it left
        unmeasured."""
        self.unmeasured.update(unmeasured)
        if len(tail.parts):
            self.pool.add(tail)


def combine(
    gathered: SliceTail,
    p50: float | None,
    p95: float | None,
    p99: float | None,
    n: int,
    th: Thresholds,
    review: Review,
    unblocked_p50: float | None = None,
) -> TailDrivers | None:
    """Slice-level drivers: every evaluated shape's attributed tail parts pooled (each against
    its own shape's p50 and p95; the CIs resample each shape's tail within it, `pooled`), with
    materiality judged on the slice's latency (and the p50 of its requests not blocked behind
    adaptation, `material`)."""
    if gathered.pool.sums is None:
        return None
    unmeasured = sorted(gathered.unmeasured)
    return _drivers(gathered.pool, n, p50, p95, p99, unmeasured, th, review, unblocked_p50)


class TailRows(msgspec.Struct, frozen=True):
    """A shape's tail requests with the raw size of each driver, before attribution."""

    n: int
    p50_us: float | None
    p95_us: float | None
    p99_us: float | None
    n_core: int
    n_mem: int
    raw: FloatArray
    """One row per tail request: excess, blocked, queueing, fallback, memory, core (us)."""
    sources: tuple[str, ...]
    n_queue: int = 0
    """ok requests that report their queue wait (0: timed by the client end to end)."""
    n_compute: int = 0
    """ok requests that report their compute."""

    def measured(self, driver: Driver) -> int:
        """How many ok requests carry what `driver` is measured from (0: not measurable)."""
        if driver in (Driver.BLOCKED_BEHIND_ADAPTATION, Driver.QUEUEING):
            return self.n_queue
        if driver is Driver.MAPPING_FALLBACK:
            return self.n_compute
        if driver is Driver.MEMORY_BURST:
            return min(self.n_mem, self.n_compute)
        return min(self.n_core, self.n_compute)


def tail_sql(budgets: dict[str, float], shape: str | None = None) -> str:
    """The SELECT of the slice's tail requests (of `shape`, or every shape) with the raw size
    of each driver, over the slice view and BLOCKED_TABLE; per-shape medians and p95 come from
    the same rows in the query, the memory budgets the plan states are literals. The analysis
    runs it over `load_slice`'s objects; an evidence pack defines them as CTEs and runs it too.

    excess = latency - p50(latency); blocked = queue - p50(queue) of a request blocked behind
    adaptation (`blocking.load_blocking`), queueing = the same of any other; fallback = compute
    excess of requests that ran `fallback`; memory = compute excess of requests whose peak memory
    exceeds the bucket's budget (1.5 x the shape's p50 memory without one); core = p50 compute
    on the request's core - p50 compute on all cores. Each is clipped at zero here; the
    attribution (`attribute`) clips them to the excess."""
    values = ", ".join(f"({literal(k)}, {float(v)!r})" for k, v in sorted(budgets.items()))
    budget_rows = (
        f"SELECT * FROM (VALUES {values}) b(shape, budget)"
        if budgets
        else "SELECT NULL::VARCHAR AS shape, NULL::DOUBLE AS budget WHERE false"
    )
    only = f"AND ok.shape = {literal(shape)}" if shape is not None else ""
    return f"""
        WITH ok AS (SELECT * FROM {SLICE_TABLE} WHERE status = 'ok'),
        s AS (
            -- the shape's quantiles as the slice's per-shape figures hold them: the latency
            -- grid's 50th and 95th points, the queue profile's 50th, compute's p50
            SELECT shape, n, lat[{LAT_P50}] AS lat50, lat[{LAT_P95}] AS lat95,
                que[{QUEUE_P50}] AS q50, com[1] AS c50, m50
            FROM {SHAPE_STATS} WHERE n > 0
        ),
        c AS (SELECT shape, core, c50_core FROM {CORE_STATS}),
        b AS ({budget_rows})
        SELECT ok.shape, s.n, ok.source_id, ok.line, ok.latency_us,
            ok.latency_us - s.lat50 AS excess,
            CASE WHEN bl.blocked_by IS NOT NULL
                 THEN greatest(ok.queue_us - s.q50, 0) ELSE 0 END AS blocked,
            CASE WHEN bl.blocked_by IS NULL
                 THEN greatest(ok.queue_us - s.q50, 0) ELSE 0 END AS queueing,
            CASE WHEN ok.variant = 'fallback'
                 THEN greatest(ok.compute_us - s.c50, 0) ELSE 0 END AS fallback,
            CASE WHEN ok.mem_peak_bytes > coalesce(b.budget, 1.5 * s.m50)
                 THEN greatest(ok.compute_us - s.c50, 0) ELSE 0 END AS memory,
            greatest(coalesce(c.c50_core - s.c50, 0), 0) AS core
        FROM ok JOIN s USING (shape)
        LEFT JOIN b ON b.shape = ok.shape
        LEFT JOIN c ON c.shape = ok.shape AND c.core = ok.core
        LEFT JOIN {BLOCKED_TABLE} bl ON bl.source_id = ok.source_id AND bl.line = ok.line
        WHERE ok.latency_us > s.lat95 {only}
        ORDER BY ok.shape, ok.latency_us, ok.source_id, ok.line
        """


PART_COLUMNS = ("excess", "blocked", "queueing", "fallback", "memory", "core")
"""The raw columns of `tail_sql`, in `TailRows.raw` order."""


def group_tails(t: pa.Table) -> dict[str, tuple[FloatArray, tuple[str, ...]]]:
    """`tail_sql` rows per shape: its raw parts (one row per tail request) and its sources."""
    out: dict[str, tuple[FloatArray, tuple[str, ...]]] = {}
    if t.num_rows == 0:
        return out
    raw = np.column_stack([t[c].to_numpy(zero_copy_only=False) for c in PART_COLUMNS])
    # each shape's rows at once (codes in the order shapes first come; a stable sort keeps
    # each shape's rows in theirs), and its sources by code: no Python object per request
    shapes = t["shape"].combine_chunks().dictionary_encode()
    codes = shapes.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(shapes.dictionary) + 1))
    sources = t["source_id"].combine_chunks().dictionary_encode()
    source_codes = sources.indices.to_numpy(zero_copy_only=False)
    names = sources.dictionary.to_pylist()
    for j, shape in enumerate(shapes.dictionary.to_pylist()):
        pick = order[bounds[j] : bounds[j + 1]]
        found = sorted(names[c] for c in np.unique(source_codes[pick]))
        out[str(shape)] = (raw[pick].astype(np.float64), tuple(found))
    return out


def tail_rows(
    con: Connection, budgets: dict[str, float], shapes: Sequence[ShapeRow]
) -> dict[str, TailRows]:
    """Per shape: its ok requests above its p95 latency and how far each driver pushed them
    (`tail_sql`)."""
    if not any(s.n for s in shapes):
        return {}
    tails = group_tails(con.sql(tail_sql(budgets)).to_arrow_table())
    out = {}
    for s in shapes:
        if not s.n:
            continue
        raw, src = tails.get(s.shape, (np.zeros((0, COLUMNS)), ()))
        out[s.shape] = TailRows(
            n=s.n,
            p50_us=s.latency.p50,
            p95_us=s.latency.p95,
            p99_us=s.latency.p99,
            n_core=s.n_core,
            n_mem=s.n_mem,
            raw=raw.reshape(-1, COLUMNS),
            sources=src,
            n_queue=s.n_queue,
            n_compute=s.n_compute,
        )
    return out


HEAVY_TAIL = 3.0
"""The slice's p99 over its shapes' medians from which its tail is heavy. A log-normal latency
whose p95 sits at the materiality bound (`tail_ratio`, 1.5 x p50) has its p99 at 1.77 x p50;
3 x is where a second mode (a wait, a fallback, a recompile) holds the slowest 1%, not the
spread of one mode (docs/metrics.md, "Judgements")."""
TAIL_Q = 0.99
TOP_SHARE = 0.02
"""The share of the slice's largest normalised latencies read for the p99 and its bootstrap
(plus TOP_MARGIN): a resample's p99 falls below them with a probability under 1e-20 from 1,000
requests up (it lies within a few sqrt(0.0099 n) ranks of 0.99 n)."""
TOP_MARGIN = 200
DRIVER_CLASSES = frozenset(BottleneckClass(d.value) for d in DRIVERS if d is not Driver.RESIDUAL)
"""The classes that name a tail driver."""


class TailRatio(msgspec.Struct, frozen=True):
    """The slice's tail against its shapes' medians: the p99 of each request's latency over its
    shape's p50 (shapes with at least `min_samples_p95` requests with a latency), so a mix of
    small and large shapes is not a tail."""

    n: int
    """Requests with a measured latency in those shapes."""
    measured: int
    """Ok requests with a measured latency, every shape (0: none records its arrival)."""
    ratio: float | None
    """None below `min_samples_p99` requests."""
    ci: Interval | None


def ratio_sql(min_n: int, limit: int | None = None) -> str:
    """Each ok request's latency over its shape's p50 (the shapes' figures of `SHAPE_STATS`),
    shapes of at least `min_n` requests: how many there are and how many ok requests have a
    latency at all (`limit` None), or the `limit` largest."""
    head = (
        "SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM ok)"
        if limit is None
        else f"SELECT x FROM r ORDER BY x DESC LIMIT {int(limit)}"
    )
    return f"""
        WITH s AS (
            SELECT shape, lat[{LAT_P50}] AS p50 FROM {SHAPE_STATS}
            WHERE n >= {int(min_n)} AND lat[{LAT_P50}] > 0
        ),
        ok AS (
            SELECT shape, latency_us FROM {SLICE_TABLE}
            WHERE status = 'ok' AND latency_us IS NOT NULL
        ),
        r AS (SELECT ok.latency_us / s.p50 AS x FROM ok JOIN s USING (shape))
        {head}"""


class TopSample:
    """The largest `len(top)` of n sorted values, read by rank (a rank below them reads the
    smallest held: `TOP_SHARE` makes that a rank no resample's p99 draws)."""

    def __init__(self, n: int, top: FloatArray):
        self.n, self.top = n, np.sort(np.asarray(top, dtype=np.float64))

    def __len__(self) -> int:
        """The number of values."""
        return self.n

    def at(self, ranks: IntArray) -> FloatArray:
        """The values at these ranks."""
        idx = np.maximum(ranks - (self.n - len(self.top)), 0)
        return np.asarray(self.top[idx], dtype=np.float64)

    def prefetch(self, ranks: IntArray) -> None:
        """Nothing to read ahead: the values are here."""


def tail_ratio(con: Connection, th: Thresholds, seed: int) -> TailRatio:
    """The slice's p99 over its shapes' medians (`TailRatio`) with its percentile bootstrap 95%
    CI (`th.bootstrap_resamples` resamples, `seed`; each resample's p99 drawn exactly from its
    order statistics, `resampled_quantile`; the shapes' medians are held at their values)."""
    row = con.execute(ratio_sql(th.min_samples_p95)).fetchone()
    n, measured = (int(row[0]), int(row[1])) if row else (0, 0)
    if n < max(th.min_samples_p99, 1):
        return TailRatio(n, measured, None, None)
    k = min(n, math.ceil(TOP_SHARE * n) + TOP_MARGIN)
    top = [float(v) for (v,) in con.execute(ratio_sql(th.min_samples_p95, k)).fetchall()]
    sample = TopSample(n, np.array(top))
    draws = resampled_quantile(sample, TAIL_Q, th.bootstrap_resamples, np.random.default_rng(seed))
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return TailRatio(n, measured, quantile(sample, TAIL_Q), Interval(float(lo), float(hi)))


TAIL_SHARE = 0.05
"""The share of requests a p95 tail holds."""


def judge(
    t: TailRatio | None,
    driver: BottleneckClass | None,
    th: Thresholds,
    blocked: Evidence | None = None,
) -> Judgement | None:
    """The tail's weight: at risk when the slice's p99 over its shapes' medians is beyond
    HEAVY_TAIL with its whole CI, naming the driver the pooled tail's class gives (or saying no
    driver decides it); healthy otherwise; not judged below `min_samples_p99` requests with a
    measured latency, or without one (None: no request). Without a latency (profiler spans),
    at risk when blocking behind adaptation decided the slice's tail from the blocked share
    (`blocked`: its evidence, `classify.read_blocked_share`), else not judged. The target is
    the SLA's judgement: this one reads the tail's shape, whatever the target."""
    family = JudgementFamily.TAIL
    if t is None:
        return None
    if t.ratio is None:
        if not t.measured and blocked is not None and blocked.value is not None:
            ci = (blocked.ci.low, blocked.ci.high) if blocked.ci else None
            return Judgement(
                family,
                Status.AT_RISK,
                StatusReason.TAIL_BLOCKED,
                blocked.value,
                FigureUnit.SHARE,
                TAIL_SHARE,
                blocked.n,
                ci,
            )
        if not t.measured:  # profiler spans: no arrival, no latency
            return Judgement(family, Status.NOT_JUDGED, StatusReason.NO_REQUESTS)
        return Judgement(
            family,
            Status.NOT_JUDGED,
            StatusReason.TAIL_FEW_SAMPLES,
            float(t.n),
            FigureUnit.COUNT,
            float(th.min_samples_p99),
            t.n,
        )
    heavy = t.ci is not None and t.ci.low > HEAVY_TAIL
    named = driver if driver in DRIVER_CLASSES else None
    if not heavy:
        state, reason = Status.HEALTHY, StatusReason.TAIL_LIGHT
    else:
        state = Status.AT_RISK
        reason = StatusReason.TAIL_HEAVY if named else StatusReason.TAIL_UNEXPLAINED
    subject = str(named) if heavy and named else ""
    return Judgement(
        family, state, reason, t.ratio, FigureUnit.RATIO, HEAVY_TAIL, t.n, t.ci, subject
    )
