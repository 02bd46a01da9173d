"""The SQL engine a report's analysis runs on: DuckDB in this process (the default), or Spark
for a fleet that outgrows one machine. Both read the same dataset and run the same SQL; only
where it runs differs (`Engine.connect`)."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Protocol

from mapreport.core.connection import Connection
from mapreport.core.errors import ConfigError, MapreportError
from mapreport.core.extras import install_hint
from mapreport.core.window import EVERYTHING, Window
from mapreport.engine.settings import EngineName, EngineSettings

if TYPE_CHECKING:
    from pathlib import Path

    from mapreport.dataset.store import Dataset
    from mapreport.ingest import Reading, Staged


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

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        """DuckDB's threads per connection (default: every core). Workers that share the
        machine's cores each take their share; the analysis's sums are compensated (`fsum`), so
        its results do not depend on how many threads add them."""

    def connect(self, ds: Dataset, workload: str | None, window: Window = EVERYTHING) -> Connection:
        """A DuckDB connection (`views.connect`)."""
        from mapreport.dataset import views  # DuckDB's import (0.1 s) only where a query runs

        return views.connect(ds, workload, window, threads=self.threads)

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
            f"{install_hint('spark')}"
        )
    from mapreport.engine.spark import SparkEngine

    return SparkEngine(settings)
