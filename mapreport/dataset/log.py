"""The commit log's records: one per committed source file, under `<root>/ingest_log/`, read
field by field (`record_entry`), and the index a writer keeps of them (`LogIndex`)."""

from __future__ import annotations

import bisect
import contextlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from mapreport.core.errors import DatasetError
from mapreport.core.schema import TABLES, check_schema_version

LOG = "ingest_log"
"""The commit log's folder (and table)."""


class LogEntry(msgspec.Struct, frozen=True):
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
    night: str | None = None
    """The night the file was ingested for (`--date`): where its rows without a wall-clock
    time belong, and from when a compile profile without captured_at is in force."""
    files: dict[str, str] | None = None
    """Each data file the source wrote, by its path in the dataset (`/`-separated), with the
    SHA-256 of its bytes (None in records written before files were hashed)."""


class LogIndex(msgspec.Struct):
    """The commit log as the writer holding the lock knows it: kept up to date by its own
    commits, so an ingest of thousands of files never lists the log folder again."""

    entries: list[LogEntry]
    live: dict[str, LogEntry]
    by_file: dict[tuple[str, int, int | None], LogEntry]
    by_sha: dict[str, LogEntry]
    by_path: dict[str, list[str]] = msgspec.field(default_factory=dict)
    """Live source ids per input path."""
    sizes: Counter[int] = msgspec.field(default_factory=Counter)
    """Live entries per file size."""
    retired_sizes: frozenset[int | None] = frozenset()
    """Sizes of retired files (None: a record written before sizes were kept)."""

    @classmethod
    def of(cls, entries: list[LogEntry], retired_sizes: frozenset[int | None]) -> LogIndex:
        """The index of a log read from disk."""
        dead = {s for e in entries for s in e.supersedes}
        idx = cls(entries, {}, {}, {}, retired_sizes=retired_sizes)
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
        self.sizes[e.size_bytes] += 1

    def commit(self, e: LogEntry) -> None:
        """A new entry, which supersedes its path's earlier versions (and replaces an earlier
        record of its own source, read again because its files were not whole)."""
        again = [x for x in self.entries if x.source_id == e.source_id]
        for x in again:
            self.entries.remove(x)
            self._forget(x)
        bisect.insort(self.entries, e, key=lambda x: (x.ingested_at, x.source_id))
        for old in e.supersedes:
            gone = self.live.pop(old, None)
            if gone is not None:
                self.by_path[gone.path].remove(old)
                self.by_file.pop((gone.path, gone.size_bytes, gone.mtime_ns), None)
                self.sizes[gone.size_bytes] -= 1
                if self.by_sha.get(gone.sha256) is gone:
                    del self.by_sha[gone.sha256]
        self.add(e)

    def _forget(self, e: LogEntry) -> None:
        """Drop a live entry from the lookups (its record is being replaced)."""
        if self.live.get(e.source_id) is not e:
            return
        del self.live[e.source_id]
        with contextlib.suppress(ValueError):
            self.by_path[e.path].remove(e.source_id)
        if self.by_file.get((e.path, e.size_bytes, e.mtime_ns)) is e:
            del self.by_file[(e.path, e.size_bytes, e.mtime_ns)]
        self.sizes[e.size_bytes] -= 1
        if self.by_sha.get(e.sha256) is e:
            del self.by_sha[e.sha256]


def record_entry(row: dict[str, Any], where: Path) -> LogEntry:
    """One commit record as its log file holds it, every field of the type mapreport writes:
    else a DatasetError naming the file and the field (exit 5), never a crash deep in a later
    step. A record of a newer schema is refused first (`check_schema_version`)."""
    check_schema_version(row.get("schema_version"), where)

    def damaged(name: str, why: str) -> DatasetError:
        root = where.parent.parent
        return DatasetError(
            f"{where}: damaged commit record: field {name!r} {why}; run `mapreport check "
            f"--dataset {root} --repair` to set it aside and see what to ingest again"
        )

    def text(name: str, optional: bool = False) -> Any:
        value = row.get(name)
        if (value is None and not optional) or (value is not None and not isinstance(value, str)):
            raise damaged(name, f"is {_kind(value)}, not text")
        return value

    def count(name: str, optional: bool = False) -> Any:
        value = row.get(name)
        if value is None and optional:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise damaged(name, f"is {_kind(value)}, not a count")
        return value

    def decoded(name: str, kind: type, optional: bool = False) -> Any:
        raw = text(name, optional)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            raise damaged(name, "is not JSON") from None
        if not isinstance(value, kind):
            raise damaged(name, f"is {_kind(value)}, not a JSON {kind.__name__}")
        return value

    source_id = text("source_id")
    if source_id != where.stem:
        raise damaged("source_id", f"is {source_id!r}, not its file's name {where.stem!r}")
    rows = decoded("rows", dict)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in rows.values()):
        raise damaged("rows", "holds a value that is not a count")
    files = decoded("files", dict, optional=True)
    if files is not None:
        for name, sha in files.items():
            if not _dataset_path(name) or not (isinstance(sha, str) and _is_sha256(sha)):
                raise damaged("files", f"names {name!r}, not a data file with its SHA-256")
    supersedes = text("supersedes", optional=True)
    return LogEntry(
        source_id=source_id,
        path=text("path"),
        format=text("format"),
        sha256=text("sha256"),
        size_bytes=count("size_bytes"),
        ingested_at=text("ingested_at"),
        rows=rows,
        rejected=count("rejected"),
        rejections=decoded("rejections", list),
        supersedes=tuple(s for s in (supersedes or "").split(",") if s),
        mtime_ns=count("mtime_ns", optional=True),
        night=text("night", optional=True),
        files=files,
    )


def _kind(value: object) -> str:
    """A value's JSON kind, in words, for a line about a field of the wrong type."""
    if value is None:
        return "missing"
    return {bool: "a boolean", int: "a number", float: "a number", str: "text"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _dataset_path(name: str) -> bool:
    """A data file's path as a commit record names it: relative, inside a table's folder."""
    parts = name.split("/")
    return (
        len(parts) >= 2
        and parts[0] in TABLES
        and parts[0] != LOG
        and all(p not in ("", ".", "..") for p in parts)
        and name.endswith(".parquet")
    )


def _is_sha256(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def source_of(f: Path) -> str:
    """The source id a data file's name carries (`<source_id>-<n>.parquet`)."""
    return f.name.split("-", 1)[0]
