"""Reading a PyTorch profiler (Kineto) Chrome trace into columns: the `kineto` reader's
implementation, imported when a trace is read (numpy and Arrow's compute functions with it).

The trace is streamed (`jsonarray`): `traceEvents` arrives in runs of a few megabytes, each
decoded with msgspec into typed structs (no dict per event) and turned into Arrow columns at
once, so memory holds one run of structs and the columns, never the document. A run with a
malformed event is decoded event by event, so the bad event is rejected by its index without
losing the others. A kernel inherits the input shape of the operator that launched it: kernel
-> launch by `correlation`, launch -> operator by `External id` (lowercase `external id` in
the legacy schema), resolved once every event has been read (a kernel may precede its
operator in the file).

A large plain trace is read by two processes: a forked helper decodes the events after an
element boundary near the middle of the file while this process decodes those before it, and
leaves its columns in an Arrow IPC file in the staging folder, which this process maps (a
pipe moved them at ~0.4 GB/s: a quarter second of a 297 MiB trace). The boundary is a guess
(the next `}, {` after the middle) until this process's last run, which ends there, decodes
as whole events; otherwise, or when the helper fails, its half is dropped or read here, so
the tables are the same either way.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any, NamedTuple

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mapreport.errors import InputError
from mapreport.ingest import helper
from mapreport.ingest.helper import Helper
from mapreport.ingest.jsonarray import CUT, ArrayStream, BadArray, NotStreamable
from mapreport.ingest.jsondoc import MAX_DOCUMENT_BYTES
from mapreport.ingest.kineto_link import extra, link
from mapreport.ingest.kineto_requests import request_columns
from mapreport.ingest.kineto_values import ENCODE, canonical_dims, int_array, text_array
from mapreport.ingest.records import JsonDecoder, Memo, open_bytes
from mapreport.ingest.sink import Sink
from mapreport.schema import ENVIRONMENT_KEYS
from mapreport.window import is_wall_clock

_NONE = msgspec.Raw(b"null")
"""Raw values (kept undecoded until needed) default to JSON null."""


class Args(msgspec.Struct, gc=False):
    """The `args` fields mapreport uses; every other key is ignored."""

    external_id: int | str | None = msgspec.field(default=None, name="External id")
    external_id_legacy: int | str | None = msgspec.field(default=None, name="external id")
    correlation: int | str | None = None
    stream: int | str | None = None
    device: int | str | None = None
    input_dims: msgspec.Raw = msgspec.field(default=_NONE, name="Input Dims")
    grid: msgspec.Raw = _NONE
    block: msgspec.Raw = _NONE


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


class Header(msgspec.Struct, gc=False):
    """The document without its events."""

    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    schemaVersion: Any = None
    baseTimeNanoseconds: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))
    """The wall-clock origin of the events' `ts` (PyTorch 2.x writes `ts` relative to it), kept
    raw: a value no number type holds (1e400) leaves the times as they are, it is no error."""


class Whole(Header, gc=False):
    """The document read whole (when it cannot be streamed): events kept raw."""

    traceEvents: list[msgspec.Raw] = msgspec.field(default_factory=list)


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
ROWS_PER_FILE = 200_000
"""op_exec rows written per Parquet file."""
EVENTS_PER_RUN = 200_000
"""Events of a whole-decoded document typed and turned into columns at a time."""
MAX_EVENTS = 10_000_000
"""A trace with more events is refused (its columns would pass ~1.5 GiB before the kernels
are linked to their operators): profile fewer steps (`schedule(active=...)`)."""


class TooManyEvents(Exception):
    """More than MAX_EVENTS events (a decompression bomb, or a profile of too many steps)."""


_SKIP = "\0skip"
_EMPTY = Args()
_UNDECODED = Event()
_get = SimpleNamespace(
    **{f: attrgetter(f) for f in (*Event.__struct_fields__, *Args.__struct_fields__)}
)
"""attrgetter per struct field: `map(_get.ts, events)` reads a field of every event in C."""
_RUN: JsonDecoder[list[Event]] = JsonDecoder(list[Event])
_RAWS: JsonDecoder[list[msgspec.Raw]] = JsonDecoder(list[msgspec.Raw])
_HEADER: JsonDecoder[Header] = JsonDecoder(Header)
_WHOLE: JsonDecoder[Whole] = JsonDecoder(Whole)
_ONE: JsonDecoder[Event] = JsonDecoder(Event)
_ANY: JsonDecoder[Any] = JsonDecoder()


def _shape_of(raw: bytes) -> str | None:
    """The canonical shape of a raw `Input Dims` text."""
    try:
        return canonical_dims(_ANY.decode(raw))
    except msgspec.DecodeError:
        return None


def _compact(raw: bytes) -> str | None:
    """The compact text of a raw JSON value (None for null)."""
    value = _ANY.decode(raw)
    return None if value is None else ENCODE(value).decode()


@dataclass
class _Memo:
    """Per-read caches: traces repeat a few categories, shapes and launch geometries."""

    categories: dict[str | None, str | None] = field(default_factory=dict)
    shapes: Memo = field(default_factory=lambda: Memo(_shape_of))
    compact: Memo = field(default_factory=lambda: Memo(_compact))

    def category(self, raw: str | None) -> str | None:
        low = (raw or "").lower()
        if low in SKIPPED_CATEGORIES:
            return _SKIP
        return CATEGORIES.get(low, low or None)

    def texts(self, raws: list[msgspec.Raw]) -> pa.Array:
        """Compact JSON text of each raw value (null where absent or null)."""
        if raws.count(_NONE) == len(raws):
            return pa.nulls(len(raws), pa.string())
        compact = self.compact
        return pa.array([None if r is _NONE else compact[bytes(r)] for r in raws], pa.string())


def _invalid(ev: Event) -> tuple[str, str] | None:
    """Why a complete event cannot be a row, as (field, reason); None when it can."""
    if not isinstance(ev.name, str):
        return "name", "event has no name"
    if ev.ts is None or ev.dur is None or not math.isfinite(ev.ts) or not math.isfinite(ev.dur):
        return ("ts" if ev.ts is None else "dur"), "complete event without a finite ts and dur"
    if ev.dur < 0:
        return "dur", f"negative duration {ev.dur}"
    return None


@dataclass
class _Run:
    """One decoded run of events; an event that did not decode is None with its error."""

    events: list[Event | None]
    errors: dict[int, tuple[str, bytes]] = field(default_factory=dict)


def _decode_run(data: bytes) -> _Run:
    """A run typed in one call; when an event is malformed, the run event by event (a
    DecodeError here means `data` is not a JSON array at all)."""
    try:
        return _Run(list(_RUN.decode(data)))
    except msgspec.ValidationError:
        pass
    return _decode_each(_RAWS.decode(data))


def _decode_each(raws: list[msgspec.Raw]) -> _Run:
    run = _Run([])
    for i, raw in enumerate(raws):
        try:
            run.events.append(_ONE.decode(raw))
        except msgspec.DecodeError as e:
            run.events.append(None)
            run.errors[i] = (str(e), bytes(raw)[:2000])
    return run


COLUMNS = pa.schema(
    [
        ("line", pa.int64()),
        ("name", pa.string()),
        ("category", pa.string()),
        ("shape", pa.string()),
        ("ts_us", pa.float64()),
        ("dur_us", pa.float64()),
        ("device", pa.int32()),
        ("stream", pa.string()),
        ("correlation", pa.int64()),
        ("external_id", pa.int64()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("grid", pa.string()),
        ("block", pa.string()),
    ]
)
"""A run's complete events as columns, before linking (pid, tid, grid, block as JSON text)."""


