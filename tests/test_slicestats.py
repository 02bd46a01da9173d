"""The slice's request statistics computed once (issue 38): the slice's grains (its totals, its
streams, batch sizes and cores) in one statement, and the families that only aggregate
requests as pure functions of them."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.analysis.base.common import Percentiles
from mapreport.analysis.base.query import SLICE_TABLE
from mapreport.analysis.base.slicestats import (
    BatchRow,
    CoreRow,
    SliceGrains,
    SliceTotals,
    StreamRow,
    slice_grains,
    slice_latency,
)
from mapreport.analysis.mapping.tokens import token_rate
from mapreport.analysis.serving.scheduling import scheduling
from mapreport.core.records import replace
from mapreport.dataset.store import Dataset


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


ROW = st.tuples(
    st.floats(0, 1e6, allow_nan=False),  # latency
    st.sampled_from(["ok", "ok", "ok", "timeout"]),
    st.one_of(st.none(), st.integers(0, 4096)),  # output tokens
    st.sampled_from([None, "a", "b"]),  # stream
    st.one_of(st.none(), st.integers(1, 4)),  # batch size
    st.one_of(st.none(), st.integers(0, 2)),  # core
    st.one_of(st.none(), st.floats(0, 1e4, allow_nan=False)),  # queue wait
)

Row = tuple[float, str, int | None, str | None, int | None, int | None, float | None]


def _q(values: list[float], qs: list[float]) -> list[float]:
    return [float(v) for v in np.quantile(values, qs)]


@settings(max_examples=40, deadline=None)
@given(st.lists(ROW, min_size=1, max_size=60))
@pytest.mark.slow
def test_slice_grains_are_what_numpy_computes_from_the_rows(rows: list[Row]) -> None:
    con = duckdb.connect()
    con.execute(
        f"""CREATE TEMP TABLE {SLICE_TABLE} (arrival_us DOUBLE, compute_end_us DOUBLE,
        latency_us DOUBLE, status VARCHAR, output_tokens BIGINT, stream VARCHAR,
        batch_size BIGINT, core BIGINT, queue_us DOUBLE, compute_us DOUBLE)"""
    )
    for i, (lat, status, tokens, stream, batch, core, queue) in enumerate(rows):
        arrival = 1000.0 * i
        con.execute(
            f"INSERT INTO {SLICE_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [arrival, arrival + lat, lat, status, tokens, stream, batch, core, queue, lat / 2],
        )
    g = slice_grains(con)
    t = g.totals
    ok = [r for r in rows if r[1] == "ok"]
    assert (t.requests, t.ok) == (len(rows), len(ok))
    if ok:
        got = [t.latency.p50, t.latency.p95, t.latency.p99]
        assert got == pytest.approx(_q([r[0] for r in ok], [0.5, 0.95, 0.99]), rel=1e-12)
    with_tokens = [r for r in ok if r[2] is not None]
    assert t.token_requests == len(with_tokens)
    assert t.output_tokens == (sum(r[2] or 0 for r in with_tokens) if with_tokens else None)
    assert t.first_arrival_us == 0.0
    # each stream (no name: "(none)"), its ok share and the queue waits of its ok requests
    names = sorted({r[3] or "(none)" for r in rows})
    assert [x.stream for x in g.streams] == names
    for x in g.streams:
        mine = [r for r in rows if (r[3] or "(none)") == x.stream]
        waits = [r[6] for r in mine if r[1] == "ok" and r[6] is not None]
        assert (x.n, x.ok, x.n_queue) == (len(mine), sum(r[1] == "ok" for r in mine), len(waits))
        grid = [i / 100 for i in range(1, 100)] + [0.995, 0.999]
        assert list(x.queue) == (pytest.approx(_q(waits, grid), rel=1e-12) if waits else [])
    # each batch size of the ok requests, and each core of every request
    sizes = sorted({r[4] for r in ok if r[4] is not None})
    assert [b.batch_size for b in g.batches] == sizes
    for b in g.batches:
        mine = [r for r in ok if r[4] == b.batch_size]
        assert (b.n, b.items) == (len(mine), b.batch_size * len(mine))
        want = _q([r[0] for r in mine], [0.5, 0.95])
        assert [b.latency_p50_us, b.latency_p95_us] == pytest.approx(want, rel=1e-12)
    assert [c.core for c in g.cores] == sorted({r[5] for r in rows if r[5] is not None})
    for c in g.cores:
        mine = [r[0] / 2 for r in rows if r[5] == c.core]
        assert c.n == len(mine)
        assert c.busy_us == pytest.approx(sum(mine), rel=1e-12)
        assert c.compute_p50_us == pytest.approx(float(np.median(mine)), rel=1e-12)


class _NoQueries:
    """A connection that refuses every statement: what runs on it is a pure function."""

    def execute(self, query: str, parameters: object = None, /) -> object:
        raise AssertionError(f"a query ran: {query[:60]}")

    def sql(self, query: str, *, params: object = None) -> object:
        raise AssertionError(f"a query ran: {query[:60]}")


def test_scheduling_is_a_pure_function_of_the_grains() -> None:
    grains = SliceGrains(
        _totals(),  # a window of 4 s
        streams=(StreamRow("a", 10, 10, 10, tuple(float(i) for i in range(101))),),
        batches=(BatchRow(4, 8, 100.0, 200.0, 32),),
        cores=(CoreRow(0, 6, 600.0, 100.0), CoreRow(1, 6, 1800.0, 300.0)),
    )
    s = scheduling(_NoQueries(), grains, [], {}, {})
    assert [(x.stream, x.served_ratio) for x in s.streams] == [("a", 1.0)]
    assert [(q.group, q.p50_us, q.p95_us) for q in s.queue_by_stream] == [("a", 49.0, 94.0)]
    (b,) = s.batch_impact
    assert (b.requests_per_s, b.items_per_s) == (2.0, 8.0)
    assert s.jain_index_cores == pytest.approx((600 + 1800) ** 2 / (2 * (600**2 + 1800**2)))
    no_window = replace(grains, totals=_totals(first_arrival_us=None))
    assert scheduling(_NoQueries(), no_window, [], {}, {}).batch_impact[0].items_per_s is None


class _Counting:
    """A connection that counts its statements by the module that ran them."""

    def __init__(self, con: Any) -> None:
        self.con, self.by_module = con, Counter[str]()

    def _count(self) -> None:
        self.by_module[sys._getframe(2).f_globals["__name__"].rsplit(".", 1)[-1]] += 1

    def execute(self, query: str, parameters: Any = None, /) -> Any:
        self._count()
        return self.con.execute(query, parameters)

    def sql(self, query: str, *, params: Any = None) -> Any:
        self._count()
        return self.con.sql(query, params=params)


STATEMENTS = 22
"""The most statements one slice's analysis runs (issue 38), besides the server metrics
family's over a slice's own metric samples: a fixed number, whatever the slice's shapes (20
until the tail judgement's figure, whose p99 over the shapes' medians reads its count and its
top values in two statements)."""


def test_a_slices_analysis_runs_a_fixed_number_of_statements(demo_dataset: Path) -> None:
    con = Dataset(demo_dataset).connect()
    counted = []
    for w, s in list_slices(con):
        counting = _Counting(con)
        analyze_slice(counting, w, s, Thresholds())
        n = sum(counting.by_module.values()) - counting.by_module["telemetry"]
        assert n <= STATEMENTS, (w, s, dict(counting.by_module))
        counted.append(n)
    assert len(counted) >= 3  # the demo's slices, each analysed
    assert min(counted) >= 15  # each slice's statements counted, whichever module ran them


class _Holding(_Counting):
    """A connection that holds a loaded slice as a table (as Spark's does)."""

    holds_slices = True


@pytest.mark.slow
def test_a_slice_held_as_a_table_is_analysed_as_its_view(demo_dataset: Path) -> None:
    viewed, held = Dataset(demo_dataset).connect(), Dataset(demo_dataset).connect()
    for w, s in list_slices(viewed):
        want = analyze_slice(viewed, w, s, Thresholds())
        assert repr(analyze_slice(_Holding(held), w, s, Thresholds())) == repr(want)
    kinds = held.execute(
        "SELECT table_name FROM duckdb_tables() WHERE table_name = 'slice_request'"
    ).fetchall()
    assert kinds == [("slice_request",)]  # a table, not a view
