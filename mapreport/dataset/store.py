"""The canonical dataset on disk: layout, atomic commits, idempotent re-ingest.

This package (store, log, integrity, history) is the only one that knows paths inside a
dataset. Layout:

    <root>/<table>/workload=<enc>/day=<date>/<source_id>-<n>.parquet   runtime tables
    <root>/<table>/workload=<enc>/<source_id>-<n>.parquet   other partitioned tables
    <root>/<table>/<source_id>-<n>.parquet                  environment, quarantine
    <root>/ingest_log/<source_id>.parquet                   one commit record per source file
    <root>/retired/<source_id>.json                         a source file aged out (retention)
    <root>/history/<table>/run_date=<date>/<slice key>.parquet   the closed-loop history
    <root>/.staging/<source_id>.<pid>/...                   a file being ingested
    <root>/retention.json                                   the first day retention keeps
    <root>/damaged/<time>/...                               what `check --repair` set aside

A runtime row's day is the UTC date of its time, or for a row without a wall-clock time the
night its file was ingested for (`day=undated` without one); see `window.py`.

A source file is committed when its ingest_log record exists: data files are moved into place
first, then the log record is written with an atomic rename. Readers only see data files whose
source_id has a committed, not superseded, log record, so a run killed at any point leaves a
readable dataset; `recover()` deletes what such a run left behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import itertools
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.core.errors import DatasetError
from mapreport.core.files import atomic_write, content_hash, refuse_outside_links, write_parquet
from mapreport.core.names import partition_name
from mapreport.core.records import replace
from mapreport.core.schema import (
    DAY_PARTITIONED,
    PARTITIONED,
    SCHEMA_VERSION,
    TABLES,
)
from mapreport.core.window import EVERYTHING, UNDATED, Window
from mapreport.dataset import views
from mapreport.dataset.history import HistoryFiles
from mapreport.dataset.integrity import (
    DAY,
    RETENTION,
    IntegrityFiles,
)
from mapreport.dataset.log import LOG, LogEntry, LogIndex, record_entry, source_of
from mapreport.dataset.views import Rows, Scan

if TYPE_CHECKING:
    import duckdb

PARTITION_COLUMN = "workload"
PARTITION_TYPE = pa.dictionary(pa.int32(), pa.string())
"""The type of the `workload` column in the files of a partitioned table (`as_written`)."""
STAGING = ".staging"
TRASH = ".trash"
"""Day partitions on their way out (retention); `recover()` finishes removing them."""
RETIRED = "retired"
"""One small record per source file retired by retention (`Dataset.retain`)."""
LOCK = ".lock"
"""The writer lock (an advisory flock held for a whole ingest and for each history write)."""
_HELD: dict[Path, int] = {}
"""Dataset roots whose lock this process holds, with the depth of nesting."""
log = logging.getLogger(__name__)


class Retention(msgspec.Struct, frozen=True):
    """What a retention pass removed (or, dry, would remove)."""

    keep_from: str
    partitions: tuple[Path, ...]
    files: int
    bytes: int
    retired: tuple[str, ...]
    """Source ids none of whose rows remain (their log records went)."""


class Dataset(HistoryFiles, IntegrityFiles):
    """A canonical dataset folder."""

    def __init__(self, root: Path, create: bool = False):
        self.root = root
        self._log_cache: dict[tuple[str, int, int], list[LogEntry]] = {}
        self._index: LogIndex | None = None
        """Set while this instance holds the writer lock (no one else changes the log)."""
        self._owner = False
        self._links_checked = False
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
        return {
            "root": self.root,
            "_log_cache": {},
            "_index": self._index,
            "_owner": False,
            "_links_checked": self._links_checked,
        }

    # -- commit log ---------------------------------------------------------------------------

    def log(self) -> list[LogEntry]:
        """Every committed source, oldest first."""
        return list(self._current().entries)

    def _current(self) -> LogIndex:
        """The log's index: the writer's own while it holds the lock, else read from disk."""
        if self._index is not None:
            return self._index
        idx = LogIndex.of(self._read_logs(), self._retired_sizes())
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

    def _read_log(self, f: Path) -> list[LogEntry]:
        """The records of one log file; a damaged one, or one a newer mapreport wrote, is a
        DatasetError naming it (exit 5), before any of its rows is used."""
        try:
            # ParquetFile, not read_table: read_table's dataset path imports pandas (0.3 s of a
            # small report's start-up) for a file of a few rows
            with pq.ParquetFile(f) as log:
                rows = log.read().to_pylist()
        except (OSError, pa.ArrowException) as e:
            raise DatasetError(
                f"{f}: damaged commit record ({str(e).splitlines()[0]}); run `mapreport check "
                f"--dataset {self.root} --repair` to set it aside and see what to ingest again"
            ) from None
        return [record_entry(r, f) for r in rows]

    def live(self) -> dict[str, LogEntry]:
        """Committed sources that no later version of the same path superseded."""
        return dict(self._current().live)

    def same_file(self, path: str, size: int, mtime_ns: int) -> LogEntry | None:
        """The live entry read from this path when the file had this size and modification
        time: the file was not rewritten since, so its content hash need not be recomputed
        (as make and git decide; a nightly job over gigabytes of unchanged telemetry would
        otherwise hash all of it again)."""
        entry = self._current().by_file.get((path, size, mtime_ns))
        return entry if entry is not None and self.whole(entry) else None

    def versions(self, path: str) -> tuple[str, ...]:
        """The live source ids read from `path` (what a new version of it supersedes)."""
        return tuple(self._current().by_path.get(path, ()))

    def find(self, sha256: str) -> LogEntry | None:
        """The live entry for a file content, if that content was already ingested and its
        data files are all in place (else it is read again: `whole`)."""
        entry = self._current().by_sha.get(sha256)
        return entry if entry is not None and self.whole(entry) else None

    def may_hold(self, size: int) -> bool:
        """Whether a file of `size` bytes could be one the dataset holds or retired (its hash
        is then needed before it is read); a size no live or retired file has is new content."""
        idx = self._current()
        return idx.sizes[size] > 0 or size in idx.retired_sizes or None in idx.retired_sizes

    def _retired_sizes(self) -> frozenset[int | None]:
        sizes: set[int | None] = set()
        for f in (self.root / RETIRED).glob("*.json"):
            try:
                size = json.loads(f.read_bytes()).get("size_bytes")
            except (OSError, ValueError, AttributeError):
                size = None  # unreadable: any size may be it, so every file is hashed first
            sizes.add(size if isinstance(size, int) else None)
        return frozenset(sizes)

    # -- staging and commit -------------------------------------------------------------------

    def staging_dir(self) -> Path:
        """A fresh private folder in which one source file's rows are written before commit
        (named before the file's hash is known: it is computed while the file is read)."""
        (self.root / STAGING).mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}.", dir=self.root / STAGING))

    @staticmethod
    def table_path(
        base: Path, table: str, workload: str | None, name: str, day: str | None = None
    ) -> Path:
        """Where a data file of `table` lives below `base` (the dataset root or a staging dir):
        in its workload's partition, and in a runtime table in its day's."""
        d = base / table
        if table in PARTITIONED:
            d = d / partition_name(workload or "")
        if day is not None:
            d = d / f"{DAY}{day}"
        d.mkdir(parents=True, exist_ok=True)
        return d / name

    @staticmethod
    def as_written(table: str, data: pa.Table, workload: str | None = None) -> pa.Table:
        """`data` as a data file of `table` holds it: in a table under `workload=` folders, the
        `workload` column dictionary-encoded, the type pandas, pyarrow's Parquet reader and
        polars give the folder read as a hive partition, so a reader with default arguments
        finds one type for the column (docs/dataset.md, "Reading it elsewhere"). Files written
        before hold it as a string; every reader of mapreport's reads both. `workload`: the
        value every row holds, where the caller knows it (its dictionary is made, not found:
        Arrow's encoder loads pyarrow.compute, 45 ms of a compile log's ingest)."""
        i = data.schema.get_field_index(PARTITION_COLUMN)
        if table not in PARTITIONED or i < 0 or pa.types.is_dictionary(data.schema[i].type):
            return data
        old = data.schema.field(i)
        typed = pa.field(old.name, PARTITION_TYPE, old.nullable, old.metadata)
        if workload is None:
            encoded = data.column(i).dictionary_encode()
        else:
            indices = pa.repeat(pa.scalar(0, pa.int32()), data.num_rows)
            encoded = pa.DictionaryArray.from_arrays(indices, pa.array([workload], pa.string()))
        return data.set_column(i, typed, encoded)

    @staticmethod
    def staged_days(staging: Path) -> tuple[str, ...]:
        """The day partitions a staged source's runtime rows went into."""
        return tuple(sorted({d.name[len(DAY) :] for d in staging.glob(f"*/*/{DAY}*")}))

    @staticmethod
    def staged_files(staging: Path) -> dict[str, str]:
        """A staged source's data files by their path in the dataset, with their SHA-256 (what
        its commit record keeps, so that `check` and every read can tell bit rot)."""
        return {
            f.relative_to(staging).as_posix(): content_hash(f)
            for f in sorted(staging.rglob("*.parquet"))
        }

    def commit(self, staging: Path, entry: LogEntry) -> None:
        """Move a staged source into the dataset, then write its log record (the commit point).
        A source committed before whose files are no longer whole (`find`) is read again: its
        remaining files make way for the new ones first."""
        if entry.files is None:
            entry = replace(entry, files=self.staged_files(staging))
        for f in self.source_files(entry.source_id):
            f.unlink()
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
            "night": entry.night,
            "files": json.dumps(entry.files, sort_keys=True),
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
    def writing(self, wait: bool = True, checked: bool = True) -> Iterator[None]:
        """Hold the dataset's writer lock while the block runs. One writer at a time: a second
        one waits (saying so), or with `wait` false fails at once naming the holder. Readers
        take no lock: a file counts only once its log record is committed. Not `checked`:
        the dataset may hold what `check_links` refuses (`check --repair` is removing it)."""
        root = self.root.resolve()
        if root in _HELD:  # nested in this process: already held
            _HELD[root] += 1
            try:
                yield
            finally:
                _HELD[root] -= 1
            return
        if checked:
            self.check_links()
        path = self.root / LOCK
        try:
            # never through a link: a `.lock` pointing elsewhere would have every writer
            # truncate and overwrite what it points to
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            fh = os.fdopen(fd, "r+")
        except OSError as e:
            why = "it is a link" if e.errno == errno.ELOOP else e.strerror
            raise DatasetError(f"cannot lock {self.root} for writing: {path}: {why}") from None
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

    def check_links(self) -> None:
        """Refuse (DatasetError, exit 5) a dataset any of whose folders or files is a link
        pointing outside it (`files.refuse_outside_links`), once per instance: such links come
        with a dataset copied from elsewhere, not from mapreport's own writes."""
        if not self._links_checked:
            refuse_outside_links(self.root, "dataset")
            self._links_checked = True

    def recover(self) -> int:
        """Finish an interrupted `set_aside`, then delete staging folders and data files of
        uncommitted or superseded sources (under the writer lock: what a staging folder holds
        then was left by a writer that died)."""
        for aside in self._unfinished_moves():
            self._finish_moves(aside)
        shutil.rmtree(self.root / STAGING, ignore_errors=True)
        shutil.rmtree(self.root / TRASH, ignore_errors=True)
        removed = self.collect_garbage()
        self._index = None  # read again: the log folder changed
        return removed

    def _drop_source(self, source_id: str) -> int:
        """Delete one source's data files, then its log record."""
        removed = 0
        for f in self.source_files(source_id):
            f.unlink()
            removed += 1
        with contextlib.suppress(FileNotFoundError):
            (self.root / LOG / f"{source_id}.parquet").unlink()
            removed += 1
        return removed

    def source_files(self, source_id: str) -> list[Path]:
        """The data files of one source, found by their names' source id compared as text (an
        id read from a damaged file's name is never a pattern: `*` matches only `*`)."""
        return sorted(
            f
            for table in TABLES
            if table != LOG and (self.root / table).is_dir()
            for f in (self.root / table).rglob("*.parquet")
            if source_of(f) == source_id
        )

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
                if source_of(f) not in live:
                    f.unlink()
                    removed += 1
        # a superseding record keeps naming sources that are gone; that is harmless
        return removed

    # -- retention ----------------------------------------------------------------------------

    def expired(self, keep_from: str) -> list[Path]:
        """The day partitions (folders) of the runtime tables dated before `keep_from`."""
        return sorted(
            d
            for table in DAY_PARTITIONED
            for d in (self.root / table).glob(f"*/{DAY}*")
            if d.is_dir() and d.name[len(DAY) :] != UNDATED and d.name[len(DAY) :] < keep_from
        )

    def retain(self, keep_from: str, dry_run: bool = False) -> Retention:
        """Remove the runtime tables' day partitions dated before `keep_from`, under the writer
        lock (`dry_run`: only say what would go). Each partition leaves with one atomic rename
        (readers see it whole or not at all); a source file none of whose rows remain is
        retired: its log record goes, and a small record of its content stays, so the same
        file found again is not read back in."""
        with self.writing():
            self._current()  # the commit log read first: a damaged or newer one is refused
            gone = self.expired(keep_from)
            files = [f for d in gone for f in d.glob("*.parquet")]
            size = sum(f.stat().st_size for f in files)
            touched = {source_of(f) for f in files}
            remaining = {
                source_of(f)
                for table in DATA_KEPT
                for f in (self.root / table).rglob("*.parquet")
                if f.parent not in gone
            }
            retired = tuple(sorted(touched - remaining))
            plan = Retention(keep_from, tuple(gone), len(files), size, retired)
            if dry_run:
                return plan
            kept = self.kept_from()
            if kept is None or kept < keep_from:  # before any partition goes (`whole`)
                atomic_write(self.root / RETENTION, json.dumps({"keep_from": keep_from}).encode())
            trash = self.root / TRASH
            for i, d in enumerate(gone):
                trash.mkdir(exist_ok=True)
                os.replace(d, trash / f"{i:06d}")
            live = self.live()
            for source_id in retired:
                e = live.get(source_id)
                if e is not None:  # the record first: a crash after it leaves the file retired
                    (self.root / RETIRED).mkdir(exist_ok=True)
                    record = {
                        "path": e.path,
                        "sha256": e.sha256,
                        "size_bytes": e.size_bytes,
                        "retired_before": keep_from,
                    }
                    atomic_write(
                        self.root / RETIRED / f"{source_id}.json", json.dumps(record).encode()
                    )
                with contextlib.suppress(FileNotFoundError):
                    (self.root / LOG / f"{source_id}.parquet").unlink()
            self._index = None
            self.collect_garbage()  # the retired sources' environment and quarantine rows
            shutil.rmtree(trash, ignore_errors=True)
        return plan

    def retired(self, sha256: str) -> bool:
        """True when a file of this content was retired (its rows aged out of the dataset)."""
        return (self.root / RETIRED / f"{sha256[:20]}.json").is_file()

    # -- reading ------------------------------------------------------------------------------

    def files(
        self,
        table: str,
        workload: str | None = None,
        live: set[str] | None = None,
        days: Iterable[str] | None = None,
        legacy: bool = True,
    ) -> list[Path]:
        """Committed data files of a table, optionally only one workload's partition and, in a
        runtime table, only some days' partitions (and, unless not `legacy`, the files written
        before days were partitions: their rows are told apart by time)."""
        live = set(self.live()) if live is None else live
        base = self.root / table
        if not base.is_dir():
            return []
        part = partition_name(workload) if workload is not None else "*"
        if table not in PARTITIONED:
            found: Iterable[Path] = base.rglob("*.parquet")
        elif days is None:
            found = base.glob(f"{part}/**/*.parquet")
        else:
            found = itertools.chain(
                base.glob(f"{part}/*.parquet") if legacy else (),
                *(base.glob(f"{part}/{DAY}{glob.escape(d)}/*.parquet") for d in sorted(set(days))),
            )
        return sorted(f for f in found if source_of(f) in live)

    def days(self, table: str, workload: str | None = None) -> list[str]:
        """The day partitions a runtime table holds (of one workload, or of any)."""
        part = partition_name(workload) if workload is not None else "*"
        return sorted(
            {d.name[len(DAY) :] for d in (self.root / table).glob(f"{part}/{DAY}*") if d.is_dir()}
        )

    def scans(
        self, table: str, workload: str | None, live: set[str], window: Window = EVERYTHING
    ) -> list[Scan]:
        """The files of a table a window reads, each list with the rows of it that count: in a
        runtime table, wall-clock rows of the window's UTC days and, from the partitions of
        its nights, rows without a wall-clock time (`window.py`)."""
        if table == LOG:
            return [Scan([self.root / LOG / f"{s}.parquet" for s in sorted(live)], Rows.ALL)]
        every = self.files(table, workload, live)
        timed = table in DAY_PARTITIONED or table == "compile_event"
        if window.everything or not timed:
            return [Scan(every, Rows.ALL)]
        if table not in DAY_PARTITIONED:  # compile events: a few rows per night, not split
            return [Scan(every, Rows.EITHER)]
        # the days the dataset holds, each asked whether the window holds it: a window costs
        # the days with data, however many days it names
        held = self.days(table, workload)
        days = [d for d in held if window.holds_utc_day(d)]
        on_clock = self.files(table, workload, live, days) if window.bounded() else every
        nights = [d for d in held if d != UNDATED and window.contains_night(d)]
        named = [f for f in self.files(table, workload, live, nights) if f.parent.name[:4] == DAY]
        if named == on_clock:
            return [Scan(on_clock, Rows.EITHER)]
        return [Scan(on_clock, Rows.DATED), Scan(named, Rows.UNDATED)]

    def connect(
        self,
        workload: str | None = None,
        window: Window = EVERYTHING,
        sources: Sequence[str] | None = None,
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with a view per canonical table over the committed files (of
        the `sources` only, when given: `views.connect`)."""
        return views.connect(self, workload, window, sources)


DATA_KEPT = tuple(t for t in TABLES if t not in ("ingest_log", "environment", "quarantine"))
"""Tables whose rows keep a source file in the dataset (its environment and quarantined records
alone do not)."""


def iter_files(paths: list[Path]) -> Iterator[Path]:
    """Expand folders into the regular files below them, sorted; files are passed through."""
    for p in paths:
        if p.is_dir():
            yield from sorted(f for f in p.rglob("*") if f.is_file())
        else:
            yield p
