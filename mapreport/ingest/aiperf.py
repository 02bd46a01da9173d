"""AIPerf's per-request export (`profile_export.jsonl`; genai-perf's where its layout is the
same), in both schemas AIPerf has written:

- older: `metadata{x_request_id, timestamp_ns, worker_id, credit_phase, ...}`, metrics named
  `ttft`, `ttst`, `request_latency`, `inter_token_latency`, `inter_chunk_latency`, ...;
- newer: `metadata{request_start_ns, request_ack_ns, request_end_ns, benchmark_phase,
  was_cancelled, cancellation_time_ns, ...}`, metrics `time_to_first_token`, ...

Every metric is `{"value", "unit"}`; times are converted to microseconds from the unit stated.
One `request` row per record, measured by the client end to end (`queue_known` false: no
queue or compute split): arrival = the request's start, end = start + request latency
(AIPerf's monotonic-clock figure; else the recorded end), time to first token, mean
inter-token latency, input and output tokens. The shape is the sequence-length bucket
(`shapes.sequence_shape`, edges from `--sequence-buckets`), `unknown` for a request that
failed before its lengths were known. A record with an `error` (a cancellation: code 499) or
`was_cancelled` is a failed request, its status the error's type. Warm-up records go to the
slice `warmup`, so they count nowhere else. The workload is `--workload`, else the export's
folder (AIPerf names it after the model and load). The inter-chunk latencies are kept in
`extra` as their count and maximum.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.core.schema import INT32_MAX
from mapreport.core.shapes import SEQUENCE_EDGES, UNKNOWN, ShapeError, parse_edges, sequence_shape
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.records import accepted, iter_jsonl
from mapreport.ingest.spec import Field, FieldError, as_float, convert_value

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

TIME_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "sec": 1e6}
"""A stated time unit -> microseconds per unit."""
METRICS: dict[str, tuple[str, str]] = {
    "request_latency": ("latency_us", "time"),
    "ttft": ("ttft_us", "time"),
    "time_to_first_token": ("ttft_us", "time"),
    "inter_token_latency": ("itl_us", "time"),
    "input_sequence_length": ("input_tokens", "tokens"),
    "output_sequence_length": ("output_tokens", "tokens"),
}
"""AIPerf metric (both schemas) -> what it becomes, and the kind of unit it must state."""
START = ("request_start_ns", "timestamp_ns")
"""The request's start (epoch ns): newer schema, older."""
PHASE = ("benchmark_phase", "credit_phase")
WARMUP = "warmup"
_MARK = re.compile(rb'\s*\{\s*"metadata"\s*:\s*\{[^\n]*?"x_request_id"')


def _epoch_us(meta: dict[str, Any], key: str) -> float | None:
    """An epoch-nanosecond field in microseconds; int / int keeps every microsecond (an
    epoch in ns is beyond 2^53: as a float first, it would be off by up to 128 ns)."""
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise FieldError(f"metadata.{key}", f"expected nanoseconds since the epoch, got {value!r}")
    return value / 1000


def _metric(name: str, entry: Any, kind: str) -> float:
    where = f"metrics.{name}"
    if not isinstance(entry, dict):
        raise FieldError(where, "must be an object {value, unit}")
    unit = entry.get("unit")
    value = float(convert_value(Field(f"{where}.value", "float", minimum=0), entry.get("value")))
    if kind == "tokens":
        if unit != "tokens" or value != int(value) or value > INT32_MAX:
            raise FieldError(where, f"expected a whole number of tokens, got {entry!r}"[:120])
        return value
    if unit not in TIME_US:
        raise FieldError(f"{where}.unit", f"unknown time unit {unit!r}")
    return value * TIME_US[unit]


