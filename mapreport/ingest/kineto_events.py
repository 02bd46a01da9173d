"""Reading a PyTorch profiler (Kineto) Chrome trace into columns: the `kineto` reader's
implementation, imported when a trace is read (numpy and Arrow's compute functions with it).

The trace is streamed (`jsonarray`): `traceEvents` arrives in runs of a few megabytes, each
turned into Arrow columns at once (`kineto_columns`), so memory holds one run of structs and
the columns, never the document. A kernel inherits the input shape of the operator that
launched it: kernel -> launch by `correlation`, launch -> operator by `External id`
(lowercase `external id` in the legacy schema), resolved once every event has been read (a
kernel may precede its operator in the file).

A large trace is read by two processes: a forked helper decodes the events after an element
boundary near the middle of the file while this process decodes those before it, and leaves
its columns in an Arrow IPC file in the staging folder, which this process maps (a pipe moved
them at ~0.4 GB/s: a quarter second of a 297 MiB trace). A gzip trace cannot be entered in
the middle: a process decompresses it into a plain spool as it is read (`gunzip.Spooled`),
and the helper starts on the spool once it is whole. The boundary is a guess (the next `}, {`
after the middle) until this process's last run, which ends there, decodes as whole events;
otherwise, or when the helper fails, its half is dropped or read here, so the tables are the
same either way."""

from __future__ import annotations

import pickle
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, NamedTuple

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from mapreport.core.errors import InputError
from mapreport.core.schema import ENVIRONMENT_KEYS
from mapreport.core.window import is_wall_clock
from mapreport.ingest import helper
from mapreport.ingest.gunzip import Spooled
from mapreport.ingest.helper import Helper
from mapreport.ingest.jsonarray import CUT, ArrayStream, BadArray, NotStreamable
from mapreport.ingest.jsondoc import MAX_DOCUMENT_BYTES
from mapreport.ingest.jsonkeys import CHUNK, TopKeys
from mapreport.ingest.kineto_columns import (
    COLUMNS,
    Reject,
    Run,
    RunMemo,
    decode_each,
    decode_run,
    hand_over,
    run_columns,
)
from mapreport.ingest.kineto_link import LAUNCHED, extra, link, region_plans
from mapreport.ingest.kineto_requests import request_columns
from mapreport.ingest.records import JsonDecoder, open_bytes
from mapreport.ingest.sink import Sink


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


ROWS_PER_FILE = 200_000
"""op_exec rows written per Parquet file."""
EVENTS_PER_RUN = 200_000
"""Events of a whole-decoded document typed and turned into columns at a time."""
MAX_EVENTS = 10_000_000
"""A trace with more events is refused (its columns would pass ~1.5 GiB before the kernels
are linked to their operators): profile fewer steps (`schedule(active=...)`)."""


class TooManyEvents(Exception):
    """More than MAX_EVENTS events (a decompression bomb, or a profile of too many steps)."""


_HEADER: JsonDecoder[Header] = JsonDecoder(Header)
_WHOLE: JsonDecoder[Whole] = JsonDecoder(Whole)


def _events(fh: IO[bytes], stop: int | None = None, inside: bool = False) -> ArrayStream[Run]:
    """The runs of a trace's events, decoded (see `ArrayStream` for `stop` and `inside`)."""
    return ArrayStream(
        fh, b"traceEvents", decode_run, lambda r: len(r.events), stop=stop, inside=inside
    )


def _read_runs(
    stream: ArrayStream[Run],
    first: int,
    sink: Sink | None,
    memo: RunMemo,
    add: Callable[[pa.Table], None],
    rejects: list[Reject] | None = None,
    between: Callable[[], None] | None = None,
) -> int:
    """Every run of `stream` as columns to `add` (its first event is number `first`);
    rejected events go to the sink as each run is read, or to `rejects` when there is no sink
    (a helper); `between` is called after each run. Returns the number of the event after the
    last."""
    found: list[Reject] = [] if rejects is None else rejects
    for run in stream:
        table = run_columns(run, first, found, memo)
        if sink is not None:
            hand_over(sink, found)
            found.clear()
        first += len(run.events)
        if first > MAX_EVENTS:
            raise TooManyEvents
        if table is not None:
            add(table)
        if between is not None:
            between()
    return first


