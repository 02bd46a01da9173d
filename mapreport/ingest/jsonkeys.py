"""The top-level keys of a JSON object, streamed: detection by content must not depend on where
in a file a key sits (a PyTorch profiler trace may begin with a 25 KB `metadata` object before
`traceEvents`). Values are skipped, not decoded: strings by a regex to their closing quote,
nesting by counting brackets, so a scan costs one regex pass over the bytes it reads.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from pathlib import Path

import msgspec

from mapreport.ingest.records import JsonDecoder, open_bytes

MAX_KEYS = 256
"""A scan stops after this many top-level keys (no trace format has more)."""
MAX_KEY_BYTES = 4096
"""A longer top-level key is not a key any format looks for: the scan stops there."""
SCAN_BYTES = 64 << 20
"""A file is scanned for its keys up to this many decompressed bytes (a trace's events begin
within kilobytes; the limit bounds what sniffing may read of a hostile file)."""
CHUNK = 64 << 10
"""Bytes read at a time: a gzip stream that breaks loses at most the chunk it broke in."""
_KEY: JsonDecoder[str] = JsonDecoder(str)

_OUTSIDE = re.compile(rb'["{}\[\]]')
_IN_STRING = re.compile(rb'["\\]')
_SPACE = b" \t\r\n"


class TopKeys:
    """Feed a JSON object's bytes in chunks; `keys` are its top-level keys in order as they
    are seen. `done` once the object closed, or the scan stopped (not an object, a limit, a
    syntax error): the keys seen until then stand. A chunk may end anywhere (inside a string
    or an escape); memory holds at most one key's bytes between chunks."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.done = False
        self._depth = 0
        self._started = False
        self._in_string = False
        self._escape = False  # the last chunk ended on a backslash inside a string
        self._text: bytearray | None = None  # the depth-1 string being read (maybe a key)
        self._key: bytes | None = None  # a depth-1 string: a key when `:` comes next

    def feed(self, data: bytes) -> None:
        """Scan one more chunk."""
        pos, n = 0, len(data)
        if not self._started and not self.done:
            stripped = data.lstrip(_SPACE)
            if not stripped:
                return
            if not stripped.startswith(b"{"):
                self.done = True
                return
            pos, self._started, self._depth = n - len(stripped) + 1, True, 1
        while not self.done and pos < n:
            if self._in_string:
                pos = self._string(data, pos)
                continue
            if self._key is not None:
                while pos < n and data[pos] in _SPACE:
                    pos += 1
                if pos == n:
                    return
                if data[pos] == 0x3A:  # ':'
                    self._add(self._key)
                self._key = None
            m = _OUTSIDE.search(data, pos)
            if m is None:
                return
            ch, pos = m.group(), m.end()
            if ch == b'"':
                self._in_string = True
                self._text = bytearray() if self._depth == 1 else None
            elif ch in b"{[":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth <= 0:
                    self.done = True

    def _string(self, data: bytes, pos: int) -> int:
        """Read on inside a string from `pos`; the position after what was read."""
        if self._escape:
            self._escape = False
            self._keep(data[pos : pos + 1])
            return pos + 1
        m = _IN_STRING.search(data, pos)
        if m is None:
            self._keep(data[pos:])
            return len(data)
        self._keep(data[pos : m.start()])
        if m.group() == b"\\":
            self._keep(b"\\")
            if m.end() == len(data):
                self._escape = True
                return m.end()
            self._keep(data[m.end() : m.end() + 1])
            return m.end() + 1
        self._in_string = False
        if self._text is not None:
            self._key, self._text = bytes(self._text), None
        return m.end()

    def _keep(self, part: bytes) -> None:
        if self._text is None:
            return
        if len(self._text) + len(part) > MAX_KEY_BYTES:
            self._text = None  # too long for a key any format looks for: skip it
            return
        self._text += part

    def _add(self, raw: bytes) -> None:
        try:  # the key as JSON means it (escapes undone)
            self.keys.append(_KEY.decode(b'"' + raw + b'"'))
        except msgspec.DecodeError:
            self.keys.append(raw.decode("utf-8", "replace"))
        if len(self.keys) >= MAX_KEYS:
            self.done = True


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
