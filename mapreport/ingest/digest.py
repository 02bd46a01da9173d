"""A source file's SHA-256, computed on a thread while the file is read.

A new file's content hash names its rows (`source_id`) but decides nothing before it is read
when no file of its size is in the dataset (`Dataset.may_hold`): then hashing and reading run
at once (hashlib releases the GIL on large updates, so the hash takes the other core), and
the hash is waited for only where a row or a file name first needs it.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

BLOCK = 1 << 20
"""Bytes hashed per update."""


def file_sha256(path: Path, stop: threading.Event | None = None) -> str:
    """The SHA-256 of a file's bytes, streamed (given up, "", once `stop` is set)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(BLOCK), b""):
            if stop is not None and stop.is_set():
                return ""
            h.update(chunk)
    return h.hexdigest()


class Digest:
    """The SHA-256 of one file: known already (`of`) or being computed on a thread (`start`)."""

    def __init__(self, sha256: str | None = None, path: Path | None = None) -> None:
        self._sha = sha256
        self._error: OSError | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        if sha256 is None:
            assert path is not None
            self._thread = threading.Thread(target=self._hash, args=(path,), name="sha256")
            self._thread.daemon = True
            self._thread.start()

    @classmethod
    def of(cls, sha256: str) -> Digest:
        """A hash already computed."""
        return cls(sha256)

    @classmethod
    def start(cls, path: Path) -> Digest:
        """Hash `path` on a thread of its own."""
        return cls(None, path)

    def _hash(self, path: Path) -> None:
        try:
            self._sha = file_sha256(path, self._stop)
        except OSError as e:  # raised where the hash is asked for
            self._error = e

    def cancel(self) -> None:
        """Stop hashing (the file failed: its hash is not needed) and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._error = self._error or OSError("hashing cancelled")

    @property
    def sha256(self) -> str:
        """The hash (waits for the thread; its OSError is raised here)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
        assert self._sha is not None
        return self._sha

    @property
    def source_id(self) -> str:
        """The dataset's name for the file's content: the hash's first 20 hex digits."""
        return self.sha256[:20]
