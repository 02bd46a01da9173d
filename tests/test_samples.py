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
from mapreport.analysis.adaptation import RANKS_SQL
from mapreport.analysis.stats import SortedArray, quantile
from mapreport.dataset.store import Dataset


@given(
    st.lists(st.floats(0, 1e9, allow_nan=False), min_size=1, max_size=300),
    st.floats(0, 1),
)
def test_a_quantile_from_two_ranks_is_numpys(values: list[float], q: float) -> None:
    assert quantile(SortedArray(values), q) == float(np.quantile(np.asarray(values), q))


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
        assert ranked, (w, s)  # the demo's groups hold hundreds of requests
        # at most the resamples' two order statistics per read, never the whole group
        assert max(len(p["ranks"]) for p in ranked) <= 2 * Thresholds().bootstrap_resamples
