"""The canonical dataset on disk: layout, atomic commits, idempotent re-ingest.

This is the only module that knows paths inside a dataset. Layout:

    <root>/<table>/workload=<enc>/<source_id>-<n>.parquet   partitioned tables
    <root>/<table>/<source_id>-<n>.parquet                  environment, quarantine
    <root>/ingest_log/<source_id>.parquet                   one commit record per source file
    <root>/.staging/<source_id>.<pid>/...                   a file being ingested

A source file is committed when its ingest_log record exists: data files are moved into place
first, then the log record is written with an atomic rename. Readers only see data files whose
source_id has a committed, not superseded, log record, so a run killed at any point leaves a
readable dataset; `recover()` deletes what such a run left behind.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.errors import DatasetError
from mapreport.files import replacing
from mapreport.names import partition_name
from mapreport.schema import HISTORY_TABLES, PARTITIONED, SCHEMA_VERSION, TABLES

STAGING = ".staging"
LOCK = ".lock"
"""The writer lock (an advisory flock held for a whole ingest and for each history write)."""
_HELD: dict[Path, int] = {}
"""Dataset roots whose lock this process holds, with the depth of nesting."""
log = logging.getLogger(__name__)
LOG = "ingest_log"


HIGH_CARDINALITY = frozenset({"request_id", "extra", "raw", "line", "correlation"})
"""Columns whose values rarely repeat: dictionary encoding only costs time there (the writer
tries it, then falls back), so they and float columns are written plain."""


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write a table with the schema version in its metadata, atomically (temp name + rename)."""
    meta = dict(table.schema.metadata or {})
    meta[b"mapreport.schema_version"] = SCHEMA_VERSION.encode()
    dictionary = [
        f.name
        for f in table.schema
        if f.name not in HIGH_CARDINALITY and not pa.types.is_floating(f.type)
    ]
    with replacing(path) as tmp:
        pq.write_table(
            table.replace_schema_metadata(meta), tmp, compression="zstd", use_dictionary=dictionary
        )


@dataclass(frozen=True)
class LogEntry:
    """One committed source file."""

    source_id: str
    path: str
    format: str
    sha256: str
    size_bytes: int
    ingested_at: str
    rows: dict[str, int]
    rejected: int
    rejections: list[dict[str, Any]]
    supersedes: tuple[str, ...]
    mtime_ns: int | None = None
    """The file's modification time when it was read (None in logs written before 0.1.1)."""


@dataclass
class _Index:
    """The commit log as the writer holding the lock knows it: kept up to date by its own
    commits, so an ingest of thousands of files never lists the log folder again."""

    entries: list[LogEntry]
    live: dict[str, LogEntry]
    by_file: dict[tuple[str, int, int | None], LogEntry]
    by_sha: dict[str, LogEntry]
    by_path: dict[str, list[str]] = field(default_factory=dict)
    """Live source ids per input path."""

    @classmethod
    def of(cls, entries: list[LogEntry]) -> _Index:
        """The index of a log read from disk."""
        dead = {s for e in entries for s in e.supersedes}
        idx = cls(entries, {}, {}, {})
        for e in entries:
            if e.source_id not in dead:
                idx.add(e)
        return idx

    def add(self, e: LogEntry) -> None:
        """A live entry."""
        self.live[e.source_id] = e
        self.by_file.setdefault((e.path, e.size_bytes, e.mtime_ns), e)
        self.by_sha.setdefault(e.sha256, e)
        self.by_path.setdefault(e.path, []).append(e.source_id)

    def commit(self, e: LogEntry) -> None:
        """A new entry, which supersedes its path's earlier versions."""
        bisect.insort(self.entries, e, key=lambda x: (x.ingested_at, x.source_id))
        for old in e.supersedes:
            gone = self.live.pop(old, None)
            if gone is not None:
                self.by_path[gone.path].remove(old)
                self.by_file.pop((gone.path, gone.size_bytes, gone.mtime_ns), None)
                if self.by_sha.get(gone.sha256) is gone:
                    del self.by_sha[gone.sha256]
        self.add(e)


