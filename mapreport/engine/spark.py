"""The Spark engine: the analysis's DuckDB-dialect SQL transpiled (`sparksql.to_spark`) and run on
a SparkSession, over the dataset's Parquet files read from a local path or any Hadoop URI.

Imported only when `--engine spark` (or `[engine] name = "spark"`) asks for it: it needs the
`spark` extra and Java 17. Each connection is its own SparkSession (`newSession`: its own
temporary views, one SparkContext), so connections do not see each other's slice views.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from mapreport.core.connection import Connection
from mapreport.core.errors import ConfigError, DatasetError, MapreportError
from mapreport.core.window import EVERYTHING, Window
from mapreport.dataset.views import define_views
from mapreport.engine.settings import EngineName, EngineSettings
from mapreport.engine.sparksql import to_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mapreport.dataset.store import Dataset
    from mapreport.ingest import Reading, Staged

LOG_CONFIG = Path(__file__).with_name("spark-log4j2.properties")
"""Spark's log4j2 settings while mapreport drives it (fatal errors only)."""
LOG_OPTION = f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
JVM_NOISE = re.compile(
    r"WARNING: "  # the JVM's own start-up warnings (Spark 4 adds jdk.incubator.vector)
    r"|Setting default log level to |To adjust logging level use sc\.setLogLevel"
    r"|Using Spark's default log4j profile"
    r"|\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO|DEBUG|TRACE) "  # log4j, below an error
    r"|.*NativeCodeLoader"
)
"""Lines of the JVM's stderr that are not for the user: logged (`-v` shows them), not printed.
Any other line (a fatal error, a crash, an executor's traceback) is printed as it comes."""
_log = logging.getLogger(__name__)

DEFAULT_CONF = {
    "spark.app.name": "mapreport",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # a folder name is not data: a workload is what its rows hold (as DuckDB reads them)
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # DuckDB's semantics: x / 0 and an impossible cast are NULL, not an error
    "spark.sql.ansi.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    JAVA_OPTIONS: LOG_OPTION,
}
"""Spark settings the analysis relies on; `[engine.conf]` adds to them or overrides them."""

_SCANS = itertools.count()

# pyspark warns of pandas 3 at its first query; mapreport hands it no pandas
warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
# pyspark logs every failed query's plan and Java stack as JSON; SparkQueryError says it in a line
logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


class SparkQueryError(MapreportError):
    """A statement Spark refused or failed to run (its first line)."""


def session_conf(conf: dict[str, str]) -> dict[str, str]:
    """DEFAULT_CONF with `conf` over it; driver Java options given in `conf` keep mapreport's
    log settings unless they name a log4j2 configuration of their own (else Spark falls back
    to its default profile and its warnings)."""
    out = {**DEFAULT_CONF, **conf}
    own = conf.get(JAVA_OPTIONS)
    if own is not None and "log4j2.configurationFile" not in own:
        out[JAVA_OPTIONS] = f"{own} {LOG_OPTION}".strip()
    return out


def filter_jvm_stderr(lines: Iterable[bytes], out: IO[str] | None = None) -> None:
    """Each line the JVM writes to its stderr: JVM_NOISE to the log, any other to `out`
    (default: this process's stderr at the time)."""
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if JVM_NOISE.match(line):
            _log.debug("spark: %s", line)
            continue
        stream = out or sys.stderr
        stream.write(line + "\n")
        stream.flush()


