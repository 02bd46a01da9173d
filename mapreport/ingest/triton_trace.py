"""Triton Inference Server trace files (`--trace-file`, `--trace-level=TIMESTAMPS`, optionally
`TENSORS`), as the server's docs/user_guide/trace.md documents them: a JSON array of fragments,
each naming its trace `id`, in no particular order:

- `{"id", "model_name", "model_version", "request_id"?, "parent_id"?}`: which model the trace is;
- `{"id", "timestamps": [{"name": "QUEUE_START", "ns": ...}, ...]}`: one or more timestamps;
- `{"id", "activity": "TENSOR_QUEUE_INPUT", "tensor": {"name", "shape": "1,16", ...}}` (TENSORS).

Older servers wrote one object per trace with lowercase names ("queue start"); both are read.
Fragments are grouped by id and each trace becomes one `request` row: arrival = HTTP_RECV_START
(or GRPC_WAITREAD_END, else REQUEST_START), queue = QUEUE_START, compute = COMPUTE_START..END.
An ensemble's own trace has no compute timestamps; its compute span is that of its composing
models' traces (`parent_id`), which are also read as requests of their own models. The shape is
the TENSOR_QUEUE_INPUT tensors' shapes (`<input>_d<i>=<size>`) when the TENSORS level was on,
else `unknown`. The trace id is the request id; the client's `request_id` is kept in `extra`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.core.shapes import MAX_DIMS, UNKNOWN
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import element_lines, json_text, read_document

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

_NOT_NAME = re.compile(r"[^A-Za-z0-9_.\-]")
_FIRST_KEYS = (b'"id"', b'"model_name"', b'"timestamps"', b'"activity"')


class Trace(msgspec.Struct):
    """One Triton trace: where it starts, its model metadata, its activity timestamps (ns, by
    upper-case name) and its input tensors' shapes (TENSORS level)."""

    line: int | None
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    stamps: dict[str, int] = msgspec.field(default_factory=dict)
    inputs: dict[str, list[int]] = msgspec.field(default_factory=dict)


def _stamp_name(name: str) -> str:
    """`queue start` (old servers) and `QUEUE_START` are the same timestamp."""
    return name.strip().upper().replace(" ", "_").replace("/", "")


def _dims(text: Any) -> list[int] | None:
    if isinstance(text, list):
        parts = text
    elif isinstance(text, str):
        parts = [p for p in text.replace("[", "").replace("]", "").split(",") if p.strip()]
    else:
        return None
    out = []
    for p in parts:
        p = str(p).strip()
        if not (p.isascii() and p.isdigit()):
            return None
        out.append(int(p))
    return out


def _shape(inputs: dict[str, list[int]]) -> str:
    dims: dict[str, int] = {}
    for name, size in sorted(inputs.items()):
        base = _NOT_NAME.sub("_", name)[:56] or "input"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "_" + base
        for i, d in enumerate(size):
            dims[f"{base}_d{i}"] = d
    if not dims or len(dims) > MAX_DIMS:
        return UNKNOWN
    return ",".join(f"{k}={v}" for k, v in sorted(dims.items()))


