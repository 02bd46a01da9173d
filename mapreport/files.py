"""Writing a file so that no reader ever sees half of it and no failure leaves a temp behind."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


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
