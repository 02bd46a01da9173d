"""The TensorFlow/JAX profiler's traces (XLA): the Chrome trace JSON the profiler writes beside
its XPlane (`<host>.trace.json.gz`, and what xprof's `trace_viewer` tool gives), and the XPlane
itself (`<host>.xplane.pb`), converted through xprof when it is installed.

An event with an `hlo_op` argument is one execution of an XLA instruction of a compiled program
(`hlo_module`): an `op_exec` row of category `kernel` (on a CPU backend the host threads are the
device), its op `<module>:<instruction>`, its plan the module (XLA's unit of compile-time
mapping), its device the `device_ordinal`. Python frames (`$file:line name`) are
`python_function` rows; every other event is a `host` row.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.core.extras import install_hint
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import MAX_DOCUMENT_BYTES, read_document
from mapreport.ingest.jsonkeys import TopKeys

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

_PROCESS_MARKERS = (b'"/host:CPU', b'"/device:', b" /host:CPU", b" /device:")
"""How the TensorFlow/JAX profiler names its processes (planes), which Kineto never does."""
XPLANE_SUFFIX = ".xplane.pb"
MAX_XPLANE_BYTES = 512 << 20
"""An XPlane larger than this is refused before it is converted (the conversion holds it)."""


def rows_of(path: Path, events: list[Any], workload: str, slice_: str, sink: Sink) -> None:
    """The complete events of a trace into op_exec rows; a malformed one is rejected by its
    index in traceEvents."""
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        name, ts, dur = ev.get("name"), ev.get("ts"), ev.get("dur")
        args: dict[str, Any] = ev["args"] if isinstance(ev.get("args"), dict) else {}
        if not isinstance(name, str) or not name:
            sink.reject(i + 1, "name", f"traceEvents[{i}]: event has no name", ev)
            continue
        if not isinstance(ts, int | float) or not isinstance(dur, int | float):
            ts = dur = None
        if ts is None or dur is None or not _number(ts) or not _number(dur) or dur < 0:
            sink.reject(i + 1, "dur", f"traceEvents[{i}]: needs a finite ts and dur >= 0", ev)
            continue
        hlo, module = args.get("hlo_op"), args.get("hlo_module")
        extra: dict[str, Any] = {"pid": ev.get("pid"), "tid": ev.get("tid")}
        if isinstance(hlo, str) and hlo:
            category = "kernel"
            extra["op"] = f"{module}:{hlo}" if isinstance(module, str) and module else hlo
        else:
            category = "python_function" if name.startswith("$") else "host"
        sink.add(
            "op_exec",
            i + 1,
            {
                "workload": workload,
                "slice": slice_,
                "name": name[:4096],
                "category": category,
                "ts_us": float(ts),
                "dur_us": float(dur),
                "device": _ordinal(args.get("device_ordinal")),
                "plan_id": module if isinstance(module, str) and category == "kernel" else None,
                "extra": msgspec.json.encode(extra).decode(),
            },
        )


@contextmanager
def _quiet() -> Iterator[None]:
    """Standard error closed while xprof converts: its native code logs every step there,
    and a command's output is its own."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and abs(x) < 1e300


def _ordinal(x: Any) -> int | None:
    text = str(x) if isinstance(x, int | str) and not isinstance(x, bool) else ""
    return int(text) if text.isdigit() and len(text) < 9 else None


def _names(path: Path, sink: Sink) -> tuple[str, str]:
    return sink.hints.get("workload") or path.name.split(".")[0], sink.hints.get("slice", "")


class XlaTraceReader:
    """TensorFlow/JAX profiler Chrome trace (`*.trace.json.gz`): XLA op executions."""

    name = "xla-trace"
    summary = (
        "TensorFlow/JAX profiler trace JSON (*.trace.json.gz beside an XPlane, or xprof's "
        "trace_viewer): XLA op executions per compiled module"
    )
    tables = ("op_exec",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A Chrome trace (a top-level `traceEvents`) whose processes are named as the
        TensorFlow/JAX profiler names its planes (`/host:CPU`, `/device:TPU:0`)."""
        scan = TopKeys()
        scan.feed(head.data)
        return (
            "traceEvents" in scan.keys
            and b'"process_name"' in head.data
            and any(m in head.data for m in _PROCESS_MARKERS)
        )

    def read(self, path: Path, sink: Sink) -> None:
        """Every complete event into op_exec."""
        doc, _ = read_document(path)
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not isinstance(events, list):
            raise InputError(path, None, "traceEvents", "not a Chrome trace: no traceEvents list")
        rows_of(path, events, *_names(path, sink), sink)


class XplaneReader:
    """TensorFlow/JAX profiler XPlane (`*.xplane.pb`), read through xprof's converter."""

    name = "xplane"
    summary = (
        "TensorFlow/JAX/XLA profiler XPlane (*.xplane.pb), converted by xprof "
        "(the xplane extra: pip install -e '.[xplane]' in mapreport's clone): XLA op executions "
        "per compiled module"
    )
    tables = ("op_exec",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """An `.xplane.pb` file that starts as an XSpace message (field 1, its planes)."""
        name = head.path.name.lower().removesuffix(".gz")
        return name.endswith(XPLANE_SUFFIX) and head.data[:1] == b"\x0a"

    def read(self, path: Path, sink: Sink) -> None:
        """Convert with xprof's `trace_viewer` tool (in the staging folder: the converter
        writes its caches beside the file it reads), then read the events."""
        try:
            from xprof.convert import raw_to_tool_data
        except ImportError:
            raise InputError(
                path,
                None,
                None,
                f"reading an XPlane needs xprof: {install_hint('xplane')} (or give "
                "mapreport the *.trace.json.gz the profiler writes beside it)",
            ) from None
        if path.stat().st_size > MAX_XPLANE_BYTES:
            raise InputError(path, None, None, f"XPlane larger than {MAX_XPLANE_BYTES} bytes")
        work = sink.staging / "xplane"
        work.mkdir(parents=True, exist_ok=True)
        copy = work / f"trace{XPLANE_SUFFIX}"
        shutil.copyfile(path, copy)
        try:
            with _quiet():
                data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "trace_viewer", {})
        except (RuntimeError, ValueError, TypeError, OSError) as e:
            raise InputError(path, None, None, f"xprof could not convert it: {e}") from None
        text = data.decode() if isinstance(data, bytes) else str(data or "")
        if len(text) > MAX_DOCUMENT_BYTES:
            raise InputError(path, None, None, "converted trace too large")
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise InputError(path, None, None, f"xprof gave no trace: {e}") from None
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not isinstance(events, list):
            raise InputError(path, None, "traceEvents", "xprof's trace has no traceEvents")
        rows_of(path, events, *_names(path, sink), sink)