class _Reject(NamedTuple):
    """A malformed or invalid event: `event` is its index in traceEvents; `indexed` reasons
    are prefixed with it when the rejection is made (a helper's indices are shifted first)."""

    event: int
    field: str | None
    reason: str
    raw: Any
    indexed: bool


def _reject(sink: Sink, rejects: list[_Reject], shift: int = 0) -> None:
    """Hand rejected events to the sink in event order (the first one aborts under `abort`)."""
    for r in sorted(rejects, key=lambda r: r.event):
        i = r.event + shift
        sink.reject(
            i + 1, r.field, f"traceEvents[{i}]: {r.reason}" if r.indexed else r.reason, r.raw
        )


def _columns(run: _Run, first: int, rejects: list[_Reject], memo: _Memo) -> pa.Table | None:
    """The valid complete events of a run (events `first`..) as columns; malformed and
    invalid events are added to `rejects`. Fields are gathered with `map(attrgetter)`
    over the typed structs: one C-level pass per column, no Python frame per event."""
    events = [e or _UNDECODED for e in run.events]
    complete = [e.ph == "X" for e in events]
    xs = list(compress(range(len(events)), complete))
    xe: list[Event] = list(compress(events, complete))
    raw_cats = list(map(_get.cat, xe))
    for c in set(raw_cats):
        if c not in memo.categories:
            memo.categories[c] = memo.category(c)
    cats = list(map(memo.categories.__getitem__, raw_cats))
    if _SKIP in memo.categories.values() and _SKIP in cats:
        keep = [c != _SKIP for c in cats]
        xs, xe, cats = (
            list(compress(xs, keep)),
            list(compress(xe, keep)),
            list(compress(cats, keep)),
        )
    names = list(map(_get.name, xe))
    ts = pa.array(list(map(_get.ts, xe)), pa.float64())
    dur = pa.array(list(map(_get.dur, xe)), pa.float64())
    tsn = ts.to_numpy(zero_copy_only=False)
    durn = dur.to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(tsn) | ~np.isfinite(durn) | (durn < 0)
    try:
        name_col = pa.array(names, pa.string())
        bad |= name_col.is_null().to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        bad |= np.array([not isinstance(n, str) for n in names])
        name_col = pa.array([n if isinstance(n, str) else None for n in names], pa.string())
    rejects.extend(_Reject(first + i, None, msg, raw, True) for i, (msg, raw) in run.errors.items())
    for j in np.flatnonzero(bad):
        why = _invalid(xe[j])
        assert why is not None
        rejects.append(_Reject(first + xs[j], why[0], why[1], repr(xe[j])[:2000], False))
    if not xe:
        return None
    args = [e.args or _EMPTY for e in xe]
    ext = int_array(list(map(_get.external_id, args)))
    if ext.null_count:
        ext = pc.coalesce(ext, int_array(list(map(_get.external_id_legacy, args))))
    dims = map(_get.input_dims, args)
    shapes = memo.shapes
    table = pa.table(
        [
            pa.array(np.asarray(xs, np.int64) + (first + 1)),
            name_col,
            pa.array(cats, pa.string()),
            pa.array(
                [
                    None if d is _NONE or c != "cpu_op" else shapes[bytes(d)]
                    for c, d in zip(cats, dims, strict=True)
                ],
                pa.string(),
            ),
            ts,
            dur,
            int_array(list(map(_get.device, args)), pa.int32()),
            text_array(list(map(_get.stream, args)), as_json=False),
            int_array(list(map(_get.correlation, args))),
            ext,
            text_array(list(map(_get.pid, xe)), as_json=True),
            text_array(list(map(_get.tid, xe)), as_json=True),
            memo.texts(list(map(_get.grid, args))),
            memo.texts(list(map(_get.block, args))),
        ],
        schema=COLUMNS,
    )
    if bad.any():
        table = table.filter(pa.array(~bad))
    return table


