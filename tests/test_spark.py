"""The Spark engine (local[2]): the transpiled analysis SQL gives DuckDB's rows for the constructs
sqlglot's own Spark output gets wrong, every golden case's findings equal DuckDB's (1e-9
relative, CIs included), and `mapreport run --engine spark` on sample_data/ writes DuckDB's
findings.json for every slice. Needs the `spark` extra (the Makefile installs it) and Java 17."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.analysis.base import query
from mapreport.analysis.base.query import (
    GRID,
    PLANS_TABLE,
    SAMPLES,
    SHAPE_STATS,
    SLICE_TABLE,
    inline,
)
from mapreport.analysis.serving.blocking import (
    EVENTS_SQL,
    LIMIT_HIT,
    VICTIMS_SQL,
    blocking_definitions,
)
from mapreport.app.cli import main
from mapreport.core.errors import InputError
from mapreport.core.records import replace
from mapreport.dataset.store import Dataset
from mapreport.demo.nights import NIGHTS
from mapreport.engine.engines import open_engine
from mapreport.engine.settings import EngineName, EngineSettings
from mapreport.engine.sparksql import to_spark
from mapreport.report.findings import plain
from mapreport.run.config import load_config
from mapreport.run.ingesting import ingest
from mapreport.run.nightly import run
from tests.conftest import SAMPLE_DATA
from tests.test_golden import CASES, Case, compare, golden_case, needs, run_case

pyspark = pytest.importorskip("pyspark", reason="pip install -e '.[spark]' (make does)")
from mapreport.engine.spark import SparkConnection, start_session  # noqa: E402  (needs pyspark)

pytestmark = pytest.mark.spark

CHECKS = {
    "plans": f"SELECT shape, plan, plan_ids, plan_counts FROM {PLANS_TABLE} ORDER BY shape",
    "shape table": f"SELECT shape, n, plan, plan_ids, cores, core_c50s, sources FROM {SHAPE_STATS} "
    "ORDER BY shape",
    "percentiles": f"SELECT shape, count(*) AS n, quantile_cont(latency_us, {GRID}) FILTER "
    f"(WHERE status = 'ok') AS q FROM {SLICE_TABLE} GROUP BY shape ORDER BY shape",
    "ordered samples": f"SELECT shape, variant, list(compute_us ORDER BY compute_us) AS v "
    f"FROM ({SAMPLES}) GROUP BY shape, variant ORDER BY shape, variant",
    "blocking events": EVENTS_SQL,
    "blocked shapes": inline(VICTIMS_SQL, {"how": LIMIT_HIT}),
    "ordered distinct": f"SELECT shape, list(DISTINCT source_id ORDER BY source_id) AS s "
    f"FROM {SLICE_TABLE} GROUP BY shape ORDER BY shape",
}
TABLES = ("request", "adaptation_event", "compile_event")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] session with a 2 GB driver for the whole run."""
    if shutil.which("java") is None:
        pytest.fail("Spark's local mode needs Java 17 on PATH (apt install openjdk-17-jre)")
    # the engine's own settings; mapreport's runs below find this session active and reuse it
    session = start_session(EngineSettings(conf={"spark.driver.memory": "2g"}))
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
            "CAST(NULL AS DOUBLE) AS compile_ms, CAST(NULL AS INT) AS core, "
            "CAST(NULL AS STRING) AS outcome, CAST(NULL AS BOOLEAN) AS cache_hit WHERE false"
        )
    con = Dataset(demo_dataset).connect()
    on_spark = SparkConnection(spark)
    compared = 0
    for w, s in list_slices(con):
        query.load_slice(con, w, s)
        marks = blocking_definitions(w, s)
        query.create(con, marks)
        # through the engine's connection, as a run creates them: its tables are checkpoints
        # (as plain views, each check computed the blocking marks again: 126 s for the test)
        for kind, name, body in [*query.slice_definitions(w, s), *marks]:
            on_spark.execute(f"CREATE OR REPLACE TEMP {kind} {name} AS {body}")
        for check, sql in CHECKS.items():
            want = [list(r) for r in con.execute(sql).fetchall()]
            got = [list(r) for r in spark.sql(to_spark(sql)).collect()]
            assert want, (w, s, check)
            assert _same(got, want), (w, s, check, got[:2], want[:2])
            compared += 1
    assert compared == len(CHECKS) * 3


