"""What a model server's own metrics say (table `metric_sample`, scraped from /metrics or
exported over OTLP): per interval between scrapes, the server-side queue share of request time,
mean queue wait and compute per request, average batch size (inferences / executions), GPU
utilisation; quantiles from histogram buckets (approximate, with the bucket they fall in) and
from summaries (as exported).

Counters are cumulative: an interval's value is the difference between two scrapes; a counter
that went down was reset (the server restarted) and the interval counts from zero, which is
said. A series with one scrape gives the totals since the server started. Files of one timed
scrape each form one series across files (one `curl` per file); a file holding a series is
its own (one server's: several are replicas), in its scrape order. The metric names are the
servers' own (VOCABULARIES).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from mapreport.core.connection import Connection

Series = tuple[str, str]
"""(metric family, sample suffix): "" is a counter itself, "_sum" / "_count" a histogram's."""


class Vocabulary(msgspec.Struct, frozen=True):
    """A server's metric names for the quantities an interval needs."""

    server: str
    requests: Series
    failures: Series | None
    request_time: tuple[Series, ...]
    queue_time: tuple[Series, ...]
    compute_time: tuple[Series, ...]
    inferences: Series | None
    executions: Series | None
    time_us: float
    """Microseconds per unit of the time series."""
    gpu: str | None
    """The server-wide gauge of GPU utilisation (a fraction), when the server exports one."""
    histograms: tuple[tuple[str, str, float], ...] = ()
    """(metric, what it measures, us per unit): approximate quantiles from buckets."""
    summaries: tuple[tuple[str, str, float], ...] = ()
    """(metric, what it measures, us per unit): quantiles as exported."""
    counts: tuple[Series | None, Series | None, Series | None] = (None, None, None)
    """The observations behind request, queue and compute time when each histogram counts
    its own (vLLM); None: the successful requests."""

    def series(self) -> tuple[Series, ...]:
        """Every counter-like series the intervals read."""
        one = (self.requests, self.failures, self.inferences, self.executions)
        return (
            *(s for s in one if s is not None),
            *self.request_time,
            *self.queue_time,
            *self.compute_time,
            *(c for c in self.counts if c is not None),
        )


TRITON = Vocabulary(
    server="Triton",
    requests=("nv_inference_request_success", ""),
    failures=("nv_inference_request_failure", ""),
    request_time=(("nv_inference_request_duration_us", ""),),
    queue_time=(("nv_inference_queue_duration_us", ""),),
    compute_time=(
        ("nv_inference_compute_input_duration_us", ""),
        ("nv_inference_compute_infer_duration_us", ""),
        ("nv_inference_compute_output_duration_us", ""),
    ),
    inferences=("nv_inference_count", ""),
    executions=("nv_inference_exec_count", ""),
    time_us=1.0,
    gpu="nv_gpu_utilization",
    histograms=(("nv_inference_first_response_histogram_ms", "first response", 1e3),),
    summaries=(
        ("nv_inference_request_summary_us", "request", 1.0),
        ("nv_inference_queue_summary_us", "queue", 1.0),
        ("nv_inference_compute_infer_summary_us", "compute (infer)", 1.0),
    ),
)
VLLM = Vocabulary(
    server="vLLM",
    requests=("vllm:e2e_request_latency_seconds", "_count"),
    failures=None,
    request_time=(("vllm:e2e_request_latency_seconds", "_sum"),),
    queue_time=(("vllm:request_queue_time_seconds", "_sum"),),
    compute_time=(("vllm:request_inference_time_seconds", "_sum"),),
    inferences=None,
    executions=None,
    time_us=1e6,
    counts=(
        ("vllm:e2e_request_latency_seconds", "_count"),
        ("vllm:request_queue_time_seconds", "_count"),
        ("vllm:request_inference_time_seconds", "_count"),
    ),
    gpu=None,
    histograms=(
        ("vllm:e2e_request_latency_seconds", "request", 1e6),
        ("vllm:request_queue_time_seconds", "queue", 1e6),
        ("vllm:time_to_first_token_seconds", "time to first token", 1e6),
        ("vllm:time_per_output_token_seconds", "time per output token", 1e6),
    ),
)
VOCABULARIES = (TRITON, VLLM)
QUANTILES = (0.5, 0.95, 0.99)