def _events(fh: IO[bytes], stop: int | None = None, inside: bool = False) -> ArrayStream[_Run]:
    """The runs of a trace's events, decoded (see `ArrayStream` for `stop` and `inside`)."""
    return ArrayStream(
        fh, b"traceEvents", _decode_run, lambda r: len(r.events), stop=stop, inside=inside
    )


def _read_runs(
    stream: ArrayStream[_Run],
    first: int,
    sink: Sink | None,
    memo: _Memo,
    tables: list[pa.Table],
    rejects: list[_Reject] | None = None,
) -> int:
    """Every run of `stream` into `tables` (its first event is number `first`); rejected
    events go to the sink as each run is read, or to `rejects` when there is no sink (a
    helper). Returns the number of the event after the last."""
    found: list[_Reject] = [] if rejects is None else rejects
    for run in stream:
        table = _columns(run, first, found, memo)
        if sink is not None:
            _reject(sink, found)
            found.clear()
        first += len(run.events)
        if first > MAX_EVENTS:
            raise TooManyEvents
        if table is not None:
            tables.append(table)
    return first


class _Half(NamedTuple):
    """What the helper read: columns (event numbers from 0), rejections, and the document
    after the array."""

    table: pa.Table
    rejects: list[_Reject]
    rest: bytes


