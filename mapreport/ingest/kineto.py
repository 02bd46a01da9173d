"""PyTorch profiler (Kineto) Chrome-trace JSON, as HTA reads it: operators, kernels and runtime
launches into `op_exec`, device and distributed information into `environment`.

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
sends its columns back as Arrow IPC. The boundary is a guess (the next `}, {` after the middle)
until this process's last run, which ends there, decodes as whole events; otherwise, or when
the helper fails, its half is dropped or read here, so the tables are the same either way.
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
from mapreport.ingest.base import Head
from mapreport.ingest.helper import Helper
from mapreport.ingest.jsonarray import CUT, ArrayStream, BadArray, NotStreamable
from mapreport.ingest.native import ENVIRONMENT_KEYS
from mapreport.ingest.records import open_bytes
from mapreport.ingest.sink import Sink
from mapreport.shapes import ShapeError, canonical_shape

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
LAUNCHED = ("kernel", "memcpy", "memset")
"""Device-side categories that inherit the shape of the operator that launched them."""
CHUNK = 200_000
"""op_exec rows written per Parquet file."""
_SKIP = "\0skip"
_EMPTY = Args()
_UNDECODED = Event()
_get = SimpleNamespace(
    **{f: attrgetter(f) for f in (*Event.__struct_fields__, *Args.__struct_fields__)}
)
"""attrgetter per struct field: `map(_get.ts, events)` reads a field of every event in C."""
_ENCODE = msgspec.json.Encoder().encode
_RUN = msgspec.json.Decoder(list[Event])
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_ONE = msgspec.json.Decoder(Event)
_ANY = msgspec.json.Decoder()
_INT64 = (-(2**63), 2**63)


def _int(value: Any) -> int | None:
    """An id as an int: ints as they are, numeric strings (decimal or 0x) parsed; None else."""
    if type(value) is int:
        return value if _INT64[0] <= value < _INT64[1] else None
    if isinstance(value, str):
        try:
            return _int(int(value, 0))
        except ValueError:
            return None
    return None


_I64 = pa.int64()


def _ints(values: list[Any], kind: pa.DataType = _I64) -> pa.Array:
    """An integer column of ids that are ints, numeric strings or missing."""
    try:
        return pa.array(values, kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        ints = [_int(v) for v in values]
        if kind == pa.int32():
            ints = [v if v is not None and -(2**31) <= v < 2**31 else None for v in ints]
        return pa.array(ints, kind)


def _texts(values: list[Any], as_json: bool) -> pa.Array:
    """A string column of ints or strings: `str()` of each, or its JSON text."""
    try:
        return pa.array(values, pa.int64()).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    # mostly ints (Kineto's pid/tid: a few events use names): ints cast, the rest patched in
    others = {i: v for i, v in enumerate(values) if type(v) is not int and v is not None}
    ints = [None if i in others else v for i, v in enumerate(values)] if others else values
    try:
        texts = pa.array(ints, pa.int64()).cast(pa.string()).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # ints beyond 64 bits
        texts = [None if v is None else str(v) for v in ints]
    for i, v in others.items():
        texts[i] = _ENCODE(v).decode() if as_json else str(v)
    return pa.array(texts, pa.string())


class _Shapes(dict[bytes, str | None]):
    """Raw `Input Dims` text -> canonical shape, computed on first sight."""

    def __missing__(self, key: bytes) -> str | None:
        try:
            value = _canonical_dims(_ANY.decode(key))
        except msgspec.DecodeError:
            value = None
        self[key] = value
        return value


class _Compact(dict[bytes, str | None]):
    """Raw JSON text -> its compact text (None for null), computed on first sight."""

    def __missing__(self, key: bytes) -> str | None:
        value = _ANY.decode(key)
        self[key] = None if value is None else _ENCODE(value).decode()
        return self[key]


@dataclass
class _Memo:
    """Per-read caches: traces repeat a few categories, shapes and launch geometries."""

    categories: dict[str | None, str | None] = field(default_factory=dict)
    shapes: _Shapes = field(default_factory=_Shapes)
    compact: _Compact = field(default_factory=_Compact)

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
    ext = _ints(list(map(_get.external_id, args)))
    if ext.null_count:
        ext = pc.coalesce(ext, _ints(list(map(_get.external_id_legacy, args))))
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
            _ints(list(map(_get.device, args)), pa.int32()),
            _texts(list(map(_get.stream, args)), as_json=False),
            _ints(list(map(_get.correlation, args))),
            ext,
            _texts(list(map(_get.pid, xe)), as_json=True),
            _texts(list(map(_get.tid, xe)), as_json=True),
            memo.texts(list(map(_get.grid, args))),
            memo.texts(list(map(_get.block, args))),
        ],
        schema=COLUMNS,
    )
    if bad.any():
        table = table.filter(pa.array(~bad))
    return table


def _first_of_each(keys: np.ndarray, last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and, for each, the position of its first (or last) occurrence."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    edge = np.ones(len(sk), bool)
    if last:
        edge[:-1] = sk[:-1] != sk[1:]
    else:
        edge[1:] = sk[1:] != sk[:-1]
    return sk[edge], order[edge]


def _lookup(sorted_keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each wanted key sits in sorted_keys, and whether it is there at all."""
    at = np.searchsorted(sorted_keys, wanted)
    safe = np.minimum(at, max(len(sorted_keys) - 1, 0))
    found = (at < len(sorted_keys)) & (sorted_keys[safe] == wanted) if len(sorted_keys) else at < 0
    return safe, found


