"""The SQL views of a dataset: one per canonical table over its committed files, holding a
window's rows, and `plan_version`, every compile plan's versions with the one in force.

Which files a window reads is the store's to say (`Dataset.scans`); which of their rows
count, and which plan version is in force, is decided here, once, in SQL.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

import pyarrow as pa

from mapreport.core.connection import Connection
from mapreport.core.errors import DatasetError
from mapreport.core.schema import DAY_PARTITIONED, TABLES
from mapreport.core.window import EVERYTHING, WALL_CLOCK_FROM_US, WALL_CLOCK_UNTIL_US, Window

if TYPE_CHECKING:
    import duckdb


SERVER_WIDE = frozenset({"metric_sample"})
"""Tables whose rows of workload "" (a server's GPU and process samples) are read with every
workload's: the server that served a model is part of its report."""


class Rows(Enum):
    """Which rows of a scan's files a window counts."""

    ALL = "all"
    DATED = "dated"
    """Rows with a wall-clock time inside the window."""
    UNDATED = "undated"
    """Rows without a wall-clock time (their files lie in the window's nights' partitions)."""
    EITHER = "either"


class Scan(NamedTuple):
    """Files of one table and the rows of them a window counts."""

    files: list[Path]
    rows: Rows


class Dataset(Protocol):
    """What the views ask of a dataset (`store.Dataset` is one): its folder, its committed
    sources, and which files of a table a window reads."""

    root: Path

    def live(self) -> Mapping[str, object]:
        """The committed, not superseded sources by id."""

    def scans(
        self, table: str, workload: str | None, live: set[str], window: Window = EVERYTHING
    ) -> list[Scan]:
        """The files of a table a window reads, each list with the rows of it that count."""

    def check_links(self) -> None:
        """Refuse a dataset with links pointing outside it."""

    def verify(self, paths: Iterable[Path]) -> None:
        """Refuse a data file whose bytes are not those its commit record hashed."""


class ParquetSource(Protocol):
    """How an engine reads a list of Parquet files."""

    def source(self, table: str, files: list[Path]) -> tuple[str, set[str]]:
        """A FROM clause over the files (hive partitions not read as columns: a workload is
        what its rows hold, not its folder name) and the columns they hold."""


class DuckDBFiles:
    """DuckDB's `read_parquet` over the files, as they lie on this machine."""

    def __init__(self, con: duckdb.DuckDBPyConnection, root: Path):
        self.con = con
        self.root = root

    def source(self, table: str, files: list[Path]) -> tuple[str, set[str]]:
        """`read_parquet([...])` and the columns DuckDB finds in the files."""
        import duckdb

        paths = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
        source = f"read_parquet([{paths}], union_by_name = true, hive_partitioning = false)"
        try:
            present = {
                r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
            }
        except duckdb.Error as e:
            raise DatasetError(
                f"{self.root}: cannot read table {table}: {str(e).splitlines()[0]}; `mapreport "
                f"check --dataset {self.root}` names the damaged file"
            ) from None
        return source, present


def connect(
    ds: Dataset,
    workload: str | None = None,
    window: Window = EVERYTHING,
    sources: Sequence[str] | None = None,
    threads: int | None = None,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the dataset's views (`define_views`), which can reach no file
    outside the dataset (`duckdb_connection`)."""
    ds.check_links()  # the sandbox refuses reads through them; say which link, once
    con = duckdb_connection([ds.root], threads=threads)
    _DEFINED[con] = define_views(con, DuckDBFiles(con, ds.root), ds, workload, window, sources)
    return con


_DEFINED: weakref.WeakKeyDictionary[object, list[str]] = weakref.WeakKeyDictionary()
"""The statements that made each live connection's views (`connect`)."""


def view_script(con: object) -> str | None:
    """The statements that made `con`'s views (a connection `connect` made; None for any
    other), as one script a plain DuckDB runs, every file by its absolute path: an evidence
    pack's SQL after it runs outside mapreport."""
    done = _DEFINED.get(con)
    return None if done is None else "".join(f"{s.strip()};\n" for s in done)


def duckdb_connection(
    folders: Sequence[Path], memory_limit: str | None = None, threads: int | None = None
) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection as mapreport uses them, sandboxed: it reads and writes
    files only below `folders` (and its own spill folder), installs and loads no extension,
    and its configuration is locked, so no query, whatever text reached it, can read a file
    elsewhere, write one, or undo these settings. Without the progress bar DuckDB otherwise
    draws on stdout (not only on a terminal) for any query over 2 s. `memory_limit` (DuckDB's
    form, "4GB"): beyond it DuckDB spills to its folder; default DuckDB's 80% of memory.
    `threads`: DuckDB's worker threads; default one per core."""
    import duckdb  # here, not at the top: readers and the command line use the views' types

    spill = Path(tempfile.mkdtemp(prefix="mapreport-duckdb-"))
    con = duckdb.connect()
    # the spill folder goes with the connection (DuckDB removes only the files it wrote)
    weakref.finalize(con, shutil.rmtree, spill, True)
    allowed = [str(f.resolve()) + os.sep for f in (*folders, spill)]
    if memory_limit is not None:
        con.execute("SET memory_limit = $v", {"v": memory_limit})
    if threads is not None:
        con.execute("SET threads = $v", {"v": threads})
    # a Jupyter kernel without ipywidgets: DuckDB starts the connection with the bar off and
    # refuses any SET of it, even to false (InvalidInputException)
    if con.execute("SELECT current_setting('enable_progress_bar')").fetchone() != (False,):
        con.execute("SET enable_progress_bar = false")
    for statement, value in (
        # every statement binds its views again, and a view over files read by name reads each
        # file's footer: six 1M slices' 112 statements spent 0.35 s binding, 0.29 s with the
        # footers kept (the connection's own cache; a dataset's files are never rewritten)
        ("SET parquet_metadata_cache = $v", True),
        # rows come back in the order a query asks for, not in the files' order
        ("SET preserve_insertion_order = $v", False),
        ("SET temp_directory = $v", str(spill / "spill")),
        ("SET allowed_directories = $v", allowed),
        ("SET enable_external_access = $v", False),
        ("SET autoinstall_known_extensions = $v", False),
        ("SET autoload_known_extensions = $v", False),
        ("SET lock_configuration = $v", True),
    ):
        con.execute(statement, {"v": value})
    return con


def _text(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def define_views(
    con: Connection,
    files: ParquetSource,
    ds: Dataset,
    workload: str | None,
    window: Window,
    sources: Sequence[str] | None = None,
) -> list[str]:
    """One view per canonical table over the committed files of one workload (or all): the
    runtime tables and compile events hold the window's rows, compile_plan each plan's
    version in force at the window's end, and `plan_version` every version of every plan
    with its capture time. The same statements on every engine; only `files` differs. With
    `sources`, every table but the ingest log holds the rows of those source files only (a
    side of a comparison chosen by its environment). Returns the statements it ran, in
    order (`view_script`)."""
    live = set(ds.live())
    done: list[str] = []

    def run(statement: str) -> None:
        con.execute(statement)
        done.append(statement)

    if sources is not None:
        ids = ", ".join(_text(s) for s in sources)
        select_ids = f"SELECT unnest([{ids}]::VARCHAR[]) AS source_id"
        run(f"CREATE OR REPLACE TEMP TABLE {SELECTED} AS {select_ids}")
    every = view_scans(ds, workload, window, live)
    # every file a view reads is checked against its commit record before any statement
    # reads it: no figure is computed from a damaged or altered file
    ds.verify(f for scans in every.values() for scan in scans for f in scan.files)
    for table, scans in every.items():
        name = ALL_PLANS if table == "compile_plan" else table
        select = view_select(files, table, scans, window)
        if sources is not None and table != "ingest_log":
            chosen = f"SELECT source_id FROM {SELECTED}"
            select = f"SELECT * FROM ({select}) WHERE source_id IN ({chosen})"
        # OR REPLACE: a comparison pack's script makes A's views, then B's (`view_script`)
        run(f"CREATE OR REPLACE TEMP VIEW {name} AS " + select)
    # tables, not views: every slice reads them (its sides, its buckets, its plan versions),
    # and as views each read ranked every version again (13-19 ms a read on DuckDB)
    run(_PLAN_VERSIONS.format(end=_sql_us(window.end_us)))
    run(
        f"""CREATE OR REPLACE TEMP TABLE compile_plan AS SELECT p.* FROM {ALL_PLANS} p
        JOIN (SELECT workload, slice, plan_id, source_id FROM plan_version WHERE in_force)
        USING (workload, slice, plan_id, source_id)"""
    )
    return done


def view_scans(
    ds: Dataset, workload: str | None, window: Window, live: set[str] | None = None
) -> dict[str, list[Scan]]:
    """The files each canonical table's view reads, for one workload (with the server-wide
    files of SERVER_WIDE tables) or all: two connections whose scans are equal have the same
    views (`define_views` makes them from these alone)."""
    live = set(ds.live()) if live is None else live
    every: dict[str, list[Scan]] = {}
    for table in TABLES:
        every[table] = ds.scans(table, workload, live, window)
        if table in SERVER_WIDE and workload:
            every[table] += ds.scans(table, "", live, window)
    return every


def view_select(files: ParquetSource, table: str, scans: list[Scan], window: Window) -> str:
    """The rows of canonical `table` the scans count, in its columns (UNION ALL)."""
    schema = TABLES[table]
    column = DAY_PARTITIONED.get(table, "ts_us")
    parts = []
    for paths, rows in scans:
        if not paths:
            continue
        where = _where(rows, column, window)
        source, present = files.source(table, paths)
        # a column added by a later schema version is null in files written before
        cols = ", ".join(
            f'"{f.name}"' if f.name in present else f'NULL::{_SQL[f.type]} AS "{f.name}"'
            for f in schema
        )
        parts.append(f"SELECT {cols} FROM {source}" + (f" WHERE {where}" if where else ""))
    if not parts:  # typed, and no rows
        cols = ", ".join(f'NULL::{_SQL[f.type]} AS "{f.name}"' for f in schema)
        return f"SELECT {cols} WHERE false"
    return " UNION ALL ".join(parts)


def _where(rows: Rows, column: str, window: Window) -> str | None:
    """SQL: the rows of a scan that count (None: all)."""
    if rows is Rows.ALL:
        return None
    if rows is Rows.DATED:
        return _in_window(column, window)
    if rows is Rows.UNDATED:
        return _undated(column)
    return f"({_in_window(column, window)}) OR {_undated(column)}"


SELECTED = "_selected_source"
"""The table of the source files a restricted connection's views hold (`define_views`)."""
ALL_PLANS = "_every_compile_plan"
"""The view of every version of every compile plan; `compile_plan` holds those in force."""

_PLAN_VERSIONS = """
CREATE OR REPLACE TEMP TABLE plan_version AS
WITH captured AS (
    SELECT source_id, max(TRY_CAST(captured_at AS TIMESTAMPTZ)) AS t
    FROM environment GROUP BY source_id
), versions AS (
    SELECT workload, slice, plan_id, source_id, count(*) AS entries
    FROM {ALL_PLANS} GROUP BY workload, slice, plan_id, source_id
), timed AS (
    SELECT v.*, l.path,
        coalesce(
            epoch_us(c.t),
            epoch_us(TRY_CAST(l.night || 'T00:00:00Z' AS TIMESTAMPTZ)),
            epoch_us(TRY_CAST(l.ingested_at AS TIMESTAMPTZ))
        )::DOUBLE AS captured_us,
        CASE WHEN c.t IS NOT NULL THEN 'captured_at'
             WHEN TRY_CAST(l.night AS DATE) IS NOT NULL THEN 'night'
             ELSE 'ingested_at' END AS captured_by
    FROM versions v LEFT JOIN captured c USING (source_id) LEFT JOIN ingest_log l USING (source_id)
), ranked AS (
    SELECT *, coalesce(captured_us <= {end}, false) AS before_end,
        row_number() OVER (
            PARTITION BY workload, slice, plan_id
            ORDER BY coalesce(captured_us <= {end}, false) DESC,
                CASE WHEN coalesce(captured_us <= {end}, false) THEN captured_us END DESC,
                captured_us, path, source_id
        ) AS version_rank
    FROM timed
)
SELECT workload, slice, plan_id, source_id, path, entries, captured_us, captured_by,
    before_end, version_rank = 1 AS in_force,
    count(*) OVER (PARTITION BY workload, slice, plan_id) AS versions
FROM ranked
""".replace("{ALL_PLANS}", ALL_PLANS)
"""Every plan version (one per source file) with its capture time (the environment's
captured_at, else the start of the night its file was ingested for, else its ingest time). The
version in force at the window's end is the latest captured before it; when none was, the
earliest (a plan first used on a night before it was captured)."""


def _sql_us(t: float | None) -> str:
    """A time bound as a SQL number; an open end is later than any capture."""
    return repr(float(t)) if t is not None else "1e300"


def _in_window(column: str, window: Window) -> str:
    """SQL: the row's time is on the wall clock and inside the window."""
    cond = [f"{column} >= {WALL_CLOCK_FROM_US!r}", f"{column} < {WALL_CLOCK_UNTIL_US!r}"]
    if window.start_us is not None:
        cond.append(f"{column} >= {window.start_us!r}")
    if window.end_us is not None:
        cond.append(f"{column} < {window.end_us!r}")
    return " AND ".join(cond)


def _undated(column: str) -> str:
    """SQL: the row's time is not a wall-clock time (or missing)."""
    return (
        f"({column} IS NULL OR {column} < {WALL_CLOCK_FROM_US!r} "
        f"OR {column} >= {WALL_CLOCK_UNTIL_US!r})"
    )


_SQL = {
    pa.string(): "VARCHAR",
    pa.float64(): "DOUBLE",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.bool_(): "BOOLEAN",
    pa.list_(pa.float64()): "DOUBLE[]",  # tuning_trial.costs_us
}
"""SQL types of the canonical columns, for columns an older file lacks."""
