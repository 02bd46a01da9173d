"""The columnar fast path of native runtime telemetry writes exactly what the per-record path
writes: the same rows, the same rejections with the same lines and reasons (property test
over generated files mixing good requests, events, unknown fields and every kind of bad
value), for JSON Lines and for Parquet."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mapreport.core.errors import InputError
from mapreport.ingest import READERS, fast, helper
from mapreport.ingest.native import NativeReader
from mapreport.ingest.records import Memo, container_of, head_bytes, iter_records
from mapreport.ingest.sink import Sink

GOOD: dict[str, Any] = {
    "workload": "w",
    "request_id": "r",
    "shape": {"batch": 4, "seq": 96},
    "arrival_us": 10.0,
    "queue_start_us": 11.0,
    "compute_start_us": 12.5,
    "compute_end_us": 20.0,
    "plan_id": "p",
    "plan_variant": "static",
    "core": 1,
    "stream": "s",
    "batch_size": 4,
    "mem_peak_bytes": 1000,
    "precision": "bf16",
    "status": "ok",
}
BREAKS: list[tuple[str, Any]] = [
    ("core", -1),
    ("batch_size", 0),
    ("mem_peak_bytes", 2**63),
    ("core", 2**62),
    ("arrival_us", 13.0),  # after compute start
    ("compute_end_us", 1.0),
    ("queue_start_us", 99.0),
    ("shape", {"batch": -1}),
    ("shape", {}),
    ("shape", {"1bad": 3}),
    ("shape", [[4, 96], [96, 768]]),  # positional: valid
    ("plan_variant", "turbo"),
    ("core", True),
    ("core", 1.5),
    ("arrival_us", "10"),
    ("workload", None),
    ("request_id", 17),  # an integer id: valid, written as "17"
    ("plan_id", 7),  # a number where a string is declared: valid, "7"
    ("status", None),
    ("slice", "prod"),
    ("queue_start_us", None),
    ("note", "an unknown field is kept in extra"),
    ("compute_start_us", 1e309),
    ("arrival_us", 1e300),  # valid JSON, not a time: beyond 2^53
    ("compute_end_us", 2.0**53 + 2),
    ("queue_start_us", -1.7e308),
]


def _line(kind: str, i: int, change: int) -> str:
    if kind == "event":
        return json.dumps({"event": "retune", "workload": "w", "ts_us": 5.0 + i, "dur_us": 2.0})
    if kind == "env":
        return json.dumps({"environment": {"hardware": "npu"}})
    if kind == "blank":
        return ""
    if kind == "garbage":
        return '{"workload": "w", "request_id": '
    if kind in ADVERSARIAL:
        return ADVERSARIAL[kind](json.dumps({**GOOD, "request_id": f"r{i}"}), change)
    rec = {**GOOD, "request_id": f"r{i}"}
    if kind == "bad":
        key, value = BREAKS[change % len(BREAKS)]
        if key == "compute_start_us" and value == 1e309:
            return json.dumps(rec).replace('"compute_start_us": 12.5', '"compute_start_us": 1e309')
        if value is None:
            rec.pop(key, None)
        else:
            rec[key] = value
    return json.dumps(rec)


ADVERSARIAL: dict[str, Callable[[str, int], str]] = {
    # lines that are not one whole JSON value, which joined with their neighbours by commas
    # could decode as other records (a request with status ",", shifted line numbers)
    "two_objects": lambda rec, c: rec + ("," if c % 2 else "") + rec.replace('"r', '"t'),
    "open_string": lambda rec, c: '{"workload": "w", "request_id": "o' + str(c) + '", "status": "',
    "close_string": lambda rec, c: '"}',
    "first_half": lambda rec, c: rec[: rec.index('"plan_id"')],
    "second_half": lambda rec, c: rec[rec.index('"plan_id"') :],
    "spaced": lambda rec, c: " " * (c % 3) + rec + "\t" * (c % 2),  # valid, with whitespace
    "crlf": lambda rec, c: rec + "\r",  # valid: a Windows line end
}


LINES = st.lists(
    st.tuples(
        st.sampled_from(
            ["good"] * 6 + ["bad"] * 3 + ["event", "env", "blank", "garbage", *ADVERSARIAL]
        ),
        st.integers(0, 1000),
    ),
    min_size=1,
    max_size=60,
)


def _staged(
    reader: NativeReader, path: Path, root: Path, slow: bool, two: bool = False
) -> dict[str, list[Any]]:
    """Every staged row of a file read by the per-record path (`slow`) or the fast path, in
    one process or (`two`) with a forked helper for the lines after 55% of the file."""
    sink = Sink(root, "src", path, "quarantine", {})
    if slow:
        container = container_of(path, head_bytes(path))
        assert container is not None
        for line, rec in iter_records(path, container):
            reader.one(sink, line, rec, container)
    else:
        with mock.patch.object(helper, "MIN_BYTES", 0 if two else 1 << 62):
            reader.read(path, sink)
    sink.enforce_unique()
    sink.close()
    out: dict[str, list[Any]] = {}
    for table in ("request", "adaptation_event", "environment", "quarantine"):
        files = sorted((root / table).rglob("*.parquet")) if (root / table).exists() else []
        rows = [r for f in files for r in pq.read_table(f).to_pylist()]
        out[table] = sorted(rows, key=lambda r: (r["line"] or 0, json.dumps(r, default=str)))
    return out


@pytest.mark.slow
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=LINES)
def test_jsonl_fast_path_equals_record_path(
    tmp_path_factory: Any, lines: list[tuple[str, int]]
) -> None:
    tmp = tmp_path_factory.mktemp("fast")
    path = tmp / "runtime.jsonl"
    text = [_line(kind, i, change) for i, (kind, change) in enumerate(lines)]
    if not next((t for t in text if t.strip()), "").startswith("{"):
        text.insert(0, json.dumps({**GOOD}))  # the first record is what detection reads
    path.write_text("\n".join(text) + "\n")
    reader = READERS["native-runtime"]
    assert isinstance(reader, NativeReader)
    slow = _staged(reader, path, tmp / "slow", True)
    assert _staged(reader, path, tmp / "fast", False) == slow
    assert _staged(reader, path, tmp / "two", False, two=True) == slow


def test_lines_that_merge_when_joined_are_not_taken_as_requests(tmp_path: Path) -> None:
    """The attack of issue 13 item 2: an unterminated string and a stray `"}` join into one
    record with status ","; a line of two objects keeps the count of elements right."""
    rec = json.dumps({**GOOD, "request_id": "a"})
    text = [
        rec,
        '{"workload": "w", "request_id": "x", "shape": {"b": 1}, "arrival_us": 1, '
        '"compute_start_us": 2, "compute_end_us": 3, "status": "',
        '"}',
        rec.replace('"a"', '"b"') + "," + rec.replace('"a"', '"c"'),
        rec.replace('"a"', '"d"'),
    ]
    path = tmp_path / "merge.jsonl"
    path.write_text("\n".join(text) + "\n")
    reader = READERS["native-runtime"]
    assert isinstance(reader, NativeReader)
    fast = _staged(reader, path, tmp_path / "fast", False)
    assert fast == _staged(reader, path, tmp_path / "slow", True)
    assert [(r["request_id"], r["line"]) for r in fast["request"]] == [("a", 1), ("d", 5)]
    assert [q["line"] for q in fast["quarantine"]] == [2, 3, 4]


@pytest.mark.slow
def test_jsonl_across_chunks(tmp_path: Path) -> None:
    """Lines that cross the 1 MiB read chunks, a bad line in the middle and no final newline."""
    rows = [
        json.dumps({**GOOD, "request_id": f"r{i}", "pad": "x" * (i % 300)}) for i in range(9000)
    ]
    rows[4321] = json.dumps({**GOOD, "request_id": "bad", "core": -3})
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(rows))
    reader = READERS["native-runtime"]
    assert isinstance(reader, NativeReader)
    fast = _staged(reader, path, tmp_path / "fast", False)
    assert fast == _staged(reader, path, tmp_path / "slow", True)
    assert fast == _staged(reader, path, tmp_path / "two", False, two=True)
    assert len(fast["request"]) == 8999
    assert [q["line"] for q in fast["quarantine"]] == [4322]


def test_parquet_fast_path_equals_record_path(tmp_path: Path) -> None:
    recs = []
    for i in range(500):
        rec = {**GOOD, "request_id": f"r{i}", "shape": "batch=4,seq=96"}
        if i % 50 == 7:
            rec["core"] = -1
        if i % 50 == 9:
            rec["compute_end_us"] = 0.0
        if i % 50 == 11:
            rec["shape"] = "seq=96,batch=4"  # not canonical order: canonicalised
        if i % 50 == 13:
            rec["plan_id"] = ""  # an empty cell is a missing value
        if i % 50 == 17:
            rec["shape"] = "batch=x"
        recs.append(rec)
    path = tmp_path / "runtime.parquet"
    pq.write_table(pa.Table.from_pylist(recs), path)
    reader = READERS["native-runtime"]
    assert isinstance(reader, NativeReader)
    fast = _staged(reader, path, tmp_path / "fast", False)
    assert fast == _staged(reader, path, tmp_path / "slow", True)
    assert len(fast["quarantine"]) == 30


def _two_halves(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n")
    return path


def test_two_processes_stage_what_one_does(tmp_path: Path) -> None:
    """A file read by two processes (the helper from the line after 55% of the bytes): lines
    longer than a read chunk on both sides of the split, an environment line and events,
    blank lines, bad lines on both sides and a request id repeated across the split all end
    exactly as one process leaves them."""
    rows = [json.dumps({**GOOD, "request_id": f"r{i}"}) for i in range(4000)]
    rows[0] = json.dumps({"environment": {"hardware": "npu"}})
    for i in (100, 3100):
        rows[i] = json.dumps({**GOOD, "request_id": f"long{i}", "pad": "x" * (1 << 21)})
    rows[200] = json.dumps({"event": "retune", "workload": "w", "ts_us": 1.0, "dur_us": 2.0})
    rows[3500] = json.dumps({"event": "retune", "workload": "w", "ts_us": 9.0, "dur_us": 2.0})
    rows[300] = rows[3300] = ""
    rows[400] = json.dumps({**GOOD, "request_id": "bad", "core": -3})
    rows[3400] = '{"workload": "w", "request_id": '
    rows[3600] = json.dumps({**GOOD, "request_id": "r5"})  # repeats line 6
    path = _two_halves(tmp_path / "t.jsonl", rows)
    reader = READERS["native-runtime"]
    assert isinstance(reader, NativeReader)
    one = _staged(reader, path, tmp_path / "one", False)
    two = _staged(reader, path, tmp_path / "two", False, two=True)
    assert two == one
    assert [q["line"] for q in one["quarantine"]] == [401, 3401, 3601]
    assert len(one["request"]) == 4000 - 1 - 2 - 2 - 3
    assert any(f.name.startswith("src-h") for f in (tmp_path / "two").rglob("*.parquet"))


@pytest.mark.parametrize("bad", [[2500], [500, 2500]], ids=["helper-half", "both-halves"])
def test_two_processes_abort_at_the_first_bad_line(tmp_path: Path, bad: list[int]) -> None:
    """Under `abort` the error names the file's first bad line, whichever process read it."""
    rows = [json.dumps({**GOOD, "request_id": f"r{i}"}) for i in range(3000)]
    for i in bad:
        rows[i] = json.dumps({**GOOD, "request_id": f"r{i}", "batch_size": 0})
    path = _two_halves(tmp_path / "t.jsonl", rows)
    reader = READERS["native-runtime"]
    errors = []
    for two in (False, True):
        sink = Sink(tmp_path / f"s{two}", "src", path, "abort", {})
        with (
            mock.patch.object(helper, "MIN_BYTES", 0 if two else 1 << 62),
            pytest.raises(InputError) as err,
        ):
            reader.read(path, sink)
        sink.abandon()
        errors.append((err.value.line, err.value.field, err.value.reason))
    assert errors[0] == errors[1] == (bad[0] + 1, "batch_size", "must be >= 1, got 0")


