"""A gzip stream decompressed ahead of its reader, on a thread of its own.

zlib releases the GIL while it inflates, so a thread that decompresses the next megabytes
while the reader decodes the last ones puts decompression on a second core: a large `.json.gz`
costs about what its decoding costs, not decoding plus decompression. The reader sees the
bytes and the errors (a truncated or corrupt stream) that `gzip.GzipFile` gives in CHUNK-sized
reads, in its order: the bytes before a break, then the break's exception.
"""

from __future__ import annotations

import contextlib
import gzip
import multiprocessing
import os
import pickle
import queue
import threading
from abc import ABC, abstractmethod
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import IO, Self

CHUNK = 1 << 20
"""Decompressed bytes handed over at a time."""

AHEAD = 8
"""Chunks decompressed ahead at most (memory: AHEAD x CHUNK)."""


class _Closing(ABC):
    """`with` closes the stream (`close`)."""

    @abstractmethod
    def close(self) -> None:
        """Stop decompressing and release the files."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Gunzip(_Closing):
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


RUN_AHEAD = 512 << 20
"""Decompressed bytes the spooling process may write beyond what its reader has read."""


def _spool(raw: IO[bytes], spool: Path, conn: Connection) -> None:
    """In the spooling process: the stream into `spool`, the running total sent after each
    chunk, the reader's position (sent back) kept within RUN_AHEAD; last a message
    (None, error or None)."""
    error: BaseException | None = None
    written, pos = 0, 0
    try:
        with gzip.GzipFile(fileobj=raw, mode="rb") as gz, open(spool, "wb") as out:
            while data := gz.read(CHUNK):
                while conn.poll(0 if written - pos <= RUN_AHEAD else None):
                    pos = conn.recv()
                    if pos is None:
                        return  # the reader closed
                out.write(data)
                out.flush()
                written += len(data)
                conn.send(written)
    except BaseException as e:  # noqa: BLE001 - handed to the reader, raised there
        error = e
    try:
        conn.send((None, error))
    except (OSError, pickle.PicklingError):
        with contextlib.suppress(OSError):
            conn.send((None, EOFError(str(error))))


class Spooled(_Closing):
    """`read(n)` over a gzip stream that a forked process decompresses into a plain file
    (`spool`), running up to RUN_AHEAD bytes ahead of the reader, which reads the file
    behind it.

    Decompressing takes a fraction of what decoding a trace takes, and in a process of its
    own it does not wait for the reader's GIL (a thread did: msgspec holds it while it decodes
    a run), so a document of up to RUN_AHEAD bytes lies whole in the spool long before its
    reader is half way, and a helper can read its second half from the plain file
    (`complete`). The reader sees the bytes and the break (a truncated or corrupt stream) that
    `Gunzip` gives. `close` stops the process and removes the spool."""

    def __init__(self, raw: IO[bytes], spool: Path) -> None:
        self._raw = raw
        self.spool = spool
        spool.touch()
        self._in = open(spool, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        ctx = multiprocessing.get_context("fork")
        self._conn, theirs = ctx.Pipe(duplex=True)
        self._proc = ctx.Process(target=_spool, args=(raw, spool, theirs))
        self._proc.start()
        theirs.close()
        self._written = 0
        self._pos = 0
        self._done = False
        self._error: BaseException | None = None

    def _take(self, block: bool) -> None:
        """Take the spooling process's messages: one at least when `block`, else those sent."""
        while not self._done and (block or self._conn.poll(0)):
            block = False
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):  # it died without a word
                self._done, self._error = True, EOFError("gzip stream: decompression ended")
                return
            if isinstance(msg, tuple):
                self._done, self._error = True, msg[1]
            else:
                self._written = msg

    def complete(self) -> int | None:
        """The spool's size once the whole stream is in it without a break; else None."""
        self._take(block=False)
        return self._written if self._done and self._error is None else None

    def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes (all that remain for n < 0); b"" at the end; a break's exception
        once every byte before it has been read."""
        self._take(block=False)
        while not self._done and (n < 0 or self._written - self._pos < n):
            self._take(block=True)
        have = self._written - self._pos
        want = have if n < 0 else min(n, have)
        out = os.pread(self._in.fileno(), want, self._pos) if want else b""
        self._pos += len(out)
        if out and not self._done:
            with contextlib.suppress(OSError):
                self._conn.send(self._pos)
        if not out and self._error is not None:
            raise self._error
        return out

    def close(self) -> None:
        """Stop the spooling process, close the files and remove the spool."""
        with contextlib.suppress(OSError):
            self._conn.send(None)
        self._conn.close()
        self._proc.join(timeout=1)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join()
        self._in.close()
        self._raw.close()
        self.spool.unlink(missing_ok=True)
