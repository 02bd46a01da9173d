"""Requests from a PyTorch profiler trace: a server that wraps each request's compute in
`torch.profiler.record_function("request <id> [<shape>]")` leaves one `user_annotation` span
per request, and those spans are `request` rows.

A span gives the compute only: the request's arrival is not in the trace, so the rows carry
`arrival_known = false` (arrival and queue start are the compute start; latency and queue wait
are not measured). The shape follows the id, in our notation (`batch=8,seq=32`) or the other ways
servers write it (`annotation_shape`); a span naming none, or one that does not read, is the
`unknown` shape.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from mapreport.core.shapes import UNKNOWN, ShapeError, canonical_shape

REQUEST_SPAN = re.compile(r"^request[ #:]+(?P<id>[^ ]+)(?:\s+(?P<shape>.*?))?\s*$")
"""The name of a request's annotation span: `request <id>` (also `request#<id>`,
`request:<id>`), optionally followed by its shape in any of the forms `annotation_shape`
reads."""
_PREFIX = "request"
_KEYED = re.compile(r"^(?:shape|input_shape|dims)\s*[=:]\s*", re.I)
"""A `shape=` (or `shape:`, `input_shape=`, `dims=`) key before the shape itself."""
_MEANT_AS_SHAPE = re.compile(r"^(?:(?:shape|input_shape|dims)\s*[=:]|[\[(])", re.I)
"""Text after the id that declares itself a shape (a key, a bracket), readable or not."""
_BRACKETS = re.compile(r"^[\[(](?P<dims>[0-9,\s]*)[\])]$")
"""A positional shape as Python prints a tuple or a list: `(8, 128)`, `[8, 128]`."""


def annotation_shape(text: str | None) -> str:
    """A request span's shape in our notation from the ways servers write it: our own
    (`batch=8,seq=128`, `8x128`), behind a `shape=` key, as a tuple or list (`(8, 128)`),
    with `×` for `x`, named dims separated by spaces (`batch=8 seq=128`). `unknown` when
    the span names none or none of these reads."""
    if not text:
        return UNKNOWN
    t = _KEYED.sub("", text.strip()).replace("×", "x")
    bracketed = _BRACKETS.match(t)
    if bracketed is not None:
        t = "x".join(d for d in re.split(r"[,\s]+", bracketed["dims"]) if d)
    elif "=" in t:
        t = ",".join(p for p in re.split(r"[,\s]+", t) if p)
    try:
        return canonical_shape(t)
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
        shape, text = annotation_shape(m["shape"]), (m["shape"] or "").strip()
        if shape == UNKNOWN and len(text.split()) > 1 and not _MEANT_AS_SHAPE.match(text):
            continue  # words after the id that read as no shape: a phrase, not a request
        lines.append(line)
        ids.append(m["id"])
        shapes.append(shape)
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
