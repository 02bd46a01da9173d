"""Streaming the one large array of a JSON document (a Chrome trace's `traceEvents`): its
elements are handed over in runs of complete elements, each run decoded on its own, and the
rest of the document (every other key) is decoded at the end. Memory holds one block of the
file, not the file.

Runs are cut at `}` `,` `{` between two objects. A cut that falls inside an element (the
pattern inside a nested list or a string) leaves the run with an unclosed bracket or string,
so its decode fails and the next cut back is tried: a run is only ever accepted when it
decodes as a JSON array, which is the proof that the cut was between elements.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import IO, Any, Generic, TypeVar

import msgspec

from mapreport.ingest.records import JsonDecoder

T = TypeVar("T")

BLOCK = 8 << 20
"""Bytes read at a time."""
MAX_PREFIX = 64 << 20
"""The array's key must start within this many bytes, else the document is read whole."""
MAX_RUN = 256 << 20
"""A run that finds no cut in this many bytes is a syntax error, not a long element."""

CUT = re.compile(rb"\}\s*,\s*\{")
"""Where two objects of an array may meet: `}` `,` `{` (also found inside strings and nested
lists, so a cut is only proven by decoding)."""
_ANY: JsonDecoder[Any] = JsonDecoder()
_RAWS: JsonDecoder[list[msgspec.Raw]] = JsonDecoder(list[msgspec.Raw])
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
_BYTE = re.compile(r" ?\(byte (\d+)\)")


class NotStreamable(Exception):
    """The document is not laid out as streaming needs (the key is not a top-level array near
    the start): read it whole instead. Raised before any run is handed over."""


class _Closed(Exception):
    """A run's decode ended before its cut: the array closed within the bytes read."""


class BadArray(Exception):
    """The array is not valid JSON: no cut between elements decodes. `at`: where, when known
    (bytes from where the stream's file starts: a caller that opened it at an offset adds
    that offset)."""

    def __init__(self, element: int, reason: str, at: int | None = None) -> None:
        super().__init__(element, reason, at)
        self.element = element
        self.reason = reason
        self.at = at

    def __str__(self) -> str:
        if self.at is None:
            return f"invalid JSON after element {self.element}: {self.reason}"
        after = f", after element {self.element}" if self.element else ""
        return f"invalid JSON at byte {self.at:,}{after}: {self.reason}"


def _bad(element: int, e: msgspec.DecodeError, start: int, length: int) -> BadArray:
    """A decode error of `length` bytes that begin at byte `start` of the file, with its
    position in the file: msgspec's byte, or the end for a truncated document."""
    m = _BYTE.search(str(e))
    if m is not None:
        at: int | None = start + int(m.group(1))
    else:
        at = start + length if "truncated" in str(e) else None
    return BadArray(element, _BYTE.sub("", str(e)).rstrip(), at)


