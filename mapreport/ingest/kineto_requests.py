"""Requests from a PyTorch profiler trace: a server that wraps each request's compute in
`torch.profiler.record_function("request <id> [<shape>]")` leaves one `user_annotation` span
per request, and those spans are `request` rows.

A span gives the compute only: the request's arrival is not in the trace, so the rows carry
`arrival_known = false` (arrival and queue start are the compute start; latency and queue wait
are not measured). The shape is the span's second word in our shape notation (`batch=8,seq=32`);
a span naming none, or one that does not parse, is the `unknown` shape.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from mapreport.core.shapes import UNKNOWN, ShapeError, canonical_shape

REQUEST_SPAN = re.compile(r"^request[ #:]+(?P<id>[^ ]+)(?: +(?P<shape>[^ ]+))? *$")
"""The name of a request's annotation span: `request <id>`, optionally followed by its shape."""
_PREFIX = "request"


def _shape(text: str | None) -> str:
    if not text:
        return UNKNOWN
    try:
        return canonical_shape(text)
    except ShapeError:
        return UNKNOWN


def request_columns(
    rows: pa.Table, workload: str, slice_: str
) -> tuple[pa.Array, dict[str, pa.Array]] | None:
    """(lines, request columns) of the trace's request annotation spans; None without any."""
    spans = rows.filter(
        pc.and_(
            pc.equal(rows["category"], "annotation"),
            pc.starts_with(rows["name"], _PREFIX),
        )
    )
    lines, ids, shapes, starts, ends = [], [], [], [], []
    for line, name, ts, dur in zip(
        spans["line"].to_pylist(),
        spans["name"].to_pylist(),
        spans["ts_us"].to_pylist(),
        spans["dur_us"].to_pylist(),
        strict=True,
    ):
        m = REQUEST_SPAN.match(name)
        if m is None or ts is None or dur is None or dur < 0:
            continue  # another annotation that happens to start with the word
        lines.append(line)
        ids.append(m["id"])
        shapes.append(_shape(m["shape"]))
        starts.append(ts)
        ends.append(ts + dur)
    if not lines:
        return None
    n = len(lines)
    start = pa.array(starts, pa.float64())
    return pa.array(lines, pa.int64()), {
        "workload": pa.array([workload] * n, pa.string()),
        "slice": pa.array([slice_] * n, pa.string()),
        "request_id": pa.array(ids, pa.string()),
        "shape": pa.array(shapes, pa.string()),
        "arrival_us": start,
        "queue_start_us": start,
        "compute_start_us": start,
        "compute_end_us": pa.array(ends, pa.float64()),
        "arrival_known": pa.array([False] * n, pa.bool_()),
        "status": pa.array(["ok"] * n, pa.string()),
    }
