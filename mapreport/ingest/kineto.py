"""PyTorch profiler (Kineto) Chrome-trace JSON, as HTA reads it: operators, kernels and runtime
launches into `op_exec`, device and distributed information into `environment`.

The trace is decoded with msgspec into typed structs (no dict per event, garbage collection
off for them); each event is decoded on its own from a raw slice, so one malformed event is
rejected by its index without losing the others. A kernel inherits the input shape of the
operator that launched it: kernel -> launch by `correlation`, launch -> operator by `External
id` (lowercase `external id` in the legacy schema).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec

from mapreport.errors import InputError
from mapreport.ingest.base import Head
from mapreport.ingest.records import open_bytes
from mapreport.ingest.sink import Sink
from mapreport.shapes import ShapeError, canonical_shape


class Args(msgspec.Struct, gc=False):
    """The `args` fields mapreport uses; every other key is ignored."""

    external_id: int | str | None = msgspec.field(default=None, name="External id")
    external_id_legacy: int | str | None = msgspec.field(default=None, name="external id")
    correlation: int | str | None = None
    stream: int | str | None = None
    device: int | str | None = None
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    grid: Any = None
    block: Any = None


class Event(msgspec.Struct, gc=False):
    """One trace event."""

    ph: str | None = None
    cat: str | None = None
    name: Any = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: Args | None = None


class TypedTrace(msgspec.Struct, gc=False):
    """The document with every event typed: the fast path when no event is malformed."""

    traceEvents: list[Event] = msgspec.field(default_factory=list)
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    schemaVersion: Any = None


class Trace(msgspec.Struct, gc=False):
    """The document: events are kept raw and decoded one by one."""

    traceEvents: list[msgspec.Raw] = msgspec.field(default_factory=list)
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    schemaVersion: Any = None


CATEGORIES = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "kernel": "kernel",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "runtime",
    "mtia_runtime": "runtime",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "user_annotation": "annotation",
    "gpu_user_annotation": "annotation",
    "cuda_sync": "sync",
}
"""Kineto category (current, legacy and vendor spellings) -> op_exec category. Other
categories are kept under their own lowercase name."""
SKIPPED_CATEGORIES = frozenset({"trace"})
"""The whole-trace span is not an execution. Flow ('s', 'f'), metadata ('M') and instant ('i')
events carry links and labels, not executions, and are not rows either."""


def _int(value: int | str | None) -> int | None:
    if type(value) is int:
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


CHUNK = 200_000
"""Events turned into columns at a time (bounds the column lists in memory)."""
_ENCODE = msgspec.json.Encoder().encode
_SHAPES: dict[str, str | None] = {}


def _invalid(ev: Event) -> tuple[str, str] | None:
    """Why a complete event cannot be a row, as (field, reason); None when it can."""
    if not isinstance(ev.name, str):
        return "name", "event has no name"
    if ev.ts is None or ev.dur is None or not math.isfinite(ev.ts) or not math.isfinite(ev.dur):
        return ("ts" if ev.ts is None else "dur"), "complete event without a finite ts and dur"
    if ev.dur < 0:
        return "dur", f"negative duration {ev.dur}"
    return None


def _shape(dims: Any) -> str | None:
    """Canonical shape of `Input Dims`, memoised: traces repeat a few thousand shapes."""
    if dims is None:
        return None
    key = repr(dims)
    if key not in _SHAPES:
        if len(_SHAPES) > 200_000:
            _SHAPES.clear()
        _SHAPES[key] = _canonical_dims(dims)
    return _SHAPES[key]


def _canonical_dims(dims: Any) -> str | None:
    """Canonical positional shape from `Input Dims`; nested tensor lists are flattened one
    level per tensor; anything else has no shape."""
    if not isinstance(dims, list):
        return None
    tensors = []
    for t in dims:
        if isinstance(t, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in t):
            tensors.append(t)
        elif isinstance(t, list):  # a tensor list (e.g. aten::cat inputs): keep its first
            inner = next((x for x in t if isinstance(x, list)), [])
            tensors.append([d for d in inner if isinstance(d, int)])
        else:
            tensors.append([])
    try:
        return canonical_shape(tensors) if tensors else None
    except ShapeError:
        return None


def _link_launches(
    events: list[Event | None],
) -> tuple[dict[int, tuple[str | None, str]], dict[int, int]]:
    """Operator shapes by key, and launch correlation -> operator key.

    A launch names its operator by `External id` when the operator carries the same id;
    older traces give launches their own ids, so there the operator is the innermost cpu_op
    on the same thread whose span holds the launch (a stack sweep in time order). Operator
    keys are external ids, or -(event number) for operators without one."""
    op_shape: dict[int, tuple[str | None, str]] = {}
    by_thread: dict[tuple[Any, Any], list[tuple[float, int, float, int]]] = {}
    launches: list[Event] = []
    for line, ev in enumerate(events, 1):
        if ev is None or ev.args is None or ev.ph != "X" or ev.ts is None:
            continue
        cat = CATEGORIES.get((ev.cat or "").lower())
        ext = _int(
            ev.args.external_id if ev.args.external_id is not None else ev.args.external_id_legacy
        )
        if cat == "cpu_op":
            key = ext if ext is not None else -line
            op_shape.setdefault(key, (_shape(ev.args.input_dims), str(ev.name)))
            # sort key: start, then longer spans first so parents open before children
            by_thread.setdefault((ev.pid, ev.tid), []).append((ev.ts, 0, -(ev.dur or 0.0), key))
        elif cat == "runtime" and _int(ev.args.correlation) is not None:
            launches.append(ev)
    launch_op: dict[int, int] = {}
    unresolved: dict[tuple[Any, Any], list[tuple[float, int, float, int]]] = {}
    for ev in launches:
        assert ev.args is not None
        corr = _int(ev.args.correlation)
        ext = _int(
            ev.args.external_id if ev.args.external_id is not None else ev.args.external_id_legacy
        )
        if corr is None:
            continue
        if ext is not None and ext in op_shape:
            launch_op[corr] = ext
        elif ev.ts is not None:
            unresolved.setdefault((ev.pid, ev.tid), []).append((ev.ts, 1, 0.0, corr))
    for thread, items in unresolved.items():
        stack: list[tuple[float, int]] = []  # (end, op key)
        for ts, kind, neg_dur, key in sorted(by_thread.get(thread, []) + items):
            while stack and stack[-1][0] < ts:
                stack.pop()
            if kind == 0:
                stack.append((ts - neg_dur, key))
            elif stack:
                launch_op[key] = stack[-1][1]
    return op_shape, launch_op


class KinetoReader:
    """PyTorch profiler / Kineto Chrome trace (`.json`, `.json.gz`)."""

    name = "kineto"
    summary = "PyTorch profiler (Kineto) Chrome trace JSON: cpu ops, kernels, launches"
    tables = ("op_exec", "environment")

    def sniff(self, head: Head) -> bool:
        """A JSON object whose first keys include traceEvents or Kineto's schema header."""
        start = head.data.lstrip()[:4096]
        return start.startswith(b"{") and (
            b'"traceEvents"' in start
            or (b'"schemaVersion"' in start and b'"deviceProperties"' in start)
        )

    def read(self, path: Path, sink: Sink) -> None:
        """Decode the trace and add one op_exec row per execution event."""
        try:
            with open_bytes(path) as fh:
                data = fh.read()
        except (OSError, EOFError) as e:
            raise InputError(path, None, None, f"unreadable: {e}") from None
        events: list[Event | None]
        trace: Trace | TypedTrace
        try:  # fast path: the whole document typed in one pass
            typed = msgspec.json.decode(data, type=TypedTrace)
            events = list(typed.traceEvents)
            typed.traceEvents = []
            trace = typed
        except msgspec.DecodeError:  # some event is malformed: decode them one by one
            events, trace = self._decode_each(path, data, sink)
        del data
        op_shape, launch_op = _link_launches(events)
        workload = sink.hints.get("workload") or path.name.split(".")[0]
        slice_ = sink.hints.get("slice", "")
        for start in range(0, len(events), CHUNK):
            self._add_chunk(sink, events, start, workload, slice_, op_shape, launch_op)
        self._environment(sink, trace)

    @staticmethod
    def _decode_each(path: Path, data: bytes, sink: Sink) -> tuple[list[Event | None], Trace]:
        try:
            trace = msgspec.json.decode(data, type=Trace)
        except msgspec.DecodeError as e:
            raise InputError(path, None, "traceEvents", f"not a Chrome trace: {e}") from None
        decoder = msgspec.json.Decoder(Event)
        events: list[Event | None] = []
        for i, raw in enumerate(trace.traceEvents, 1):
            try:
                events.append(decoder.decode(raw))
            except msgspec.DecodeError as e:
                sink.reject(i, None, f"traceEvents[{i - 1}]: {e}", bytes(raw)[:2000])
                events.append(None)
        trace.traceEvents = []
        return events, trace

    @staticmethod
    def _add_chunk(
        sink: Sink,
        events: list[Event | None],
        start: int,
        workload: str,
        slice_: str,
        op_shape: dict[int, tuple[str | None, str]],
        launch_op: dict[int, int],
    ) -> None:
        """Columns of op_exec for events[start:start + CHUNK]; bad events are rejected."""
        cols: dict[str, list[Any]] = {
            c: []
            for c in (
                "name",
                "category",
                "shape",
                "ts_us",
                "dur_us",
                "device",
                "stream",
                "correlation",
                "extra",
            )
        }
        lines: list[int] = []
        empty = Args()
        for line in range(start + 1, min(start + CHUNK, len(events)) + 1):
            ev = events[line - 1]
            if ev is None or ev.ph != "X":
                continue
            raw_cat = (ev.cat or "").lower()
            if raw_cat in SKIPPED_CATEGORIES:
                continue
            why = _invalid(ev)
            if why is not None:
                sink.reject(line, why[0], why[1], repr(ev)[:2000])
                continue
            cat = CATEGORIES.get(raw_cat, raw_cat or None)
            a = ev.args or empty
            ext = a.external_id if a.external_id is not None else a.external_id_legacy
            if type(ext) is not int:
                ext = _int(ext)
            corr = a.correlation if type(a.correlation) is int else _int(a.correlation)
            shape = op_name = None
            if cat == "cpu_op":
                shape = _shape(a.input_dims)
            elif corr is not None and cat in ("kernel", "memcpy", "memset"):
                op = op_shape.get(launch_op.get(corr, -1))
                if op is not None:
                    shape, op_name = op
            extra = {
                k: v
                for k, v in (
                    ("grid", a.grid),
                    ("block", a.block),
                    ("op", op_name),
                    ("external_id", ext),
                    ("pid", ev.pid),
                    ("tid", ev.tid),
                )
                if v is not None
            }
            lines.append(line)
            cols["name"].append(ev.name)
            cols["category"].append(cat)
            cols["shape"].append(shape)
            cols["ts_us"].append(ev.ts)
            cols["dur_us"].append(ev.dur)
            cols["device"].append(_int(a.device))
            cols["stream"].append(None if a.stream is None else str(a.stream))
            cols["correlation"].append(corr)
            cols["extra"].append(_ENCODE(extra).decode() if extra else None)
        n = len(lines)
        sink.add_columns(
            "op_exec",
            workload,
            lines,
            {
                **cols,
                "workload": [workload] * n,
                "slice": [slice_] * n,
                "core": [None] * n,
                "plan_id": [None] * n,
            },
        )

    @staticmethod
    def _environment(sink: Sink, trace: Trace | TypedTrace) -> None:
        devices = trace.deviceProperties or []
        names = sorted({str(d.get("name")) for d in devices if d.get("name")})
        extra = {
            "device_count": len(devices),
            "schemaVersion": trace.schemaVersion,
            "distributedInfo": trace.distributedInfo,
        }
        sink.add(
            "environment",
            None,
            {
                "side": "runtime",
                "compiler": None,
                "compiler_version": None,
                "runtime": "pytorch-profiler",
                "runtime_version": None,
                "driver": None,
                "firmware": None,
                "hardware": ", ".join(names) or None,
                "host": None,
                "container_digest": None,
                "git_sha": None,
                "captured_at": None,
                "extra": msgspec.json.encode(extra).decode(),
            },
        )
