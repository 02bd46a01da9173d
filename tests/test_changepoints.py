"""Change points across nights (issue 35): a tail that moved to a new level is found on the
first night of that level, with its size; noise, a one-night blip and a short history are not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapreport.analysis.base.changepoints import change_points
from mapreport.analysis.base.common import Percentiles, SlaCheck
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
