"""Kineto: one decoded run of trace events into Arrow columns (the `kineto` reader's
implementation, with `kineto_events`, which streams the runs).

Events are typed with msgspec structs (no dict per event) and their fields gathered with
`map(attrgetter)`, one C-level pass per column. A run with a malformed event is decoded event
by event, so the bad event is rejected by its index without losing the others.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import compress
from operator import attrgetter
from types import SimpleNamespace
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mapreport.ingest.kineto_values import ENCODE, canonical_dims, int_array, text_array
from mapreport.ingest.records import JsonDecoder, Memo
from mapreport.ingest.sink import Sink

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
    input_types: msgspec.Raw = msgspec.field(default=_NONE, name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=_NONE, name="Concrete Inputs")
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


CATEGORIES = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "kernel": "kernel",
    # CUPTI's range profiler records each kernel as a range with its counters
    "cuda_profiler_range": "kernel",
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


_SKIP = "\0skip"


_EMPTY = Args()


_UNDECODED = Event()


_get = SimpleNamespace(
    **{f: attrgetter(f) for f in (*Event.__struct_fields__, *Args.__struct_fields__)}
)
"""attrgetter per struct field: `map(_get.ts, events)` reads a field of every event in C."""


_RUN: JsonDecoder[list[Event]] = JsonDecoder(list[Event])


_RAWS: JsonDecoder[list[msgspec.Raw]] = JsonDecoder(list[msgspec.Raw])


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


class RunMemo(msgspec.Struct):
    """Per-read caches: traces repeat a few categories, shapes and launch geometries."""

    categories: dict[str | None, str | None] = msgspec.field(default_factory=dict)
    shapes: Memo = msgspec.field(default_factory=lambda: Memo(_shape_of))
    compact: Memo = msgspec.field(default_factory=lambda: Memo(_compact))

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


def _of_ops(cats: list[str | None], raws: Iterable[msgspec.Raw]) -> list[msgspec.Raw]:
    """An operator's raw value; null for other events (only operators have inputs)."""
    return [r if c == "cpu_op" else _NONE for c, r in zip(cats, raws, strict=True)]


class Run(msgspec.Struct):
    """One decoded run of events; an event that did not decode is None with its error."""

    events: list[Event | None]
    errors: dict[int, tuple[str, bytes]] = msgspec.field(default_factory=dict)


def decode_run(data: bytes) -> Run:
    """A run typed in one call; when an event is malformed, the run event by event (a
    DecodeError here means `data` is not a JSON array at all)."""
    try:
        return Run(list(_RUN.decode(data)))
    except msgspec.ValidationError:
        pass
    return decode_each(_RAWS.decode(data))


def decode_each(raws: list[msgspec.Raw]) -> Run:
    run = Run([])
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
        ("types", pa.string()),
        ("concrete", pa.string()),
    ]
)
"""A run's complete events as columns, before linking (pid, tid, grid, block, and an
operator's `Input type` and `Concrete Inputs` as JSON text)."""


class Reject(NamedTuple):
    """A malformed or invalid event: `event` is its index in traceEvents; `indexed` reasons
    are prefixed with it when the rejection is made (a helper's indices are shifted first)."""

    event: int
    field: str | None
    reason: str
    raw: Any
    indexed: bool


def hand_over(sink: Sink, rejects: list[Reject], shift: int = 0) -> None:
    """Hand rejected events to the sink in event order (the first one aborts under `abort`)."""
    for r in sorted(rejects, key=lambda r: r.event):
        i = r.event + shift
        sink.reject(
            i + 1, r.field, f"traceEvents[{i}]: {r.reason}" if r.indexed else r.reason, r.raw
        )


def run_columns(run: Run, first: int, rejects: list[Reject], memo: RunMemo) -> pa.Table | None:
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
    rejects.extend(Reject(first + i, None, msg, raw, True) for i, (msg, raw) in run.errors.items())
    for j in np.flatnonzero(bad):
        why = _invalid(xe[j])
        assert why is not None
        rejects.append(Reject(first + xs[j], why[0], why[1], repr(xe[j])[:2000], False))
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
            memo.texts(_of_ops(cats, map(_get.input_types, args))),
            memo.texts(_of_ops(cats, map(_get.concrete, args))),
        ],
        schema=COLUMNS,
    )
    if bad.any():
        table = table.filter(pa.array(~bad))
    return table