def _link(rows: pa.Table) -> tuple[pa.ChunkedArray, pa.Array]:
    """Per row: the shape (operators: their own; kernels, copies and sets: their launching
    operator's) and the launching operator's name as JSON text (launched rows only).

    A launch names its operator by `External id` when an operator carries the same id; older
    traces give launches their own ids, so there the operator is the innermost cpu_op on the
    same thread whose span holds the launch (`_sweep`). Operator keys are external ids, or
    -(event number) for operators without one; an operator key's first operator counts, a
    correlation's last launch. All of it is array lookups, no Python per event."""
    n = len(rows)
    cat = rows["category"]
    ext = rows["external_id"]
    has_ext = ext.is_valid().to_numpy(zero_copy_only=False)
    ext_n = ext.fill_null(0).to_numpy()
    key = np.where(has_ext, ext_n, -rows["line"].to_numpy())
    cpu_idx = np.flatnonzero(pc.equal(cat, "cpu_op").to_numpy(zero_copy_only=False))
    op_keys, first = _first_of_each(key[cpu_idx])
    op_rows = cpu_idx[first]
    has_corr = rows["correlation"].is_valid().to_numpy(zero_copy_only=False)
    corr_n = rows["correlation"].fill_null(0).to_numpy()
    li = np.flatnonzero(pc.equal(cat, "runtime").to_numpy(zero_copy_only=False) & has_corr)
    _, named = _lookup(op_keys, ext_n[li])
    named &= has_ext[li]
    corr, op = corr_n[li[named]], ext_n[li[named]]
    pending = li[~named]
    if len(pending):
        swept_corr, swept_op = _sweep(rows, pending, cpu_idx, key)
        corr, op = np.concatenate([corr, swept_corr]), np.concatenate([op, swept_op])
    map_corr, at = _first_of_each(corr, last=True)
    map_op = op[at]
    launched = np.flatnonzero(
        pc.is_in(cat, pa.array(LAUNCHED)).to_numpy(zero_copy_only=False) & has_corr
    )
    pos, hit = _lookup(map_corr, corr_n[launched])
    launched, pos = launched[hit], pos[hit]
    pos, hit = _lookup(op_keys, map_op[pos])
    launched, src = launched[hit], op_rows[pos[hit]]
    shape_src = np.full(n, -1, np.int64)
    shape_src[cpu_idx] = cpu_idx
    shape_src[launched] = src
    shapes = pc.take(rows["shape"], pa.array(shape_src, mask=shape_src < 0))
    op_src = np.full(n, -1, np.int64)
    op_src[launched] = src
    names = pc.take(rows["name"], pa.array(op_src, mask=op_src < 0)).combine_chunks()
    coded = names.dictionary_encode()
    texts = pa.array([_ENCODE(v).decode() for v in coded.dictionary.to_pylist()], pa.string())
    return shapes, pc.take(texts, coded.indices)


