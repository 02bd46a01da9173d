"""Helpers for formats that are one JSON document per file (trtexec exports, Model Analyzer
checkpoints, Triton trace files): a bounded whole-file decode whose errors name the line, and
the line each element of a top-level array starts on, for error messages and provenance."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from mapreport.core.errors import InputError
from mapreport.ingest.records import JsonDecoder, open_bytes

MAX_DOCUMENT_BYTES = 128 << 20
"""A one-document file decompressing to more than this is refused while it is read: these
exports are per engine or per run (the largest real one here is 1 MB), and the decoded
document takes several times its bytes."""

_BYTE = re.compile(r"byte (\d+)")
_DECODE: JsonDecoder[Any] = JsonDecoder()


def read_document(path: Path, limit: int = MAX_DOCUMENT_BYTES) -> tuple[Any, bytes]:
    """The decoded document and its raw bytes (at most `limit` of them, checked while they are
    read); malformed JSON raises InputError with the line."""
    with open_bytes(path) as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        raise InputError(path, None, None, f"document larger than {limit} bytes")
    try:
        return _DECODE.decode(raw), raw
    except msgspec.DecodeError as e:
        m = _BYTE.search(str(e))
        if m:
            line: int | None = raw.count(b"\n", 0, int(m.group(1))) + 1
        elif "truncated" in str(e):
            line = raw.count(b"\n") + 1  # the document stops at the last line
        else:
            line = None
        raise InputError(path, line, None, f"invalid JSON: {e}") from None


def element_lines(raw: bytes, count: int) -> list[int | None]:
    """1-based start line of each element of a top-level array written one element per line
    (`[`, `{...}`, `, {...}`, `]`, as trtexec and Triton write them); None for each element when
    the file is laid out otherwise."""
    starts = [
        i for i, line in enumerate(raw.split(b"\n"), 1) if line.lstrip(b"[, \t").startswith(b"{")
    ]
    if len(starts) == count:
        return list(starts)
    return [None] * count


def json_text(value: Any) -> str | None:
    """A compact JSON string of a value for the `extra` column, or None when empty."""
    if value in (None, {}, []):
        return None
    return msgspec.json.encode(value).decode()
