"""What a Spark run prints (issue 54, item 7): without a terminal, one progress line per stage
and per slice on stderr, and nothing of the JVM's (its start-up warnings, log4j's, Spark's
"Setting default log level"); a line that is not noise (a fatal error) still comes through."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mapreport.app.terminal import progress_printer
from tests.conftest import SAMPLE_DATA

pytest.importorskip("pyspark", reason="pip install -e '.[spark]' (make does)")
from mapreport.engine.spark import (
    JAVA_OPTIONS,
    LOG_OPTION,
    filter_jvm_stderr,
    session_conf,
)

pytestmark = pytest.mark.spark

NOISE = re.compile(r"WARN|log4j|NativeCodeLoader|incubator|log level|setLogLevel", re.IGNORECASE)
"""What no line of a Spark run's stderr may say."""


def test_a_spark_run_without_a_terminal_prints_progress_and_no_jvm_warnings(
    tmp_path: Path,
) -> None:
    """`mapreport run --engine spark` of one night of one slice, its output piped (no
    terminal): stderr is the progress lines alone, in order; stdout the summary as ever."""
    if shutil.which("java") is None:
        pytest.fail("Spark's local mode needs Java 17 on PATH (apt install openjdk-17-jre)")
    shutil.copy(SAMPLE_DATA / "plans" / "bert-base.compile.jsonl", tmp_path)
    shutil.copy(SAMPLE_DATA / "nights" / "2026-11-28" / "bert-base.runtime.jsonl.gz", tmp_path)
    config = tmp_path / "mapreport.toml"
    config.write_text(
        '[run]\ndataset = "ds"\nout = "out"\nsources = ["*.compile.jsonl", "*.runtime.*"]\n'
        '[engine]\nconf = { "spark.driver.memory" = "1g" }\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    done = subprocess.run(
        [
            *(sys.executable, "-m", "mapreport", "run", str(config), "--date", "2026-11-28"),
            *("--engine", "spark", "--pdf", "packet"),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    err = done.stderr.splitlines()
    assert [line for line in err if NOISE.search(line)] == []
    assert all(line.startswith("  ") for line in err), err
    steps = [re.sub(r"\d+\.\d s|\d+:\d\d", "T", line.split(" /")[0].strip()) for line in err]
    assert steps == [
        "ingest 0/2: the files read on spark's executors",
        "ingest 1/2",
        "ingest 2/2",
        "slices: listing them on spark",
        "slices 0/1 listed in T",
        "slices 1/1 (bert-base reported), T elapsed",
    ]
    assert "report    bert-base -> " in done.stdout
    assert (tmp_path / "out" / "bert-base" / "report.pdf").stat().st_size > 0


def test_the_jvms_noise_is_logged_and_anything_else_printed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lines = [
        b"WARNING: Using incubator modules: jdk.incubator.vector\n",
        b"Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n",
        b'Setting default log level to "WARN".\n',
        b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use ...\n",
        b"26/12/06 13:45:25 WARN NativeCodeLoader: Unable to load native-hadoop library\n",
        b"26/12/06 13:45:25 INFO SparkContext: Running Spark version 4.0.0\n",
        b"26/12/06 13:45:26 FATAL SparkContext: out of memory\n",
        b'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n',
    ]
    out = io.StringIO()
    with caplog.at_level("DEBUG", logger="mapreport.engine.spark"):
        filter_jvm_stderr(lines, out)
    assert out.getvalue().splitlines() == [
        "26/12/06 13:45:26 FATAL SparkContext: out of memory",
        'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space',
    ]
    assert len(caplog.records) == 6


def test_driver_java_options_of_the_config_keep_the_log_settings() -> None:
    """[engine.conf] Java options add to mapreport's log settings, unless they name their own
    log4j2 configuration (else Spark's default profile and its warnings would be back)."""
    assert session_conf({})[JAVA_OPTIONS] == LOG_OPTION
    mine = session_conf({JAVA_OPTIONS: "-XX:+UseG1GC"})[JAVA_OPTIONS]
    assert mine == f"-XX:+UseG1GC {LOG_OPTION}"
    own = "-Dlog4j2.configurationFile=file:///etc/log4j2.properties"
    assert session_conf({JAVA_OPTIONS: own})[JAVA_OPTIONS] == own


def test_progress_without_a_terminal_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    progress_printer(quiet=False)("not on a terminal")
    progress_printer(quiet=True, always=True)("quiet wins")
    progress_printer(quiet=False, always=True)("slices 1/3")
    assert capsys.readouterr().err == "  slices 1/3\n"