def _launch_jvm(master: str, conf: dict[str, str]) -> None:
    """Start Spark's JVM with its stderr through `filter_jvm_stderr` and a SparkContext on it,
    as `getOrCreate` would with the same settings; nothing when this process's JVM runs
    already (an earlier session here, or spark-submit's gateway)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if os.environ.get("PYSPARK_GATEWAY_PORT") or getattr(SparkContext, "_gateway", None):
        return
    spark_conf = SparkConf().setMaster(master).setAll(list(conf.items()))
    gateway = launch_gateway(spark_conf, {"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    proc = gateway.proc
    threading.Thread(
        target=filter_jvm_stderr, args=(proc.stderr,), name="spark-stderr", daemon=True
    ).start()
    SparkContext(conf=spark_conf, gateway=gateway)


def start_session(settings: EngineSettings) -> SparkSession:
    """A SparkSession on the settings' master (local mode needs Java on this machine)."""
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and Path(java_home, "bin", "java").exists()):
        raise ConfigError(
            "engine spark needs Java 17 (none on PATH or in JAVA_HOME): "
            "apt-get install openjdk-17-jre-headless"
        )
    if settings.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no lookup of this host's name
        # executors run mapreport's readers: the Python it is installed in, not PATH's python3
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit, its --master applies
        builder = builder.master(settings.master)
    conf = session_conf(settings.conf)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        if SparkSession.getActiveSession() is None:
            _launch_jvm(settings.master, conf)
        session = builder.getOrCreate()
    except (PySparkException, Py4JError) as e:  # the first line says why
        raise ConfigError(
            f"engine spark: cannot start on {settings.master}: {_first_line(e)}"
        ) from None
    session.sparkContext.setLogLevel("OFF")  # errors reach the user as one line, from here
    return session


class SparkResult:
    """One statement's result, as DuckDB's cursor and relation give it."""

    def __init__(self, df: DataFrame):
        self.df = df

    @property
    def description(self) -> list[tuple[str]]:
        """The result's column names (as DB-API's first field)."""
        return [(f.name,) for f in self.df.schema.fields]

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row, values as DuckDB gives them (lists, dicts for structs)."""
        return [tuple(_python(v) for v in row) for row in _run(self.df.collect)]

    def fetchone(self) -> tuple[Any, ...] | None:
        """The first row, or None."""
        rows = _run(lambda: self.df.take(1))
        return tuple(_python(v) for v in rows[0]) if rows else None

    def to_arrow_table(self) -> pa.Table:
        """Every row as one Arrow table."""
        return _run(self.df.toArrow)


T = TypeVar("T")


def _run(job: Callable[[], T]) -> T:
    """Run a Spark job; its failure as one line."""
    from pyspark.errors import PySparkException

    try:
        return job()
    except PySparkException as e:
        raise SparkQueryError(f"spark: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _python(v: Any) -> Any:
    from pyspark.sql import Row

    if isinstance(v, Row):
        return {k: _python(x) for k, x in v.asDict().items()}
    if isinstance(v, list):
        return [_python(x) for x in v]
    return v


_TEMP_TABLE = re.compile(
    r"\s*CREATE\s+OR\s+REPLACE\s+TEMP\s+TABLE\s+([A-Za-z_][A-Za-z0-9_]*)\s+AS\b"
)
"""The analysis's own temporary tables (the slice's per-shape statistics, its blocking marks):
DuckDB holds their rows, and so does Spark here, as a local checkpoint (the rows kept by the
executors, the plan cut). As views, every query reading one computed it again: the blocking
marks, read five times a slice, cost 10 s each time on a slice of 1M requests. Cached views
(`CACHE TABLE`) did not serve a self-join or a subquery (measured: 86 s against 47 s)."""


class SparkConnection:
    """A `Connection` on one SparkSession: each DuckDB-dialect statement transpiled once."""

    sample_limit = 100_000
    """The most compute times of one (shape, variant) brought to the driver for the bootstrap
    (800 KB); a larger group is read by rank, the bootstrap's order statistics only."""
    holds_slices = True
    """A loaded slice's requests are a table here (a local checkpoint), not a view: a query
    does not share another's scan, so each read of the view scanned every request file again
    (six 1M slices on local[2]: 164.4 s as a view, 130.9 s as a table). DuckDB reads the view
    as fast as a table (3.52 s against 3.46 s) without holding the slice's rows."""

    def __init__(self, session: SparkSession):
        self.session = session

    def execute(self, query: str, parameters: Any = None, /) -> SparkResult:
        """Run one statement (DDL runs now; a query when its rows are fetched). A temporary
        table's rows are made now and kept by the executors (`_TEMP_TABLE`)."""
        from pyspark.errors import PySparkException

        table = _TEMP_TABLE.match(query)
        try:
            if table:
                select = query[table.end() :]
                df = self.session.sql(to_spark(select), args=parameters or None)
                _run(lambda: df.localCheckpoint(eager=True)).createOrReplaceTempView(table[1])
                return SparkResult(df.limit(0))
            return SparkResult(self.session.sql(to_spark(query), args=parameters or None))
        except PySparkException as e:
            raise SparkQueryError(f"spark: {_first_line(e)}") from None

    def sql(self, query: str, *, params: Any = None) -> SparkResult:
        """A query's result, for its Arrow table."""
        return self.execute(query, params)