class _Half(NamedTuple):
    """What the helper read: columns (event numbers from 0), rejections, and the document
    after the array with the offset it starts at (from the split)."""

    table: pa.Table
    rejects: list[Reject]
    rest: bytes
    rest_at: int


class _Split:
    """The events of a large trace from `split` on (an element boundary near the middle),
    read by a helper process while this one reads those before it. The split is only a guess
    until this process's last run, which ends there, decodes; when it does not, or the helper
    fails, the helper's work is dropped and this process reads on alone."""

    def __init__(self, path: Path, split: int, spill: Path) -> None:
        self.path = path
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

    @classmethod
    def late(cls, fh: Spooled, stream: ArrayStream[Run], spill: Path) -> _Split | None:
        """A helper for a gzip trace once its spool holds the whole document (`Spooled`),
        when the split lies ahead of what this process has read; else None (ask again after
        the next run)."""
        if fh.complete() is None:
            return None
        found = helper.start_window(fh.spool)
        m = CUT.search(found[1]) if found is not None else None
        if found is None or m is None or not stream.stop_at(found[0] + m.end() - 1):
            return None
        return cls(fh.spool, found[0] + m.end() - 1, spill)

    def result(self) -> _Half | None:
        """The helper's half, or None when it failed."""
        reply = self._helper.result()
        if reply is None:
            return None
        rejects, rest, rest_at = pickle.loads(reply[0])
        try:
            # mapped, not read: the columns stay file pages the kernel may drop and reload;
            # the name goes at once (the mapping lives as long as the columns do)
            table = pa.ipc.open_file(pa.memory_map(str(self._spill))).read_all()
        except (OSError, pa.ArrowInvalid):
            return None
        return _Half(table, rejects, rest, rest_at)

    def close(self) -> None:
        """End the helper and remove its file."""
        self._helper.close()
        self._spill.unlink(missing_ok=True)


def _second_half(path: Path, split: int, spill: Path) -> list[bytes]:
    """The helper's work: the events from `split` on; their columns into the Arrow IPC file
    `spill`, (rejections, rest, rest_at) as the reply."""
    memo, rejects = RunMemo(), list[Reject]()
    # each run's columns go to the file as they are made: the helper never holds its half
    with (
        open(path, "rb") as fh,
        pa.OSFile(str(spill), "wb") as out,
        pa.ipc.new_file(out, COLUMNS) as writer,
    ):
        fh.seek(split)
        stream = _events(fh, inside=True)
        _read_runs(stream, 0, None, memo, writer.write_table, rejects)
    return [pickle.dumps((rejects, stream.rest, stream.rest_at))]


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
    memo = RunMemo()
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
    rows = pa.concat_tables(tables) if tables else COLUMNS.empty_table()
    del tables
    rows = on_wall_clock(rows, header)
    linked = link(rows)
    ops = linked.ops
    linked_columns = {
        "shape": linked.shapes,
        "types": linked.types,
        "concrete": linked.concrete,
        "external_id": linked.external_ids,
    }
    for name, column in linked_columns.items():
        rows = rows.set_column(rows.schema.get_field_index(name), name, column)
    rows = rows.append_column("plan_id", region_plans(rows))
    workload = sink.hints.get("workload") or path.name.split(".")[0]
    slice_ = sink.hints.get("slice", "")
    for part, extras in _with_extra(rows, ops):
        n = len(part)
        sink.add_table(
            "op_exec",
            workload,
            part["line"],
            {
                "workload": pa.repeat(pa.scalar(workload, pa.string()), n),
                "slice": pa.repeat(pa.scalar(slice_, pa.string()), n),
                "name": part["name"],
                "category": part["category"],
                "shape": part["shape"],
                "ts_us": part["ts_us"],
                "dur_us": part["dur_us"],
                "device": part["device"],
                "core": host_process(part),
                "stream": part["stream"],
                "correlation": part["correlation"],
                "plan_id": part["plan_id"],
                "extra": extras,
            },
        )
    found = request_columns(rows, workload, slice_, sink.hints.get("request_span"))
    if found is not None:
        sink.add_table("request", workload, found.lines, found.columns)
        unread, example = found.unread
        if unread:
            sink.note(
                f"{unread} request span(s) name a shape that does not read (first: "
                f"{example!r}): their requests have the shape `unknown`"
            )
    _environment(sink, header)