class Point(msgspec.Struct, frozen=True):
    """One scrape of the slice's model: where and when, and each series' summed value."""

    source_id: str
    scrape: int
    time_us: float | None
    values: dict[Series, float]


class MetricWindow(msgspec.Struct, frozen=True):
    """The server's view of one interval between scrapes (or since it started)."""

    start_us: float | None
    end_us: float | None
    since_start: bool
    """True: one scrape alone, its totals since the server started."""
    reset: bool
    """A counter went down inside it (a restart): it counts from the reset."""
    requests: float
    failures: float | None
    queue_share: float | None
    """Mean queue time / mean request time."""
    queue_mean_us: float | None
    """Queue time per successful request (per queued request where the server counts it)."""
    compute_mean_us: float | None
    request_mean_us: float | None
    batch_mean: float | None
    """Inferences / executions."""
    gpu_utilization: float | None
    """The GPU gauge at its end scrape (mean over the server's GPUs)."""

    @property
    def throughput_per_s(self) -> float | None:
        """Successful requests per second (timed intervals only)."""
        if self.since_start or self.start_us is None or self.end_us is None:
            return None
        span = (self.end_us - self.start_us) / 1e6
        return self.requests / span if span > 0 else None


class MetricQuantile(msgspec.Struct, frozen=True):
    """A quantile the server's metrics give: exact as a summary exports it, or approximate
    from histogram buckets (then the bucket it lies in)."""

    metric: str
    what: str
    quantile: float
    value_us: float | None
    approximate: bool
    lower_us: float | None = None
    upper_us: float | None = None
    """The bucket's bounds (upper None: the +Inf bucket; the value is then its lower bound)."""
    n: int = 0


class Telemetry(msgspec.Struct, frozen=True):
    """A slice's server-side metrics."""

    server: str
    scrapes: int
    windows: tuple[MetricWindow, ...]
    total: MetricWindow | None
    """Every window together (their deltas summed)."""
    quantiles: tuple[MetricQuantile, ...]
    resets: int
    unmeasured: tuple[str, ...]
    """Quantities this server's metrics do not give (batch size, GPU utilisation)."""
    sources: tuple[str, ...]


def _matches(series: Series, metric: str, sample: str, kind: str) -> bool:
    family, suffix = series
    if metric != family:
        return False
    if suffix:
        return sample == family + suffix
    return kind == "counter" and sample in (family, family + "_total")


def load_points(con: Connection, workload: str, slice_: str, vocab: Vocabulary) -> list[Point]:
    """The slice's scrapes, each series summed over its label sets (versions, GPUs)."""
    wanted = vocab.series()
    rows = con.execute(
        POINT_ROWS, {"w": workload, "s": slice_, "metrics": sorted({m for m, _ in wanted})}
    ).fetchall()
    return points_of(rows, vocab)


POINT_ROWS = """
    SELECT source_id, scrape, min(scrape_us) AS scrape_us, metric, sample, type,
        fsum(value) AS value
    FROM metric_sample
    WHERE workload = $w AND slice = $s AND le IS NULL AND quantile IS NULL
        AND value IS NOT NULL AND list_contains($metrics, metric)
    GROUP BY source_id, scrape, metric, sample, type
    ORDER BY source_id, scrape, metric, sample, type
"""
"""Each series' value per scrape, summed over its label sets (`load_points`; an evidence pack
selects the same rows)."""


def points_of(rows: Iterable[Sequence[Any]], vocab: Vocabulary) -> list[Point]:
    """Scrape points from POINT_ROWS rows: (source, scrape, time, metric, sample, type, value)."""
    wanted = vocab.series()
    points: dict[tuple[str, int], Point] = {}
    for source, scrape, t, metric, sample, kind, v in rows:
        key = (str(source), int(scrape))
        p = points.setdefault(key, Point(key[0], key[1], t, {}))
        for s in wanted:
            if _matches(s, metric, sample, kind):
                p.values[s] = p.values.get(s, 0.0) + float(v)
    return [p for p in points.values() if vocab.requests in p.values]


