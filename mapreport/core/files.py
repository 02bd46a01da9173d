"""Writing a file so that no reader ever sees half of it and no failure leaves a temp behind;
Parquet files with the schema version in their metadata and page checksums; the content hash a
commit record keeps of each file; what a folder of mapreport's may hold (no link out, nothing
but folders and regular files)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.core.errors import DatasetError
from mapreport.core.schema import SCHEMA_VERSION


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` to write; renamed onto `path` when the block ends, and
    removed when it fails (a full disk must not stay full on every rerun). An OSError that
    names no file (ENOSPC from a write) or the temporary one is raised naming `path`."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError) and e.filename in (None, "", str(tmp)):
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` under a temporary name and rename it into place."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)


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
        # page checksums: a reader that verifies them (pyarrow, `mapreport check`) finds a
        # damaged page instead of decoding it into wrong numbers
        pq.write_table(
            table.replace_schema_metadata(meta),
            tmp,
            compression="zstd",
            use_dictionary=dictionary,
            write_page_checksum=True,
        )


def content_hash(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex), as a commit record keeps it for each data file."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def refuse_outside_links(root: Path, what: str) -> None:
    """Raise DatasetError naming the first entry below `root` that `unsafe_entries` finds."""
    for path, why in unsafe_entries(root, what):
        raise DatasetError(f"{path} {why}")


def unsafe_entries(root: Path, what: str) -> list[tuple[Path, str]]:
    """Every entry below `root` mapreport will not go through, with why: a link pointing
    outside it (a writer would follow a folder link and write outside the folder, a reader
    would read what it points to) and anything neither a folder nor a regular file (a FIFO
    named `*.parquet` blocks whoever opens it, forever; a socket or device is no data). Links
    that stay inside are left alone. A folder that cannot be listed is a DatasetError."""
    inside = root.resolve()
    found: list[tuple[Path, str]] = []
    stack = [root]
    while stack:
        try:
            entries = sorted(os.scandir(stack.pop()), key=lambda e: e.name)
        except OSError as e:
            raise DatasetError(f"cannot read {e.filename}: {e.strerror}") from None
        for entry in entries:
            if entry.is_symlink():
                target = Path(entry.path).resolve()
                if not target.is_relative_to(inside):
                    found.append(
                        (
                            Path(entry.path),
                            f"is a link to {target}, outside the {what} {root}: mapreport "
                            f"reads and writes only inside a {what} (replace the link with the "
                            "folder or file itself)",
                        )
                    )
            elif entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif not entry.is_file(follow_symlinks=False):
                kind = _special_kind(Path(entry.path))
                found.append(
                    (
                        Path(entry.path),
                        f"is a {kind}, not a regular file: mapreport reads only folders and "
                        f"regular files in a {what} (remove it, or `mapreport check --repair` "
                        "sets it aside)",
                    )
                )
    return found


def _special_kind(path: Path) -> str:
    """What a file that is neither a folder, a regular file nor a link is, in words."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "file that vanished while it was listed"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"
