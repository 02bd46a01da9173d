"""PyTorch profiler (Kineto) Chrome-trace JSON, as HTA reads it: operators, kernels and runtime
launches into `op_exec`, device and distributed information into `environment`.

This module is the format (its name, tables and sniffing test); the reading is
`kineto_events`, imported only when a trace is read, so listing or detecting formats does not
load numpy and Arrow's compute functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mapreport.core.errors import ErrorPolicy
from mapreport.ingest.base import Head
from mapreport.ingest.jsonkeys import TopKeys, file_keys

if TYPE_CHECKING:
    from pathlib import Path

    from mapreport.ingest.sink import Sink


class KinetoReader:
    """PyTorch profiler / Kineto Chrome trace (`.json`, `.json.gz`)."""

    name = "kineto"
    summary = "PyTorch profiler (Kineto) Chrome trace JSON: cpu ops, kernels, launches"
    tables = ("op_exec", "request", "environment")
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON object whose top-level keys in the head include traceEvents or Kineto's
        schema header (`schemaVersion` with `deviceProperties`)."""
        scan = TopKeys()
        scan.feed(head.data)
        return _is_trace(scan.keys)

    def sniff_file(self, path: Path) -> bool:
        """The same test on the keys of the whole file, streamed: `traceEvents` may follow a
        `metadata` object of any size."""
        return _is_trace(file_keys(path, wanted="traceEvents"))

    def read(self, path: Path, sink: Sink) -> None:
        """Stream the events into columns, link kernels to their operators, write op_exec (and
        a request per request annotation span, `kineto_requests`)."""
        from mapreport.ingest import kineto_events

        kineto_events.read(path, sink)


def _is_trace(keys: list[str]) -> bool:
    return "traceEvents" in keys or ("schemaVersion" in keys and "deviceProperties" in keys)
