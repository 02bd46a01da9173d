"""Student's t distribution and Welch's test, in the standard library's floats: the two figures
that need it (a change point's p-value, a run-level ratio's interval) took scipy.stats for it,
and scipy.stats was 0.6-1.2 s of import in every report of a slice with four nights or more.
tests/test_changepoints.py holds them to scipy's (1e-9 relative where a p-value is small) and
to the closed forms of one and two degrees of freedom."""

from __future__ import annotations

import math
from collections.abc import Sequence

_ITERATIONS = 500
"""Terms of the continued fraction at most: it converges in under 100 for the degrees of
freedom the figures meet (1 to a few thousand)."""
_EPS = 1e-16
_TINY = 1e-300
NORMAL_DF = 1e8
"""Degrees of freedom from which t is taken as normal: about there the log-gamma terms'
cancellation (2e-8 of the 97.5% quantile, growing tenfold a decade) meets the normal's own
difference from t (2.4e-8 of that quantile, shrinking tenfold a decade)."""


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz), which converges
    fast for x < (a + 1) / (a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) >= _TINY else _TINY)
    h = d
    for m in range(1, _ITERATIONS + 1):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) >= _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) >= _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1.0) < _EPS:
            break
    return h


def beta_regularized(a: float, b: float, x: float, y: float) -> float:
    """The regularized incomplete beta function I_x(a, b), given x and y = 1 - x separately
    (so that an x near 1 loses no digits)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, y) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom (NaN for NaN or df <= 0)."""
    if math.isnan(t) or math.isnan(df) or df <= 0:
        return math.nan
    if math.isinf(t):
        return 0.0
    if df >= NORMAL_DF:
        return math.erfc(abs(t) / math.sqrt(2.0))
    t2 = t * t
    return beta_regularized(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))


def t_quantile(q: float, df: float) -> float:
    """The q-quantile of Student's t for 0.5 < q < 1 (NaN outside, or for NaN or df <= 0), by
    bisection of `t_two_sided` to the floats' precision: the doubling ends by infinity at the
    latest, where the tail is 0, and the halving when its ends are adjacent floats."""
    if not 0.5 < q < 1.0 or math.isnan(df) or df <= 0:
        return math.nan
    target = 2.0 * (1.0 - q)
    lo, hi = 0.0, 1.0
    while t_two_sided(hi, df) > target:
        lo, hi = hi, hi * 2.0
    while True:
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            return hi
        if t_two_sided(mid, df) > target:
            lo = mid
        else:
            hi = mid


def welch_df(va: float, na: int, vb: float, nb: int) -> float:
    """Welch-Satterthwaite degrees of freedom of two means whose variances (of the mean) are
    va and vb (not both 0), from na and nb values."""
    # as shares of their sum: the squares of two tiny variances underflow to 0 / 0
    ra, rb = va / (va + vb), vb / (va + vb)
    return 1.0 / (ra**2 / (na - 1) + rb**2 / (nb - 1))


def welch_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p-value of Welch's unequal-variance t test of two samples' means (each
    of 2 values or more). When neither varies, the means differ or not: 0, or NaN for equal
    means (as scipy's `ttest_ind(equal_var=False)`)."""
    na, nb = len(a), len(b)
    ma, mb = math.fsum(a) / na, math.fsum(b) / nb
    va = math.fsum((v - ma) ** 2 for v in a) / (na - 1) / na
    vb = math.fsum((v - mb) ** 2 for v in b) / (nb - 1) / nb
    if va + vb == 0.0:
        return 0.0 if ma != mb else math.nan
    return t_two_sided((ma - mb) / math.sqrt(va + vb), welch_df(va, na, vb, nb))
