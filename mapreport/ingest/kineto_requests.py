"""Requests from a PyTorch profiler trace: a server that wraps each request's compute in
`torch.profiler.record_function("request <id> [<shape>]")` leaves one `user_annotation` span
per request, and those spans are `request` rows.

A span gives the compute only: the request's arrival is not in the trace, so the rows carry
`arrival_known = false` (arrival and queue start are the compute start; latency and queue wait
are not measured). The shape follows the id, in our notation (`batch=8,seq=32`) or the other ways
servers write it (`annotation_shape`); a span naming none is the `unknown` shape, and spans whose
shape text does not read are counted and named once per file (`Requests.unread`).

What torch.compile ran for each request is in the same trace (`served`): the worker is the
span's process (its thread, where one process serves on several); the graph is the compile id
of the `Torch-Compiled Region` inside the span; a span without one, in a trace that holds
regions, ran eagerly (`fallback`); a graph first run in a span that also compiled was compiled
while serving (`adapted`), any other graph was compiled before (`static`, the plan).
"""

from __future__ import annotations

import re

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mapreport.core.schema import INT32_MAX
from mapreport.core.shapes import UNKNOWN, ShapeError, canonical_shape
from mapreport.ingest.kineto_link import REGION

REQUEST_SPAN = re.compile(r"^request[ #:]+(?P<id>[^ ]+)(?:\s+(?P<shape>.*?))?\s*$")
"""The name of a request's annotation span: `request <id>` (also `request#<id>`,
`request:<id>`), optionally followed by its shape in any of the forms `annotation_shape`
reads."""
_PREFIX = "request"
MAX_PATTERN = 500
"""The longest `run.request_span` pattern accepted (characters)."""
MAX_SPAN_NAME = 4096
"""Longer span names are not matched against a configured pattern (a pattern that backtracks
cannot be made to spend its time on a hostile trace's megabyte-long names)."""


def span_pattern(text: str) -> re.Pattern[str]:
    """A configured request-span pattern (`run.request_span`, `ingest --request-span`): a
    regular expression with a named group `id` and optionally `shape`, matched against the
    whole span name. ValueError saying what is wrong otherwise."""
    if len(text) > MAX_PATTERN:
        raise ValueError(f"longer than {MAX_PATTERN} characters")
    try:
        pattern = re.compile(text)
    except re.error as e:
        raise ValueError(f"not a regular expression: {e}") from None
    if "id" not in pattern.groupindex:
        raise ValueError("needs a named group `id`, as in request (?P<id>\\S+) (?P<shape>.*)")
    return pattern


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


COMPILING = ("_compile.compile_inner", "entire_frame_compile")
"""The names (prefixes) of the profiler spans dynamo records while it compiles a frame."""


class Requests(msgspec.Struct, frozen=True):
    """A trace's request spans as request columns, and the spans whose shape did not read."""

    lines: pa.Array
    columns: dict[str, pa.Array]
    unread: tuple[int, str | None]
    """How many spans had shape text that did not read, and the first one's name."""


def request_columns(
    rows: pa.Table, workload: str, slice_: str, pattern: str | None = None
) -> Requests | None:
    """The trace's request annotation spans as request rows; None without any. `pattern`
    (`span_pattern`) replaces the span names this module knows."""
    custom = span_pattern(pattern) if pattern else None
    is_span = pc.equal(rows["category"], "annotation")
    if custom is None:
        is_span = pc.and_(is_span, pc.starts_with(rows["name"], _PREFIX))
    spans = rows.filter(is_span)
    keep, ids, shapes, starts, ends = [], [], [], [], []
    unread, first_unread = 0, None
    for i, (name, ts, dur) in enumerate(
        zip(
            spans["name"].to_pylist(),
            spans["ts_us"].to_pylist(),
            spans["dur_us"].to_pylist(),
            strict=True,
        )
    ):
        if ts is None or dur is None or dur < 0:
            continue
        if custom is not None:
            m = custom.fullmatch(name) if len(name) <= MAX_SPAN_NAME else None
            if m is None or not m["id"]:
                continue
            text = ((m.groupdict().get("shape")) or "").strip()
            shape = annotation_shape(text)
        else:
            m = REQUEST_SPAN.match(name)
            if m is None:
                continue  # another annotation that happens to start with the word
            shape, text = annotation_shape(m["shape"]), (m["shape"] or "").strip()
            if shape == UNKNOWN and len(text.split()) > 1 and not _MEANT_AS_SHAPE.match(text):
                continue  # words after the id that read as no shape: a phrase, not a request
        if shape == UNKNOWN and text:
            unread += 1
            first_unread = first_unread or name
        keep.append(i)
        ids.append(m["id"])
        shapes.append(shape)
        starts.append(ts)
        ends.append(ts + dur)
    if not keep:
        return None
    kept = spans.take(pa.array(keep, pa.int64()))
    n = len(keep)
    start = pa.array(starts, pa.float64())
    workers, graphs, variants = served(rows, kept)
    return Requests(
        kept["line"].combine_chunks(),
        {
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
            "core": workers,
            "plan_id": graphs,
            "plan_variant": variants,
        },
        (unread, first_unread),
    )