class _Split:
    """The events of a large trace from `split` on (an element boundary near the middle),
    read by a helper process while this one reads those before it. The split is only a guess
    until this process's last run, which ends there, decodes; when it does not, or the helper
    fails, the helper's work is dropped and this process reads on alone."""

    def __init__(self, path: Path, split: int, spill: Path) -> None:
        self.split = split
        self._spill = spill
        self._helper = Helper(lambda: _second_half(path, split, spill))

    @classmethod
    def start(cls, path: Path, spill: Path) -> _Split | None:
        """A helper for a large plain trace (see `helper.available`), its columns to be left
        in the file `spill`; else None."""
        found = helper.start_window(path)
        if found is None:
            return None
        at, window = found
        m = CUT.search(window)
        return cls(path, at + m.end() - 1, spill) if m else None

    def result(self) -> _Half | None:
        """The helper's half, or None when it failed."""
        reply = self._helper.result()
        if reply is None:
            return None
        rejects, rest = pickle.loads(reply[0])
        try:
            # mapped, not read: the columns stay file pages the kernel may drop and reload;
            # the name goes at once (the mapping lives as long as the columns do)
            table = pa.ipc.open_file(pa.memory_map(str(self._spill))).read_all()
        except (OSError, pa.ArrowInvalid):
            return None
        return _Half(table, rejects, rest)

    def close(self) -> None:
        """End the helper and remove its file."""
        self._helper.close()
        self._spill.unlink(missing_ok=True)


def _second_half(path: Path, split: int, spill: Path) -> list[bytes]:
    """The helper's work: the events from `split` on; their columns into the Arrow IPC file
    `spill`, (rejections, rest) as the reply."""
    memo, tables, rejects = _Memo(), list[pa.Table](), list[_Reject]()
    with open(path, "rb") as fh:
        fh.seek(split)
        stream = _events(fh, inside=True)
        _read_runs(stream, 0, None, memo, tables, rejects)
    with pa.OSFile(str(spill), "wb") as out, pa.ipc.new_file(out, COLUMNS) as writer:
        for table in tables:
            writer.write_table(table)
    return [pickle.dumps((rejects, stream.rest))]


def on_wall_clock(rows: pa.Table, header: Header) -> pa.Table:
    """Events timed from the trace's `baseTimeNanoseconds` moved onto the wall clock (epoch
    microseconds), so they line up with a server's log and TORCH_TRACE; a trace whose `ts`
    are already wall-clock times (older PyTorch, HTA's examples) is left as it is, and so is
    one without a usable base."""
    try:
        base = msgspec.json.decode(header.baseTimeNanoseconds)
    except msgspec.DecodeError:
        return rows
    if isinstance(base, bool) or not isinstance(base, int | float) or not rows.num_rows:
        return rows
    base_us = float(base) / 1000
    latest = pc.max(rows["ts_us"]).as_py()
    if not is_wall_clock(base_us) or latest is None or is_wall_clock(latest):
        return rows
    shifted = pc.add(rows["ts_us"], base_us)
    return rows.set_column(rows.schema.get_field_index("ts_us"), "ts_us", shifted)


