"""The slice's request statistics computed once (issue 38): the slice-wide totals in one scan,
and the families that only aggregate requests as pure functions of them."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapreport.analysis.common import Percentiles
from mapreport.analysis.query import SLICE_TABLE
from mapreport.analysis.slicestats import SliceTotals, slice_latency, slice_totals
from mapreport.analysis.tokens import token_rate


def _totals(**kw: object) -> SliceTotals:
    base: dict[str, object] = {
        "requests": 12,
        "ok": 10,
        "latency": Percentiles(10, 1.0, 2.0, 3.0),
        "first_arrival_us": 1_000_000.0,
        "last_end_us": 5_000_000.0,
        "token_requests": 10,
        "output_tokens": 5_000,
        "token_first_us": 1_000_000.0,
        "token_last_us": 3_000_000.0,
    }
    return SliceTotals(**(base | kw))  # type: ignore[arg-type]


def test_token_rate_and_latency_are_pure_functions_of_the_totals() -> None:
    rate = token_rate(_totals())
    assert rate is not None
    assert (rate.requests, rate.output_tokens, rate.window_s) == (10, 5_000, 2.0)
    assert rate.tokens_per_s == 2_500.0
    assert token_rate(_totals(output_tokens=None, token_requests=0)) is None
    assert token_rate(_totals(token_last_us=1_000_000.0)) is None  # a window of no length
    overall = slice_latency(_totals())
    assert overall["failed"] == 2
    assert overall["window"] == (1_000_000.0, 5_000_000.0)
    assert _totals().window_s == 4.0
    assert _totals(first_arrival_us=None).window_s is None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 1e6, allow_nan=False),
            st.sampled_from(["ok", "ok", "ok", "timeout"]),
            st.one_of(st.none(), st.integers(0, 4096)),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_slice_totals_are_what_numpy_computes_from_the_rows(
    rows: list[tuple[float, str, int | None]],
) -> None:
    con = duckdb.connect()
    con.execute(
        f"""CREATE TEMP TABLE {SLICE_TABLE} (arrival_us DOUBLE, compute_end_us DOUBLE,
        latency_us DOUBLE, status VARCHAR, output_tokens BIGINT)"""
    )
    for i, (lat, status, tokens) in enumerate(rows):
        arrival = 1000.0 * i
        con.execute(
            f"INSERT INTO {SLICE_TABLE} VALUES (?, ?, ?, ?, ?)",
            [arrival, arrival + lat, lat, status, tokens],
        )
    t = slice_totals(con)
    ok = [r for r in rows if r[1] == "ok"]
    assert (t.requests, t.ok) == (len(rows), len(ok))
    if ok:
        want = np.quantile([r[0] for r in ok], [0.5, 0.95, 0.99])
        got = [t.latency.p50, t.latency.p95, t.latency.p99]
        assert got == pytest.approx(list(want), rel=1e-12, abs=1e-9)
    with_tokens = [r for r in ok if r[2] is not None]
    assert t.token_requests == len(with_tokens)
    assert t.output_tokens == (sum(r[2] or 0 for r in with_tokens) if with_tokens else None)
    assert t.first_arrival_us == 0.0
