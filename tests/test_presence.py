"""A slice's tables probed once before its analysis: the families over tables without its
records are not asked, and the slice's sides come from the same answer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.analysis.mapping.presence import EVERY_TABLE, PROBED, Presence, presence
from mapreport.dataset.store import Dataset


class Counting:
    """A connection that keeps the text of each statement it runs."""

    def __init__(self, con: Any):
        self.con, self.queries = con, []

    def execute(self, query: str, parameters: Any = None, /) -> Any:
        self.queries.append(query)
        return self.con.execute(query, parameters)

    def sql(self, query: str, *, params: Any = None) -> Any:
        self.queries.append(query)
        return self.con.sql(query, params=params)


def test_the_demos_tables_and_sides(demo_dataset: Path) -> None:
    con = Dataset(demo_dataset).connect()
    got = presence(con, "bert-base", "")
    assert got.has("adaptation_event")
    assert not got.has("op_exec")  # the demo has no profiler trace
    assert not got.has("loadgen_run")
    assert got.sides(has_requests=True) == ("compile", "runtime")


def test_sides_without_records_are_both_and_requests_make_the_runtime_side() -> None:
    none = Presence(frozenset(), frozenset())
    assert none.sides(has_requests=False) == ("compile", "runtime")
    compile_only = Presence(frozenset(), frozenset({"compile"}))
    assert compile_only.sides(has_requests=False) == ("compile",)
    assert compile_only.sides(has_requests=True) == ("compile", "runtime")
    assert EVERY_TABLE.tables == frozenset(PROBED)


@pytest.mark.slow
def test_no_family_reads_a_table_without_the_slices_records(demo_dataset: Path) -> None:
    """Over the demo, after the probe, no statement reads a profiler trace, a load sweep, an
    MLPerf run or the server's metrics (it has none), and the analysis is the one that asks
    every family."""
    con = Dataset(demo_dataset).connect()
    for w, s in list_slices(con):
        counting = Counting(con)
        got = analyze_slice(counting, w, s, Thresholds())
        # read by no family but those skipped (the compile events are read by the buckets'
        # and the blocking marks' joins too)
        skipped = ("op_exec", "load_sweep", "loadgen_run", "metric_sample")
        absent = [t for t in skipped if not presence(con, w, s).has(t)]
        assert absent, (w, s)
        reads = [
            q
            for q in counting.queries[1:]
            if any(re.search(rf"\b(FROM|JOIN)\s+{t}\b", q) for t in absent)
        ]
        assert reads == [], reads[0][:200]
        assert counting.queries[0].count("LIMIT 1") >= len(PROBED)  # the probe came first
        assert got == analyze_slice(con, w, s, Thresholds())