def vocabulary_of(con: Connection, workload: str, slice_: str) -> Vocabulary | None:
    """The server whose request counter, histograms or summaries the slice's samples hold."""
    names = {
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT metric FROM metric_sample WHERE workload = $w AND slice = $s",
            {"w": workload, "s": slice_},
        ).fetchall()
    }
    return next(
        (
            v
            for v in VOCABULARIES
            if v.requests[0] in names or names & {m for m, _, _ in (*v.histograms, *v.summaries)}
        ),
        None,
    )


def series_of(points: Sequence[Point]) -> list[list[Point]]:
    """Points in the order they were scraped: one series over every file when each file is one
    timed scrape (`curl -o` per scrape), else one per file in its scrape order (a file that
    holds a series is one server's: several such files are several replicas, whose counters
    must not be subtracted from each other)."""
    by_file: dict[str, list[Point]] = {}
    for p in points:
        by_file.setdefault(p.source_id, []).append(p)
    timed = all(p.time_us is not None for p in points)
    if points and timed and all(len(ps) == 1 for ps in by_file.values()):
        return [sorted(points, key=lambda p: (p.time_us, p.source_id, p.scrape))]
    return [sorted(ps, key=lambda p: p.scrape) for _, ps in sorted(by_file.items())]


def _delta(before: Point | None, after: Point, s: Series | None) -> tuple[float | None, bool]:
    """(the series' increase, whether it was reset) between two points."""
    if s is None or s not in after.values:
        return None, False
    now = after.values[s]
    if before is None:
        return now, False
    was = before.values.get(s)
    if was is None:
        return None, False
    return (now, True) if now < was else (now - was, False)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _sum(parts: Iterable[tuple[float | None, bool]]) -> tuple[float | None, bool]:
    """The parts a server exports, added (compute input + infer + output); None: none is."""
    values = list(parts)
    present = [v for v, _ in values if v is not None]
    return (math.fsum(present) if present else None), any(r for _, r in values)


class _Deltas(msgspec.Struct, frozen=True):
    requests: float
    failures: float | None
    request_us: float | None
    queue_us: float | None
    compute_us: float | None
    inferences: float | None
    executions: float | None
    reset: bool
    n_request: float | None = None
    n_queue: float | None = None
    n_compute: float | None = None


def _deltas(before: Point | None, after: Point, v: Vocabulary) -> _Deltas:
    req, r1 = _delta(before, after, v.requests)
    fail, r2 = _delta(before, after, v.failures)
    rt, r3 = _sum(_delta(before, after, s) for s in v.request_time)
    qt, r4 = _sum(_delta(before, after, s) for s in v.queue_time)
    ct, r5 = _sum(_delta(before, after, s) for s in v.compute_time)
    inf, r6 = _delta(before, after, v.inferences)
    exe, r7 = _delta(before, after, v.executions)
    counted = [_delta(before, after, c) if c is not None else (req, False) for c in v.counts]
    scale = v.time_us
    return _Deltas(
        req or 0.0,
        fail,
        None if rt is None else rt * scale,
        None if qt is None else qt * scale,
        None if ct is None else ct * scale,
        inf,
        exe,
        any((r1, r2, r3, r4, r5, r6, r7, *(r for _, r in counted))),
        *(n for n, _ in counted),
    )


def _window(
    d: _Deltas, start: float | None, end: float | None, since: bool, gpu: float | None
) -> MetricWindow:
    request_mean = _ratio(d.request_us, d.n_request)
    queue_mean = _ratio(d.queue_us, d.n_queue)
    return MetricWindow(
        start_us=start,
        end_us=end,
        since_start=since,
        reset=d.reset,
        requests=d.requests,
        failures=d.failures,
        # mean over mean: the two times may count different requests (vLLM's histograms)
        queue_share=_ratio(queue_mean, request_mean),
        queue_mean_us=queue_mean,
        compute_mean_us=_ratio(d.compute_us, d.n_compute),
        request_mean_us=request_mean,
        batch_mean=_ratio(d.inferences, d.executions),
        gpu_utilization=gpu,
    )


def _added(parts: Sequence[_Deltas]) -> _Deltas:
    def total(xs: list[float | None]) -> float | None:
        return None if any(x is None for x in xs) else math.fsum(x for x in xs if x is not None)

    return _Deltas(
        sum(p.requests for p in parts),
        total([p.failures for p in parts]),
        total([p.request_us for p in parts]),
        total([p.queue_us for p in parts]),
        total([p.compute_us for p in parts]),
        total([p.inferences for p in parts]),
        total([p.executions for p in parts]),
        any(p.reset for p in parts),
        total([p.n_request for p in parts]),
        total([p.n_queue for p in parts]),
        total([p.n_compute for p in parts]),
    )


