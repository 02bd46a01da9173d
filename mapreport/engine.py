"""The SQL engine a report's analysis runs on: DuckDB in this process (the default), or Spark
for a fleet that outgrows one machine. Both read the same dataset and run the same SQL; only
where it runs differs (`Engine.connect`)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from mapreport.connection import Connection
from mapreport.errors import ConfigError, MapreportError
from mapreport.window import EVERYTHING, Window

if TYPE_CHECKING:
    from pathlib import Path

    from mapreport.ingest import Reading, Staged
    from mapreport.store import Dataset


class EngineName(StrEnum):
    """Where the analysis SQL runs."""

    DUCKDB = "duckdb"
    SPARK = "spark"


SPARK_EXTRA = "pip install 'mapreport[spark]'"
"""What installs the Spark engine's packages (pyspark, sqlglot)."""


@dataclass(frozen=True)
class EngineSettings:
    """The `[engine]` section of a run configuration (or `--engine`)."""

    name: EngineName = EngineName.DUCKDB
    master: str = "local[2]"
    """Spark's master URL (`local[N]`, `spark://host:7077`, `yarn`, ...)."""
    conf: dict[str, str] = field(default_factory=dict)
    """Extra Spark configuration, as `spark-submit --conf` takes it."""
    dataset_uri: str | None = None
    """Where Spark's executors read the dataset's Parquet files (`s3a://...`, `hdfs://...`):
    the same folder as the dataset, seen from the cluster. Default: the dataset's own path as a
    `file://` URI (local mode, or a shared file system)."""


class Engine(Protocol):
    """Opens connections with the dataset's views (`views.define_views`)."""

    name: EngineName
    views_per_workload: bool
    """Whether a slice's analysis gets a connection over its workload's files alone (DuckDB:
    views are cheap, and a query then opens only those files) rather than sharing one over
    every workload (Spark: making views reads every file's schema, seconds each time)."""

    def connect(self, ds: Dataset, workload: str | None, window: Window = EVERYTHING) -> Connection:
        """A connection with one view per canonical table over the window's committed files."""

    def stage_files(
        self, ds: Dataset, files: list[Path], how: Reading
    ) -> list[Staged | MapreportError] | None:
        """Each file read and staged under the dataset by the engine's workers, in the files'
        order (a file's reader error in its place), for this process to commit; None: the
        engine reads nothing itself (files are read here, `ingest --jobs`)."""

    def close(self) -> None:
        """Release what the engine holds (Spark: its session)."""


class DuckDBEngine:
    """DuckDB in this process, over the dataset's files as they lie here."""

    name = EngineName.DUCKDB
    views_per_workload = True

    def connect(self, ds: Dataset, workload: str | None, window: Window = EVERYTHING) -> Connection:
        """A DuckDB connection (`views.connect`)."""
        from mapreport import views  # DuckDB's import (0.1 s) only where a query runs

        return views.connect(ds, workload, window)

    def stage_files(
        self, ds: Dataset, files: list[Path], how: Reading
    ) -> list[Staged | MapreportError] | None:
        """None: DuckDB has no workers of its own."""
        return None

    def close(self) -> None:
        """Nothing to release: each connection closes when it is dropped."""


DUCKDB = DuckDBEngine()


def open_engine(settings: EngineSettings) -> Engine:
    """The engine the settings name; the Spark one a clear error when its extra is missing."""
    if settings.name is EngineName.DUCKDB:
        return DUCKDB
    missing = [m for m in ("pyspark", "sqlglot") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"engine spark needs {' and '.join(missing)}, which this environment lacks: "
            f"{SPARK_EXTRA}"
        )
    from mapreport.spark import SparkEngine

    return SparkEngine(settings)