class AiperfReader:
    """AIPerf per-request profile export: client-side latency and token timing."""

    name = "aiperf"
    summary = (
        "AIPerf / genai-perf profile_export.jsonl: per request latency, time to first token, "
        "inter-token latency, sequence lengths (client side)"
    )
    tables = ("request",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON line whose first key is `metadata`, holding `x_request_id`."""
        return _MARK.match(head.data) is not None

    def read(self, path: Path, sink: Sink) -> None:
        """One request row per record."""
        edges = SEQUENCE_EDGES
        if sink.hints.get("sequence_buckets"):
            try:
                edges = parse_edges(sink.hints["sequence_buckets"])
            except ShapeError as e:
                raise InputError(path, None, "sequence_buckets", str(e)) from None
        workload = sink.hints.get("workload") or path.resolve().parent.name
        for line, rec in accepted(iter_jsonl(path), sink):
            try:
                row = self._row(rec, edges)
            except FieldError as e:
                sink.reject(line, e.field, e.reason, json_text(rec) or "")
                continue
            row["workload"] = workload
            if row["slice"] is None:
                row["slice"] = sink.hints.get("slice", "")
            sink.add("request", line, row)

    @staticmethod
    def _row(rec: Any, edges: tuple[int, ...]) -> dict[str, Any]:
        if not isinstance(rec, dict) or not isinstance(rec.get("metadata"), dict):
            raise FieldError("metadata", "record has no metadata object")
        meta: dict[str, Any] = rec["metadata"]
        metrics = rec.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise FieldError("metrics", "must be an object")
        request_id = meta.get("x_request_id")
        if not isinstance(request_id, str) or not request_id:
            raise FieldError("metadata.x_request_id", "required field is missing")
        start = next((t for k in START if (t := _epoch_us(meta, k)) is not None), None)
        if start is None:
            raise FieldError("metadata.request_start_ns", "the request's start is missing")
        got = {
            column: _metric(name, metrics[name], kind)
            for name, (column, kind) in METRICS.items()
            if metrics.get(name) is not None
        }
        end_at = _epoch_us(meta, "request_end_ns")
        cancelled_at = _epoch_us(meta, "cancellation_time_ns")
        error = rec.get("error")
        # AIPerf's latency is timed on a monotonic clock: it, not the wall-clock end (tens of
        # microseconds apart), is the figure AIPerf's own statistics give
        if "latency_us" in got:
            end = start + got["latency_us"]
        elif end_at is not None:
            end = end_at
        elif cancelled_at is not None:
            end = cancelled_at
        else:
            end = start
        if end < start or (end_at is not None and end_at < start):
            raise FieldError("metadata.request_end_ns", "ends before it starts")
        if isinstance(error, dict) and error:
            status = str(error.get("type") or error.get("code") or "error")
        elif error not in (None, {}):
            status = "error"
        elif meta.get("was_cancelled") is True:
            status = "cancelled"
        else:
            status = "ok"
        if status == "ok" and "latency_us" not in got and end_at is None:
            raise FieldError("metrics.request_latency", "a completed request has no latency")
        isl = got.get("input_tokens")
        osl = got.get("output_tokens")
        shape = UNKNOWN
        if isl is not None:
            shape = sequence_shape(int(isl), int(osl) if osl is not None else None, edges)
        phase = next((meta[k] for k in PHASE if isinstance(meta.get(k), str)), None)
        chunks = metrics.get("inter_chunk_latency")
        chunk_values = chunks.get("value") if isinstance(chunks, dict) else None
        known = {"x_request_id", "was_cancelled"}
        extra = {
            "metadata": {k: v for k, v in meta.items() if k not in known and k not in START},
            "metrics": {
                k: v for k, v in metrics.items() if k not in METRICS and k != "inter_chunk_latency"
            },
            "error": error or None,
            "inter_chunk_latency": {
                "count": len(chunk_values),
                "max": max((as_float(v) or 0.0 for v in chunk_values), default=None),
                "unit": chunks.get("unit") if isinstance(chunks, dict) else None,
            }
            if isinstance(chunk_values, list)
            else None,
        }
        return {
            "slice": WARMUP if phase == WARMUP else None,
            "request_id": request_id,
            "shape": shape,
            "arrival_us": start,
            "queue_start_us": start,
            "compute_start_us": start,
            "compute_end_us": end,
            "arrival_known": True,
            "queue_known": False,
            "status": status,
            "ttft_us": got.get("ttft_us"),
            "itl_us": got.get("itl_us"),
            "input_tokens": int(isl) if isl is not None else None,
            "output_tokens": int(osl) if osl is not None else None,
            "extra": json_text({k: v for k, v in extra.items() if v}),
        }