def windows(
    series: Sequence[Sequence[Point]], v: Vocabulary, gpu: dict[tuple[str, int], float]
) -> tuple[list[MetricWindow], MetricWindow | None]:
    """Each interval's figures, and all of them together."""
    out, parts = [], []
    for points in series:
        pairs: list[tuple[Point | None, Point]] = (
            [(None, points[0])] if len(points) == 1 else list(itertools.pairwise(points))
        )
        for before, after in pairs:
            d = _deltas(before, after, v)
            start = before.time_us if before is not None else None
            g = gpu.get((after.source_id, after.scrape))
            out.append(_window(d, start, after.time_us, before is None, g))
            parts.append(d)
    if not parts:
        return out, None
    starts = [w.start_us for w in out if w.start_us is not None]
    ends = [w.end_us for w in out if w.end_us is not None]
    gpus = [w.gpu_utilization for w in out if w.gpu_utilization is not None]
    total = _window(
        _added(parts),
        min(starts) if starts else None,
        max(ends) if ends else None,
        all(w.since_start for w in out),
        math.fsum(gpus) / len(gpus) if gpus else None,
    )
    return out, total


def gpu_points(con: Connection, metric: str, sources: list[str]) -> dict[tuple[str, int], float]:
    """The server-wide GPU gauge per scrape of the given files (mean over their GPUs)."""
    rows = con.execute(
        """
        SELECT source_id, scrape, favg(value) FROM metric_sample
        WHERE metric = $m AND workload = '' AND value IS NOT NULL
            AND list_contains($ids, source_id)
        GROUP BY source_id, scrape
        """,
        {"m": metric, "ids": sources},
    ).fetchall()
    return {(str(s), int(k)): float(v) for s, k, v in rows}


def bucket_quantile(
    buckets: Sequence[tuple[float | None, float]], q: float
) -> tuple[float | None, float | None, float | None]:
    """Prometheus's histogram_quantile: (estimate, bucket lower, bucket upper) from cumulative
    (upper bound, count) pairs, +Inf as None last; linear within the bucket; in the +Inf
    bucket, its lower bound (the highest finite one)."""
    finite = sorted((b, c) for b, c in buckets if b is not None)
    total = next((c for b, c in buckets if b is None), finite[-1][1] if finite else 0.0)
    if total <= 0:
        return None, None, None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in finite:
        if count >= rank:
            inside = count - below
            frac = (rank - below) / inside if inside > 0 else 1.0
            return lower + (bound - lower) * frac, lower, bound
        lower, below = bound, count
    return (lower if finite else None), lower, None


def histogram_quantiles(
    con: Connection, workload: str, slice_: str, v: Vocabulary, series: Sequence[Sequence[Point]]
) -> list[MetricQuantile]:
    """Approximate p50/p95/p99 of each histogram over the scrape window (the buckets' growth
    between the first and last scrape of the longest series; one scrape: since start)."""
    longest = max(series, key=len, default=[])
    if not longest:
        return []
    first, last = longest[0], longest[-1]
    ends = [(first.source_id, first.scrape), (last.source_id, last.scrape)]
    out = []
    for metric, what, scale in v.histograms:
        rows = con.execute(
            """
            SELECT source_id, scrape, le, fsum(value) FROM metric_sample
            WHERE workload = $w AND slice = $s AND metric = $m AND sample = $b
                AND value IS NOT NULL
            GROUP BY source_id, scrape, le
            """,
            {"w": workload, "s": slice_, "m": metric, "b": metric + "_bucket"},
        ).fetchall()
        at: dict[tuple[str, int], dict[float | None, float]] = {}
        for source, scrape, le, value in rows:
            at.setdefault((str(source), int(scrape)), {})[le] = float(value)
        end = at.get(ends[1])
        if not end:
            continue
        start = at.get(ends[0]) if len(longest) > 1 else None
        grown = {b: c - (start or {}).get(b, 0.0) for b, c in end.items()}
        if start is not None and any(c < 0 for c in grown.values()):
            grown = end  # reset inside the window: the buckets since the reset
        n = grown.get(None, max(grown.values(), default=0.0))
        for q in QUANTILES:
            est, lo, hi = bucket_quantile(list(grown.items()), q)
            out.append(
                MetricQuantile(
                    metric,
                    what,
                    q,
                    None if est is None else est * scale,
                    True,
                    None if lo is None else lo * scale,
                    None if hi is None else hi * scale,
                    int(n),
                )
            )
    return out


