"""Intervals that hold under bursty noise (docs/compare.md, "Bursty noise"): the latency
autocorrelation across a side's consecutive requests, the block length where it has died out,
and a moving-block bootstrap of a quantile over requests in time order.

Contention on a shared machine hits consecutive requests together: their latencies are
correlated, and an interval that resamples them one by one claims more independent evidence
than the run holds. Resampling blocks of consecutive requests keeps that correlation inside
each resample, so the interval widens by as much as the bursts cost.
"""

from __future__ import annotations

import math
import warnings
from enum import StrEnum

import msgspec
import numpy as np

from mapreport.analysis.base.stats import SortedArray, quantile, resampled_quantile


class LatencyBasis(StrEnum):
    """What a compared request's latency is: arrival to end of compute where both sides record
    arrivals, else each request's span (start to end of compute, as a profiler trace's request
    span gives it)."""

    END_TO_END = "end_to_end"
    SPAN = "span"


MAX_LAG = 50
"""The longest lag whose autocorrelation is estimated (and the longest block)."""
QUIET = 5
"""Consecutive lags whose autocorrelation must all be under the band for it to have died out
(a single lag under it between bursts is not the end of them)."""
MIN_BLOCKS = 4
"""A shape's block holds at most a quarter of its requests: a resample draws 4 or more."""
CHUNK = 4_000_000
"""Resampled values drawn at once (memory bound of the block bootstrap)."""


class BlockChoice(msgspec.Struct, frozen=True):
    """A side's latency autocorrelation across consecutive requests and the block length
    chosen from it."""

    n: int
    """Requests of the series (the side's ok requests in time order)."""
    acf: tuple[float, ...]
    """Autocorrelation at lags 1, 2, ... of each request's log latency less its shape's
    median log latency (what is left once the shape mix is taken out)."""
    band: float
    """1.96 / sqrt(n): the autocorrelation of independent requests stays under it 95% of the
    time."""
    length: int
    """The first lag from which `QUIET` consecutive lags' autocorrelations are all under
    `band` (1: none was above it early on; the requests are taken as independent)."""

    @property
    def lag1(self) -> float | None:
        """The autocorrelation of consecutive requests (None: under 3 requests)."""
        return self.acf[0] if self.acf else None


INDEPENDENT = BlockChoice(0, (), 1.0, 1)
"""No series estimated: every request its own block."""


def autocorrelation(x: np.ndarray, max_lag: int) -> np.ndarray:
    """The sample autocorrelation of x at lags 1..max_lag (biased estimator: each lag's
    covariance over n, as the white-noise band assumes); zeros for a constant series."""
    n = len(x)
    d = x - x.mean()
    var = float(d @ d)
    if n < 3 or var <= 0:
        return np.zeros(max(0, min(max_lag, n - 1)))
    return np.array([float(d[:-k] @ d[k:]) / var for k in range(1, min(max_lag, n - 1) + 1)])


def residuals(log_latency: np.ndarray, shapes: np.ndarray) -> np.ndarray:
    """Each request's log latency less its shape's median log latency (requests in time
    order; `shapes` an integer code per request)."""
    out = np.empty_like(log_latency)
    for code in np.unique(shapes):
        mine = shapes == code
        out[mine] = log_latency[mine] - np.median(log_latency[mine])
    return out