def host_process(rows: pa.Table) -> pa.Array:
    """`core` of each row: the host process id of a CPU-side event (the worker that ran it;
    compile ids are per process); null for device-side rows (their pid is the device) and
    for pids that are not numbers an int32 holds."""
    pid = rows["pid"].combine_chunks() if isinstance(rows["pid"], pa.ChunkedArray) else rows["pid"]
    host = pc.invert(pc.is_in(rows["category"], pa.array(LAUNCHED)))
    numeric = pc.and_(
        pc.and_(pc.utf8_is_digit(pid.fill_null("x")), pc.less_equal(pc.utf8_length(pid), 9)),
        host,
    )
    values = pc.cast(pc.if_else(numeric, pid, pa.scalar("0")), pa.int32())
    return pc.if_else(numeric, values, pa.scalar(None, pa.int32()))


def _with_extra(rows: pa.Table, ops: pa.Array) -> Iterator[tuple[pa.Table, pa.Array]]:
    """The rows in chunks of ROWS_PER_FILE, each with its `extra` column. The next chunk's is
    built on a thread while the caller hands this one to the sink, whose own thread writes
    the one before: Arrow's string kernels and Parquet's encoding release the GIL, so the
    three share both cores (one chunk ahead at most: memory holds two chunks' texts)."""
    with ThreadPoolExecutor(1, thread_name_prefix="kineto-extra") as pool:
        ahead: deque[tuple[pa.Table, Future[pa.Array]]] = deque()
        for start in range(0, len(rows), ROWS_PER_FILE):
            part = rows.slice(start, ROWS_PER_FILE)
            ahead.append((part, pool.submit(extra, part, ops.slice(start, len(part)))))
            if len(ahead) > 1:
                done, built = ahead.popleft()
                yield done, built.result()
        while ahead:
            done, built = ahead.popleft()
            yield done, built.result()


def _stream(path: Path, sink: Sink, memo: RunMemo, tables: list[pa.Table]) -> Header:
    """Runs of events into columns. A large file is read by two processes: a forked helper
    reads the events from an element boundary near the middle on (`_Split`); a gzip trace is
    decompressed into a plain spool as it is read, and the helper starts once the spool is
    whole, if this process has not read up to the middle by then."""
    spill = sink.staging / "kineto-helper.arrow"
    second = _Split.start(path, spill)
    spool = sink.staging / "kineto-trace.json" if helper.large_gzip(path) else None
    try:
        with open_bytes(path, ahead=True, spool=spool) as fh:
            stream = _events(fh, stop=second.split if second else None)

            def late() -> None:
                nonlocal second
                if second is None and isinstance(fh, Spooled):
                    second = _Split.late(fh, stream, spill)

            first = _read_runs(stream, 0, sink, memo, tables.append, between=late)
            if not stream.stopped:
                rest, rest_at = stream.rest, stream.rest_at
            else:
                assert second is not None
                half = second.result()
                if half is None:  # the helper failed: its half is read here instead
                    with open(second.path, "rb") as plain:
                        plain.seek(second.split)
                        tail = _events(plain, inside=True)
                        try:
                            _read_runs(tail, first, sink, memo, tables.append)
                        except BadArray as e:
                            if e.at is not None:  # counted from the split
                                e.at += second.split
                            raise
                    rest = stream.prefix + b"[]" + tail.rest
                    rest_at = second.split + tail.rest_at
                else:
                    hand_over(sink, half.rejects, first)
                    lines = pc.add(half.table["line"], first)
                    tables.append(half.table.set_column(0, "line", lines))
                    rest = stream.prefix + b"[]" + half.rest
                    rest_at = second.split + half.rest_at
    finally:
        if second is not None:
            second.close()
    try:
        header = _HEADER.decode(rest)
    except msgspec.DecodeError as e:
        raise InputError(path, None, None, f"not a Chrome trace: {e}") from None
    events_end = len(stream.prefix) + 2  # `rest` holds `[]` where the events were
    view = memoryview(rest)
    _refuse_repeated_keys(path, [(0, view[:events_end]), (rest_at, view[events_end:])])
    return header


