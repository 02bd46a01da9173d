"""vLLM's and SGLang's graph-capture record, `execution_details.json`, which their capture
harnesses write beside the capture traces (`capture_traces/`): a JSON array of
`{"file", "batch_size", "mode"}`, one per capture trace, into `graph_capture` rows.

`mode` is the CUDA/HIP graph mode the server captured under (vLLM's `FULL`, `PIECEWISE`;
SGLang's `FULL`). The capture trace's own annotation (`capture_<size>_<word>`) names vLLM's
graph mode too, but SGLang's names its forward mode (`DECODE`): the graph buckets report the
mode recorded here where there is one (docs/metrics.md, "Graph buckets"). A record's workload
is `--workload`, else the one the trace it names gets when read alone (its file name up to
the first dot, as the profiler-trace readers name it), so a run folder ingested as recorded
joins each record to its trace's slice.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import defstruct

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.core.schema import INT32_MAX
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import read_document
from mapreport.ingest.records import JsonDecoder, open_bytes
from mapreport.ingest.spec import Field, FieldError, RecordSpec, convert_record

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

CAPTURE = RecordSpec(
    "graph capture",
    (
        Field("file", "str", required=True, column="trace_file"),
        Field("batch_size", "int", required=True, minimum=1, maximum=INT32_MAX),
        Field("mode", "str", required=True, column="graph_mode"),
    ),
)
"""A record's raw fields and the `graph_capture` columns they land in; others go to `extra`."""
MAX_BYTES = 1 << 20
"""A record file decompressing to more than this is refused while it is read: it lists one
entry per capture trace (the real ones: one entry, 87-132 bytes)."""
MAX_TEXT = 255
"""The longest trace name or graph mode kept (a file name's limit on Linux)."""
_MODE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{},\n]|[^\s\[\]{},"]+')
"""What the element scanner steps over: a string (escapes and all), a bracket, a comma, a line
break, or any other run of a value (numbers, true, false, null)."""
_AT = re.compile(r"^(.*) - at `\$\[(\d+)\]\.(\w+)`$")
_DECLARED = defstruct("Declared", [(f.raw, Any, None) for f in CAPTURE.fields], gc=False)
_FIELDS: JsonDecoder[Any] = JsonDecoder(list[_DECLARED])  # type: ignore[valid-type]
"""The declared fields alone, each of any type: a decode error in one of them (a number
beyond float range refuses the whole document) then names the field."""


def element_lines(raw: bytes) -> list[int]:
    """1-based line on which each element of the top-level array starts, however the file
    is laid out (nested objects and all)."""
    out: list[int] = []
    line, depth, expect = 1, 0, False
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        if tok == b"\n":
            line += 1
            continue
        if expect and tok != b"]":  # `[]`: no element
            out.append(line)
        expect = False
        if tok in (b"[", b"{"):
            depth += 1
            expect = depth == 1 and tok == b"["
        elif tok in (b"]", b"}"):
            depth -= 1
        elif tok == b"," and depth == 1:
            expect = True
    return out


def _document(path: Path) -> tuple[Any, bytes]:
    """The decoded document and its bytes (at most MAX_BYTES, checked while read)."""
    try:
        return read_document(path, MAX_BYTES)
    except InputError as e:
        with open_bytes(path) as fh:
            raw = fh.read(MAX_BYTES)
        try:
            _FIELDS.decode(raw)
        except msgspec.DecodeError as typed:
            at = _AT.match(str(typed))
            if at is not None:  # a declared field's value, by its record
                reason = f"{at.group(1)} (record {int(at.group(2)) + 1})"
                raise InputError(path, None, at.group(3), reason) from None
        raise e from None


def _trace_name(text: str) -> str:
    """The file name a record's `file` holds (a path written on any system: its last part)."""
    name = PureWindowsPath(PurePosixPath(text).name).name
    if not name or name in (".", "..") or len(name) > MAX_TEXT or not name.isprintable():
        raise FieldError("file", f"expected a file name, got {text[:60]!r}")
    return name


def capture_row(record: Any, hints: dict[str, str]) -> dict[str, Any]:
    """One `graph_capture` row of a record (FieldError naming the field it breaks)."""
    if not isinstance(record, dict):
        raise FieldError(None, "a capture record is a JSON object")
    row = convert_record(CAPTURE, record)
    row["trace_file"] = _trace_name(row["trace_file"])
    mode = row["graph_mode"]
    if len(mode) > MAX_TEXT or not _MODE.fullmatch(mode):
        raise FieldError("mode", f"expected a graph mode name (FULL, PIECEWISE), got {mode[:60]!r}")
    row["workload"] = hints.get("workload") or row["trace_file"].split(".")[0]
    row["slice"] = hints.get("slice", "")
    return row


class CaptureDetailsReader:
    """vLLM/SGLang graph-capture record: each capture trace's batch size and graph mode."""

    name = "capture-details"
    summary = (
        "vLLM/SGLang execution_details.json: each capture trace's batch size and CUDA/HIP "
        "graph mode (FULL, PIECEWISE)"
    )
    tables = ("graph_capture",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON array opening with an object that names a batch size and a file or a mode."""
        text = head.data.lstrip()
        if not text.startswith(b"[") or not text[1:].lstrip().startswith(b"{"):
            return False
        window = text[:4096]
        return b'"batch_size"' in window and (b'"mode"' in window or b'"file"' in window)

    def read(self, path: Path, sink: Sink) -> None:
        """One graph_capture row per record; a bad record is rejected by its line and field."""
        doc, raw = _document(path)
        if not isinstance(doc, list):
            raise InputError(path, None, None, "a capture record file is a JSON array")
        lines = element_lines(raw)
        for i, record in enumerate(doc):
            line = lines[i] if len(lines) == len(doc) else None
            try:
                row = capture_row(record, sink.hints)
            except FieldError as e:
                sink.reject(line, e.field, e.reason, record)
                continue
            sink.add("graph_capture", line, row)
