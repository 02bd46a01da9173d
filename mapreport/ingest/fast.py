"""The fast path of native runtime telemetry: request records decoded typed in batches and
checked as columns, so a fleet's JSON Lines (or Parquet) never builds a dict per request.

Exactness comes from the slow path: a record the typed decoder refuses (an unknown field, an
adaptation event, an environment line, a value of the wrong type) or that fails a column check
(a rule of FORMATS.md: minimums, finite numbers, timestamp order, shape syntax) is handed, with
its line, to the per-record reader, which converts it, or rejects it with the same message as
before. Rows therefore land exactly as the slow path would write them, only faster.
"""

from __future__ import annotations

import gzip
import pickle
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mapreport.core.errors import InputError
from mapreport.core.schema import TABLES
from mapreport.core.shapes import ShapeError, canonical_shape
from mapreport.ingest import helper
from mapreport.ingest.helper import Helper
from mapreport.ingest.native_spec import REQUEST
from mapreport.ingest.records import BadRecord, JsonDecoder, Memo, iter_jsonl_batches, open_bytes
from mapreport.ingest.sink import Sink, beyond_range
from mapreport.ingest.spec import INT_LIMIT, struct_of

BATCH = 65_536
"""Lines decoded and checked at a time: bounds memory whatever the file size."""

Slow = Callable[[int, Any], None]
"""The per-record reader: (line, decoded record or BadRecord) -> rows or a rejection."""


Request = struct_of(
    REQUEST, "Request", {"shape": msgspec.Raw, "request_id": str | int}, module=__name__
)
"""A request record exactly as FORMATS.md declares it, with no unknown field. The shape is kept
raw: canonicalised once per distinct shape (a fleet repeats a few)."""
Rec = Any
"""A decoded `Request` (made at import, so typed loosely)."""

_ONE: JsonDecoder[Any] = JsonDecoder(Request)
_MANY: JsonDecoder[list[Any]] = JsonDecoder(list[Request])  # type: ignore[valid-type]
_ANY: JsonDecoder[Any] = JsonDecoder()
_SCHEMA = TABLES["request"]
_TEXT = tuple(f.target for f in REQUEST.fields if f.kind in ("str", "shape"))
_FLOATS = tuple(f.target for f in REQUEST.fields if f.kind == "float")
_INT_MIN = {
    f.target: -INT_LIMIT if f.minimum is None else f.minimum
    for f in REQUEST.fields
    if f.kind == "int"
}
_INT_MAX = {f.target: f.maximum for f in REQUEST.fields if f.maximum is not None}
_REQUIRED = tuple(f.target for f in REQUEST.fields if f.required)


def _shape_of(raw: bytes) -> str | None:
    """The canonical shape of a record's raw shape JSON; None for an invalid shape (the slow
    path rejects it with the reason)."""
    try:
        value = _ANY.decode(raw)
        return canonical_shape(value) if isinstance(value, dict | list) and value else None
    except (msgspec.DecodeError, ShapeError):
        return None


def _columns(recs: list[Rec], shapes: Memo) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {
        "workload": [r.workload for r in recs],
        "slice": [r.slice or "" for r in recs],
        "request_id": [
            r.request_id if type(r.request_id) is str else str(r.request_id) for r in recs
        ],
        "shape": [shapes[bytes(r.shape)] for r in recs],
        "arrival_us": [r.arrival_us for r in recs],
        "queue_start_us": [
            r.queue_start_us if r.queue_start_us is not None else r.arrival_us for r in recs
        ],
        "compute_start_us": [r.compute_start_us for r in recs],
        "compute_end_us": [r.compute_end_us for r in recs],
        "plan_id": [r.plan_id for r in recs],
        "plan_variant": [r.plan_variant for r in recs],
        "core": [r.core for r in recs],
        "stream": [r.stream for r in recs],
        "batch_size": [r.batch_size for r in recs],
        "mem_peak_bytes": [r.mem_peak_bytes for r in recs],
        "precision": [r.precision for r in recs],
        "status": [r.status or "ok" for r in recs],
    }
    return cols


