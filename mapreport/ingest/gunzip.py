"""A gzip stream decompressed ahead of its reader, on a thread of its own.

zlib releases the GIL while it inflates, so a thread that decompresses the next megabytes
while the reader decodes the last ones puts decompression on a second core: a large `.json.gz`
costs about what its decoding costs, not decoding plus decompression. The reader sees the
bytes and the errors (a truncated or corrupt stream) that `gzip.GzipFile` gives in CHUNK-sized
reads, in its order: the bytes before a break, then the break's exception.
"""

from __future__ import annotations

import gzip
import queue
import threading
from types import TracebackType
from typing import IO

CHUNK = 1 << 20
"""Decompressed bytes handed over at a time."""

AHEAD = 8
"""Chunks decompressed ahead at most (memory: AHEAD x CHUNK)."""


class Gunzip:
    """`read(n)` over a gzip stream that a thread decompresses ahead; `close` stops it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(AHEAD)
        self._buf = bytearray()
        self._pos = 0
        self._error: BaseException | None = None
        self._ended = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._inflate, name="gunzip", daemon=True)
        self._thread.start()

    def _inflate(self) -> None:
        try:
            with gzip.GzipFile(fileobj=self._raw, mode="rb") as gz:
                while not self._stop.is_set():
                    data = gz.read(CHUNK)
                    if not data:
                        break
                    self._put(data)
            self._put(None)
        except BaseException as e:  # noqa: BLE001 - handed to the reader, raised there
            self._put(e)

    def _put(self, item: bytes | BaseException | None) -> None:
        while not self._stop.is_set():
            try:
                self._chunks.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes (all that remain for n < 0); b"" at the end; a break's exception
        once every byte before it has been read."""
        while not self._ended and (n < 0 or len(self._buf) - self._pos < n):
            item = self._chunks.get()
            if item is None:
                self._ended = True
            elif isinstance(item, BaseException):
                self._ended, self._error = True, item
            else:
                if self._pos:
                    del self._buf[: self._pos]
                    self._pos = 0
                self._buf += item
        end = len(self._buf) if n < 0 else min(len(self._buf), self._pos + n)
        out = bytes(self._buf[self._pos : end])
        self._pos = end
        if not out and self._error is not None:
            raise self._error
        return out

    def close(self) -> None:
        """Stop the thread and close the file."""
        self._stop.set()  # a put waiting for room gives up within 0.1 s
        self._thread.join()
        self._raw.close()

    def __enter__(self) -> Gunzip:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
