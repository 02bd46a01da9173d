"""The engine switch: `[engine]` in the config, `--engine` on the command line, and what a
missing Spark extra or Java says (one line, exit code 4, never a traceback)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mapreport.app.cli import main
from mapreport.core.errors import ConfigError
from mapreport.core.extras import install_hint
from mapreport.engine import engines as engine_module
from mapreport.engine.engines import DUCKDB, open_engine
from mapreport.engine.settings import EngineName, EngineSettings
from mapreport.run.config import load_config


def _config(tmp_path: Path, engine: str) -> Path:
    p = tmp_path / "mapreport.toml"
    p.write_text(f'[run]\ndataset = "ds"\n\n[engine]\n{engine}\n')
    return p


def test_the_engine_section_is_read_and_checked(tmp_path: Path) -> None:
    cfg = load_config(
        _config(
            tmp_path,
            'name = "spark"\nmaster = "spark://head:7077"\ndataset_uri = "s3a://b/ds"\n'
            'conf = { "spark.executor.memory" = "8g" }',
        )
    )
    assert cfg.engine == EngineSettings(
        EngineName.SPARK, "spark://head:7077", {"spark.executor.memory": "8g"}, "s3a://b/ds"
    )
    assert load_config(_config(tmp_path, "")).engine.name is EngineName.DUCKDB
    with pytest.raises(ConfigError, match=r"engine.name"):
        load_config(_config(tmp_path, 'name = "trino"'))
    with pytest.raises(ConfigError, match=r"engine"):
        load_config(_config(tmp_path, "workers = 4"))
    # how the SQL runs is not what a report is made from: its fingerprint ignores it
    assert repr(load_config(_config(tmp_path, 'name = "spark"'))) == repr(
        load_config(_config(tmp_path, ""))
    )


def test_duckdb_needs_nothing_new() -> None:
    assert open_engine(EngineSettings()) is DUCKDB


def test_spark_without_its_extra_names_the_extra(
    tmp_path: Path, demo_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        engine_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "pyspark" else real(name, *a),
    )
    hint = install_hint("spark")
    assert hint.endswith(f"-m pip install -e '{Path(__file__).resolve().parents[1]}[spark]'")
    with pytest.raises(ConfigError, match=r"needs pyspark.*pip install -e '.*\[spark\]'"):
        open_engine(EngineSettings(EngineName.SPARK))
    args = ["report", "--dataset", str(demo_dataset), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, [*args, "--engine", "spark", "--no-pdf"])
    assert result.exit_code == 4
    assert result.output.strip().splitlines() == [
        f"mapreport: engine spark needs pyspark, which this environment lacks: {hint}"
    ]


def test_spark_without_java_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    from mapreport.engine import spark

    monkeypatch.setattr(spark.shutil, "which", lambda _name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ConfigError, match=r"needs Java 17 .*openjdk-17-jre-headless"):
        spark.start_session(EngineSettings(EngineName.SPARK))


@pytest.mark.slow
def test_a_long_query_draws_no_progress_bar_on_stdout(demo_dataset: Path) -> None:
    """DuckDB draws a progress bar on stdout for a query over 2 s, terminal or not (at 10M
    requests the analysis printed '99%' bars into the nightly job's output): mapreport's
    connections, the views' and the ingest's, have it off."""
    slow = "SELECT sum(a.range * b.range) FROM range(60000) a, range(30000) b"
    probe = (
        "import sys; from pathlib import Path; from mapreport.dataset.store import Dataset; "
        "from mapreport.dataset.views import connect; "
        f"connect(Dataset(Path(sys.argv[1]))).execute({slow!r}).fetchall()"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(demo_dataset)], capture_output=True, check=True
    ).stdout
    assert out == b""
    from mapreport.dataset.views import duckdb_connection  # the one the ingest's check uses

    setting = "SELECT current_setting('enable_progress_bar')"
    assert duckdb_connection([demo_dataset]).execute(setting).fetchone() == (False,)
