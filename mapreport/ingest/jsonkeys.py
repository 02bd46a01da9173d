"""The top-level keys of a JSON object, streamed: detection by content must not depend on where
in a file a key sits (a PyTorch profiler trace may begin with a 25 KB `metadata` object before
`traceEvents`). Values are skipped, not decoded, and the cost of a scan is linear in the bytes
it reads whatever they hold: each chunk is first rewritten (same length) with its escaped
backslashes and quotes blanked by two `bytes.replace` passes, so every `"` left delimits a
string and a string's end is one `find`; a nested value is skipped WINDOW bytes at a time by
counting its brackets outside strings with C-level passes (split, join, translate,
accumulate), and only the top level is read token by token (at most MAX_ITEMS tokens). Reading
escapes one Python step at a time cost 80-165x a json.loads of the same bytes
(benchmarks/README.md, `json_keys.py`).
"""

from __future__ import annotations

import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate
from pathlib import Path

import msgspec

from mapreport.ingest.records import JsonDecoder, open_bytes

MAX_KEYS = 256
"""A scan stops after this many top-level keys (no trace format has more)."""
MAX_KEY_BYTES = 4096
"""A longer top-level key is not a key any format looks for: it is skipped, not recorded."""
SCAN_BYTES = 64 << 20
"""A file is scanned for its keys up to this many decompressed bytes (a trace's events begin
within kilobytes; the limit bounds what sniffing may read of a hostile file)."""
CHUNK = 64 << 10
"""Bytes read at a time: a gzip stream that breaks loses at most the chunk it broke in."""
MAX_DEPTH = 10_000
"""A scan stops at a value nested deeper than this: no reader can decode it (msgspec refuses
depths past Python's recursion limit, 1,000), and the depth is counted in Python ints."""
MAX_ITEMS = 2 * MAX_KEYS + 2
"""A scan stops after this many strings and nested values at the top level: an object of
MAX_KEYS members holds as many, so only a malformed one (strings without colons, `{[][]...}`)
gets here, and the top level (read token by token) costs at most this many steps."""
WINDOW = 8 << 10
"""Bytes of a nested value skipped at a time: finding where it closes costs at most this
much more work than reaching it."""
_KEY: JsonDecoder[str] = JsonDecoder(str)

_SPECIALS = (b'"', b"{", b"[", b"}", b"]")
_SPACE = b" \t\r\n"
_QUOTE, _COLON = 0x22, 0x3A
_OPENS = b"{["
_STEPS = bytes(1 if b in b"{[" else 0xFF if b in b"}]" else 0 for b in range(256))
"""A bracket as the signed byte it moves the depth by (+1, -1); anything else 0."""
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"{}[]")


