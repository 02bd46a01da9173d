"""Whether an action's target is met on a night: the first row of its validation matrix
against that night's figure and the figure's 95% CI (docs/metrics.md, "Closed loop across
nights"). A target is met only when the whole CI lies on the met side of its bound; a figure
without a CI (or below its evidence threshold) judges nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import msgspec
import numpy as np

from mapreport.analysis.actions.tuning_actions import TuningFigures
from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.base.stats import CI_LEVEL, wilson_interval
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.core.kinds import Criterion

BACK_MARGIN = 0.10
"""A regressed shape is back when its p95, CI and all, is within this share above its value
before the regression (the same 10% as a rollback trigger's margin)."""
EXACT = frozenset(
    {
        Criterion.PRESENT_IN_EVERY_FILE,
        Criterion.PRESENT_ON_EVERY_REQUEST,
        Criterion.SAME_ON_BOTH_SIDES,
        Criterion.QUALITY_MAX_DROP,
        Criterion.AGREES_WITHIN,
    }
)
"""Targets the finding's own check decides exactly each night (a record present, a key the
same on both sides): met when the finding is gone, with no sampling error to bound."""
EVEN = tuple(float(x) for x in np.linspace(0, 1, 101))
"""The grid of a stored latency quantile function (0%, 1%, ..., 100%)."""

Bound = tuple[float | None, float | None]
"""The range a target's figure must lie in, CI and all (None: unbounded on that side)."""


class Curve(msgspec.Struct, frozen=True):
    """A night's quantile function of one figure of a shape (values at `grid`), with the
    number of samples it was read from."""

    values: tuple[float, ...]
    grid: tuple[float, ...]
    n: int


class Target(msgspec.Struct, frozen=True):
    """An action's target as proposed: the first row of its validation matrix."""

    metric: str | None
    criterion: Criterion | None
    baseline: float | None
    """The metric's value on the night the action was proposed."""
    limit: float | None = None
    reference: float | None = None


class TargetCheck(msgspec.Struct, frozen=True):
    """A target against one night's figure: met (the CI clear of the bound), missed, or not
    judged (None: no figure, no CI, or too few samples)."""

    met: bool | None
    value: float | None
    ci: Interval | None
    bound: Bound | None
    """The range the figure must lie in, CI and all (low, high; None: open on that side)."""
    n: int = 0


NOT_JUDGED = TargetCheck(None, None, None, None)


class Valued(Protocol):
    """What holds a night's figures by metric name (a shape, or the slice's run point)."""

    def metric(self, name: str) -> float | None: ...


def redraw_quantile(curve: Curve, q: float, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The q-quantile of `resamples` samples of size n drawn from a stored quantile function,
    exactly, from two random numbers per resample (`history._redraw_p95` for any q)."""
    n = curve.n
    h = q * (n - 1)
    j = int(np.floor(h))
    g = h - j
    lo = rng.beta(j + 1, n - j, resamples)
    hi = lo + (1 - lo) * rng.beta(1, n - j - 1, resamples) if j + 1 < n else lo
    grid, qs = np.asarray(curve.grid), np.asarray(curve.values, dtype=np.float64)
    return (1 - g) * np.interp(lo, grid, qs) + g * np.interp(hi, grid, qs)


QUANTILE_METRICS = {
    "latency_p50_us": ("latency", 0.5),
    "latency_p95_us": ("latency", 0.95),
    "latency_p99_us": ("latency", 0.99),
    "queue_p95_us": ("queue", 0.95),
}
"""Target metrics that are a quantile of a stored quantile function: (curve, q)."""


def _evidence(q: float, th: Thresholds) -> int:
    """Samples a quantile needs to be stated (METRICS.md's evidence rules)."""
    return th.min_samples_p99 if q >= 0.99 else th.min_samples_p95 if q >= 0.95 else th.min_samples


def figure(
    metric: str,
    m: Valued | None,
    curves: Mapping[str, Curve],
    th: Thresholds,
    seed: int,
) -> tuple[float | None, Interval | None, int, bool]:
    """A night's value of `metric`, its 95% CI, the n it rests on and whether it is an exact
    count (no sampling error): quantiles are redrawn from their stored quantile function, a
    signed error carries its own CI, a share of requests is a count."""
    value = m.metric(metric) if m is not None else None
    if value is None:
        return None, None, 0, False
    if metric in QUANTILE_METRICS:
        name, q = QUANTILE_METRICS[metric]
        curve = curves.get(name)
        if curve is None or not curve.values or curve.n < _evidence(q, th):
            return value, None, curve.n if curve else 0, False
        draws = redraw_quantile(curve, q, th.bootstrap_resamples, np.random.default_rng(seed))
        alpha = (1 - CI_LEVEL) / 2
        lo, hi = np.quantile(draws, [alpha, 1 - alpha])
        return value, Interval(float(lo), float(hi)), curve.n, False
    if isinstance(m, TuningFigures):
        # a tuning run's figure tonight carries the ranking's own interval and n
        return value, m.intervals.get(metric), m.ns.get(metric, 0), False
    shape = m if isinstance(m, ShapeMetrics) else None
    if shape is None:
        # the slice's own counts (blocked requests) are counted, not sampled
        return value, None, 0, metric == "blocked_requests"
    if metric in ("signed_error", "ape"):
        ci = shape.accuracy.signed_error_ci
        if ci is not None and metric == "ape":
            ci = _absolute(ci)
        return value, ci, shape.n_static, False
    if metric in ("fallback_share", "error_rate"):
        n = shape.n if metric == "fallback_share" else shape.n_total
        k = shape.n_fallback if metric == "fallback_share" else shape.n_failed
        if n < th.min_samples:
            return value, None, n, False  # too few requests for a share to say anything
        return value, Interval(*wilson_interval(k, n)), n, True
    return value, None, shape.n, False


def _absolute(ci: Interval) -> Interval:
    """The CI of |x| from the CI of x."""
    if ci.low >= 0:
        return ci
    if ci.high <= 0:
        return Interval(-ci.high, -ci.low)
    return Interval(0.0, max(-ci.low, ci.high))


def bound(t: Target) -> Bound | None:
    """The range a target's figure must lie in to be met (None: the criterion has no
    measured bound, or what it needs is unknown)."""
    base, limit, c = t.baseline, t.limit, t.criterion
    if c == Criterion.HALVED and base is not None:
        return None, base / 2
    if c in (Criterion.TENTH_LOWER, Criterion.TENTH_LOWER_IN_BUDGET) and base is not None:
        return None, base * 0.9
    if c == Criterion.NO_FALLBACK:
        return None, 0.0
    if c in (Criterion.APE_WITHIN, Criterion.APE_WITHIN_AFTER_UPDATE) and limit is not None:
        return None, limit
    if c == Criterion.BACK_WITHIN_TOLERANCE and limit is not None and t.reference is not None:
        return t.reference - limit, t.reference + limit
    if c in (Criterion.NOT_WORSE_THAN_STATIC, Criterion.AT_MOST_ADAPTED) and limit is not None:
        return None, limit
    if c == Criterion.BACK_TO_BEFORE and limit is not None:
        return None, limit * (1 + BACK_MARGIN)
    if c == Criterion.NO_WORSE and base is not None:
        return None, base
    if c == Criterion.REGRET_WITHIN and limit is not None:
        return None, limit
    if c == Criterion.RANKS_WELL and limit is not None:
        return limit, None
    return None


def check(
    t: Target,
    m: Valued | None,
    curves: Mapping[str, Curve],
    th: Thresholds,
    seed: int,
    gone: bool,
) -> TargetCheck:
    """Target `t` against a night's figures: met when the figure's whole CI (an exact count:
    the count) lies within the target's bound; a target the finding's own check decides
    exactly is met when the finding is `gone`."""
    if t.criterion in EXACT:
        return TargetCheck(gone, None, None, None)
    if t.metric is None or t.criterion is None:
        return NOT_JUDGED
    value, ci, n, exact = figure(t.metric, m, curves, th, seed)
    b = bound(t)
    if value is None or b is None:
        return TargetCheck(None, value, ci, b, n)
    if not exact and ci is None:
        return TargetCheck(None, value, ci, b, n)
    lo, hi = (value, value) if exact or ci is None else ci
    met = (b[0] is None or b[0] <= lo) and (b[1] is None or hi <= b[1])
    return TargetCheck(met, value, ci, b, n)


def curves_of(
    shape: str,
    latency: Mapping[str, Sequence[float]],
    n: int,
    queue: Mapping[str, Curve],
) -> dict[str, Curve]:
    """A shape's stored curves tonight: its latency quantiles (ok requests) and queue wait."""
    out: dict[str, Curve] = {}
    if latency.get(shape):
        out["latency"] = Curve(tuple(latency[shape]), EVEN, n)
    if shape in queue:
        out["queue"] = queue[shape]
    return out