def test_a_failed_helper_half_is_read_here(tmp_path: Path) -> None:
    """A helper that fails after staging files: they are removed and this process reads the
    helper's lines itself, so the rows are those of one process."""

    def failing(path: Path, split: int, sink: Sink, slow_for: Any) -> list[bytes]:
        fast._read(path, split, None, fast._lines_before(path, split) + 1, sink, slow_for(sink))
        sink.close()
        raise MemoryError("simulated, after staging its half")

    rows = [json.dumps({**GOOD, "request_id": f"r{i}"}) for i in range(3000)]
    path = _two_halves(tmp_path / "t.jsonl", rows)
    reader = READERS["native-runtime"]
    assert isinstance(reader, NativeReader)
    one = _staged(reader, path, tmp_path / "one", False)
    with mock.patch.object(fast, "_second_half", failing):
        two = _staged(reader, path, tmp_path / "two", False, two=True)
    assert two == one
    assert not any(f.name.startswith("src-h") for f in (tmp_path / "two").rglob("*.parquet"))


def test_memo_of_raw_values_starts_over_past_its_limit() -> None:
    calls: list[bytes] = []

    def upper(raw: bytes) -> str:
        calls.append(raw)
        return raw.decode().upper()

    memo = Memo(upper, limit=3)
    assert [memo[b"a"], memo[b"a"], memo[b"b"]] == ["A", "A", "B"]
    assert calls == [b"a", b"b"]  # computed once per distinct value
    for i in range(10):
        assert memo[str(i).encode()] == str(i)
    assert len(memo) <= 3  # all-distinct values never grow it past its limit