class TopKeys:
    """Feed a JSON object's bytes in chunks; `keys` are its top-level keys in order as they
    are seen, `offsets` the byte offset of each (its opening quote). `done` once the object
    closed, or the scan stopped (not an object, a limit): the keys seen until then stand. A
    chunk may end anywhere (inside a string or an escape); memory holds at most one key's
    bytes between chunks. Invalid JSON gives some keys, never an error, in the same time."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.offsets: list[int] = []
        self.done = False
        self.fed = 0
        """Bytes fed so far (or the offset set by `feed`'s `at`)."""
        self._depth = 0
        self._items = 0  # strings and nested values seen at the top level
        self._started = False
        self._in_string = False
        self._escape = False  # the last chunk ended on a backslash that escapes the next byte
        self._text: bytearray | None = None  # the depth-1 string being read (maybe a key)
        self._text_at = 0
        self._key: bytes | None = None  # a depth-1 string: a key when `:` comes next
        self._key_at = 0

    def feed(self, data: bytes, at: int | None = None) -> None:
        """Scan one more chunk; `at`: its offset in the document, when the bytes before it
        were not all fed (a caller that left out a large value)."""
        start = self.fed if at is None else at
        self.fed = start + len(data)
        if self.done:
            return
        pos = 0
        if not self._started:
            stripped = data.lstrip(_SPACE)
            if not stripped:
                return
            if not stripped.startswith(b"{"):
                self.done = True
                return
            pos, self._started, self._depth = len(data) - len(stripped) + 1, True, 1
        text = self._unescaped(data)
        while not self.done and pos < len(data):
            if self._in_string:
                pos = self._string(text, data, pos)
            elif self._depth > 1:
                pos = self._skip(text, pos)
            else:
                pos = self._top(text, data, pos, start)

    def repeated(self) -> tuple[str, int, int] | None:
        """The first key named twice: (key, offset of the first, offset of the second)."""
        first: dict[str, int] = {}
        for key, at in zip(self.keys, self.offsets, strict=True):
            if key in first:
                return key, first[key], at
            first[key] = at
        return None

    def _unescaped(self, data: bytes) -> bytes:
        """`data` with each escape of a backslash or a quote blanked, byte for byte: every
        `"` left opens or closes a string. Backslashes pair from the left within a run (the
        JSON rule), which `replace` does in one C pass; an odd one at the end of the chunk
        escapes the next chunk's first byte."""
        if not data:
            return data  # an escape pending stays pending
        head = b""
        if self._escape and data[:1] in (b"\\", b'"'):  # as `replace` treats it in one chunk
            head, data = b"_", data[1:]
        if b"\\" not in data:  # most chunks of a trace: one memchr instead of two passes
            text = head + data
        else:
            text = head + data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
        self._escape = text.endswith(b"\\")
        return text

    def _string(self, text: bytes, data: bytes, pos: int) -> int:
        """Read on inside a string from `pos`; the position after what was read."""
        end = text.find(b'"', pos)
        if end < 0:
            self._keep(data, pos, len(data))
            return len(data)
        self._keep(data, pos, end)
        self._in_string = False
        if self._text is not None:
            self._key, self._text = bytes(self._text), None
            self._key_at = self._text_at
        return end + 1

    def _top(self, text: bytes, data: bytes, pos: int, start: int) -> int:
        """One token of the top-level object from `pos`; the position after it."""
        if self._key is not None:
            pos = _after_spaces(text, pos)
            if pos == len(text):
                return pos
            if text[pos] == _COLON:
                self._add(self._key, self._key_at)
            self._key = None
        at = _next_special(text, pos)
        if at < 0:
            return len(text)
        ch = text[at]
        if ch == _QUOTE or ch in _OPENS:
            self._items += 1
            if self._items > MAX_ITEMS:
                self.done = True
            elif ch == _QUOTE:
                self._in_string = True
                self._text, self._text_at = bytearray(), start + at
            else:
                self._depth += 1
        else:
            self._depth -= 1
            if self._depth <= 0:
                self.done = True
        return at + 1

    def _skip(self, text: bytes, pos: int) -> int:
        """Skip a nested value from `pos` (outside any string): the position just after the
        bracket that closes it, or the chunk's end when the value goes on. Brackets inside
        strings are dropped by splitting at the quotes; whether the depth comes back to 1
        here is the minimum of a running sum, so the chunk costs C-level passes, not a
        Python step per token. At most WINDOW bytes at a time: a window may end anywhere, the
        depth and whether a string is open carry over."""
        end = min(len(text), pos + WINDOW)
        parts = text[pos:end].split(b'"')
        outside = b"".join(parts[::2])  # even parts lie between strings
        steps = array("b", outside.translate(_STEPS, _NOT_BRACKET))
        if self._depth + min(accumulate(steps), default=0) > 1:
            self._depth += sum(steps)
            self._in_string = len(parts) % 2 == 0  # an odd count of quotes: one is open
            self._text = None
            if self._depth > MAX_DEPTH:
                self.done = True
            return end
        # the value closes in this window (once per top-level value): find the byte
        closing = list(accumulate(array("b", outside.translate(_STEPS)))).index(1 - self._depth)
        self._depth = 1
        ends = list(accumulate(map(len, parts[::2])))  # where each even part ends in `outside`
        part = bisect_right(ends, closing)
        before = sum(map(len, parts[: 2 * part])) + 2 * part  # bytes and quotes of earlier parts
        return pos + before + closing - (ends[part - 1] if part else 0) + 1

    def _keep(self, data: bytes, start: int, end: int) -> None:
        if self._text is None:
            return
        if len(self._text) + end - start > MAX_KEY_BYTES:
            self._text = None  # too long for a key any format looks for: skip it
            return
        self._text += data[start:end]

    def _add(self, raw: bytes, at: int) -> None:
        try:  # the key as JSON means it (escapes undone)
            self.keys.append(_KEY.decode(b'"' + raw + b'"'))
        except msgspec.DecodeError:
            self.keys.append(raw.decode("utf-8", "replace"))
        self.offsets.append(at)
        if len(self.keys) >= MAX_KEYS:
            self.done = True


def _next_special(text: bytes, pos: int) -> int:
    """The index of the first quote or bracket at or after `pos`, or -1. Searched with
    `find` (memchr) in growing windows: a long number or run of spaces costs C passes over its
    bytes, and a token close by costs five short finds."""
    width = 64
    while pos < len(text):
        end = min(len(text), pos + width)
        found = [i for c in _SPECIALS if (i := text.find(c, pos, end)) >= 0]
        if found:
            return min(found)
        pos, width = end, width * 2
    return -1


def _after_spaces(text: bytes, pos: int) -> int:
    """The index of the first byte at or after `pos` that is not JSON whitespace (or the
    end): stripped in growing windows, so a key's colon close by costs no copy of the chunk."""
    width = 64
    while pos < len(text):
        window = text[pos : pos + width]
        rest = window.lstrip(_SPACE)
        if rest:
            return pos + len(window) - len(rest)
        pos, width = pos + len(window), width * 2
    return pos


def top_keys(chunks: Iterable[bytes], wanted: str | None = None) -> TopKeys:
    """Scan chunks until the object ends, or `wanted` is among the keys."""
    scan = TopKeys()
    for chunk in chunks:
        scan.feed(chunk)
        if scan.done or (wanted is not None and wanted in scan.keys):
            break
    return scan


def file_keys(path: Path, wanted: str | None = None, limit: int = SCAN_BYTES) -> list[str]:
    """The top-level keys of the JSON object a file holds (gzip or plain), read until the
    object ends, `wanted` is seen or `limit` bytes were read; [] when unreadable."""

    scan = TopKeys()
    read = 0
    try:
        with open_bytes(path) as fh:
            while read < limit and (chunk := fh.read(min(CHUNK, limit - read))):
                read += len(chunk)
                scan.feed(chunk)
                if scan.done or (wanted is not None and wanted in scan.keys):
                    break
    except (OSError, EOFError, ValueError, zlib.error):
        pass  # a broken stream: the keys before the break stand
    return scan.keys
