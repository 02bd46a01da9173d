"""What keeps a dataset's files trustworthy: every data file a read uses is checked against the
hash its commit record keeps (`verify`); whether a committed source's files are all in place
(`whole`, retention's removals excepted); and setting damaged files aside in one step a crash
cannot split (`set_aside`). `store.Dataset` mixes these in."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.core.errors import DatasetError
from mapreport.core.files import atomic_write, content_hash
from mapreport.core.schema import check_schema_version
from mapreport.core.window import UNDATED
from mapreport.dataset.log import LOG, LogEntry, LogIndex, source_of

DAMAGED = "damaged"
"""Where `check --repair` sets damaged files aside, one folder per repair (`set_aside`)."""
MOVES = "moves.json"
"""A repair's list of moves, written before the first (`set_aside`)."""
RETENTION = "retention.json"
"""The first day retention keeps (`retain`), so that files of earlier partitions that a commit
record names are known to be gone by design, not lost."""
DAY = "day="
"""The prefix of a day partition's folder name (`day=2026-11-29`)."""


class _Store(Protocol):
    """What these methods need of their dataset: its folder, its log, its writer lock."""

    root: Path
    _index: LogIndex | None

    def _current(self) -> LogIndex: ...

    def writing(
        self, wait: bool = True, checked: bool = True
    ) -> contextlib.AbstractContextManager[None]: ...

    def kept_from(self) -> str | None: ...

    def _finish_moves(self, aside: Path) -> None: ...

    def _unfinished_moves(self) -> list[Path]: ...


class IntegrityFiles:
    """The integrity methods of a dataset (`store.Dataset` mixes them in)."""

    root: Path
    _index: LogIndex | None

    def whole(self: _Store, entry: LogEntry) -> bool:
        """Whether every data file the entry's commit record names is in place (those of day
        partitions retention removed excepted). A record written before files were hashed
        names none: it counts as whole."""
        if not entry.files:
            return True
        kept_from = self.kept_from()
        return all(
            (self.root / name).is_file() or retained_away(name, kept_from) for name in entry.files
        )

    def kept_from(self: _Store) -> str | None:
        """The first day retention keeps (`retain`): partitions before it are gone by design."""
        try:
            record = json.loads((self.root / RETENTION).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise DatasetError(f"{self.root / RETENTION}: damaged retention record ({e})") from None
        kept = record.get("keep_from") if isinstance(record, dict) else None
        if not isinstance(kept, str):
            raise DatasetError(f"{self.root / RETENTION}: damaged retention record (no keep_from)")
        return kept

    # SETASIDE
    def set_aside(self: _Store, paths: Iterable[Path]) -> Path | None:
        """Move files of the dataset to `damaged/<time>/` (same relative paths; nothing is
        deleted), under the writer lock, as one step a crash cannot split: the list of moves
        is written first, commit records move before data files (a source whose record has
        gone is no longer read), and `recover()` finishes a list a crash interrupted before
        it removes any uncommitted file. The folder (None: nothing to move)."""
        names = sorted(
            {p.relative_to(self.root).as_posix() for p in paths},
            key=lambda n: (not n.startswith(f"{LOG}/"), n),
        )
        if not names:
            return None
        with self.writing():
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            aside = self.root / DAMAGED / stamp
            aside.mkdir(parents=True)
            atomic_write(aside / MOVES, json.dumps({"moves": names, "done": False}).encode())
            self._finish_moves(aside)
        return aside

    def _finish_moves(self: _Store, aside: Path) -> None:
        """Do what remains of a list of moves (`set_aside`), then mark it done."""
        plan = json.loads((aside / MOVES).read_bytes())
        for name in plan["moves"]:
            source = self.root / name
            if os.path.lexists(source):
                target = aside / name
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(source, target)
        atomic_write(aside / MOVES, json.dumps({**plan, "done": True}).encode())
        self._index = None  # read again: the log folder changed

    def _unfinished_moves(self: _Store) -> list[Path]:
        """The folders of `set_aside` lists a crash interrupted."""
        found = []
        for moves in sorted((self.root / DAMAGED).glob(f"*/{MOVES}")):
            try:
                plan = json.loads(moves.read_bytes())
                done = plan["done"] and isinstance(plan["moves"], list)
            except (OSError, ValueError, KeyError, TypeError):
                raise DatasetError(
                    f"{moves}: damaged list of moves (set it right by hand)"
                ) from None
            if not done:
                found.append(moves.parent)
        return found

    # VERIFY
    def verify(self: _Store, paths: Iterable[Path]) -> None:
        """Refuse (DatasetError, exit 5, naming the file) a data file a read would use that is
        not a regular file, that its source's commit record does not name, whose bytes are not
        the ones the record hashed (bit rot, an edit, a damaged page header), or, where the
        record predates hashes, whose footer says a newer schema. No query ever computes from
        such a file; `check` says what to do."""
        live = self._current().live
        for f in paths:
            try:
                st = f.lstat()
            except OSError as e:
                raise DatasetError(f"{f}: cannot read ({e.strerror})") from None
            if not stat.S_ISREG(st.st_mode):
                raise DatasetError(f"{f}: not a regular file; `mapreport check` names it")
            entry = live.get(source_of(f))
            files = entry.files if entry is not None else None
            name = f.relative_to(self.root).as_posix()
            want = files.get(name) if files is not None else None
            key = (str(f), st.st_size, st.st_mtime_ns, want or "")
            if key in _VERIFIED:
                continue
            remedy = (
                f"run `mapreport check --dataset {self.root} --repair`, then ingest "
                f"{entry.path if entry else 'its input'} again"
            )
            if files is None:
                _check_footer(f, remedy)
            elif want is None:
                raise DatasetError(
                    f"{f}: a data file its source's commit record does not name (copied in "
                    f"by hand?); {remedy}"
                )
            elif content_hash(f) != want:
                raise DatasetError(
                    f"{f}: its bytes are not those its commit record hashed (SHA-256 differs: "
                    f"bit rot, an edit or a partial copy); {remedy}"
                )
            _VERIFIED.add(key)


def retained_away(name: str, kept_from: str | None) -> bool:
    """Whether a data file's path lies in a day partition retention removed."""
    if kept_from is None:
        return False
    days = [p[len(DAY) :] for p in name.split("/") if p.startswith(DAY)]
    return bool(days) and days[0] != UNDATED and days[0] < kept_from


_VERIFIED: set[tuple[str, int, int, str]] = set()
"""Data files whose bytes matched their commit record, by path, size, modification time and
the hash they matched: each version of a file is hashed once per process (a night reports
many slices over the same files)."""


def _check_footer(f: Path, remedy: str) -> None:
    """A file of a record that keeps no hashes: its footer reads, of a schema this reads."""
    try:
        meta = pq.read_metadata(f).metadata or {}
    except (OSError, pa.ArrowException) as e:
        why = str(e).splitlines()[0]
        raise DatasetError(f"{f}: unreadable Parquet ({why}); {remedy}") from None
    version = meta.get(b"mapreport.schema_version")
    if version is not None:
        check_schema_version(version.decode(errors="replace"), f)