class TritonTraceReader:
    """Triton Inference Server per-request trace files."""

    name = "triton-trace"
    summary = (
        "Triton Inference Server trace file (--trace-file, TIMESTAMPS/TENSORS): per-request "
        "queue and compute times per model"
    )
    tables = ("request",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON array whose first object starts with a trace fragment's keys."""
        text = head.data.lstrip()
        if not text.startswith(b"["):
            return False
        body = text[1:].lstrip()
        if not body.startswith(b"{"):
            return False
        first, window = body[1:200].lstrip(), text[:4096]
        return first.startswith(_FIRST_KEYS) and (b'"ns"' in window or b'"model_name"' in window)

    def read(self, path: Path, sink: Sink) -> None:
        """Group fragments by trace id, then write one request per complete trace."""
        doc, raw = read_document(path)
        if not isinstance(doc, list):
            raise InputError(path, None, None, "a Triton trace file is a JSON array")
        traces: dict[int, Trace] = {}
        for line, frag in zip(element_lines(raw, len(doc)), doc, strict=True):
            if not isinstance(frag, dict):
                sink.reject(line, None, "trace fragment is not a JSON object", frag)
                continue
            tid = frag.get("id")
            if isinstance(tid, bool) or not isinstance(tid, int):
                sink.reject(line, "id", f"must be an integer trace id, got {tid!r}", frag)
                continue
            t = traces.setdefault(tid, Trace(line))
            for key in ("model_name", "model_version", "request_id", "parent_id"):
                if key in frag:
                    t.meta[key] = frag[key]
            stamps = frag.get("timestamps")
            if stamps is not None:
                if not isinstance(stamps, list):
                    sink.reject(line, "timestamps", "must be a list", frag)
                    continue
                for s in stamps:
                    ns = s.get("ns") if isinstance(s, dict) else None
                    name = s.get("name") if isinstance(s, dict) else None
                    if (
                        not isinstance(name, str)
                        or isinstance(ns, bool)
                        or not isinstance(ns, int)
                        or not 0 <= ns < 2**63  # nanoseconds as Triton's uint64 clock states
                    ):
                        sink.reject(line, "timestamps", f"bad timestamp {s!r}"[:200], frag)
                        continue
                    t.stamps.setdefault(_stamp_name(name), ns)
            tensor = frag.get("tensor")
            if frag.get("activity") == "TENSOR_QUEUE_INPUT" and isinstance(tensor, dict):
                dims = _dims(tensor.get("shape"))
                if dims is None:
                    sink.reject(line, "tensor.shape", f"bad shape {tensor.get('shape')!r}", frag)
                    continue
                t.inputs[str(tensor.get("name"))] = dims
        children: dict[int, list[Trace]] = {}
        for t in traces.values():
            parent = t.meta.get("parent_id")
            if isinstance(parent, int) and parent in traces:
                children.setdefault(parent, []).append(t)
        unnamed = path.name.split(".")[0]
        for tid, t in sorted(traces.items()):
            emit_request(sink, str(tid), t, children.get(tid, []), unnamed)


def emit_request(sink: Sink, tid: str, t: Trace, children: list[Trace], unnamed: str) -> None:
    """One request per complete trace (Triton's activity timestamps, from a trace file or
    OpenTelemetry span events); a trace that names no model (Triton's documented example does
    not) belongs to the workload the user names, else to the file's."""
    st = t.stamps
    named = t.meta.get("model_name")
    model = named if isinstance(named, str) and named else None
    start, end = st.get("COMPUTE_START"), st.get("COMPUTE_END")
    if (start is None or end is None) and children:
        starts = [c.stamps["COMPUTE_START"] for c in children if "COMPUTE_START" in c.stamps]
        ends = [c.stamps["COMPUTE_END"] for c in children if "COMPUTE_END" in c.stamps]
        start, end = (min(starts), max(ends)) if starts and ends else (None, None)
    if start is None or end is None:
        sink.reject(t.line, "timestamps", f"trace {tid} has no COMPUTE_START/COMPUTE_END", t.stamps)
        return
    queue = st.get("QUEUE_START", start)
    arrival = st.get("HTTP_RECV_START", st.get("GRPC_WAITREAD_END", st.get("REQUEST_START")))
    arrival = min(arrival if arrival is not None else queue, queue)
    if not arrival <= queue <= start <= end:
        sink.reject(
            t.line,
            "timestamps",
            f"trace {tid}: timestamps out of order (arrival {arrival}, queue {queue}, "
            f"compute {start}..{end} ns)",
            t.stamps,
        )
        return
    version = t.meta.get("model_version")
    extra = {
        "request_id": t.meta.get("request_id") or None,
        "parent_id": t.meta.get("parent_id"),
        "model_version": version,
        "composing_traces": len(children) or None,
        **{
            k.lower() + "_ns": v
            for k, v in st.items()
            if k not in ("COMPUTE_START", "COMPUTE_END", "QUEUE_START")
        },
    }
    sink.add(
        "request",
        t.line,
        {
            "workload": sink.hints.get("workload") or model or unnamed,
            "slice": sink.hints.get("slice", ""),
            "request_id": str(tid),
            "shape": _shape(t.inputs),
            "arrival_us": arrival / 1000,
            "queue_start_us": queue / 1000,
            "compute_start_us": start / 1000,
            "compute_end_us": end / 1000,
            "plan_id": f"{model}:{version}" if model and version is not None else model,
            "plan_variant": None,
            "status": "ok",
            "extra": json_text({k: v for k, v in extra.items() if v is not None}),
        },
    )