class SparkFiles:
    """Spark's Parquet reader over the dataset's files, at the URI the executors see."""

    def __init__(self, session: SparkSession, root: Path, uri: str):
        self.session = session
        self.root = root
        self.uri = uri.rstrip("/")

    def source(self, table: str, files: list[Path]) -> tuple[str, set[str]]:
        """A temporary view over the files (schemas merged, as DuckDB's union_by_name) and the
        columns they hold."""
        from pyspark.errors import PySparkException

        uris = [f"{self.uri}/{f.relative_to(self.root).as_posix()}" for f in files]
        try:
            df = self.session.read.option("mergeSchema", "true").parquet(*uris)
        except PySparkException as e:
            raise DatasetError(f"{self.uri}: cannot read table {table}: {_first_line(e)}") from None
        name = f"_scan_{table}_{next(_SCANS)}"
        df.createOrReplaceTempView(name)
        return name, set(df.columns)


class SparkEngine:
    """Spark: one session for the run (the active one when there is one, as in a notebook or a
    spark-submit job; else started at the first connection), one child session per
    connection."""

    name = EngineName.SPARK
    views_per_workload = False

    def __init__(self, settings: EngineSettings):
        self.settings = settings
        self._session: SparkSession | None = None
        self._owned = False

    @property
    def session(self) -> SparkSession:
        """The run's SparkSession."""
        if self._session is None:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            self._owned = active is None
            self._session = active if active is not None else start_session(self.settings)
        return self._session

    def connect(self, ds: Dataset, workload: str | None, window: Window = EVERYTHING) -> Connection:
        """A connection with the dataset's views, read from `dataset_uri` (default: the
        dataset's folder as a file:// URI)."""
        session = self.session.newSession()
        for key, value in session_conf(self.settings.conf).items():
            if session.conf.isModifiable(key):  # the semantics, whoever started the session
                session.conf.set(key, value)
        uri = self.settings.dataset_uri or ds.root.resolve().as_uri()
        con = SparkConnection(session)
        define_views(con, SparkFiles(session, ds.root, uri), ds, workload, window)
        return con

    def stage_files(
        self, ds: Dataset, files: list[Path], how: Reading
    ) -> list[Staged | MapreportError]:
        """One Spark task per file: the executor runs the same reader and stages its Parquet
        parts under the dataset (a shared folder), answering with what the commit needs or
        with the file's error. The driver commits them in order under the writer lock."""
        task = functools.partial(_stage_task, ds, how)
        paths = [str(f) for f in files]
        rdd = self.session.sparkContext.parallelize(list(enumerate(paths)), len(paths))
        return [r for _, r in sorted(_run(rdd.map(task).collect), key=lambda x: x[0])]

    def close(self) -> None:
        """Stop the session if this engine started it (and with it a local cluster)."""
        if self._session is not None and self._owned:
            self._session.stop()
        self._session = None


def _stage_task(
    ds: Dataset, how: Reading, item: tuple[int, str]
) -> tuple[int, Staged | MapreportError]:
    """In an executor: stage one file (no helper process: the executors use the cores)."""
    from mapreport.ingest import helper

    helper.disable()
    i, path = item
    try:
        return i, how.stage(ds, Path(path))
    except MapreportError as e:  # an error of the file, said on the driver as a serial read
        return i, e
