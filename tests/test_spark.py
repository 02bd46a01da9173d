"""The transpiled analysis SQL on Spark (local[2]): the same rows as DuckDB for the constructs
sqlglot's own Spark output gets wrong (the slice's objects with its primary plan by an ordered
first, exact percentile lists, ordered sample lists, the blocking window functions, ordered
distinct lists), on every demo slice. Needs the `spark` extra (the Makefile installs it) and
Java 17."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mapreport.analysis import list_slices, query
from mapreport.analysis.blocking import EVENTS_SQL, VICTIMS_SQL, blocked_select
from mapreport.analysis.query import BLOCKED_TABLE, GRID, ON_PRIMARY, SLICE_TABLE
from mapreport.sparksql import to_spark
from mapreport.store import Dataset

pyspark = pytest.importorskip("pyspark", reason="pip install -e '.[spark]' (make does)")
pytestmark = pytest.mark.spark

CHECKS = {
    "primary plan": f"SELECT shape, plan FROM {SLICE_TABLE}_primary ORDER BY shape",
    "percentiles": f"SELECT shape, count(*) AS n, quantile_cont(latency_us, {GRID}) FILTER "
    f"(WHERE status = 'ok') AS q FROM {SLICE_TABLE} GROUP BY shape ORDER BY shape",
    "ordered samples": f"SELECT shape, variant, list(compute_us ORDER BY compute_us) AS v "
    f"FROM ({ON_PRIMARY}) WHERE status = 'ok' GROUP BY shape, variant ORDER BY shape, variant",
    "blocking events": EVENTS_SQL,
    "blocked shapes": VICTIMS_SQL,
    "ordered distinct": f"SELECT shape, list(DISTINCT source_id ORDER BY source_id) AS s "
    f"FROM {SLICE_TABLE} GROUP BY shape ORDER BY shape",
}
TABLES = ("request", "adaptation_event", "compile_event")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] session with a 2 GB driver for the whole run."""
    if shutil.which("java") is None:
        pytest.fail("Spark's local mode needs Java 17 on PATH (apt install openjdk-17-jre)")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def test_the_tricky_constructs_give_duckdbs_rows(spark: Any, demo_dataset: Path) -> None:
    for table in TABLES:
        files = sorted(str(f) for f in (demo_dataset / table).rglob("*.parquet"))
        if files:
            spark.read.option("mergeSchema", "true").parquet(*files).createOrReplaceTempView(table)
    if not list((demo_dataset / "compile_event").rglob("*.parquet")):  # the demo has none
        spark.sql(
            "CREATE OR REPLACE TEMPORARY VIEW compile_event AS SELECT CAST(NULL AS STRING) AS "
            "workload, CAST(NULL AS STRING) AS slice, CAST(NULL AS DOUBLE) AS ts_us, "
            "CAST(NULL AS DOUBLE) AS compile_ms WHERE false"
        )
    con = Dataset(demo_dataset).connect()
    compared = 0
    for w, s in list_slices(con):
        query.load_slice(con, w, s)
        select = blocked_select(w, s)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {BLOCKED_TABLE} AS {select}")
        for kind, name, body in query.slice_definitions(w, s):
            spark.sql(to_spark(f"CREATE OR REPLACE TEMP {kind} {name} AS {body}"))
        spark.sql(to_spark(f"CREATE OR REPLACE TEMP TABLE {BLOCKED_TABLE} AS {select}"))
        for check, sql in CHECKS.items():
            want = [list(r) for r in con.execute(sql).fetchall()]
            got = [list(r) for r in spark.sql(to_spark(sql)).collect()]
            assert want, (w, s, check)
            assert _same(got, want), (w, s, check, got[:2], want[:2])
            compared += 1
        query.drop_slice(con)
    assert compared == len(CHECKS) * 3