def _sweep(
    rows: pa.Table, pending: np.ndarray, cpu_idx: np.ndarray, key: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(launch correlations, operator keys) for launches that name no operator: of the cpu_ops
    on the launch's thread whose span holds it (start <= t <= end), the one that started last
    (at equal starts, the shorter).

    Vectorised: operators sorted by (thread, start, longer first), launches merged into that
    order, so the last operator started by each launch is known; when that one has ended, a
    descent over a sparse table of span ends finds the nearest earlier operator still open."""
    if not len(cpu_idx) or not len(pending):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    thread = (
        pc.binary_join_element_wise(rows["pid"].fill_null(""), rows["tid"].fill_null(""), "\x1f")
        .combine_chunks()
        .dictionary_encode()
        .indices.to_numpy()
    )
    ts = rows["ts_us"].to_numpy()
    end = ts + rows["dur_us"].to_numpy()
    n_ops, n_launch = len(cpu_idx), len(pending)
    order = np.lexsort(
        (
            np.concatenate([ts[cpu_idx] - end[cpu_idx], np.zeros(n_launch)]),
            np.repeat(np.array([0, 1], np.int8), [n_ops, n_launch]),
            np.concatenate([ts[cpu_idx], ts[pending]]),
            np.concatenate([thread[cpu_idx], thread[pending]]),
        )
    )
    is_op = order < n_ops
    ops = cpu_idx[order[is_op]]  # operator rows in (thread, start, longer first) order
    last = (np.cumsum(is_op) - 1)[~is_op]  # per launch: the last operator started by then
    launches = pending[order[~is_op] - n_ops]
    t = ts[launches]
    ends = [end[ops]]  # ends[k][i] = latest end among operators i .. i + 2**k - 1
    while 2 ** len(ends) <= n_ops:
        half = 2 ** (len(ends) - 1)
        prev = ends[-1]
        ends.append(np.maximum(prev[:-half], prev[half:]))
    j = last.copy()
    for k in range(len(ends) - 1, -1, -1):  # skip back over blocks that all ended before t
        size = 2**k
        start = j - size + 1
        can = start >= 0
        block_end = ends[k][np.where(can, start, 0)]
        j = np.where(can & (block_end < t), j - size, j)
    at = np.where(j >= 0, j, 0)
    ok = (j >= 0) & (thread[ops[at]] == thread[launches]) & (end[ops[at]] >= t)
    corr = rows["correlation"].fill_null(0).to_numpy()
    return corr[launches[ok]], key[ops[at[ok]]]


def _extra(rows: pa.Table, ops: pa.Array) -> pa.Array:
    """The `extra` JSON object of each row: grid, block, op, external_id, pid, tid where set."""

    def member(name: str, values: pa.Array) -> pa.Array:
        return pc.binary_join_element_wise(f'"{name}":', values, "")

    parts = [
        member("grid", rows["grid"]),
        member("block", rows["block"]),
        member("op", ops),
        member("external_id", rows["external_id"].cast(pa.string())),
        member("pid", rows["pid"]),
        member("tid", rows["tid"]),
    ]
    body = pc.binary_join_element_wise(*parts, ",", null_handling="skip")
    text = pc.binary_join_element_wise("{", body, "}", "")
    empty = pc.equal(body, "")
    if not pc.any(empty).as_py():
        return text
    return pc.if_else(empty, pa.scalar(None, pa.string()), text)


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
        if table is not None:
            tables.append(table)
    return first


HELPER_SHARE = 0.45
"""The share of a large trace the helper process reads (it also ships its columns back)."""


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

    def __init__(self, path: Path, split: int) -> None:
        self.split = split
        self._helper = Helper(lambda: _second_half(path, split))

    @classmethod
    def start(cls, path: Path) -> _Split | None:
        """A helper for a large plain trace (see `helper.available`), else None."""
        found = helper.start_window(path, HELPER_SHARE)
        if found is None:
            return None
        at, window = found
        m = CUT.search(window)
        return cls(path, at + m.end() - 1) if m else None

    def result(self) -> _Half | None:
        """The helper's half, or None when it failed."""
        reply = self._helper.result()
        if reply is None:
            return None
        rejects, rest = pickle.loads(reply[0])
        with pa.ipc.open_stream(reply[1]) as reader:
            return _Half(reader.read_all(), rejects, rest)

    def close(self) -> None:
        """End the helper."""
        self._helper.close()


def _second_half(path: Path, split: int) -> list[bytes]:
    """The helper's work: the events from `split` on, as (rejections, rest) and Arrow IPC."""
    memo, tables, rejects = _Memo(), list[pa.Table](), list[_Reject]()
    with open(path, "rb") as fh:
        fh.seek(split)
        stream = _events(fh, inside=True)
        _read_runs(stream, 0, None, memo, tables, rejects)
    table = pa.concat_tables(tables) if tables else COLUMNS.empty_table()
    out = pa.BufferOutputStream()
    with pa.ipc.new_stream(out, COLUMNS) as writer:
        writer.write_table(table)
    return [pickle.dumps((rejects, stream.rest)), out.getvalue().to_pybytes()]


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
        """Stream the events into columns, link kernels to their operators, write op_exec."""
        memo = _Memo()
        tables: list[pa.Table] = []
        try:
            header = self._stream(path, sink, memo, tables)
        except NotStreamable:
            header = self._whole(path, sink, memo, tables)
        except BadArray as e:
            raise InputError(path, None, "traceEvents", f"not a Chrome trace: {e}") from None
        except (OSError, EOFError) as e:
            raise InputError(path, None, None, f"unreadable: {e}") from None
        rows = (pa.concat_tables(tables) if tables else COLUMNS.empty_table()).combine_chunks()
        del tables
        shapes, ops = _link(rows)
        rows = rows.set_column(rows.schema.get_field_index("shape"), "shape", shapes)
        workload = sink.hints.get("workload") or path.name.split(".")[0]
        slice_ = sink.hints.get("slice", "")
        for start in range(0, len(rows), CHUNK):
            # `extra` per chunk: built here while the sink's thread writes the chunk before
            part = rows.slice(start, CHUNK)
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
                    "extra": _extra(part, ops.slice(start, n)),
                },
            )
        self._environment(sink, header)

    @staticmethod
    def _stream(path: Path, sink: Sink, memo: _Memo, tables: list[pa.Table]) -> Header:
        """Runs of events into columns. A large plain file is read by two processes: a forked
        helper reads the events from an element boundary near the middle on (`_Split`)."""
        second = _Split.start(path)
        try:
            with open_bytes(path) as fh:
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
            return msgspec.json.decode(rest, type=Header)
        except msgspec.DecodeError as e:
            raise InputError(path, None, None, f"not a Chrome trace: {e}") from None

    @staticmethod
    def _whole(path: Path, sink: Sink, memo: _Memo, tables: list[pa.Table]) -> Header:
        """The document decoded whole, its events one by one (layouts streaming refuses)."""
        with open_bytes(path) as fh:
            data = fh.read()
        try:
            doc = msgspec.json.decode(data, type=Whole)
        except msgspec.DecodeError as e:
            raise InputError(path, None, "traceEvents", f"not a Chrome trace: {e}") from None
        for start in range(0, len(doc.traceEvents), CHUNK):
            run = _decode_each(doc.traceEvents[start : start + CHUNK])
            rejects: list[_Reject] = []
            table = _columns(run, start, rejects, memo)
            _reject(sink, rejects)
            if table is not None:
                tables.append(table)
        return doc

    @staticmethod
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