_SUMMARIES = """
WITH s AS (
    SELECT metric, source_id, scrape, scrape_us, labels, sample, quantile, value
    FROM metric_sample WHERE workload = $w AND slice = $s AND list_contains($ms, metric)
), last AS (
    SELECT metric, source_id, scrape FROM (
        SELECT metric, source_id, scrape, row_number() OVER (
            PARTITION BY metric ORDER BY scrape_us DESC NULLS LAST, source_id DESC, scrape DESC
        ) AS k FROM s
    ) WHERE k = 1
), counts AS (
    SELECT metric, labels, n FROM (
        SELECT s.metric, s.labels, s.value AS n, row_number() OVER (
            PARTITION BY s.metric ORDER BY s.value DESC, s.labels
        ) AS k
        FROM s JOIN last USING (metric, source_id, scrape) WHERE s.sample = s.metric || '_count'
    ) WHERE k = 1
)
SELECT s.metric, s.quantile, s.value, counts.n FROM s JOIN last USING (metric, source_id, scrape)
JOIN counts ON counts.metric = s.metric AND s.labels IS NOT DISTINCT FROM counts.labels
WHERE s.quantile IS NOT NULL ORDER BY s.metric, s.quantile
"""
"""Per summary metric: its quantiles in its last scrape, of the label set with the most
observations there."""


def summary_quantiles(
    con: Connection, workload: str, slice_: str, v: Vocabulary
) -> list[MetricQuantile]:
    """Each summary's quantiles as the last scrape exports them (of its label set with the
    most observations: quantiles of several sets cannot be added up), every summary in one
    statement, in the vocabulary's order."""
    if not v.summaries:
        return []
    by_metric: dict[str, list[tuple[Any, Any, Any]]] = {}
    params = {"w": workload, "s": slice_, "ms": [m for m, _, _ in v.summaries]}
    for metric, q, value, n in con.execute(_SUMMARIES, params).fetchall():
        by_metric.setdefault(str(metric), []).append((q, value, n))
    out = []
    for metric, what, scale in v.summaries:
        for q, value, n in by_metric.get(metric, ()):
            if n:
                val = None if value is None or math.isnan(value) else float(value) * scale
                out.append(MetricQuantile(metric, what, float(q), val, False, n=int(n)))
    return out


def telemetry(con: Connection, workload: str, slice_: str) -> Telemetry | None:
    """The slice's server-side metrics; None when it has none of a known server's."""
    v = vocabulary_of(con, workload, slice_)
    if v is None:
        return None
    points = load_points(con, workload, slice_, v)
    series = series_of(points)
    sources = sorted({p.source_id for p in points})
    gpu = gpu_points(con, v.gpu, sources) if v.gpu else {}
    ws, total = windows(series, v, gpu)
    unmeasured = []
    if v.executions is None or not any(v.executions in p.values for p in points):
        unmeasured.append("batch_size")
    if not gpu:
        unmeasured.append("gpu_utilization")
    quantiles = histogram_quantiles(con, workload, slice_, v, series)
    quantiles += summary_quantiles(con, workload, slice_, v)
    if not points and not quantiles:
        return None
    if not points:
        unmeasured.insert(0, "requests")
    return Telemetry(
        server=v.server,
        scrapes=len(points),
        windows=tuple(ws),
        total=total,
        quantiles=tuple(quantiles),
        resets=sum(w.reset for w in ws),
        unmeasured=tuple(unmeasured),
        sources=tuple(sources),
    )


def vocabulary_named(server: str) -> Vocabulary:
    """The vocabulary of a server by its name (an evidence pack names it); ValueError for a
    name no vocabulary has."""
    for v in VOCABULARIES:
        if v.server == server:
            return v
    known = ", ".join(v.server for v in VOCABULARIES)
    raise ValueError(f"unknown server {server!r} (known: {known})")
