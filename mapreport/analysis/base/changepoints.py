"""Change points across a slice's nights: where a tail shifted to a new level, when, and by
how much. PELT over the log of each night's value finds the candidate shifts; each is kept
only when the nights before and after it differ by a Welch t-test (as Apache Otava and
MongoDB's E-Divisive follow-up test do) and by at least SHIFT_MIN.

PELT is `ruptures`' own (`Pelt(model="l2")`), step for step: ruptures imported scipy, and the
two were 1.0-1.2 s of import in every report of a slice with four nights or more, for a
search over a few dozen values. tests/test_changepoints.py holds the two to the same
breakpoints, and the p-values to scipy's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from mapreport.analysis.base.tdist import welch_p_value

MIN_SIDE = 2
"""Nights on each side of a shift: one night is a blip, not a level."""
SHIFT_MIN = 0.10
"""A shift of the level smaller than this share is not reported."""
P_MAX = 0.05
"""The t-test's p-value under which the two sides differ."""
NOISE_FLOOR = 0.01
"""The least night-to-night noise assumed (1% of the level): a flat series has some."""


class ChangePoint(msgspec.Struct, frozen=True):
    """A series' shift to a new level from one night on."""

    series: str
    """A shape, or `*` for the slice."""
    metric: str
    night: str
    """The first night of the new level."""
    before_us: float
    """The level (geometric mean) of the nights since the previous shift."""
    after_us: float
    """The level of the nights from this one to the next shift."""
    change: float
    """after / before - 1."""
    p_value: float
    nights: int
    """Nights in the series."""


def change_points(
    nights: Sequence[str], values: Sequence[float | None], series: str, metric: str
) -> tuple[ChangePoint, ...]:
    """The shifts of one nightly series, oldest first (none under 2 x MIN_SIDE nights)."""
    pts = [(n, float(v)) for n, v in zip(nights, values, strict=True) if v is not None and v > 0]
    if len(pts) < 2 * MIN_SIDE:
        return ()
    x = np.log(np.array([v for _, v in pts]))
    n = len(x)
    # the noise of one night about its level, from night-to-night differences (robust: a
    # shift is one large difference among small ones)
    sigma = max(float(np.median(np.abs(np.diff(x)))) / 0.6745 / math.sqrt(2), NOISE_FLOOR)
    penalty = 2 * sigma**2 * math.log(n) * 2
    bounds = [0, *pelt_l2(x, penalty, MIN_SIDE)]
    out = []
    for k in range(1, len(bounds) - 1):
        before, after = x[bounds[k - 1] : bounds[k]], x[bounds[k] : bounds[k + 1]]
        change = math.exp(float(after.mean() - before.mean())) - 1
        if abs(change) < SHIFT_MIN:
            continue
        p = _p_value(before, after)
        if p >= P_MAX:
            continue
        out.append(
            ChangePoint(
                series,
                metric,
                pts[bounds[k]][0],
                math.exp(float(before.mean())),
                math.exp(float(after.mean())),
                change,
                p,
                n,
            )
        )
    return tuple(out)


def pelt_l2(x: np.ndarray, penalty: float, min_size: int) -> list[int]:
    """The ends of the segments of `x` that minimise their summed squared deviations plus
    `penalty` per segment, each of `min_size` values or more (the last end is len(x)):
    ruptures' `Pelt(model="l2", min_size=min_size, jump=1).fit(x).predict(pen=penalty)`, the
    same steps in the same order, so the same floats and the same choice between equal
    costs. Its admissible starts and their candidate partitions are paired by position
    (`zip`) after a start without a partition is skipped; kept as it is."""
    signal = x.reshape(-1, 1)
    n = len(signal)
    # a partition of signal[0:t]: its segments' costs (each with the penalty) after a leading
    # 0, summed in that order as ruptures sums its partition dict's values
    partitions: dict[int, tuple[list[Any], list[int]]] = {0: ([0], [])}
    admissible: list[int] = []
    for end in [*(k for k in range(n) if k >= min_size), n]:
        admissible.append(end - min_size)
        candidates = []
        for start in admissible:
            if start not in partitions:
                continue
            costs, ends = partitions[start]
            # a numpy float, as ruptures' is: Python 3.12's sum() adds plain floats with
            # compensation, and would break near-ties unlike ruptures
            cost = signal[start:end].var(axis=0).sum() * (end - start)
            candidates.append(([*costs, cost + penalty], [*ends, end]))
        best = min(candidates, key=lambda c: sum(c[0]))
        partitions[end] = best
        bound = sum(best[0]) + penalty
        admissible = [t for t, c in zip(admissible, candidates, strict=False) if sum(c[0]) <= bound]
    return sorted(partitions[n][1])


def _p_value(before: np.ndarray, after: np.ndarray) -> float:
    """Welch's t-test of two sides; sides without spread differ when their means do."""
    if float(np.var(before)) == 0.0 and float(np.var(after)) == 0.0:
        return 0.0 if float(before.mean()) != float(after.mean()) else 1.0
    p = welch_p_value(before.tolist(), after.tolist())
    return 1.0 if math.isnan(p) else p