def _mask(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def check(data: dict[str, pa.Array]) -> tuple[pa.Table, np.ndarray]:
    """The canonical request table of a batch (all columns but `extra` given, typed) and a
    mask of rows that break a rule of FORMATS.md (the slow path says which rule)."""
    n = len(data["workload"])
    bad = np.zeros(n, dtype=bool)
    for name in _FLOATS:
        bad |= beyond_range(data[name])
    for name, low in _INT_MIN.items():
        arr = data[name]  # below its minimum, or beyond the range a record may state
        bad |= _mask(pc.less(arr, low)) | _mask(pc.greater_equal(pc.abs(arr), INT_LIMIT))
        if name in _INT_MAX:  # beyond its column's type (int32): the slow path names it
            bad |= _mask(pc.greater(arr, _INT_MAX[name]))
    for name in ("workload", "request_id", "shape"):
        bad |= pc.is_null(data[name]).to_numpy(zero_copy_only=False)
    a, q = data["arrival_us"], data["queue_start_us"]
    s, e = data["compute_start_us"], data["compute_end_us"]
    for broken in (pc.less(s, a), pc.less(e, s), pc.greater(q, s)):
        bad |= _mask(broken)
    full = {**data, "extra": pa.nulls(n, pa.string())}
    table = pa.table({f.name: full[f.name] for f in _SCHEMA if f.name in full})
    return table, bad


def _arrays(cols: dict[str, list[Any]]) -> dict[str, pa.Array] | None:
    """Typed arrays of a JSON batch's columns; None when a value does not fit its type."""
    try:
        out = {c: pa.array(cols[c], pa.float64()) for c in _FLOATS}
        out |= {c: pa.array(cols[c], pa.int64()) for c in _INT_MIN}
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    for c in _TEXT:
        out[c] = pa.array(cols[c], pa.string())
    return out


def _write(sink: Sink, table: pa.Table, lines: np.ndarray) -> None:
    """Add the good rows of a batch, one staged file per workload in it."""
    if table.num_rows == 0:
        return
    workloads = table["workload"].unique().to_pylist()
    for w in workloads:
        part, rows = table, lines
        if len(workloads) > 1:
            mask = pc.equal(table["workload"], w)
            part, rows = table.filter(mask), lines[mask.to_numpy(zero_copy_only=False)]
        sink.add_table(
            "request", str(w), pa.array(rows, pa.int64()), {c: part[c] for c in part.column_names}
        )


CHUNK_BYTES = 1 << 20
"""Bytes read at a time. A chunk's complete lines are decoded as one JSON array (newlines
become commas, no per-line split) when they are plain; a chunk and the carried-over part of
its first line are at most 2 MiB, so none of its lines can exceed MAX_LINE_BYTES."""


def read_jsonl(path: Path, sink: Sink, slow_for: Callable[[Sink], Slow]) -> None:
    """Requests of a native runtime JSON Lines file; everything else goes to the slow path
    (`slow_for(sink)`: the per-record reader writing to that sink). A large plain file is
    read by two processes: a forked helper reads the lines after a line end near the middle
    into staged files of its own while this process reads those before it."""
    split = _split(path)
    if split is None:
        _read(path, 0, None, 1, sink, slow_for(sink))
        return
    theirs = sink.for_part("h")
    second = Helper(lambda: _second_half(path, split, theirs, slow_for))
    try:
        _read(path, 0, split, 1, sink, slow_for(sink))  # an error here is the first one
        reply = second.result()
    finally:
        second.close()
    if reply is None:  # the helper failed: its half is read here instead
        sink.discard_part(theirs.part)
        _read(path, split, None, _lines_before(path, split) + 1, sink, slow_for(sink))
        return
    outcome = pickle.loads(reply[0])
    if isinstance(outcome, InputError):
        raise outcome
    sink.absorb(*outcome)


def _split(path: Path) -> int | None:
    """Where the helper starts: the line after the first line end past 55% of the file; None
    when the file gets no helper (`helper.available`) or has no line end there."""
    found = helper.start_window(path, CHUNK_BYTES)
    if found is None:
        return None
    at, window = found
    end = window.find(b"\n")
    return at + end + 1 if 0 <= end < len(window) - 1 else None


def _lines_before(path: Path, offset: int) -> int:
    """The number of line ends in the first `offset` bytes of a plain file."""
    n = 0
    with open(path, "rb") as fh:
        while offset > 0:
            data = fh.read(min(8 * CHUNK_BYTES, offset))
            if not data:
                break
            n += data.count(b"\n")
            offset -= len(data)
    return n


def _second_half(
    path: Path, split: int, sink: Sink, slow_for: Callable[[Sink], Slow]
) -> list[bytes]:
    """The helper's work: the lines from byte `split` on into its own staged files; replies
    with the sink's counts, or with the InputError that stopped it (abort policy)."""
    try:
        _read(path, split, None, _lines_before(path, split) + 1, sink, slow_for(sink))
        sink.close()
    except InputError as e:
        return [pickle.dumps(e)]
    return [pickle.dumps(sink.counts())]


def _read(path: Path, start: int, end: int | None, line: int, sink: Sink, slow: Slow) -> None:
    """The lines of bytes `start`..`end` (a line start, and a line start or the end of the
    file), the first being line number `line`."""
    shapes = Memo(_shape_of)
    pending = _Pending(sink)
    with open_bytes(path, ahead=True) as fh:
        if start:
            fh.seek(start)
        left = -1 if end is None else end - start
        rest = b""
        try:
            while left:
                data = fh.read(CHUNK_BYTES if left < 0 else min(CHUNK_BYTES, left))
                if not data:
                    break
                left -= len(data) if left > 0 else 0
                cut = data.rfind(b"\n")
                if cut < 0 or len(rest) > CHUNK_BYTES:  # a long line: leave it to the line reader
                    raise _LongLine
                body, rest = rest + data[:cut], data[cut + 1 :]
                n = body.count(b"\n") + 1
                _chunk(pending, body, line, n, slow, shapes, True)
                line += n
            if rest.strip():
                _chunk(pending, rest, line, 1, slow, shapes, False)
        except _LongLine:
            pending.flush()
            stop = None if end is None else _lines_before(path, end) + 1
            _from_line(path, line, stop, sink, slow, shapes)
            return
        except (EOFError, zlib.error, gzip.BadGzipFile):
            # a truncated gzip stream: the line reader finds exactly where it ends
            pending.flush()
            _from_line(path, line, None, sink, slow, shapes)
            return
    pending.flush()


class _LongLine(Exception):
    """A chunk without a line end: the rest of the file is read line by line."""


def _from_line(
    path: Path, first: int, stop: int | None, sink: Sink, slow: Slow, shapes: Memo
) -> None:
    """Read the file's lines `first`.. (before line `stop`) through the per-line reader."""
    pending = _Pending(sink)
    for batch in iter_jsonl_batches(path, BATCH):
        part = [b for b in batch if b[0] >= first and (stop is None or b[0] < stop)]
        if part:
            _batch(pending, part, slow, shapes)
        if stop is not None and batch[-1][0] >= stop:
            break
    pending.flush()


def _chunk(
    pending: _Pending,
    body: bytes,
    first: int,
    n: int,
    slow: Slow,
    shapes: Memo,
    terminated: bool,
) -> None:
    """One chunk of complete lines: decoded as a JSON array when every line is a plain
    request; else split into lines and decoded line-wise. `terminated`: the chunk's last
    line ended with a newline (all but a file's unterminated last line)."""
    lines = body.split(b"\n")
    if b"\n\n" not in body and not body.startswith(b"\n") and not body.endswith(b"\n"):
        try:
            recs: list[Rec | None] | None = _many(lines)
        except msgspec.DecodeError:
            recs = None
        if recs is not None:
            _emit(
                pending, recs, list(range(first, first + n)), None, body, slow, shapes, terminated
            )
            return
    # each line as the line reader sees it, newline included
    batch: list[tuple[int, bytes | BadRecord]] = [
        (first + i, raw + b"\n" if terminated or i < len(lines) - 1 else raw)
        for i, raw in enumerate(lines)
        if raw.strip()
    ]
    _batch(pending, batch, slow, shapes)


_RAWS: JsonDecoder[list[msgspec.Raw]] = JsonDecoder(list[msgspec.Raw])


def _many(lines: list[bytes]) -> list[Rec] | None:
    """The lines decoded as one JSON array (raises DecodeError naming the failing element), or
    None when the array's elements are not the lines one for one: a line that is not one
    whole JSON value (two objects, half of one, an unterminated string) would otherwise merge
    with its neighbours into elements that decode, with wrong rows and line numbers."""
    buf = b"[" + b",".join(lines) + b"]"
    recs = _MANY.decode(buf)
    if len(recs) != len(lines):
        return None
    raws = _RAWS.decode(buf)
    # lengths compared as two lists built in C (a Python loop here cost 0.5 s per 1M lines)
    if list(map(len, raws)) != list(map(len, map(bytes.strip, lines))):
        return None
    return recs


_NOT_REQUESTS = (b'{"event"', b'{"environment"')
_AT = re.compile(r"at `\$\[(\d+)\]")


def _decode(batch: list[tuple[int, bytes | BadRecord]]) -> list[Rec | None]:
    """Typed records of a batch, None where a line is not a plain request. The batch is
    decoded as one JSON array; where an element fails, msgspec names its index, that element
    is set aside and the rest is decoded on (a few events in a batch cost a few passes)."""
    out: list[Rec | None] = [None] * len(batch)
    # lines that open as an event or an environment record are not requests: set them aside
    # before the batch decode (any other non-request is found by the decode itself)
    raws = {
        i: raw
        for i, (_, raw) in enumerate(batch)
        if isinstance(raw, bytes) and not raw.startswith(_NOT_REQUESTS)
    }
    todo = list(raws)

    def many(idx: list[int]) -> list[Rec] | None:
        return _many([raws[i] for i in idx])

    def head(k: int) -> list[Rec] | None:
        """The records before element k, which failed (None: misaligned, so decode each)."""
        try:
            return many(todo[:k]) if k else []
        except msgspec.DecodeError:
            return None

    while todo:
        try:
            recs = many(todo)
        except msgspec.DecodeError as e:
            m = _AT.search(str(e))
            if m is None or int(m.group(1)) >= len(todo):
                return _decode_each(raws, out, todo)
            k = int(m.group(1))
            before = head(k)
            if before is None:
                return _decode_each(raws, out, todo)
            for i, r in zip(todo[:k], before, strict=True):
                out[i] = r
            todo = todo[k + 1 :]
            continue
        if recs is None:
            return _decode_each(raws, out, todo)
        for i, r in zip(todo, recs, strict=True):
            out[i] = r
        break
    return out


def _decode_each(
    raws: dict[int, bytes], out: list[Rec | None], todo: list[int]
) -> list[Rec | None]:
    for i in todo:
        try:
            out[i] = _ONE.decode(raws[i])
        except msgspec.DecodeError:
            out[i] = None
    return out


def _batch(
    pending: _Pending, batch: list[tuple[int, bytes | BadRecord]], slow: Slow, shapes: Memo
) -> None:
    """Lines decoded one batch at a time (blank lines, over-long lines, non-requests)."""
    _emit(pending, _decode(batch), [ln for ln, _ in batch], batch, None, slow, shapes)


def _emit(
    pending: _Pending,
    recs: list[Rec | None],
    lines: list[int],
    batch: list[tuple[int, bytes | BadRecord]] | None,
    body: bytes | None,
    slow: Slow,
    shapes: Memo,
    terminated: bool = True,
) -> None:
    """Check the typed records as columns; the good rows wait in `pending`, the rest go to
    the slow path now, in line order (so an abort names the first bad line)."""
    good = [i for i, r in enumerate(recs) if r is not None]
    arrays = _arrays(_columns([r for r in recs if r is not None], shapes))
    if arrays is None:  # an integer beyond int64: let the slow path say which
        bad = np.ones(len(good), dtype=bool)
    else:
        table, bad = check(arrays)
        rows = np.array([lines[i] for i in good], dtype=np.int64)
        pending.add(table.filter(pa.array(~bad)), rows[~bad])
    redo = sorted(
        {i for i, r in enumerate(recs) if r is None} | {good[j] for j in np.flatnonzero(bad)}
    )
    split = body.split(b"\n") if body is not None and redo else []
    for i in redo:
        raw: bytes | BadRecord
        if batch is not None:
            raw = batch[i][1]
        else:  # the fast form's lines all end in a newline but a file's unterminated last one
            raw = split[i] + (b"\n" if terminated or i < len(split) - 1 else b"")
        if isinstance(raw, BadRecord):
            slow(lines[i], raw)
            continue
        try:
            slow(lines[i], _ANY.decode(raw))
        except msgspec.DecodeError as e:
            slow(lines[i], BadRecord(None, f"invalid JSON: {e}", raw[:2000]))


class _Pending:
    """Good rows waiting to be written: staged files of about BATCH rows, not one per chunk."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.tables: list[pa.Table] = []
        self.lines: list[np.ndarray] = []
        self.rows = 0

    def add(self, table: pa.Table, lines: np.ndarray) -> None:
        """Queue checked rows; writes when a batch is full."""
        if table.num_rows:
            self.tables.append(table)
            self.lines.append(lines)
            self.rows += table.num_rows
        if self.rows >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Write what is queued."""
        if self.tables:
            _write(self.sink, pa.concat_tables(self.tables), np.concatenate(self.lines))
        self.tables, self.lines, self.rows = [], [], 0


_KINDS = {
    **dict.fromkeys(_FLOATS, "float"),
    **dict.fromkeys(_INT_MIN, "int"),
    **dict.fromkeys(_TEXT, "str"),
}


def _fits(kind: str, t: pa.DataType) -> bool:
    if kind == "float":
        return bool(pa.types.is_floating(t) or pa.types.is_integer(t))
    if kind == "int":  # uint64 may exceed int64: such a file reads per row, which names it
        return bool(pa.types.is_signed_integer(t) or t in (pa.uint8(), pa.uint16(), pa.uint32()))
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def parquet_fits(path: Path) -> bool:
    """True when a Parquet file holds exactly declared request columns of natural types, the
    layout the columnar path reads (anything else, unknown columns included, reads per row)."""
    schema = pq.read_schema(path)
    names = set(schema.names)
    return (
        set(_REQUIRED) <= names
        and names <= set(_KINDS)
        and all(_fits(_KINDS[f.name], f.type) for f in schema)
    )


def read_parquet(path: Path, sink: Sink, slow: Slow) -> None:
    """Requests of a native runtime Parquet file (see `parquet_fits`), batch by batch; rows
    that break a rule go to `slow` as records, with their row numbers."""
    pf = pq.ParquetFile(path)
    shapes: dict[str, str | None] = {}
    row = 0
    for rb in pf.iter_batches(batch_size=BATCH):
        n = rb.num_rows
        data: dict[str, pa.Array] = {}
        for name, kind in _KINDS.items():
            if name not in rb.schema.names:
                data[name] = pa.nulls(
                    n,
                    pa.float64()
                    if kind == "float"
                    else pa.int64()
                    if kind == "int"
                    else pa.string(),
                )
                continue
            col = rb.column(name)
            if kind == "str":
                col = col.cast(pa.string())
                # a CSV/Parquet cell that is empty is a missing value (FORMATS.md)
                col = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)
            else:
                col = col.cast(pa.float64() if kind == "float" else pa.int64())
            data[name] = col
        data["slice"] = pc.fill_null(data["slice"], "")
        data["status"] = pc.fill_null(data["status"], "ok")
        data["queue_start_us"] = pc.coalesce(data["queue_start_us"], data["arrival_us"])
        raw_shapes = data["shape"].to_pylist()
        for text in set(raw_shapes):
            if text is not None and text not in shapes:
                try:
                    shapes[text] = canonical_shape(text)
                except ShapeError:
                    shapes[text] = None
        data["shape"] = pa.array(
            [shapes.get(t) if t is not None else None for t in raw_shapes], pa.string()
        )
        table, bad = check(data)
        lines = np.arange(row + 1, row + n + 1, dtype=np.int64)
        _write(sink, table.filter(pa.array(~bad)), lines[~bad])
        if bad.any():
            records = rb.to_pylist()
            for i in np.flatnonzero(bad):
                slow(row + int(i) + 1, records[i])
        row += n
