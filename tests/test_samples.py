"""The bootstrap reads a sample by rank: a quantile from the two order statistics around it
equals numpy's over the whole sample, and a group read by rank from the engine (a group larger
than the connection's `sample_limit`, as on Spark) gives the very intervals the whole group
gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.analysis.base.stats import (
    IntArray,
    SortedArray,
    bootstrap_ratio_gain,
    gain_ranks,
    quantile,
)
from mapreport.analysis.serving.adaptation import RANKS_SQL
from mapreport.dataset.store import Dataset


@given(
    st.lists(st.floats(0, 1e9, allow_nan=False), min_size=1, max_size=300),
    st.floats(0, 1),
)
def test_a_quantile_from_two_ranks_is_numpys(values: list[float], q: float) -> None:
    assert quantile(SortedArray(values), q) == float(np.quantile(np.asarray(values), q))


class Recording(SortedArray):
    """A sorted sample that keeps every rank read from it."""

    def __init__(self, values: list[float]):
        super().__init__(values)
        self.read: set[int] = set()

    def at(self, ranks: IntArray) -> Any:
        self.read |= set(ranks.tolist())
        return super().at(ranks)


@given(
    st.integers(1, 300),
    st.integers(1, 300),
    st.sampled_from([0.5, 0.95, 0.99]),
    st.integers(0, 2**32),
)
def test_gain_ranks_are_the_ranks_the_bootstrap_reads(
    na: int, nb: int, q: float, seed: int
) -> None:
    """What a shape's gain reads ahead (one read of a group on the engine) is exactly what its
    bootstrap then reads: no rank missed, none read for nothing."""
    rng = np.random.default_rng(seed)
    a, b = Recording(list(rng.random(na))), Recording(list(rng.random(nb) + 1))
    bootstrap_ratio_gain(a, b, q, 200, seed)
    want_a, want_b = gain_ranks(na, nb, q, 200, seed)
    assert a.read == set(want_a.tolist())
    assert b.read == set(want_b.tolist())


class Limited:
    """A DuckDB connection that brings at most `sample_limit` values of a group into the
    process, keeping the text of each query."""

    def __init__(self, con: Any, limit: int):
        self.con, self.sample_limit, self.queries = con, limit, []

    def execute(self, query: str, parameters: Any = None, /) -> Any:
        self.queries.append((query, parameters))
        return self.con.execute(query, parameters)

    def sql(self, query: str, *, params: Any = None) -> Any:
        self.queries.append((query, params))
        return self.con.sql(query, params=params)


@pytest.mark.slow
def test_groups_read_by_rank_give_the_whole_groups_intervals(demo_dataset: Path) -> None:
    con = Dataset(demo_dataset).connect()
    for w, s in list_slices(con):
        whole = analyze_slice(con, w, s, Thresholds())
        limited = Limited(con, 50)
        assert analyze_slice(limited, w, s, Thresholds()) == whole
        ranked = [p for q, p in limited.queries if q == RANKS_SQL]
        # every group read by rank is read in one query for the slice: the ranks its gains
        # and its error interval resample, read ahead for all its shapes (one sort of each
        # group on the engine)
        assert len(ranked) == 1, (w, s, len(ranked))
        (p,) = ranked
        groups = len(p["groups"])
        assert groups > 0  # the demo's groups hold hundreds of requests
        # at most two order statistics per resample and figure (the p50 and p95 gains, the
        # error interval's median), never the whole groups
        resamples = Thresholds().bootstrap_resamples
        assert len(p["codes"]) <= groups * (6 * resamples + 4)
        assert len(set(p["codes"])) == len(p["codes"])  # each rank once
