"""Statistics shared by the metric families: percentiles, bootstrap CIs, Kendall tau."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

CI_LEVEL = 0.95


class Sample(Protocol):
    """A sample in ascending order, read by rank: all the bootstrap needs of it (a quantile
    and a resample's order statistics are values at ranks)."""

    def __len__(self) -> int:
        """The number of values."""

    def at(self, ranks: IntArray) -> FloatArray:
        """The values at these 0-based ranks."""

    def prefetch(self, ranks: IntArray) -> None:
        """Read these ranks ahead, in one go where a read costs a query."""


class SortedArray:
    """A sample held in memory, sorted."""

    def __init__(self, values: Sequence[float] | FloatArray):
        self.values = np.sort(np.asarray(values, dtype=np.float64))

    def __len__(self) -> int:
        """The number of values."""
        return len(self.values)

    def at(self, ranks: IntArray) -> FloatArray:
        """The values at these ranks."""
        return np.asarray(self.values[ranks], dtype=np.float64)

    def prefetch(self, ranks: IntArray) -> None:
        """Nothing to read ahead: the values are here."""


def as_sample(x: Sample | Sequence[float] | FloatArray) -> Sample:
    """`x` read by rank: a sample as it is, values sorted into one."""
    if isinstance(x, np.ndarray | list | tuple):
        return SortedArray(x)
    return cast(Sample, x)


def point_ranks(n: int, q: float) -> IntArray:
    """The two order statistics (0-based ranks) around the q-quantile of n sorted values."""
    lo = int(np.floor((n - 1) * q))
    return np.array([lo, min(lo + 1, n - 1)], dtype=np.int64)


def quantile(x: Sample, q: float) -> float:
    """The q-quantile with numpy's linear method, from the two order statistics around it."""
    h = (len(x) - 1) * q
    pair = x.at(point_ranks(len(x), q))
    # numpy's own interpolation between the two (the same arithmetic as over the whole sample)
    return float(np.quantile(pair, h - np.floor(h)))


def seed_for(base: int, *key: str) -> int:
    """A bootstrap seed fixed by the run seed and the key, so a result does not depend on the
    order in which shapes are processed."""
    digest = hashlib.sha256("\x1f".join((str(base), *key)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def percentile(values: Sequence[float] | FloatArray, q: float) -> float:
    """The q-th quantile (0..1) with linear interpolation between order statistics."""
    return float(np.quantile(np.asarray(values, dtype=np.float64), q))


def resample_ranks(
    n: int, q: float, resamples: int, rng: np.random.Generator
) -> tuple[IntArray, IntArray | None, float]:
    """The ranks `resampled_quantile` reads from n sorted values (the order statistics below
    and above each resample's q-quantile; None: the quantile falls on one) and the fraction
    between them. Draws from `rng` only when n > 1."""
    if n == 1:
        return np.zeros(resamples, dtype=np.int64), None, 0.0
    h = (n - 1) * q
    k = int(np.floor(h)) + 1  # 1-based order statistic below the quantile
    frac = h - (k - 1)
    u1 = rng.beta(k, n - k + 1, size=resamples)
    i1 = np.minimum((u1 * n).astype(np.int64), n - 1)
    if frac <= 0 or k >= n:
        return i1, None, frac
    u2 = u1 + (1.0 - u1) * rng.beta(1, n - k, size=resamples)
    return i1, np.minimum((u2 * n).astype(np.int64), n - 1), frac


def resampled_quantile(x: Sample, q: float, resamples: int, rng: np.random.Generator) -> FloatArray:
    """The q-quantile (numpy's linear method) of `resamples` bootstrap resamples of the
    sorted sample x, drawn exactly without drawing the resamples.

    A resample's k-th order statistic is x[floor(n U_(k))], where U_(k) is the k-th order
    statistic of n uniforms, Beta(k, n - k + 1) distributed; the next one is
    U_(k+1) = U_(k) + (1 - U_(k)) Beta(1, n - k). So each resample costs two Beta draws instead
    of n index draws: the same bootstrap distribution at O(resamples) cost, whatever n is
    (a shape with 250,000 requests is as cheap as one with 25).
    """
    i1, i2, frac = resample_ranks(len(x), q, resamples, rng)
    if i2 is None:
        return x.at(i1)
    both = x.at(np.concatenate([i1, i2]))  # one read of the sample for the two statistics
    x1, x2 = both[:resamples], both[resamples:]
    return np.asarray(x1 + frac * (x2 - x1), dtype=np.float64)


SUM_BLOCK = 2_000_000
"""Values (resamples x rows x columns) `resampled_sums` draws for at once: its blocks of
resamples, which also fix its random stream."""
COUNT_BINS = 16_384
"""Counters `row_counts` fills at once (128 KiB: a core's L2 cache holds them)."""


def resampled_sums(rows: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    """The column sums of `resamples` bootstrap resamples of `rows` (k x columns), each drawn
    row by row: each resample's row counts, then their product with the rows (the same sums
    as adding up the drawn rows, without materialising resamples x k x columns values). A
    column of zeros sums to zero in every resample and is not multiplied. The product is
    numpy's own loop (einsum), not BLAS: one thread and the same bits on every machine (BLAS's
    threads spun against the machine's other work: the 1M report's tails 3x slower at load 8)."""
    k, columns = rows.shape
    sums = np.zeros((resamples, columns))
    live = np.flatnonzero(rows.any(axis=0))
    weights = np.ascontiguousarray(rows[:, live].T)
    chunk = max(1, SUM_BLOCK // (k * columns))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, k, size=(stop - start, k))
        sums[start:stop, live] = np.einsum("ck,rk->rc", weights, row_counts(idx))
    return sums


def row_counts(idx: IntArray) -> IntArray:
    """How often each row index 0..k-1 appears in each row of `idx` (resamples x k), counted
    a few resamples at a time so the counters stay in cache (one count over a whole block of
    resamples missed it: 30% slower)."""
    n, k = idx.shape
    step = max(1, COUNT_BINS // k)
    offsets = (np.arange(step) * k)[:, None]
    out = np.empty((n, k), dtype=np.int64)
    for a in range(0, n, step):
        b = min(n, a + step)
        flat = (idx[a:b] + offsets[: b - a]).ravel()
        out[a:b] = np.bincount(flat, minlength=(b - a) * k).reshape(b - a, k)
    return out


def gain_ranks(na: int, nb: int, q: float, resamples: int, seed: int) -> tuple[IntArray, IntArray]:
    """Every rank `bootstrap_ratio_gain` reads from the adapted (na values) and the baseline
    (nb) sample, drawn as it draws them: a sample read by rank from the engine can be read
    once for all of a shape's figures."""
    rng = np.random.default_rng(seed)
    out = []
    for n in (na, nb):
        i1, i2, _ = resample_ranks(n, q, resamples, rng)
        out.append(np.concatenate([point_ranks(n, q), i1, () if i2 is None else i2]))
    return out[0].astype(np.int64), out[1].astype(np.int64)


def bootstrap_ratio_gain(
    adapted: Sample | FloatArray,
    baseline: Sample | FloatArray,
    q: float,
    resamples: int,
    seed: int,
    offset: float = 0.0,
) -> tuple[float, float, float]:
    """Gain `1 - (Q_q(adapted) + offset) / Q_q(baseline)` and its percentile bootstrap 95% CI.

    Both groups are resampled independently; arrays are sorted first so the result does not
    depend on row order. `offset` adds a per-request cost to the adapted statistic (net gain).
    """
    a, b = as_sample(adapted), as_sample(baseline)
    rng = np.random.default_rng(seed)
    point = 1.0 - (quantile(a, q) + offset) / quantile(b, q)
    ra = resampled_quantile(a, q, resamples, rng)
    rb = resampled_quantile(b, q, resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        gains = 1.0 - (ra + offset) / rb
    gains = gains[np.isfinite(gains)]
    alpha = (1.0 - CI_LEVEL) / 2
    lo, hi = np.quantile(gains, [alpha, 1.0 - alpha])
    return point, float(lo), float(hi)


RESAMPLE_BLOCK = 4_000_000
"""Values drawn at once by `bootstrap_mean` (bounds its memory at 32 MB a block)."""


def bootstrap_mean(
    values: Sequence[float] | FloatArray, resamples: int, seed: int
) -> tuple[float, float]:
    """The percentile bootstrap 95% CI of a sample's mean (sorted first: the interval does not
    depend on row order)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = len(x)
    rng = np.random.default_rng(seed)
    step = max(1, RESAMPLE_BLOCK // max(n, 1))
    means = np.concatenate(
        [
            x[rng.integers(0, n, size=(min(step, resamples - i), n))].mean(axis=1)
            for i in range(0, resamples, step)
        ]
    )
    alpha = (1.0 - CI_LEVEL) / 2
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b rank correlation (ties counted per Kendall); None below 2 points or when
    either side is constant."""
    n = len(x)
    if n < 2 or len(y) != n:
        return None
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(n, k=1)
    dx, dy = np.sign(xa[i] - xa[j]), np.sign(ya[i] - ya[j])
    concordant_minus_discordant = float(np.sum(dx * dy))
    n0 = len(i)
    tx, ty = float(np.sum(dx == 0)), float(np.sum(dy == 0))
    denom = np.sqrt((n0 - tx) * (n0 - ty))
    if denom == 0:
        return None
    return concordant_minus_discordant / float(denom)


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float | None:
    """Weighted mean; None when the weights sum to zero."""
    w = np.asarray(weights, dtype=np.float64)
    total = float(w.sum())
    if total <= 0:
        return None
    return float(np.dot(np.asarray(values, dtype=np.float64), w) / total)


def bootstrap_relative_error(
    measured: Sample | FloatArray, predicted: float, resamples: int, seed: int
) -> tuple[float, float]:
    """95% CI of `(predicted - median(measured)) / median(measured)`, resampling measured."""
    med = resampled_quantile(as_sample(measured), 0.5, resamples, np.random.default_rng(seed))
    with np.errstate(divide="ignore", invalid="ignore"):
        err = (predicted - med) / med
    err = err[np.isfinite(err)]
    alpha = (1.0 - CI_LEVEL) / 2
    lo, hi = np.quantile(err, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def relative_error_ranks(n: int, resamples: int, seed: int) -> IntArray:
    """Every rank `bootstrap_relative_error` reads from n measured values, drawn as it draws
    them (to read them ahead from a sample read by rank)."""
    i1, i2, _ = resample_ranks(n, 0.5, resamples, np.random.default_rng(seed))
    return np.concatenate([i1, () if i2 is None else i2]).astype(np.int64)


def jain_index(loads: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 for equal loads, 1/n for one busy
    participant; None without participants or load."""
    x = np.asarray(loads, dtype=np.float64)
    top = float(np.max(np.abs(x))) if len(x) else 0.0
    if top == 0:
        return None
    x = x / top  # the index is scale-free; squares of loads near 1e-160 would underflow
    return float(np.sum(x) ** 2 / (len(x) * np.sum(x * x)))


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score 95% interval of a proportion k / n (n > 0)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))
