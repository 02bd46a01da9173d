"""Change points across nights (issue 35): a tail that moved to a new level is found on the
first night of that level, with its size; noise, a one-night blip and a short history are not."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapreport.analysis.base.changepoints import MIN_SIDE, change_points, pelt_l2
from mapreport.analysis.base.common import Percentiles, SlaCheck
from mapreport.analysis.base.tdist import t_quantile, t_two_sided, welch_p_value
from mapreport.analysis.loop.history import History
from mapreport.analysis.steps.status import slice_status
from mapreport.core.kinds import Status, StatusReason

NIGHTS = [f"2026-11-{d:02d}" for d in range(1, 15)]


def test_a_shift_is_found_on_its_first_night_with_its_size() -> None:
    rng = np.random.default_rng(7)
    values = [10.0 * (1 + rng.normal(0, 0.02)) for _ in range(7)]
    values += [14.0 * (1 + rng.normal(0, 0.02)) for _ in range(7)]
    (c,) = change_points(NIGHTS, values, "b=8", "latency_p95_us")
    assert c.night == "2026-11-08"
    assert c.change == pytest.approx(0.4, abs=0.05)
    assert c.p_value < 0.001
    assert c.nights == 14


def test_a_slide_from_met_to_missed_and_back_is_two_shifts() -> None:
    """resnet's p99 7.94 -> 16.20 -> 12.76 ms, held over two nights each."""
    values = [7.94, 8.02, 16.2, 16.6, 12.76, 12.5]
    found = change_points(NIGHTS[:6], values, "*", "latency_p99_us")
    assert [(c.night, round(c.change, 1)) for c in found] == [
        ("2026-11-03", 1.1),
        ("2026-11-05", -0.2),
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(9.5, 10.5), min_size=0, max_size=14))
def test_noise_within_five_percent_is_no_shift(values: list[float]) -> None:
    assert change_points(NIGHTS[: len(values)], values, "s", "m") == ()


def test_a_blip_or_a_short_history_is_no_shift() -> None:
    assert change_points(NIGHTS[:7], [10, 10, 10, 30, 10, 10, 10], "s", "m") == ()
    assert change_points(NIGHTS[:3], [7.94, 16.2, 12.76], "s", "m") == ()
    assert change_points(NIGHTS[:4], [10, None, 20, 20], "s", "m") == ()


def test_a_tail_that_shifted_up_puts_a_met_slice_at_risk() -> None:
    values = [4.0, 4.1, 3.9, 5.2, 5.3, 5.25]
    shifts = change_points(NIGHTS[:6], values, "*", "latency_p95_us")
    h = History((), (), (), "r", None, None, NIGHTS[4], shifts)
    latency = Percentiles(500, 4e6, 5.25e6, 5.5e6)
    st_ = slice_status((SlaCheck("p95", 6e6, 5.25e6, True, True),), latency, h)
    assert (st_.status, st_.reason) == (Status.AT_RISK, StatusReason.RISING)
    assert st_.shift is not None
    assert st_.shift.night == NIGHTS[3]