def _whole(path: Path, sink: Sink, memo: RunMemo, tables: list[pa.Table]) -> Header:
    """The document decoded whole, its events one by one (layouts streaming refuses)."""
    with open_bytes(path) as fh:
        data = fh.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        why = f"a trace that cannot be streamed may hold at most {MAX_DOCUMENT_BYTES} bytes"
        raise InputError(path, None, "traceEvents", why)
    try:
        doc = _WHOLE.decode(data)
    except msgspec.DecodeError as e:
        end = f" (the document ends at byte {len(data):,})" if "truncated" in str(e) else ""
        raise InputError(path, None, "traceEvents", f"not a Chrome trace: {e}{end}") from None
    _refuse_repeated_keys(path, [(0, memoryview(data))])
    if len(doc.traceEvents) > MAX_EVENTS:
        raise TooManyEvents
    for start in range(0, len(doc.traceEvents), EVENTS_PER_RUN):
        run = decode_each(doc.traceEvents[start : start + EVENTS_PER_RUN])
        rejects: list[Reject] = []
        table = run_columns(run, start, rejects, memo)
        hand_over(sink, rejects)
        if table is not None:
            tables.append(table)
    return doc


def _refuse_repeated_keys(path: Path, pieces: list[tuple[int, memoryview]]) -> None:
    """Refuse a document whose top-level object names a key twice (`pieces`: its bytes
    without the events, each with its offset in the file). JSON readers disagree on which
    one counts (msgspec and json, so HTA, take the last; the stream takes the first
    `traceEvents`), so any choice could drop events or device data without a word."""
    scan = TopKeys()
    for at, piece in pieces:
        # fed a chunk at a time: the scan holds one chunk's copies, not the document's
        for i in range(0, len(piece), CHUNK):
            if scan.done:
                break
            scan.feed(bytes(piece[i : i + CHUNK]), at + i)
    found = scan.repeated()
    if found is not None:
        key, first, again = found
        why = (
            f"top-level key named twice (byte {first:,} and byte {again:,} of the JSON text); "
            "readers disagree on which counts: keep one"
        )
        raise InputError(path, None, key, why)


_DEVICE_KEYS = frozenset(
    {"name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms", "warpSize", "gcnArchName"}
)


def _environment(sink: Sink, trace: Header) -> None:
    devices = trace.deviceProperties or []
    names = sorted({str(d.get("name")) for d in devices if d.get("name")})
    extra = {
        # the profiler observed the run; which runtime served it the trace does not say, so the
        # record states no `runtime` (beside a serving log's it would read as a second runtime)
        "profiler": "pytorch-profiler",
        "device_count": len(devices),
        # what recognises the device for its roofline (name, units, memory, architecture)
        "device_properties": {
            k: v for k, v in (devices[0] if devices else {}).items() if k in _DEVICE_KEYS
        }
        or None,
        "schemaVersion": trace.schemaVersion,
        "distributedInfo": trace.distributedInfo,
    }
    sink.add(
        "environment",
        None,
        {
            **dict.fromkeys(ENVIRONMENT_KEYS),
            "side": "runtime",
            "hardware": ", ".join(names) or None,
            "extra": msgspec.json.encode(extra).decode(),
        },
    )
