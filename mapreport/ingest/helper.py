"""A second process for one large file: a forked helper reads the part of the file after a
split point while the caller reads the part before it, so a single file uses both cores.

The helper is forked (it inherits the reader's code, caches and arguments, nothing is pickled
on the way in) and answers with a list of byte strings through a pipe. Any failure of the
helper (an exception, a crash, a broken reply) makes `result()` None: the caller then reads
that part itself, so a helper can cost time but never rows.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import pyarrow as pa

MIN_BYTES = 64 << 20
"""A plain (not gzipped) file at least this large is read by two processes."""
SHARE = 0.45
"""The share of a large file the helper reads: a little under half, because it does more per
byte than the caller (it counts the lines before its start, or writes its columns out)."""
_enabled = True


def disable() -> None:
    """No helpers in this process: the initializer of `ingest --jobs` reader processes,
    which already use the cores."""
    global _enabled
    _enabled = False


def possible() -> bool:
    """Whether this process may start helpers: two cores or more, fork available, and
    helpers not `disable`d here."""
    return (
        _enabled
        and (os.cpu_count() or 1) >= 2
        and "fork" in multiprocessing.get_all_start_methods()
    )


def available(size: int, head: bytes) -> bool:
    """Whether a file of `size` bytes starting with `head` is worth a helper here: large,
    not gzipped (a gzip stream cannot be entered in the middle) and `possible`."""
    return size >= MIN_BYTES and not head.startswith(b"\x1f\x8b") and possible()


def large_gzip(path: Path) -> bool:
    """Whether a gzip file likely inflates to MIN_BYTES or more (its trailer's size, which
    is modulo 4 GiB, or its own size), so that a plain copy of it is worth a helper."""
    try:
        with open(path, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                return False
            total = fh.seek(0, os.SEEK_END)
            fh.seek(max(total - 4, 0))
            inflated = int.from_bytes(fh.read(4), "little")
    except OSError:
        return False
    return max(inflated, total) >= MIN_BYTES and possible()


def start_window(path: Path, size: int = 1 << 20) -> tuple[int, bytes] | None:
    """Where a helper reading about the last `SHARE` of a file would start looking for a
    boundary, and the `size` bytes there; None when the file gets no helper (`available`)."""
    try:
        total = path.stat().st_size
        with open(path, "rb") as fh:
            if not available(total, fh.read(2)):
                return None
            at = int(total * (1 - SHARE))
            fh.seek(at)
            return at, fh.read(size)
    except OSError:
        return None


def _serve(work: Callable[[], list[bytes]], conn: Connection) -> None:
    """In the helper: run `work` and send its messages, preceded by their count. On failure
    nothing is sent, and the caller sees the pipe close."""
    try:
        messages = work()
        conn.send_bytes(pickle.dumps(len(messages)))
        for m in messages:
            conn.send_bytes(m)
    except BaseException:  # noqa: BLE001 - the closed pipe tells the caller
        pass
    finally:
        conn.close()


class Helper:
    """`work()` run in a forked process; `result()` is its messages, or None if it failed."""

    def __init__(self, work: Callable[[], list[bytes]]) -> None:
        # pyarrow asks once per process whether pandas is installed, on its first array
        # (importing it, where the process allows it: 0.17 s, 40 MiB): asked here, before the
        # fork, the helper does not ask again (a 297 MiB trace: 2.0-2.4 s -> 1.8-2.0 s)
        pa.array([0])

        ctx = multiprocessing.get_context("fork")
        self._conn, theirs = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_serve, args=(work, theirs))
        self._proc.start()
        theirs.close()

    def result(self) -> list[bytes] | None:
        """Wait for the helper's messages; None when it failed."""
        try:
            n = pickle.loads(self._conn.recv_bytes())
            return [self._conn.recv_bytes() for _ in range(n)]
        except (EOFError, OSError, pickle.UnpicklingError, TypeError, ValueError):
            return None

    def close(self) -> None:
        """End the helper (it may still run when the caller stopped early) and reap it."""
        self._conn.close()
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
