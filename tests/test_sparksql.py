"""The analysis SQL as Spark SQL (mapreport/sparksql.py): what sqlglot's own Spark output gets
wrong for these queries, what the dialect writes instead, and that every query the analysis
runs transpiles without a warning, an unsupported construct or an approximate function."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pytest
import sqlglot

from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.analysis.base.packs import (
    NoParams,
    QueueParams,
    RegressionParams,
    SampleParams,
    TailParams,
)
from mapreport.analysis.serving.adaptation import RANKS_SQL
from mapreport.analysis.steps.packs import pack_sql
from mapreport.core.kinds import Driver, Reduction
from mapreport.dataset.store import Dataset
from mapreport.engine.sparksql import APPROXIMATE, TranspileError, to_spark
from mapreport.run.ingesting import ingest
from tests.test_torch_serving import CASE


@pytest.mark.parametrize(
    ("duckdb_sql", "plain_spark", "ours"),
    [
        ("SELECT quantile_cont(x, 0.5) FROM t", "PERCENTILE_CONT(x, 0.5)", "PERCENTILE(x, 0.5)"),
        (
            "SELECT quantile_cont(x, [0.5, 0.95]) FROM t",
            "PERCENTILE_CONT(x, ARRAY(0.5, 0.95))",
            "PERCENTILE(x, ARRAY(0.5, 0.95))",
        ),
        (
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM t",
            "PERCENTILE_APPROX(x, 0.5)",
            "PERCENTILE(x, 0.5)",
        ),
        ("SELECT list(x ORDER BY y) FROM t", "COLLECT_LIST(x)", "TRANSFORM(ARRAY_SORT("),
        ("SELECT first(x ORDER BY y DESC, z) FROM t", "FIRST(x ORDER BY", "ELEMENT_AT(ARRAY_SORT("),
        (
            "CREATE OR REPLACE TEMP TABLE t AS SELECT 1 AS a",
            "CREATE TEMPORARY VIEW t",
            "CREATE OR REPLACE TEMPORARY VIEW t",
        ),
    ],
)
def test_the_dialect_keeps_the_meaning_sqlglot_loses(
    duckdb_sql: str, plain_spark: str, ours: str
) -> None:
    """sqlglot's Spark output rejects, approximates or reorders; the dialect's does not."""
    assert plain_spark in sqlglot.transpile(duckdb_sql, read="duckdb", write="spark")[0]
    out = to_spark(duckdb_sql)
    assert ours in out
    assert not APPROXIMATE.search(out)


def test_an_ordered_percentile_it_cannot_state_is_refused() -> None:
    with pytest.raises(TranspileError, match="ordered by more than one"):
        to_spark("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x DESC) FROM t")


class Recording:
    """A connection that keeps the text of every query run on it."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.queries: list[str] = []

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self.queries.append(sql)
        return self.con.execute(sql, *args, **kwargs)

    def sql(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self.queries.append(sql)
        return self.con.sql(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def _analysis_queries(ds: Path) -> list[str]:
    con = Dataset(ds).connect()
    rec = Recording(con)
    for w, s in list_slices(con):
        analyze_slice(rec, w, s, Thresholds())  # type: ignore[arg-type]  # a recording proxy
    return list(dict.fromkeys(rec.queries))


@pytest.mark.slow
def test_every_analysis_query_transpiles(demo_dataset: Path, tmp_path: Path) -> None:
    """Every distinct query the analysis runs on the demo and on the real torch.compile case
    (its blocking SQL reads compile events too) becomes one Spark statement, with no
    unsupported construct and no approximate function."""
    ingest(
        tmp_path / "ts",
        [CASE / "serving.runtime.jsonl.gz", *sorted((CASE / "torch_trace").iterdir())],
        hints={"workload": "torch-serving"},
    )
    queries = _analysis_queries(demo_dataset) + _analysis_queries(tmp_path / "ts")
    # every family of the analysis was recorded (a slice runs about 18 statements), and the
    # query of the groups read by rank, which the demo's slices do not need on DuckDB
    assert len(set(queries)) >= 30
    queries.append(RANKS_SQL)
    for q in dict.fromkeys(queries):
        out = to_spark(q)
        # DuckDB's list functions passed through by name: Spark has none of them
        assert not re.search(r"\bLIST_[A-Z_]+\s*\(", out, re.IGNORECASE), out
        assert not APPROXIMATE.search(out), q
        assert not re.search(r"\$[A-Za-z_]", out)  # DuckDB's $name parameters are Spark's :name


@pytest.mark.parametrize(
    ("reduction", "params"),
    [
        (
            Reduction.TAIL_SHARE,
            TailParams(Driver.BLOCKED_BEHIND_ADAPTATION, ["a'b"], {"a'b": 1e9}),
        ),
        (Reduction.NET_GAIN, SampleParams(covered=True)),
        (Reduction.REGRESSION, RegressionParams([1.0, 2.0], 2)),
        (Reduction.BLOCKED_SHARE, NoParams()),
        (Reduction.QUEUE_CHECK, QueueParams("vLLM", 0.0, 1e6)),
    ],
)
def test_a_packs_sql_names_each_cte_once(reduction: Reduction, params: Any) -> None:
    """A pack's SQL defines the slice's objects as CTEs, each over its own CTEs: Spark refuses
    one name defined twice at any depth (DUPLICATED_CTE_NAMES), where DuckDB lets the inner
    one shadow the outer."""
    sql = pack_sql(reduction, "w", "s", "a'b", params)
    names = [c.alias for c in sqlglot.parse_one(sql, read="duckdb").find_all(sqlglot.exp.CTE)]
    assert len(names) > 5
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    to_spark(sql)