def read(path: Path, sink: Sink) -> None:
    """Stream the events into columns, link kernels to their operators, write op_exec (and a
    request per request annotation span, `kineto_requests`) and the environment."""
    memo = _Memo()
    tables: list[pa.Table] = []
    try:
        try:
            header = _stream(path, sink, memo, tables)
        except NotStreamable:
            header = _whole(path, sink, memo, tables)
    except BadArray as e:
        raise InputError(path, None, "traceEvents", f"not a Chrome trace: {e}") from None
    except TooManyEvents:
        why = f"more than {MAX_EVENTS:,} events; profile fewer steps"
        raise InputError(path, None, "traceEvents", why) from None
    except (OSError, EOFError) as e:
        raise InputError(path, None, None, f"unreadable: {e}") from None
    if sum(len(x) for x in tables) > MAX_EVENTS:  # each process's half was within it
        why = f"more than {MAX_EVENTS:,} events; profile fewer steps"
        raise InputError(path, None, "traceEvents", why)
    rows = (pa.concat_tables(tables) if tables else COLUMNS.empty_table()).combine_chunks()
    del tables
    rows = on_wall_clock(rows, header)
    shapes, ops = link(rows)
    rows = rows.set_column(rows.schema.get_field_index("shape"), "shape", shapes)
    workload = sink.hints.get("workload") or path.name.split(".")[0]
    slice_ = sink.hints.get("slice", "")
    for start in range(0, len(rows), ROWS_PER_FILE):
        # `extra` per chunk: built here while the sink's thread writes the chunk before
        part = rows.slice(start, ROWS_PER_FILE)
        n = len(part)
        sink.add_table(
            "op_exec",
            workload,
            part["line"],
            {
                "workload": pa.array([workload] * n, pa.string()),
                "slice": pa.array([slice_] * n, pa.string()),
                "name": part["name"],
                "category": part["category"],
                "shape": part["shape"],
                "ts_us": part["ts_us"],
                "dur_us": part["dur_us"],
                "device": part["device"],
                "core": pa.nulls(n, pa.int32()),
                "stream": part["stream"],
                "correlation": part["correlation"],
                "plan_id": pa.nulls(n, pa.string()),
                "extra": extra(part, ops.slice(start, n)),
            },
        )
    found = request_columns(rows, workload, slice_)
    if found is not None:
        sink.add_table("request", workload, *found)
    _environment(sink, header)


def _stream(path: Path, sink: Sink, memo: _Memo, tables: list[pa.Table]) -> Header:
    """Runs of events into columns. A large plain file is read by two processes: a forked
    helper reads the events from an element boundary near the middle on (`_Split`)."""
    second = _Split.start(path, sink.staging / "kineto-helper.arrow")
    try:
        with open_bytes(path, ahead=True) as fh:
            stream = _events(fh, stop=second.split if second else None)
            first = _read_runs(stream, 0, sink, memo, tables)
            if not stream.stopped:
                rest = stream.rest
            else:
                assert second is not None
                half = second.result()
                if half is None:  # the helper failed: its half is read here instead
                    fh.seek(second.split)
                    tail = _events(fh, inside=True)
                    _read_runs(tail, first, sink, memo, tables)
                    rest = stream.prefix + b"[]" + tail.rest
                else:
                    _reject(sink, half.rejects, first)
                    lines = pc.add(half.table["line"], first)
                    tables.append(half.table.set_column(0, "line", lines))
                    rest = stream.prefix + b"[]" + half.rest
    finally:
        if second is not None:
            second.close()
    try:
        return _HEADER.decode(rest)
    except msgspec.DecodeError as e:
        raise InputError(path, None, None, f"not a Chrome trace: {e}") from None


def _whole(path: Path, sink: Sink, memo: _Memo, tables: list[pa.Table]) -> Header:
    """The document decoded whole, its events one by one (layouts streaming refuses)."""
    with open_bytes(path) as fh:
        data = fh.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        why = f"a trace that cannot be streamed may hold at most {MAX_DOCUMENT_BYTES} bytes"
        raise InputError(path, None, "traceEvents", why)
    try:
        doc = _WHOLE.decode(data)
    except msgspec.DecodeError as e:
        raise InputError(path, None, "traceEvents", f"not a Chrome trace: {e}") from None
    if len(doc.traceEvents) > MAX_EVENTS:
        raise TooManyEvents
    for start in range(0, len(doc.traceEvents), EVENTS_PER_RUN):
        run = _decode_each(doc.traceEvents[start : start + EVENTS_PER_RUN])
        rejects: list[_Reject] = []
        table = _columns(run, start, rejects, memo)
        _reject(sink, rejects)
        if table is not None:
            tables.append(table)
    return doc


def _environment(sink: Sink, trace: Header) -> None:
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
            **dict.fromkeys(ENVIRONMENT_KEYS),
            "side": "runtime",
            "runtime": "pytorch-profiler",
            "hardware": ", ".join(names) or None,
            "extra": msgspec.json.encode(extra).decode(),
        },
    )