def choose_block(series: np.ndarray, max_lag: int = MAX_LAG) -> BlockChoice:
    """The block length of a series of residuals in time order: the first lag from which the
    autocorrelation stays under the white-noise band for `QUIET` lags, capped at `max_lag` and
    at a quarter of the series."""
    n = len(series)
    if n < 8:
        return BlockChoice(n, (), 1.0, 1)
    band = 1.96 / math.sqrt(n)
    acf = autocorrelation(series, min(max_lag, n // MIN_BLOCKS))
    inside = acf < band
    length = next(
        (k for k in range(1, len(acf) + 1) if inside[k - 1 : k - 1 + QUIET].all()), len(acf)
    )
    return BlockChoice(n, tuple(float(r) for r in acf), band, max(1, length))


def shape_block(length: int, n_shape: int, n_side: int) -> int:
    """A shape's block, in its own requests: the side's block length covers `length`
    consecutive requests of the side, of which the shape holds its share; at most a quarter of
    the shape's requests."""
    if length <= 1 or n_side <= 0:
        return 1
    return max(1, min(math.ceil(length * n_shape / n_side), n_shape // MIN_BLOCKS))


def block_quantiles(
    x: np.ndarray, q: float, block: int, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """The q-quantile of `resamples` moving-block bootstrap resamples of x (values in time
    order): each resample joins blocks of `block` consecutive values from uniform starts,
    cut to len(x). A block of 1 is the ordinary bootstrap, drawn exactly from the order
    statistics (`stats.resampled_quantile`)."""
    n = len(x)
    if block <= 1 or n < 2:
        return resampled_quantile(SortedArray(np.sort(x)), q, resamples, rng)
    block = min(block, n)
    k = math.ceil(n / block)
    starts = rng.integers(0, n - block + 1, size=(resamples, k))
    step = np.arange(block)
    out = np.empty(resamples, dtype=np.float64)
    per = max(1, CHUNK // n)
    for lo in range(0, resamples, per):
        idx = (starts[lo : lo + per, :, None] + step).reshape(-1, k * block)[:, :n]
        out[lo : lo + per] = np.quantile(x[idx], q, axis=1)
    return out


def ratio_draws(
    a: np.ndarray,
    b: np.ndarray,
    q: float,
    resamples: int,
    seed: int,
    blocks: tuple[int, int] = (1, 1),
) -> tuple[float, np.ndarray]:
    """Q_q(B) / Q_q(A) and its `resamples` bootstrap draws (each side resampled on its own, in
    blocks of `blocks` consecutive requests; values in time order; a draw over a zero
    quantile is not finite)."""
    rng = np.random.default_rng(seed)
    ra = block_quantiles(a, q, blocks[0], resamples, rng)
    rb = block_quantiles(b, q, blocks[1], resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = rb / ra
    point = quantile(SortedArray(np.sort(b)), q) / quantile(SortedArray(np.sort(a)), q)
    return float(point), ratios


def summarize(point: float, draws: np.ndarray) -> tuple[float, tuple[float, float], float]:
    """A ratio, the percentile 95% CI of its finite draws, and the two-sided bootstrap
    p-value against 1 (twice the smaller share of draws on either side of 1, with the +1
    correction)."""
    ratios = draws[np.isfinite(draws)]
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    below = (np.sum(ratios <= 1.0) + 1) / (len(ratios) + 1)
    above = (np.sum(ratios >= 1.0) + 1) / (len(ratios) + 1)
    return point, (float(lo), float(hi)), float(min(1.0, 2 * min(below, above)))


def ratio_interval(
    a: np.ndarray,
    b: np.ndarray,
    q: float,
    resamples: int,
    seed: int,
    blocks: tuple[int, int] = (1, 1),
) -> tuple[float, tuple[float, float], float]:
    """Q_q(B) / Q_q(A), its percentile bootstrap 95% CI and p-value against 1
    (`ratio_draws`, `summarize`)."""
    return summarize(*ratio_draws(a, b, q, resamples, seed, blocks))


MIN_SHIFT_SHAPES = 3
"""Shapes a quantile needs tested before the run's shift is read from them: with fewer, one
shape's own change would be most of the shift."""


class RunShift(msgspec.Struct, frozen=True):
    """What moved every shape of one run against the other at one quantile: the median of the
    shapes' ratios, with its bootstrap CI (the per-resample median of their draws). With one
    run a side, a shift of the whole run cannot be told from a change of the machine between
    the runs (load, clocks, a neighbour): each shape is tested against it."""

    quantile: str
    ratio: float
    ci: tuple[float, float]
    shapes: int

    @property
    def moved(self) -> bool:
        """The CI excludes 1."""
        return not self.ci[0] <= 1.0 <= self.ci[1]


def run_shift(
    quantile: str, points: list[float], draws: list[np.ndarray]
) -> tuple[RunShift, float, np.ndarray]:
    """The run's shift at a quantile from its tested shapes' ratios and draws: the shift, its
    point and its draws (for the shapes' tests against it)."""
    stack = np.vstack(draws)
    stack = np.where(np.isfinite(stack), stack, np.nan)
    with warnings.catch_warnings():  # a resample no shape drew a finite ratio in stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        shifted = np.nanmedian(stack, axis=0)
    point = float(np.median(points))
    _, ci, _ = summarize(point, shifted)
    return RunShift(quantile, point, ci, len(points)), point, shifted


BAND = 0.05
"""Half-width, in quantile levels, of the requests whose parts explain a quantile's move."""


def band_means(
    latency: np.ndarray, queue: np.ndarray, compute: np.ndarray, q: float
) -> tuple[float, float]:
    """The mean queue wait and mean compute of the requests whose latency ranks within `BAND`
    of the q-quantile (at least one request): the parts of a request at that quantile."""
    n = len(latency)
    order = np.argsort(latency, kind="stable")
    lo = max(0, min(n - 1, math.floor((q - BAND) * (n - 1))))
    hi = max(lo + 1, min(n, math.ceil((q + BAND) * (n - 1)) + 1))
    pick = order[lo:hi]
    return float(queue[pick].mean()), float(compute[pick].mean())


FDR = 0.05
"""The false discovery rate held across a comparison's tests."""


def benjamini_hochberg(p_values: list[float], q: float) -> list[bool]:
    """Which hypotheses are discoveries at false discovery rate q (step-up procedure)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    cut = 0
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= q * rank / m:
            cut = rank
    found = [False] * m
    for i in order[:cut]:
        found[i] = True
    return found