def _int(text: str | None) -> int | None:
    """A pid or tid as a worker number (None: not a number an int32 column holds)."""
    try:
        v = int(text or "")
    except ValueError:
        return None
    return v if 0 <= v <= INT32_MAX else None


def served(rows: pa.Table, spans: pa.Table) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Per request span: its worker, the compiled graph that ran it, and its plan variant
    (null where the trace holds no compiled region at all: not a torch.compile run)."""
    pids, tids = spans["pid"].to_pylist(), spans["tid"].to_pylist()
    threads: dict[str | None, set[str | None]] = {}
    for pid, tid in zip(pids, tids, strict=True):
        threads.setdefault(pid, set()).add(tid)
    # a process is a worker; where one serves on several threads, each thread is
    workers = [
        _int(tid) if len(threads[pid]) > 1 else _int(pid)
        for pid, tid in zip(pids, tids, strict=True)
    ]
    n = len(pids)
    names = rows["name"]
    is_region = pc.starts_with(names, REGION)
    if not pc.any(is_region).as_py():
        nulls = pa.nulls(n, pa.string())
        return pa.array(workers, pa.int32()), nulls, nulls
    is_compile = pc.or_(*(pc.starts_with(names, p) for p in COMPILING))
    regions, compiling = rows.filter(is_region), rows.filter(is_compile)
    start = spans["ts_us"].to_numpy()
    end = start + spans["dur_us"].to_numpy()
    keys = [f"{p}\x1f{t}" for p, t in zip(pids, tids, strict=True)]
    graph_ids = [
        None if g is None else g[len(REGION) :] for g in _first_inside(keys, start, end, regions)
    ]
    compiles = _first_inside(keys, start, end, compiling)
    # compile ids are per process: a graph one thread compiled while serving is adapted on all
    compiled_here = {
        (p, g)
        for p, g, c in zip(pids, graph_ids, compiles, strict=True)
        if g is not None and c is not None
    }
    variants = [
        "fallback" if g is None else "adapted" if (p, g) in compiled_here else "static"
        for p, g in zip(pids, graph_ids, strict=True)
    ]
    return (
        pa.array(workers, pa.int32()),
        pa.array(graph_ids, pa.string()),
        pa.array(variants, pa.string()),
    )


def _first_inside(
    keys: list[str], start: np.ndarray, end: np.ndarray, events: pa.Table
) -> list[str | None]:
    """Per span: the name of the first event of `events` on its thread that starts inside it."""
    out: list[str | None] = [None] * len(keys)
    by_thread: dict[str, list[tuple[float, str]]] = {}
    for pid, tid, ts, name in zip(
        events["pid"].to_pylist(),
        events["tid"].to_pylist(),
        events["ts_us"].to_pylist(),
        events["name"].to_pylist(),
        strict=True,
    ):
        if ts is not None:
            by_thread.setdefault(f"{pid}\x1f{tid}", []).append((ts, name))
    sorted_threads = {k: sorted(v) for k, v in by_thread.items()}
    times = {k: np.array([t for t, _ in v]) for k, v in sorted_threads.items()}
    for i, key in enumerate(keys):
        ts = times.get(key)
        if ts is None:
            continue
        j = int(np.searchsorted(ts, start[i], side="left"))
        if j < len(ts) and ts[j] <= end[i]:
            out[i] = sorted_threads[key][j][1]
    return out