levels = st.lists(
    st.tuples(
        st.floats(0.5, 500.0, allow_nan=False),  # a level
        st.integers(1, 6),  # nights at it
        st.floats(0.0, 0.2),  # noise about it
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(levels, st.integers(0, 2**32 - 1), st.floats(1e-4, 2.0))
def test_pelt_is_ruptures_pelt(
    segments: list[tuple[float, int, float]], seed: int, pen: float
) -> None:
    """The port finds ruptures' breakpoints, ties and all, on series of levels and noise (and
    at penalties from nothing to everything)."""
    rpt = pytest.importorskip("ruptures")
    rng = np.random.default_rng(seed)
    x = np.log(
        np.concatenate([lvl * (1 + rng.normal(0, sd, n)).clip(0.01) for lvl, n, sd in segments])
    )
    if len(x) < 2 * MIN_SIDE:
        return
    want = rpt.Pelt(model="l2", min_size=MIN_SIDE, jump=1).fit(x.reshape(-1, 1)).predict(pen=pen)
    assert pelt_l2(x, pen, MIN_SIDE) == want


def test_pelt_breaks_ties_as_ruptures_does() -> None:
    """Flat stretches and repeated values make equal-cost partitions: the same one is chosen."""
    rpt = pytest.importorskip("ruptures")
    for x in ([1.0] * 9, [1.0, 1.0, 2.0, 2.0] * 3, [0.0, 1.0] * 6, [3.0, 3.0, 3.0, 5.0, 5.0]):
        arr = np.array(x)
        for pen in (0.0, 1e-12, 0.5, 1.0, 10.0):
            want = rpt.Pelt(model="l2", min_size=2, jump=1).fit(arr.reshape(-1, 1)).predict(pen=pen)
            assert pelt_l2(arr, pen, 2) == want, (x, pen)


def test_a_history_long_enough_for_change_points_loads_neither_scipy_nor_ruptures() -> None:
    """Issue 53: the search and its test are the package's own, so a slice of four nights or
    more no longer imports scipy.stats and ruptures (1.0-1.2 s) for a few dozen values."""
    probe = (
        "import sys; from mapreport.analysis.base.changepoints import change_points; "
        "found = change_points([str(d) for d in range(14)], [10.0] * 7 + [14.0, 14.2] * 3 + [14.1],"
        " '*', 'p95'); print(len(found), *sorted(m for m in sys.modules if m.split('.')[0] in "
        "('scipy', 'ruptures')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1"]


LOG_VALUES = st.floats(-50, 50).filter(lambda v: v == 0 or abs(v) > 1e-70)
"""Logs of values, not so close to 0 that the square of their variance (in Welch's degrees of
freedom) leaves the floats' normal range: scipy's then underflows to 0 / 0 (at [0, 0] against
[0, 0, 7.8e-83] it says p = 0.5, where t = -1 on 2 degrees of freedom is 0.4226)."""


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")  # scipy's, not ours
@settings(max_examples=300, deadline=None)
@given(st.lists(LOG_VALUES, min_size=2, max_size=30), st.lists(LOG_VALUES, min_size=2, max_size=30))
def test_welch_p_value_is_scipys(a: list[float], b: list[float]) -> None:
    stats = pytest.importorskip("scipy.stats")
    want = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    got = welch_p_value(a, b)
    if math.isnan(want):
        assert math.isnan(got) or np.var(a) + np.var(b) < 1e-20
        return
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 60.0), st.floats(1.0, 5000.0))
def test_t_tail_and_quantile_are_scipys(t: float, df: float) -> None:
    """Within 1e-9 of scipy where the p-value is below one half, and 1e-8 absolute above it,
    where scipy itself errs by 1e-9 (at t = 2.4e-8 with one degree of freedom, against the
    Cauchy's exact value, which this gives: `test_t_tail_is_exact_where_it_has_a_closed_form`)."""
    stats = pytest.importorskip("scipy.stats")
    want = 2 * stats.t.sf(t, df)
    # near 1 scipy's error; below the floats' normal range (1e-308), zero for every purpose
    near_one = 1e-8 if want > 0.5 else 1e-300
    assert t_two_sided(t, df) == pytest.approx(want, rel=1e-9, abs=near_one)
    assert t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-10)


@given(st.floats(0.0, 1e6))
def test_t_tail_is_exact_where_it_has_a_closed_form(t: float) -> None:
    """One degree of freedom (Cauchy): 2 atan(1 / t) / pi; two: 1 - t / sqrt(2 + t^2), written
    as 2 / (sqrt(2 + t^2) (sqrt(2 + t^2) + t)) so that neither loses digits far out."""
    cauchy = 1.0 if t == 0 else 2 * math.atan(1 / t) / math.pi
    assert t_two_sided(t, 1.0) == pytest.approx(cauchy, rel=1e-12, abs=0)
    root = math.sqrt(2 + t * t)
    assert t_two_sided(t, 2.0) == pytest.approx(2 / (root * (root + t)), rel=1e-9, abs=0)


def test_t_outside_its_domain_is_nan_and_far_out_normal() -> None:
    """NaN for a NaN or a non-positive df and a quantile outside (0.5, 1); from 1e8 degrees
    of freedom the normal's (the log-gamma terms cancel there), either side of it within 1e-7."""
    stats = pytest.importorskip("scipy.stats")
    for df in (math.nan, 0.0, -3.0):
        assert math.isnan(t_two_sided(1.0, df))
        assert math.isnan(t_quantile(0.975, df))
    for q in (0.5, 0.2, 1.0, math.nan):
        assert math.isnan(t_quantile(q, 10.0))
    assert t_two_sided(math.inf, 3.0) == 0.0
    for df in (1e5, 1e6, 1e7, 9.9e7, 1e8, 1e9, math.inf):
        assert t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-7), df
        assert t_two_sided(3.0, df) == pytest.approx(2 * stats.t.sf(3.0, df), rel=1e-6), df
