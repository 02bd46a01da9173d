"""Which engine a run asks for and how it is set up (the `[engine]` section, `--engine`):
plain values that the configuration, the command line and each engine read."""

from __future__ import annotations

from enum import StrEnum

import msgspec


class EngineName(StrEnum):
    """Where the analysis SQL runs."""

    DUCKDB = "duckdb"
    SPARK = "spark"


class EngineSettings(msgspec.Struct, frozen=True):
    """The `[engine]` section of a run configuration (or `--engine`)."""

    name: EngineName = EngineName.DUCKDB
    master: str = "local[2]"
    """Spark's master URL (`local[N]`, `spark://host:7077`, `yarn`, ...)."""
    conf: dict[str, str] = msgspec.field(default_factory=dict)
    """Extra Spark configuration, as `spark-submit --conf` takes it."""
    dataset_uri: str | None = None
    """Where Spark's executors read the dataset's Parquet files (`s3a://...`, `hdfs://...`):
    the same folder as the dataset, seen from the cluster. Default: the dataset's own path as a
    `file://` URI (local mode, or a shared file system)."""