class Dataset:
    """A canonical dataset folder."""

    def __init__(self, root: Path, create: bool = False):
        self.root = root
        self._log_cache: dict[tuple[str, int, int], list[LogEntry]] = {}
        self._index: _Index | None = None
        """Set while this instance holds the writer lock (no one else changes the log)."""
        self._owner = False
        if create:
            try:
                (root / LOG).mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise DatasetError(f"cannot create dataset folder {root}: {e.strerror}") from None
        elif not (root / LOG).is_dir():
            raise DatasetError(f"{root} is not a mapreport dataset (no {LOG}/ folder)")

    def __getstate__(self) -> dict[str, Any]:
        """What a reader process (`ingest --jobs`) gets: the folder and the log as it was when
        its work was handed out (the committing process checks again before each commit),
        not this process's claim on the lock."""
        return {"root": self.root, "_log_cache": {}, "_index": self._index, "_owner": False}

    # -- commit log ---------------------------------------------------------------------------

    def log(self) -> list[LogEntry]:
        """Every committed source, oldest first."""
        return list(self._current().entries)

    def _current(self) -> _Index:
        """The log's index: the writer's own while it holds the lock, else read from disk."""
        if self._index is not None:
            return self._index
        idx = _Index.of(self._read_logs())
        if self._owner:
            self._index = idx
        return idx

    def _read_logs(self) -> list[LogEntry]:
        """Every log record on disk. Log files are parsed once per version (name, size,
        mtime), so a reader that asks again re-reads only what changed."""
        entries = []
        seen = set()
        for f in sorted((self.root / LOG).glob("*.parquet")):
            st = f.stat()
            key = (f.name, st.st_size, st.st_mtime_ns)
            seen.add(key)
            if key not in self._log_cache:
                self._log_cache[key] = self._read_log(f)
            entries += self._log_cache[key]
        for stale in set(self._log_cache) - seen:
            del self._log_cache[stale]
        return sorted(entries, key=lambda e: (e.ingested_at, e.source_id))

    @staticmethod
    def _read_log(f: Path) -> list[LogEntry]:
        entries = []
        for r in pq.read_table(f).to_pylist():
            entries.append(
                LogEntry(
                    source_id=r["source_id"],
                    path=r["path"],
                    format=r["format"],
                    sha256=r["sha256"],
                    size_bytes=r["size_bytes"],
                    ingested_at=r["ingested_at"],
                    rows=json.loads(r["rows"]),
                    rejected=r["rejected"],
                    rejections=json.loads(r["rejections"]),
                    supersedes=tuple(s for s in (r["supersedes"] or "").split(",") if s),
                    mtime_ns=r.get("mtime_ns"),
                )
            )
        return entries

    def live(self) -> dict[str, LogEntry]:
        """Committed sources that no later version of the same path superseded."""
        return dict(self._current().live)

    def same_file(self, path: str, size: int, mtime_ns: int) -> LogEntry | None:
        """The live entry read from this path when the file had this size and modification
        time: the file was not rewritten since, so its content hash need not be recomputed
        (as make and git decide; a nightly job over gigabytes of unchanged telemetry would
        otherwise hash all of it again)."""
        return self._current().by_file.get((path, size, mtime_ns))

    def versions(self, path: str) -> tuple[str, ...]:
        """The live source ids read from `path` (what a new version of it supersedes)."""
        return tuple(self._current().by_path.get(path, ()))

    def find(self, sha256: str) -> LogEntry | None:
        """The live entry for a file content, if that content was already ingested."""
        return self._current().by_sha.get(sha256)

    # -- staging and commit -------------------------------------------------------------------

    def staging_dir(self, source_id: str) -> Path:
        """A fresh private folder in which one source file's rows are written before commit."""
        d = self.root / STAGING / f"{source_id}.{os.getpid()}"
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    @staticmethod
    def table_path(base: Path, table: str, workload: str | None, name: str) -> Path:
        """Where a data file of `table` lives below `base` (the dataset root or a staging dir)."""
        d = base / table
        if table in PARTITIONED:
            d = d / partition_name(workload or "")
        d.mkdir(parents=True, exist_ok=True)
        return d / name

    def commit(self, staging: Path, entry: LogEntry) -> None:
        """Move a staged source into the dataset, then write its log record (the commit point)."""
        for f in sorted(staging.rglob("*.parquet")):
            target = self.root / f.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, target)
        row = {
            "source_id": entry.source_id,
            "path": entry.path,
            "format": entry.format,
            "sha256": entry.sha256,
            "size_bytes": entry.size_bytes,
            "ingested_at": entry.ingested_at,
            "rows": json.dumps(entry.rows, sort_keys=True),
            "rejected": entry.rejected,
            "rejections": json.dumps(entry.rejections),
            "supersedes": ",".join(entry.supersedes) or None,
            "schema_version": SCHEMA_VERSION,
            "mtime_ns": entry.mtime_ns,
        }
        write_parquet(
            pa.Table.from_pylist([row], schema=TABLES[LOG]),
            self.root / LOG / f"{entry.source_id}.parquet",
        )
        if self._index is not None:
            self._index.commit(entry)
        shutil.rmtree(staging, ignore_errors=True)
        for old in entry.supersedes:  # the earlier versions of this path
            self._drop_source(old)

    @contextlib.contextmanager
    def writing(self, wait: bool = True) -> Iterator[None]:
        """Hold the dataset's writer lock while the block runs. One writer at a time: a second
        one waits (saying so), or with `wait` false fails at once naming the holder. Readers
        take no lock: a file counts only once its log record is committed."""
        root = self.root.resolve()
        if root in _HELD:  # nested in this process: already held
            _HELD[root] += 1
            try:
                yield
            finally:
                _HELD[root] -= 1
            return
        path = self.root / LOCK
        try:
            fh = open(path, "a+")  # noqa: SIM115 - held until the block ends
        except OSError as e:
            raise DatasetError(f"cannot lock {self.root} for writing: {e.strerror}") from None
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "another process"
                if not wait:
                    raise DatasetError(
                        f"{self.root} is being written by another mapreport ({holder}); "
                        "run again later, or without --no-wait to wait for it"
                    ) from None
                log.warning("waiting for the other writer of %s (%s) to finish", self.root, holder)
                fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()}\n")
            fh.flush()
            _HELD[root] = 1
            self._owner, self._index = True, None
            yield
        finally:
            self._owner, self._index = False, None
            _HELD.pop(root, None)
            fh.close()  # releases the lock

    def recover(self) -> int:
        """Delete staging folders and data files of uncommitted or superseded sources (under
        the writer lock: what a staging folder holds then was left by a writer that died)."""
        shutil.rmtree(self.root / STAGING, ignore_errors=True)
        removed = self.collect_garbage()
        self._index = None  # read again: the log folder changed
        return removed

    def _drop_source(self, source_id: str) -> int:
        """Delete one source's data files, then its log record."""
        removed = 0
        for table in TABLES:
            if table != LOG and (self.root / table).is_dir():
                for f in (self.root / table).rglob(f"{source_id}-*.parquet"):
                    f.unlink()
                    removed += 1
        with contextlib.suppress(FileNotFoundError):
            (self.root / LOG / f"{source_id}.parquet").unlink()
            removed += 1
        return removed

    def collect_garbage(self) -> int:
        """Remove files of superseded sources and data files that no live log record owns."""
        entries = self.log()
        dead = {s for e in entries for s in e.supersedes}
        live = {e.source_id for e in entries} - dead
        removed = 0
        for s in dead:
            with contextlib.suppress(FileNotFoundError):
                (self.root / LOG / f"{s}.parquet").unlink()
                removed += 1
        for table in TABLES:
            if table == LOG:
                continue
            for f in (self.root / table).rglob("*.parquet") if (self.root / table).is_dir() else []:
                if f.name.split("-", 1)[0] not in live:
                    f.unlink()
                    removed += 1
        # a superseding record keeps naming sources that are gone; that is harmless
        return removed

    # -- reading ------------------------------------------------------------------------------

    def files(
        self, table: str, workload: str | None = None, live: set[str] | None = None
    ) -> list[Path]:
        """Committed data files of a table, optionally only one workload's partition."""
        live = set(self.live()) if live is None else live
        base = self.root / table
        if table in PARTITIONED and workload is not None:
            base = base / partition_name(workload)
        if not base.is_dir():
            return []
        return sorted(f for f in base.rglob("*.parquet") if f.name.split("-", 1)[0] in live)

    # -- closed-loop history --------------------------------------------------------------

    def write_history(
        self, run_date: str, workload: str, slice_: str, rows: dict[str, list[dict[str, Any]]]
    ) -> None:
        """Store one slice's history rows of one nightly run under
        history/<table>/run_date=<date>/. A second run on the same date replaces the first.

        Each file is written atomically; the `history_run` file is written last, and readers
        only use runs that have one, so a run killed half-way is invisible."""
        safe = _history_key(workload, slice_)
        with self.writing():
            for table in ("history_shape", "history_action", "history_run"):
                d = self.root / "history" / table / f"run_date={quote(run_date, safe='-')}"
                d.mkdir(parents=True, exist_ok=True)
                write_parquet(
                    pa.Table.from_pylist(rows.get(table, []), schema=HISTORY_TABLES[table]),
                    d / f"{safe}.parquet",
                )

    def history(self, table: str, workload: str, slice_: str) -> list[dict[str, Any]]:
        """Rows of a history table for one slice, from complete runs, oldest run first.

        Only this slice's files are read (one per run date, named by the slice's key)."""
        base = self.root / "history"
        name = f"{_history_key(workload, slice_)}.parquet"
        complete = {f.parent.name for f in (base / "history_run").glob(f"*/{name}")}
        files = [f for f in (base / table).glob(f"*/{name}") if f.parent.name in complete]
        if not files:
            return []
        rows = pa.concat_tables(
            [pq.read_table(f, schema=HISTORY_TABLES[table]) for f in files]
        ).to_pylist()
        return sorted(rows, key=lambda r: (r["run_date"], r["run_id"]))

    def history_runs(self, workload: str, slice_: str) -> list[str]:
        """The run dates (`run_date=...` folder names) with a complete history of a slice."""
        name = f"{_history_key(workload, slice_)}.parquet"
        return sorted(
            f.parent.name for f in (self.root / "history" / "history_run").glob(f"*/{name}")
        )

    def connect(self, workload: str | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with one view per canonical table over the committed files."""
        con = duckdb.connect()
        con.execute("SET preserve_insertion_order = false")
        live = set(self.live())
        for table, schema in TABLES.items():
            files = (
                [self.root / LOG / f"{s}.parquet" for s in sorted(live)]
                if table == LOG
                else self.files(table, workload, live)
            )
            if files:
                paths = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
                # folders are not data: a workload is what its rows hold, not its folder name
                source = f"read_parquet([{paths}], union_by_name = true, hive_partitioning = false)"
                try:
                    present = {
                        r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
                    }
                    # a column added by a later schema version is null in files written before
                    cols = ", ".join(
                        f'"{f.name}"'
                        if f.name in present
                        else f'NULL::{_SQL[f.type]} AS "{f.name}"'
                        for f in schema
                    )
                    con.execute(f"CREATE VIEW {table} AS SELECT {cols} FROM {source}")
                except duckdb.Error as e:
                    raise DatasetError(
                        f"{self.root}: cannot read table {table}: {str(e).splitlines()[0]}"
                    ) from None
            else:
                con.register(f"_empty_{table}", schema.empty_table())
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM _empty_{table}")
        return con


_SQL = {
    pa.string(): "VARCHAR",
    pa.float64(): "DOUBLE",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.bool_(): "BOOLEAN",
}
"""SQL types of the canonical columns, for columns an older file lacks."""


def _history_key(workload: str, slice_: str) -> str:
    """The file name stem of one slice's history files."""
    return hashlib.sha256(f"{workload}\x1f{slice_}".encode()).hexdigest()[:16]


def iter_files(paths: list[Path]) -> Iterator[Path]:
    """Expand folders into the regular files below them, sorted; files are passed through."""
    for p in paths:
        if p.is_dir():
            yield from sorted(f for f in p.rglob("*") if f.is_file())
        else:
            yield p
