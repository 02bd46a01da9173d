"""Writing a file so that no reader ever sees half of it and no failure leaves a temp behind;
Parquet files with the schema version in their metadata."""

from __future__ import annotations

import contextlib
import os
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
        pq.write_table(
            table.replace_schema_metadata(meta), tmp, compression="zstd", use_dictionary=dictionary
        )


def refuse_outside_links(root: Path, what: str) -> None:
    """Raise DatasetError naming the first link below `root` that points outside it: a writer
    would follow a folder link and write outside the folder, and a reader would read what it
    points to. Links that stay inside are left alone."""
    inside = root.resolve()
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError as e:
            raise DatasetError(f"cannot read {e.filename}: {e.strerror}") from None
        for entry in entries:
            if entry.is_symlink():
                target = Path(entry.path).resolve()
                if not target.is_relative_to(inside):
                    raise DatasetError(
                        f"{entry.path} is a link to {target}, outside the {what} {root}: "
                        f"mapreport reads and writes only inside a {what} (replace the link "
                        "with the folder or file itself)"
                    )
            elif entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