class ArrayStream(Generic[T]):
    """Iterate the runs of `doc[key]` (each `decode`d from `[elements]`); afterwards `rest` is
    the document with that array replaced by `[]`.

    `decode` must raise `msgspec.DecodeError` (not a ValidationError) only when the bytes are
    not a JSON array; `count` gives the number of elements of a decoded run.
    """

    def __init__(
        self,
        fh: IO[bytes],
        key: bytes,
        decode: Callable[[bytes], T],
        count: Callable[[T], int],
        block: int | None = None,
        stop: int | None = None,
        inside: bool = False,
    ) -> None:
        """`stop`: the byte offset (from where `fh` starts) of an element to stop before: the
        last run ends there, and `stopped` says whether that run decoded, which proves an
        element starts at `stop`. `inside`: `fh` starts at an element of the array (a second
        reader's half), there is no key to find, and `rest` is what follows the array."""
        self._fh = fh
        self._key = re.compile(rb'"' + re.escape(key) + rb'"\s*:\s*\[')
        self._decode = decode
        self._count = count
        self._block = block or BLOCK
        self._stop = stop
        self._inside = inside
        self.rest = b""
        self.prefix = b""
        """The document up to the array's `[` (empty when `inside`)."""
        self.rest_at = 0
        """Where the document after the array begins (bytes from where `fh` starts), once
        every run was read: an offset in the file for what `rest` holds after `[]`."""
        self.elements = 0
        self.stopped = False
        self._read_to = 0

    def _read(self) -> bytes:
        more = self._fh.read(self._block)
        self._read_to += len(more)
        return more

    def stop_at(self, offset: int) -> bool:
        """Set the stop (see `__init__`) while the stream is read, between runs: taken when
        none is set and the stream has not read up to `offset` yet."""
        if self._stop is not None or offset <= self._read_to:
            return False
        self._stop = offset
        return True

    def _start(self) -> tuple[bytes, bytes, bool]:
        """(prefix up to the array's `[`, bytes after it, eof) or NotStreamable."""
        buf = b""
        while True:
            more = self._read()
            eof = not more
            buf += more
            m = self._key.search(buf)
            if m is not None:
                prefix = buf[: m.end() - 1]
                try:  # the key is a member of the top-level object, not text inside a value
                    _ANY.decode(prefix + b"[]}")
                except msgspec.DecodeError:
                    raise NotStreamable from None
                return prefix, buf[m.end() :], eof
            if eof or len(buf) > MAX_PREFIX:
                raise NotStreamable

    def __iter__(self) -> Iterator[T]:
        if self._inside:
            prefix, buf, eof, pos = b"", b"", False, 0
        else:
            prefix, buf, eof = self._start()
            pos = len(prefix) + 1  # the offset of buf[0]: just after the `[`
        self.prefix = prefix
        while True:
            while not eof and len(buf) < self._block:
                more = self._read()
                eof = not more
                buf += more
            if self._stop is not None and self._stop <= pos:
                self._stop = None  # the stop lies before the array's elements: never an element
            if self._stop is not None and pos + len(buf) > self._stop:
                value = self._until(buf[: self._stop - pos])
                if value is not None:
                    self.stopped = True
                    self.elements += self._count(value)
                    yield value
                    return
                self._stop = None  # no element starts there: read on as if never asked
            if eof:
                break
            try:
                run = self._run(buf)
            except _Closed:
                buf, eof = self._read_rest(buf), True
                break
            if run is None:
                if len(buf) > MAX_RUN:
                    raise BadArray(self.elements, "no element boundary decodes", pos)
                more = self._read()
                eof = not more
                buf += more
                continue
            value, end = run
            self.elements += self._count(value)
            yield value
            buf = buf[end:]
            pos += end
        value, rest = self._last(prefix, buf, pos)
        self.elements += self._count(value)
        self.rest = rest
        after = len(rest) - (0 if self._inside else len(prefix) + 2)  # the bytes after `]`
        self.rest_at = pos + len(buf) - after
        yield value

    def _read_rest(self, buf: bytes) -> bytes:
        """`buf` and the rest of the document, once the array closed in it: read whole
        (without trying further runs, which copied the growing buffer for each cut tried: a
        trace whose first `traceEvents` is `[]` took 8 s for 51 MiB, quadratic in size), at
        most MAX_RUN bytes."""
        parts, size = [buf], len(buf)
        while more := self._read():
            parts.append(more)
            size += len(more)
            if size > MAX_RUN:
                raise BadArray(self.elements, f"more than {MAX_RUN} bytes follow the array")
        return b"".join(parts)

    def _until(self, head: bytes) -> T | None:
        """The elements of `head`, which must be whole elements followed by a comma; None
        when it is not (the stop offset is not an element start)."""
        head = head.rstrip()
        if not head.endswith(b","):
            return None
        try:
            return self._decode(b"[" + head[:-1] + b"]")
        except msgspec.ValidationError:
            raise
        except msgspec.DecodeError:
            return None

    def _run(self, buf: bytes) -> tuple[T, int] | None:
        """The longest run of whole elements at the start of `buf` that decodes, and where
        the next element starts; None when no cut in the last block decodes; _Closed when
        the array ends before a cut (its decode stops with trailing characters: the parse
        from the array's `[` is exact up to there, wherever the cut fell)."""
        window = 1 << 16
        while True:  # the last cuts: searched in a growing window at the end
            start = max(0, len(buf) - window)
            cuts = [m.start() for m in CUT.finditer(buf, start)]
            if len(cuts) >= 16 or start == 0:
                break
            window *= 8
        for cut in reversed(cuts[-16:]):
            try:
                value = self._decode(b"[" + buf[: cut + 1] + b"]")
            except msgspec.ValidationError:
                raise
            except msgspec.DecodeError as e:
                if _TRAILING.search(str(e)):
                    raise _Closed from None
                continue
            nxt = buf.index(b"{", cut + 1)
            return value, nxt
        return None

    def _last(self, prefix: bytes, buf: bytes, pos: int) -> tuple[T, bytes]:
        """The last elements and the rest of the document (`buf` starts at byte `pos`). The
        array ends where a decode of `[` + what is left stops with trailing characters; the
        document without the array (prefix, `[]`, what follows) must then decode too."""
        data = b"[" + buf
        try:
            _RAWS.decode(data)
            end = len(data)  # nothing after the array: the document is not closed
        except msgspec.DecodeError as e:
            m = _TRAILING.search(str(e))
            if m is None:
                raise _bad(self.elements, e, pos - 1, len(data)) from None
            # msgspec reports the byte after the first trailing character; the array's
            # closing bracket is the last one before that character
            end = data.rfind(b"]", 0, int(m.group(1)) - 1) + 1
        if self._inside:  # the caller puts the document together
            return self._decode(data[:end]), data[end:]
        rest = prefix + b"[]" + data[end:]
        try:
            _ANY.decode(rest)
        except msgspec.DecodeError as e:
            bad = _bad(self.elements, e, 0, len(rest))
            if bad.at is not None and bad.at >= len(prefix) + 2:  # after `[]`: the file's tail
                bad.at += pos - 1 + end - len(prefix) - 2
            bad.reason = f"after the array: {bad.reason}"
            raise bad from None
        try:
            return self._decode(data[:end]), rest
        except msgspec.ValidationError:
            raise
        except msgspec.DecodeError as e:
            raise _bad(self.elements, e, pos - 1, end) from None