def test_fast_struct_is_the_declared_request_record() -> None:
    from mapreport.ingest.native_spec import REQUEST

    assert set(fast.Request.__struct_fields__) == {f.raw for f in REQUEST.fields}
    required = {f.raw for f in REQUEST.fields if f.required}
    assert set(fast.Request.__struct_fields__[: len(required)]) == required
    ok = b'{"workload":"w","request_id":1,"shape":{"b":1},"arrival_us":0,'
    assert fast._ONE.decode(ok + b'"compute_start_us":1,"compute_end_us":2}').request_id == 1
    for refused in (b'"compute_start_us":1,"compute_end_us":2,"x":1}', b'"compute_start_us":1}'):
        with pytest.raises(msgspec.ValidationError):  # unknown field; a required one missing
            fast._ONE.decode(ok + refused)
    with pytest.raises(msgspec.ValidationError):  # plan_variant outside its choices
        fast._ONE.decode(ok + b'"compute_start_us":1,"compute_end_us":2,"plan_variant":"x"}')


def test_a_batch_of_lines_is_bounded_by_its_bytes(tmp_path: Path) -> None:
    """Batches hold BATCH_BYTES of lines at most (one line past it), however many lines the
    count allows: 65,536 lines of 1 MiB each were one 64 GiB batch, and an 8.9 MB gzip of them
    took 20 GB before the machine killed the ingest. Every line still comes, in order."""
    from mapreport.ingest import records

    path = tmp_path / "long.runtime.jsonl"
    line = b'{"workload": "w"}' + b" " * 983 + b"\n"  # 1,000 bytes
    path.write_bytes(line * 50)
    with mock.patch.object(records, "BATCH_BYTES", 10_000):
        batches = list(records.iter_jsonl_batches(path, 65_536))
    assert [len(b) for b in batches] == [10] * 5
    assert [n for b in batches for n, _ in b] == list(range(1, 51))