SPARK = EngineSettings(EngineName.SPARK)
EXACT = {"rel": 1e-9, "ci_abs": 1e-9}
"""Both engines see the same rows: every figure and interval agrees to 1e-9."""


def _plain(x: Any) -> Any:
    return json.loads(json.dumps(plain(x)))


def _last_job(spark: Any) -> int:
    """The id of the last Spark job the session ran (ids only grow)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)


def _findings(case: Case) -> dict[str, Any]:
    return {f: json.loads((case.out / f / "findings.json").read_text()) for f in case.folders}


SAME_SQL_ON_SPARK = {
    "torch-dynamic",
    "torch-kernels",
    "torch-limit",
    "torch-limit-native",
    "torch-workers-native",
}
"""Golden cases whose queries another case already runs on Spark (torch-workers: traces of two
workers at the recompile limit, ops joined per graph; torch-eager: the gain's other path;
torch-serving: native): each
costs 10-23 s of Spark here, and Spark's answer to the same SQL is checked once."""


@pytest.mark.parametrize("name", [c for c in CASES if c != "demo" and c not in SAME_SQL_ON_SPARK])
def test_every_golden_case_gives_duckdbs_findings_on_spark(
    spark: Any, name: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    needs(name)
    duck = golden_case(name, tmp_path_factory)  # test_golden's run on DuckDB, made once
    on_spark = run_case(name, tmp_path / "spark", SPARK)
    assert on_spark.folders == duck.folders
    want, got = _findings(duck), _findings(on_spark)
    assert [d for f in want for d in compare(got[f], want[f], f, **EXACT)] == []


def test_mapreport_run_engine_spark_on_sample_data_writes_duckdbs_findings(
    spark: Any, tmp_path: Path
) -> None:
    """Three demo nights on each engine, the third through the CLI with its PDFs: the same
    findings for every slice, history, drift and actions included."""
    configs = {}
    for engine in EngineName:
        shutil.copytree(SAMPLE_DATA, tmp_path / engine / "sample_data")
        configs[engine] = tmp_path / engine / "sample_data" / "mapreport.toml"
        config = replace(load_config(configs[engine]), engine=EngineSettings(engine))
        for night in NIGHTS[:-1]:
            # two slices analysed at once on Spark (its own test of the threads), one on DuckDB
            run(config, night=night, pdf=False, jobs=2 if engine == EngineName.SPARK else 1)
    duck = load_config(configs[EngineName.DUCKDB])
    run(duck, night=NIGHTS[-1], pdf=False)
    args = ["run", str(configs[EngineName.SPARK]), "--date", NIGHTS[-1].isoformat()]
    jobs = _last_job(spark)
    # two slices analysed at once on the one session (issue 38), the same findings
    result = CliRunner().invoke(main, [*args, "--engine", "spark", "--jobs", "2", "-q"])
    assert result.exit_code == 0, result.output
    assert _last_job(spark) > jobs  # it ran on Spark
    reports = {e: tmp_path / e / "demo" / "reports" for e in EngineName}
    folders = sorted(
        f.parent.relative_to(reports[EngineName.DUCKDB])
        for f in reports[EngineName.DUCKDB].rglob("findings.json")
    )
    assert len(folders) == 4  # qwen-chat: AIPerf and /metrics on Spark too
    for f in folders:
        want = json.loads((reports[EngineName.DUCKDB] / f / "findings.json").read_text())
        got = json.loads((reports[EngineName.SPARK] / f / "findings.json").read_text())
        assert compare(got, want, str(f), **EXACT) == []
        assert (reports[EngineName.SPARK] / f / "report.pdf").stat().st_size > 0


def _tables(ds: Path) -> dict[str, list[dict[str, Any]]]:
    """Every table of a dataset as sorted rows (the log without its ingest times)."""
    out = {}
    for table in sorted(p.name for p in ds.iterdir() if p.is_dir() and p.name[0] != "."):
        rows = [
            {k: v for k, v in r.items() if k != "ingested_at"}
            for f in sorted((ds / table).rglob("*.parquet"))
            for r in pq.ParquetFile(f).read().to_pylist()
        ]
        out[table] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return out


def test_ingest_on_spark_executors_leaves_the_dataset_a_serial_ingest_leaves(
    spark: Any, tmp_path: Path
) -> None:
    sources = [SAMPLE_DATA / "plans", SAMPLE_DATA / "nights" / NIGHTS[0].isoformat()]
    jobs = _last_job(spark)
    spread = ingest(tmp_path / "spark", sources, engine=open_engine(SPARK))
    assert _last_job(spark) > jobs  # the executors read the files
    serial = ingest(tmp_path / "serial", sources)
    assert [(r.path, r.source_id, r.rows, r.days) for r in spread] == [
        (r.path, r.source_id, r.rows, r.days) for r in serial
    ]
    assert _tables(tmp_path / "spark") == _tables(tmp_path / "serial")
    again = ingest(tmp_path / "spark", sources, engine=open_engine(SPARK))
    assert {r.status for r in again} == {"unchanged"}
    assert not list((tmp_path / "spark").glob(".staging/*"))


@pytest.mark.parametrize("policy", ["abort", "quarantine"])
def test_a_bad_file_on_spark_is_what_it_is_on_one_machine(
    spark: Any, tmp_path: Path, policy: str
) -> None:
    bad = tmp_path / "bad.runtime.jsonl"
    bad.write_text('{"kind": "request", "workload": "w", "shape": "a=1", "arrival_us": "x"}\n')
    files = [SAMPLE_DATA / "quality.jsonl", bad, SAMPLE_DATA / "plans"]
    said = {}
    for engine in EngineName:
        ds = tmp_path / engine
        with pytest.raises(InputError) as e:
            ingest(ds, files, policy, engine=open_engine(EngineSettings(engine)))
        said[engine] = (str(e.value).replace(str(tmp_path), ""), _tables(ds))
    assert said[EngineName.SPARK] == said[EngineName.DUCKDB]


def test_groups_read_by_rank_on_spark_give_duckdbs_intervals(
    spark: Any, demo_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver takes a group above `sample_limit` by rank: the same figures and CIs."""
    monkeypatch.setattr(SparkConnection, "sample_limit", 600)
    ds = Dataset(demo_dataset)
    duck = analyze_slice(ds.connect(), "bert-base", "", Thresholds())
    on_spark = analyze_slice(open_engine(SPARK).connect(ds, None), "bert-base", "", Thresholds())
    assert compare(_plain(on_spark), _plain(duck), "$", **EXACT) == []
    assert max(s.gain.n_baseline for s in duck.shapes) > 600  # some groups read by rank


def test_a_static_spark_setting_in_the_config_is_kept_for_the_session(
    spark: Any, demo_dataset: Path
) -> None:
    """[engine.conf] may hold settings fixed at a session's start: a connection leaves them."""
    conf = {"spark.sql.ui.retainedExecutions": "50", "spark.sql.shuffle.partitions": "3"}
    con = open_engine(EngineSettings(EngineName.SPARK, conf=conf)).connect(
        Dataset(demo_dataset), None
    )
    assert con.session.conf.get("spark.sql.shuffle.partitions") == "3"
    assert list_slices(con)
