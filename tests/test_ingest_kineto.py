"""The Kineto (PyTorch profiler) reader on HTA's real traces, with counts checked against a plain
json reading of the same files, and on malformed traces."""

from __future__ import annotations

import bisect
import gzip
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

HTA = REALDATA / "hta"
TRACELENS = REALDATA / "tracelens"
TRACES = sorted(p for p in HTA.rglob("*.json.gz") if not p.name.endswith("_et.json.gz"))
ALL_TRACES = TRACES + sorted(TRACELENS.rglob("*.json.gz"))
pytestmark = pytest.mark.skipif(
    not HTA.is_dir(), reason="../shared/realdata is not beside the repo"
)


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path) as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


def op_rows(ds: Dataset) -> list[dict[str, Any]]:
    cur = ds.connect().execute("SELECT * FROM op_exec ORDER BY line")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


@pytest.mark.slow
@pytest.mark.parametrize("trace", ALL_TRACES, ids=lambda p: str(p.relative_to(REALDATA)))
def test_every_real_trace_is_read_completely(tmp_path: Path, trace: Path) -> None:
    assert detect(trace).name == "kineto"
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, trace)
    events = load(trace)["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X" and (e.get("cat") or "").lower() != "trace"]
    assert res.rows["op_exec"] == len(complete)
    assert res.rejected == 0
    assert res.rows["environment"] == 1


@pytest.mark.parametrize(
    "trace", sorted(TRACELENS.glob("*/*.json.gz")), ids=lambda p: str(p.relative_to(TRACELENS))
)
def test_a_trace_that_begins_with_other_keys_is_detected(trace: Path) -> None:
    # the H100 and MI300X traces open with a 25 KB `metadata` object: the head holds no
    # `traceEvents`, so detection streams the top-level keys
    assert detect(trace).name == "kineto"


@pytest.mark.slow
def test_control_trace_counts_and_links(tmp_path: Path) -> None:
    trace = HTA / "trace_diff" / "control" / "control.json.gz"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "ranker"})
    rows = op_rows(ds)
    cats = Counter(r["category"] for r in rows)
    assert cats == {
        "cpu_op": 40506,
        "runtime": 24692,
        "kernel": 8568,
        "memset": 654,
        "annotation": 288,
        "memcpy": 228,
    }
    assert {r["workload"] for r in rows} == {"ranker"}
    assert sum(1 for r in rows if r["category"] == "cpu_op" and r["shape"]) == 36468
    kernels = [r for r in rows if r["category"] == "kernel"]
    assert Counter(r["stream"] for r in kernels) == {"7": 8298, "20": 210, "21": 60}
    assert {r["device"] for r in kernels} == {3}
    # kernel -> launch (correlation) -> the innermost cpu_op around the launch: checked here by
    # a brute-force scan of the raw json for a sample of kernels
    events = load(trace)["traceEvents"]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    starts = [e["ts"] for e in ops]
    checked = 0
    for k in kernels[::97]:
        launch = launches[k["correlation"]]
        i = bisect.bisect_right(starts, launch["ts"])
        holding = [
            o for o in ops[:i] if o["tid"] == launch["tid"] and o["ts"] + o["dur"] >= launch["ts"]
        ]
        if not holding:
            assert k["shape"] is None
            continue
        inner = max(holding, key=lambda o: (o["ts"], -o["dur"]))
        dims = inner["args"].get("Input Dims")
        want = ";".join("x".join(map(str, t)) or "()" for t in dims) if dims else None
        assert k["shape"] == want, (k["name"], inner["name"])
        checked += 1
    assert checked > 50
    env = ds.connect().execute("SELECT side, hardware, extra FROM environment").fetchone()
    assert env is not None
    assert env[:2] == ("runtime", "NVIDIA A100-PG509-200")
    assert json.loads(env[2])["device_count"] == 8


def test_amd_trace_links_by_external_id(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, HTA / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    rows = op_rows(ds)
    kernels = [r for r in rows if r["category"] == "kernel"]
    assert len(kernels) == 14
    assert all(r["shape"] for r in kernels)
    launches = [r for r in rows if r["category"] == "runtime"]
    assert any(r["name"] == "hipLaunchKernel" for r in launches)


def test_legacy_schema(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, HTA / "trace_file_list" / "inference_rank_1.json.gz")
    cats = Counter(r["category"] for r in op_rows(ds))
    assert res.rows["op_exec"] == 12
    assert cats == {"runtime": 8, "kernel": 4}


def test_execution_trace_is_not_mistaken_for_kineto(tmp_path: Path) -> None:
    """A PyTorch execution trace (an op graph without times) is skipped as what it is."""
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, HTA / "execution_trace" / "benchmark_simple_add_et.json.gz")
    assert (res.status, res.format, res.rows) == ("skipped", "execution-trace", {})
    assert ds.live() == {}


def write_trace(path: Path, events: list[Any], raw_tail: str = "") -> Path:
    body = json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": events})
    path.write_bytes(gzip.compress((body[:-2] + raw_tail + "]}" if raw_tail else body).encode()))
    return path


GOOD = {
    "ph": "X",
    "cat": "kernel",
    "name": "k",
    "pid": 0,
    "tid": 7,
    "ts": 10.0,
    "dur": 2.0,
    "args": {"stream": 7, "correlation": 1, "device": 0},
}


@pytest.mark.parametrize(
    ("event", "field", "reason"),
    [
        ({**GOOD, "ts": "soon"}, None, "traceEvents[1]"),
        ({**GOOD, "dur": -3.0}, "dur", "negative duration"),
        ({**GOOD, "dur": None}, "dur", "finite ts and dur"),
        ({**GOOD, "name": 42}, "name", "no name"),
        ([1, 2], None, "traceEvents[1]"),
    ],
)
def test_malformed_events(tmp_path: Path, event: Any, field: str | None, reason: str) -> None:
    f = write_trace(tmp_path / "t.json.gz", [GOOD, event, GOOD])
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as err:
        ingest_file(ds, f)
    assert err.value.line == 2
    assert err.value.field == field
    assert reason in err.value.reason
    res = ingest_file(ds, f, policy="quarantine")
    assert (res.rows["op_exec"], res.rejected) == (2, 1)


def test_truncated_trace(tmp_path: Path) -> None:
    body = json.dumps(
        {"schemaVersion": 1, "deviceProperties": [], "traceEvents": [GOOD] * 2000}
    ).encode()
    f = tmp_path / "cut.json.gz"
    packed = gzip.compress(body)
    f.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(InputError, match=r"unreadable|not a Chrome trace"):
        ingest_file(Dataset(tmp_path / "ds", create=True), f)


@pytest.mark.parametrize("damage", ["cut", "bad byte", "bad byte after"])
def test_a_broken_trace_names_the_byte(tmp_path: Path, damage: str) -> None:
    """A trace cut short or holding a bad character is refused in one line with the byte
    where it broke (in the file, not in the buffer the decoder saw)."""
    events = [{**GOOD, "name": f"k{i}"} for i in range(500)]
    raw = json.dumps({"schemaVersion": 1, "traceEvents": events, "after": [1, 2]}).encode()
    if damage == "cut":
        raw, where = raw[: len(raw) // 2], len(raw) // 2
    else:
        where = raw.index(b"k250") if damage == "bad byte" else raw.index(b"[1, 2]") + 1
        raw = raw[:where] + b"\x00" + raw[where + 1 :]
    f = tmp_path / "t.json"
    f.write_bytes(raw)
    with pytest.raises(InputError) as err:
        ingest_file(Dataset(tmp_path / "ds", create=True), f)
    assert f"invalid JSON at byte {where:,}:" in err.value.reason
    assert err.value.lines() == [str(err.value)]


def test_streamed_runs_cut_only_between_events(tmp_path: Path) -> None:
    """Runs of a few hundred bytes: cuts land next to `}, {` inside strings and nested lists,
    the array sits between other keys, and every event still arrives once, in order."""
    from mapreport.ingest import jsonarray
    from mapreport.ingest.kineto_columns import decode_run

    events = [
        {**GOOD, "name": f'k{i} }}, {{ "x": [{{}}, {{}}]', "args": {**GOOD["args"], "n": [{}, {}]}}
        for i in range(300)
    ]
    doc = {"schemaVersion": 1, "traceEvents": events, "distributedInfo": {"ranks": [[0], [1]]}}
    raw = json.dumps(doc, indent=1).encode()
    import io

    stream = jsonarray.ArrayStream(
        io.BytesIO(raw), b"traceEvents", decode_run, lambda r: len(r.events), block=512
    )
    runs = list(stream)
    assert len(runs) > 20
    names = [e.name for r in runs for e in r.events if e is not None]
    assert names == [e["name"] for e in events]
    assert json.loads(stream.rest) == {**doc, "traceEvents": []}
    assert raw[stream.rest_at :] == stream.rest[len(stream.prefix) + 2 :]


def test_an_array_that_closes_early_is_read_to_the_end_at_once() -> None:
    """A first `traceEvents` that is `[]`, megabytes of document after it: the first run's
    decode stops with trailing characters, which proves the array closed, and the rest is
    read whole. Trying a run at every cut of every block instead copied the growing buffer
    for each: 8 s for a 51 MiB trace, quadratic in its size."""
    import io

    from mapreport.ingest import jsonarray
    from mapreport.ingest.kineto_columns import decode_run

    doc = {"traceEvents": [], "more": [GOOD] * 2000}
    raw = json.dumps(doc).encode()
    calls = 0

    def decode(data: bytes) -> Any:
        nonlocal calls
        calls += 1
        return decode_run(data)

    stream = jsonarray.ArrayStream(
        io.BytesIO(raw), b"traceEvents", decode, lambda r: len(r.events), block=4096
    )
    assert [len(r.events) for r in stream] == [0]
    assert json.loads(stream.rest) == doc
    assert stream.rest_at == raw.index(b"[]") + 2
    assert calls <= 3


def test_not_streamable_layout_is_read_whole(tmp_path: Path) -> None:
    """`"traceEvents": [` inside a string before the real key: the document is read whole."""
    body = json.dumps(
        {"note": 'a "traceEvents": [ inside a string', "traceEvents": [GOOD, GOOD]}
    ).encode()
    f = tmp_path / "t.json"
    f.write_bytes(body)
    res = ingest_file(Dataset(tmp_path / "ds", create=True), f)
    assert res.rows["op_exec"] == 2


EVENT = json.dumps(GOOD)


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        # the first, empty list was read and the events dropped without a word
        ('{"schemaVersion": 1, "traceEvents": [], "x": 1, "traceEvents": [@, @]}', "traceEvents"),
        ('{"traceEvents": [@], "deviceProperties": [], "traceEvents": [@]}', "traceEvents"),
        # metadata: msgspec kept the last device list, a stream of the keys the first
        (
            '{"deviceProperties": [{"name": "A"}], "traceEvents": [@], "deviceProperties": []}',
            "deviceProperties",
        ),
        (
            '{"distributedInfo": {"rank": 0}, "distributedInfo": {}, "traceEvents": [@]}',
            "distributedInfo",
        ),
        # read whole (a `"traceEvents": [` inside a string comes first)
        ('{"n": "\\"traceEvents\\": [", "traceEvents": [@], "n": 2}', "n"),
    ],
)
@pytest.mark.parametrize("packed", [False, True])
def test_a_top_level_key_named_twice_is_refused(
    tmp_path: Path, doc: str, key: str, packed: bool
) -> None:
    """JSON readers disagree on which of two same-named keys counts: the trace is refused
    in one line naming the key and where both are (bytes of the JSON text)."""
    data = doc.replace("@", EVENT).encode()
    f = tmp_path / ("t.json.gz" if packed else "t.json")
    f.write_bytes(gzip.compress(data) if packed else data)
    with pytest.raises(InputError) as err:
        ingest_file(Dataset(tmp_path / "ds", create=True), f)
    first, second = data.index(b'"%s"' % key.encode()), data.rindex(b'"%s"' % key.encode())
    assert err.value.field == key
    assert f"byte {first:,} and byte {second:,}" in err.value.reason
    assert err.value.lines() == [str(err.value)]
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_a_key_named_twice_after_the_events_of_a_split_trace(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Read by two processes, the offset of a key after the events is the same as read by
    one: the helper says where its part of the document begins."""
    events = [{**GOOD, "name": f"k{i}", "ts": float(i)} for i in range(3000)]
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}
    raw = json.dumps(doc, indent=1).encode()
    f = tmp_path / "t.json"
    f.write_bytes(raw[:-2] + b',\n "schemaVersion": 2}')
    one, two, used = _one_and_two_processes(tmp_path, f, monkeypatch)
    assert used == [True]
    assert two == one
    data = f.read_bytes()
    first, second = data.index(b'"schemaVersion"'), data.rindex(b'"schemaVersion"')
    assert one[:3] == ("error", None, "schemaVersion")
    assert f"byte {first:,} and byte {second:,}" in one[3]

    def broken(path: Path, split: int, spill: Path) -> list[bytes]:
        raise MemoryError("simulated")

    from mapreport.ingest import kineto_events

    monkeypatch.setattr(kineto_events, "_second_half", broken)  # its half is read here
    assert _outcome(tmp_path, f, "three", None) == one


BERT = TRACELENS / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
ESCAPES = b'"' + b'\\\\\\"' * 300_000 + b'"'


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mutation", "error"),
    [
        # a metadata string of escapes (what cost the key scanner 45 s per 64 MiB)
        (lambda d: d.replace(b"{", b'{"notes": ' + ESCAPES + b", ", 1), None),
        (lambda d: d.replace(b'"metadata": {', b'"metadata": {"x": ' + ESCAPES + b", ", 1), None),
        (lambda d: d.replace(b'"traceEvents"', b'"m": [' + ESCAPES + b'], "traceEvents"', 1), None),
        # the same key twice: refused in one line
        (lambda d: d[: d.rindex(b"}")] + b', "traceEvents": []}', "traceEvents"),
        (lambda d: d.replace(b"{", b'{"traceEvents": [], ', 1), "traceEvents"),
        (lambda d: d[: d.rindex(b"}")] + b', "metadata": {}}', "metadata"),
        # cut short: before, inside and after the events
        (lambda d: d[: len(d) // 200], "format not recognised"),  # no traceEvents key
        (lambda d: d[: len(d) // 2], "not a Chrome trace"),
        (lambda d: d[:-1], "not a Chrome trace"),
    ],
)
def test_a_real_trace_mutated_reads_the_same_or_fails_in_one_line(
    tmp_path: Path, mutation: Any, error: str | None
) -> None:
    """TraceLens's bert-small trace (a `metadata` object before `traceEvents`): an escape-heavy
    metadata string changes no row; a repeated key or a cut gives one line naming the file."""
    data = gzip.decompress(BERT.read_bytes())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    original = tmp_path / "a" / "trace.json"
    original.write_bytes(data)
    mutated = tmp_path / "b" / "trace.json"
    mutated.write_bytes(mutation(data))
    want = _outcome(tmp_path, original, "one", None)
    got = _outcome(tmp_path, mutated, "two", None)
    if error is None:
        assert got == want
        return
    assert got[0] == "error"
    assert error in (got[2] or "") + got[3]
    assert "\n" not in got[3]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 60), st.integers(0, 30)),
        min_size=1,
        max_size=25,
    ),
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 90)), min_size=1, max_size=15),
)
def test_launch_sweep_finds_the_innermost_holding_op(
    ops: list[tuple[int, int, int]], launches: list[tuple[int, int]]
) -> None:
    """Against brute force: of the ops on the launch's thread with start <= t <= end, the one
    with the latest start (at equal starts the shorter); spans may overlap without nesting."""
    import numpy as np
    import pyarrow as pa

    from mapreport.ingest.kineto_link import _sweep

    n_ops = len(ops)
    rows = pa.table(
        {
            "pid": pa.array(["1"] * (n_ops + len(launches))),
            "tid": pa.array([str(t) for t, _, _ in ops] + [str(t) for t, _ in launches]),
            "ts_us": pa.array([float(s) for _, s, _ in ops] + [float(t) for _, t in launches]),
            "dur_us": pa.array([float(d) for _, _, d in ops] + [0.0] * len(launches)),
            "correlation": pa.array([None] * n_ops + list(range(len(launches))), pa.int64()),
        }
    )
    key = np.arange(len(rows), dtype=np.int64) + 100
    corr, op = _sweep(rows, np.arange(n_ops, len(rows)), np.arange(n_ops), key)
    got = dict(zip(corr.tolist(), op.tolist(), strict=True))
    for c, (thread, t) in enumerate(launches):
        holding = [
            (s, -d, i) for i, (th, s, d) in enumerate(ops) if th == thread and s <= t <= s + d
        ]
        want = max(holding)[2] + 100 if holding else None
        if want is None:
            assert c not in got
        else:  # equal (start, duration): either op is the innermost
            best = max(holding)[:2]
            assert got[c] - 100 in [i for s, nd, i in holding if (s, nd) == best]


def test_streamed_lines_and_rejections_across_runs(tmp_path: Path, monkeypatch: Any) -> None:
    """Many runs: every row keeps its event's index as its line, and a malformed event in a
    middle run is rejected by its index (abort) or quarantined while the rest are kept."""
    from mapreport.ingest import jsonarray

    monkeypatch.setattr(jsonarray, "BLOCK", 600)
    events: list[Any] = [{**GOOD, "name": f"k{i}", "ts": float(i)} for i in range(400)]
    events[150] = {**GOOD, "ts": "soon"}
    events[151] = {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x"}}
    f = write_trace(tmp_path / "t.json.gz", events)
    with pytest.raises(InputError) as err:
        ingest_file(Dataset(tmp_path / "ds", create=True), f)
    assert (err.value.line, err.value.field) == (151, None)
    assert "traceEvents[150]" in err.value.reason
    ds = Dataset(tmp_path / "ds2", create=True)
    res = ingest_file(ds, f, policy="quarantine")
    assert (res.rows["op_exec"], res.rejected) == (398, 1)
    rows = ds.connect().execute("SELECT line, name FROM op_exec ORDER BY line").fetchall()
    assert rows == [(i + 1, f"k{i}") for i in range(400) if i not in (150, 151)]


def _outcome(tmp_path: Path, f: Path, name: str, policy: str | None) -> Any:
    """What ingesting `f` leaves: counts and rows of every table (or the error it raised)."""
    ds = Dataset(tmp_path / name, create=True)
    try:
        res = ingest_file(ds, f, policy=policy)  # type: ignore[arg-type]
    except InputError as e:
        return ("error", e.line, e.field, e.reason)
    con = ds.connect()
    tables = {}
    for table, cols in (
        ("op_exec", "* EXCLUDE (source_id)"),
        ("environment", "* EXCLUDE (source_id)"),
        ("quarantine", "line, field, reason, raw"),
    ):
        if res.rows.get(table):
            tables[table] = con.execute(f"SELECT {cols} FROM {table} ORDER BY line").fetchall()
    return res.rows, res.rejected, tables


def _one_and_two_processes(
    tmp_path: Path, f: Path, monkeypatch: Any, policy: str | None = None
) -> tuple[Any, Any, list[bool]]:
    """The outcome read by this process alone and with a forked helper for the second half;
    and, per helper started, whether its half was used."""
    from mapreport.ingest import helper
    from mapreport.ingest import kineto_events as kineto

    used: list[bool] = []
    real = kineto._Split.result

    def result(self: Any) -> Any:
        half = real(self)
        used.append(half is not None)
        return half

    monkeypatch.setattr(kineto._Split, "result", result)
    monkeypatch.setattr(helper, "MIN_BYTES", 1 << 62)
    one = _outcome(tmp_path, f, "one", policy)
    monkeypatch.setattr(helper, "MIN_BYTES", 0)
    two = _outcome(tmp_path, f, "two", policy)
    return one, two, used


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: str(p.relative_to(HTA)))
def test_two_processes_read_a_trace_as_one_does(
    tmp_path: Path, trace: Path, monkeypatch: Any
) -> None:
    """A large plain trace is read by two processes (a forked helper takes the events after
    an element boundary near the middle): every table ends exactly as one process leaves it.
    Every real trace, unpacked, is read both ways (size threshold lowered to 0)."""
    f = tmp_path / "trace.json"
    f.write_bytes(gzip.decompress(trace.read_bytes()))
    one, two, used = _one_and_two_processes(tmp_path, f, monkeypatch)
    assert two == one
    # the split guess lands among the events unless they are a small part of the file
    assert used in ([True], [])
    if trace.parent.name == "control":
        assert used == [True]


def _plain_trace(path: Path, events: list[Any]) -> Path:
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events, "after": [1]}
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.mark.parametrize("policy", ["quarantine", None])
def test_two_processes_reject_the_same_events(
    tmp_path: Path, monkeypatch: Any, policy: str | None
) -> None:
    """Malformed and invalid events on both sides of the split: the same rejections, lines
    and messages (event numbers of the helper's half are shifted by the events before it),
    and under `abort` the same first bad event."""
    events: list[Any] = [{**GOOD, "name": f"k{i}", "ts": float(i)} for i in range(3000)]
    events[10] = {**GOOD, "dur": -1.0}
    events[2500] = {**GOOD, "ts": "soon"}
    events[2600] = [1, 2]
    if policy is None:  # abort: the first bad event is in the helper's half
        events[10] = GOOD
    f = _plain_trace(tmp_path / "t.json", events)
    one, two, used = _one_and_two_processes(tmp_path, f, monkeypatch, policy)
    assert two == one
    assert used == [True]
    if policy is None:
        assert one[:3] == ("error", 2501, None)
        assert "traceEvents[2500]" in one[3]
    else:
        assert one[1] == 3
        assert [r[0] for r in one[2]["quarantine"]] == [11, 2501, 2601]


def test_a_split_inside_an_event_is_dropped(tmp_path: Path, monkeypatch: Any) -> None:
    """When the guessed split is not an element start (here `}, {` inside a name), this
    process's last run does not decode there, the helper's work is dropped and this process
    reads the whole array."""
    from mapreport.ingest import kineto_events as kineto

    events = [{**GOOD, "name": f"k{i} }}, {{ x"} for i in range(3000)]
    f = _plain_trace(tmp_path / "t.json", events)
    raw = f.read_bytes()
    inside = raw.index(b"k1500 }, { x") + len(b"k1500 }, ")

    def start(cls: Any, path: Path, spill: Path) -> Any:
        return cls(path, inside, spill)

    monkeypatch.setattr(kineto._Split, "start", classmethod(start))
    one, two, used = _one_and_two_processes(tmp_path, f, monkeypatch)
    assert used == []  # never asked: the split did not prove itself
    assert two == one
    assert one[0]["op_exec"] == 3000


def test_a_split_before_the_events_is_dropped(tmp_path: Path, monkeypatch: Any) -> None:
    """A document whose events start after the split guess (a long `deviceProperties` list of
    objects first, so the guess is a `}, {` between two devices): the helper's work is
    dropped and this process reads every event."""
    devices = [{"id": i, "name": f"gpu{i}", "totalGlobalMem": 1 << 34} for i in range(20000)]
    events = [{**GOOD, "name": f"k{i}", "ts": float(i)} for i in range(500)]
    doc = {"schemaVersion": 1, "deviceProperties": devices, "traceEvents": events}
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc))
    one, two, used = _one_and_two_processes(tmp_path, f, monkeypatch)
    assert used == []
    assert two == one
    assert one[0]["op_exec"] == 500


def test_a_stop_before_the_array_is_never_taken() -> None:
    """`ArrayStream(stop=...)` with the stop anywhere before the array's elements (inside the
    document's other keys): it is ignored, nothing is `stopped`, every element arrives."""
    import io

    from mapreport.ingest.jsonarray import ArrayStream
    from mapreport.ingest.kineto_columns import decode_run

    events = [{**GOOD, "name": f"k{i}"} for i in range(40)]
    raw = json.dumps(
        {"deviceProperties": [{"id": i} for i in range(8)], "traceEvents": events}
    ).encode()
    start = raw.index(b"[", raw.index(b'"traceEvents"')) + 1
    for stop in range(1, start + 1):
        stream = ArrayStream(
            io.BytesIO(raw), b"traceEvents", decode_run, lambda r: len(r.events), 256, stop
        )
        names = [e.name for run in stream for e in run.events if e is not None]
        assert (stream.stopped, names) == (False, [e["name"] for e in events]), stop


def test_a_failed_helper_half_is_read_here(tmp_path: Path, monkeypatch: Any) -> None:
    """A helper that fails (here: it raises at once) costs time, not rows: this process
    reads the second half itself."""
    from mapreport.ingest import kineto_events as kineto

    def broken(path: Path, split: int, spill: Path) -> list[bytes]:
        raise MemoryError("simulated")

    monkeypatch.setattr(kineto, "_second_half", broken)
    events = [{**GOOD, "name": f"k{i}", "ts": float(i)} for i in range(3000)]
    f = _plain_trace(tmp_path / "t.json", events)
    one, two, used = _one_and_two_processes(tmp_path, f, monkeypatch)
    assert used == [False]
    assert two == one


def test_helper_reply_or_none() -> None:
    """A helper's messages come back whole; an exception or a crash in it is None."""
    import os

    from mapreport.ingest.helper import Helper

    def run(work: Any) -> Any:
        h = Helper(work)
        try:
            return h.result()
        finally:
            h.close()

    assert run(lambda: [b"a", b"", b"x" * 300_000]) == [b"a", b"", b"x" * 300_000]
    assert run(lambda: 1 / 0) is None
    assert run(lambda: os._exit(3)) is None


def test_helpers_off_in_jobs_readers(monkeypatch: Any) -> None:
    """`helper.disable` (called when an `ingest --jobs` reader process starts) turns helpers
    off in that process; size and gzip decide otherwise."""
    import os

    from mapreport.ingest import helper

    monkeypatch.setattr(helper, "_enabled", True)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert helper.available(helper.MIN_BYTES, b"{")
    assert not helper.available(helper.MIN_BYTES - 1, b"{")
    assert not helper.available(helper.MIN_BYTES, b"\x1f\x8b")
    helper.disable()
    assert not helper.available(helper.MIN_BYTES, b"{")


@pytest.mark.skipif(not HTA.is_dir(), reason="../shared/realdata is not beside the repo")
@pytest.mark.parametrize(
    ("trace", "day"),
    [
        ("mtia_inference_trace/mtia_inference_rank_0.json.gz", "2026-01-08"),
        ("nccl_parser_config/nccl_data.json.gz", "2024-05-23"),
        ("alexnet", None),  # epoch `ts` already, no base: unchanged (2023-09-27)
    ],
)
def test_relative_ts_move_onto_the_wall_clock_by_the_trace_base(
    tmp_path: Path, trace: str, day: str | None
) -> None:
    """PyTorch 2.x writes `ts` relative to `baseTimeNanoseconds`: such events get their
    wall-clock time (and their day partition); a trace already on the wall clock keeps its."""
    path = (
        HTA / "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
        if trace == "alexnet"
        else HTA / trace
    )
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, fmt="kineto")
    assert ds.days("op_exec") == [day or "2023-09-27"]
    if trace == "alexnet":
        (low,) = ds.connect().execute("SELECT min(ts_us) FROM op_exec").fetchone() or (None,)
        assert low == 1695835542514261.0  # as the file has it


def test_profiler_spans_line_up_with_the_servers_log(tmp_path: Path) -> None:
    """The real torch.compile case: each request's record_function span starts within a
    millisecond of the compute start the server logged (both on the wall clock now)."""
    from tests.test_torch_serving import CASE

    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, CASE / "profiler.json.gz", hints={"workload": "torch-serving"})
    ingest_file(ds, CASE / "serving.runtime.jsonl.gz")
    (n, worst, typical), *_ = (
        ds.connect()
        .execute(
            """
        SELECT count(*), max(abs(o.ts_us - r.compute_start_us)),
            median(abs(o.ts_us - r.compute_start_us))
        FROM op_exec o JOIN request r ON o.name LIKE 'request ' || r.request_id || ' %'
        WHERE r.arrival_known IS NULL  -- the server's log, not the spans' own requests
        """
        )
        .fetchall()
    )
    assert n == 400
    assert typical < 1_000
    assert worst < 20_000


@pytest.mark.parametrize("base", ['"abc"', "true", "1e400", "1" + "0" * 30, "-5", "null"])
def test_a_base_no_clock_can_use_leaves_the_times_alone(tmp_path: Path, base: str) -> None:
    doc = (
        '{"schemaVersion": 1, "deviceProperties": [], "baseTimeNanoseconds": ' + base + ", "
        '"traceEvents": [{"ph": "X", "name": "a", "cat": "cpu_op", "ts": 5284191360471.0, '
        '"dur": 3, "pid": 1, "tid": 1}]}'
    )
    f = tmp_path / "t.json"
    f.write_text(doc)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, f)
    assert ds.connect().execute("SELECT ts_us FROM op_exec").fetchall() == [(5284191360471.0,)]


def test_request_annotations_are_requests_without_an_arrival(tmp_path: Path) -> None:
    """`record_function("request <id> [<shape>]")` spans are requests (compute only: no arrival,
    so `arrival_known` is false); other annotations, a bad shape or no shape are handled."""
    span = {"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1}
    events = [
        {**span, "name": "request r1 batch=8,seq=32", "ts": 10.0, "dur": 5.0},
        {**span, "name": "request r2", "ts": 20.0, "dur": 1.0},
        {**span, "name": "request r3 b=not-a-number", "ts": 30.0, "dur": 1.0},
        {**span, "name": "requests are served here", "ts": 40.0, "dur": 1.0},
        {**span, "name": "request", "ts": 50.0, "dur": 1.0},
        {**span, "name": "request r4 batch=1 extra words", "ts": 60.0, "dur": 1.0},
        {"ph": "X", "cat": "cpu_op", "name": "request r5 batch=1", "ts": 70.0, "dur": 1.0},
    ]
    f = write_trace(tmp_path / "t.json", events)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, f, hints={"workload": "w"})
    got = (
        ds.connect()
        .execute(
            "SELECT request_id, shape, compute_start_us, compute_end_us, arrival_us, "
            "arrival_known, status FROM request ORDER BY compute_start_us"
        )
        .fetchall()
    )
    assert got == [
        ("r1", "batch=8,seq=32", 10.0, 15.0, 10.0, False, "ok"),
        ("r2", "unknown", 20.0, 21.0, 20.0, False, "ok"),
        ("r3", "unknown", 30.0, 31.0, 30.0, False, "ok"),
    ]


@pytest.mark.parametrize(
    ("name", "request_id", "shape"),
    [
        ("request#12 shape=8x128", "12", "8x128"),
        ("request:7 (8, 128)", "7", "8x128"),
        ("request 3 [4, 96]", "3", "4x96"),
        ("request 10 8×128", "10", "8x128"),
        ("request 4 batch=8 seq=128", "4", "batch=8,seq=128"),
        ("request 5 shape: batch=1,seq=64", "5", "batch=1,seq=64"),
        ("request 6 input_shape=(2, 3)", "6", "2x3"),
        ("request#8 ???", "8", "unknown"),
        ("request#9 shape=(1e999, 2)", "9", "unknown"),  # meant as a shape: a request still
    ],
)
def test_request_annotations_in_the_forms_servers_write(
    tmp_path: Path, name: str, request_id: str, shape: str
) -> None:
    """A request span's shape in the common annotation styles (a `shape=` key, a Python tuple
    or list, `×`, named dims separated by spaces) reads as our notation: a server that writes
    `request#12 shape=8x128` no longer gives every request the shape `unknown` (issue 34)."""
    span = {"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0}
    f = write_trace(tmp_path / "t.json", [{**span, "name": name}])
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, f, hints={"workload": "w"})
    got = ds.connect().execute("SELECT request_id, shape FROM request").fetchall()
    assert got == [(request_id, shape)]


def test_spans_whose_shape_does_not_read_are_counted_once_per_file(tmp_path: Path) -> None:
    """Kept with the shape `unknown`, and named once in the file's ingest note."""
    span = {"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "dur": 1.0}
    names = ["request 1 batch=8", "request 2 shape=(8, x)", "request 3 shape=oops", "request 4"]
    events = [{**span, "name": n, "ts": 10.0 * i} for i, n in enumerate(names)]
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, write_trace(tmp_path / "t.json", events), hints={"workload": "w"})
    assert res.rows["request"] == 4
    (note,) = res.notes
    assert note.startswith("2 request span(s) name a shape that does not read")
    assert "'request 2 shape=(8, x)'" in note


def test_a_configured_request_span_pattern(tmp_path: Path) -> None:
    """`run.request_span` / `ingest --request-span`: a server's own span names, with the id
    and the shape as named groups; the default names are then not taken."""
    span = {"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "dur": 1.0}
    names = ["infer id=42 input=(8, 128)", "infer id=43", "request r1 batch=1", "infer"]
    events = [{**span, "name": n, "ts": 10.0 * i} for i, n in enumerate(names)]
    hints = {"workload": "w", "request_span": r"infer id=(?P<id>\d+)(?: input=(?P<shape>.*))?"}
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, write_trace(tmp_path / "t.json", events), hints=hints)
    got = ds.connect().execute("SELECT request_id, shape FROM request ORDER BY 1").fetchall()
    assert got == [("42", "8x128"), ("43", "unknown")]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("request (\\d+)", "needs a named group `id`"), ("(?P<id>", "not a regular expression")],
)
def test_a_bad_request_span_pattern_is_refused_before_reading(
    tmp_path: Path, pattern: str, why: str
) -> None:
    from click.testing import CliRunner

    from mapreport.app.cli import main
    from mapreport.core.errors import ConfigError
    from mapreport.run.config import load_config

    cfg = tmp_path / "mapreport.toml"
    cfg.write_text(f"[run]\nrequest_span = {json.dumps(pattern)}\n")
    with pytest.raises(ConfigError, match=f"run.request_span: {why}"):
        load_config(cfg)
    args = ["ingest", "--dataset", str(tmp_path / "ds"), "--request-span", pattern, str(cfg)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2
    assert why in res.output


def test_what_torch_compile_ran_for_each_request(tmp_path: Path) -> None:
    """A span with a compiled region ran that graph: `static` when the graph was not compiled
    inside any request span, `adapted` once a span compiled it; no region, in a trace that
    has regions, is eager (`fallback`). The worker is the process, or the thread where one
    process serves on several threads."""

    def span(name: str, ts: float, dur: float, pid: int = 1, tid: int = 1) -> dict[str, Any]:
        cat = "user_annotation" if name.startswith("request") else "cpu_op"
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}

    events = [
        span("request a", 0, 10),
        span("Torch-Compiled Region: 0/0", 1, 8),
        span("request b", 20, 100),  # compiles 0/1, then runs it
        span("_compile.compile_inner (dynamo_timed)", 21, 80),
        span("Torch-Compiled Region: 0/1", 102, 10),
        span("request c", 200, 10),  # the graph compiled while serving, again
        span("Torch-Compiled Region: 0/1", 201, 8),
        span("request d", 300, 10),  # no compiled region: eager
        span("request e", 400, 10, pid=2, tid=7),  # another worker process, on two threads
        span("Torch-Compiled Region: 0/0", 401, 8, pid=2, tid=7),
        span("request f", 400, 10, pid=2, tid=8),
    ]
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, write_trace(tmp_path / "t.json", events), hints={"workload": "w"})
    got = ds.connect().execute(
        "SELECT request_id, core, plan_id, plan_variant FROM request ORDER BY 1"
    )
    assert got.fetchall() == [
        ("a", 1, "0/0", "static"),
        ("b", 1, "0/1", "adapted"),
        ("c", 1, "0/1", "adapted"),
        ("d", 1, None, "fallback"),
        ("e", 7, "0/0", "static"),
        ("f", 8, None, "fallback"),
    ]


def _spool_waited_for(monkeypatch: Any, block: int = 4096) -> None:
    """Small runs, and the helper's start waits for the spool to be whole (its process is
    quick, but a test must not depend on it being quicker than the reader)."""
    from mapreport.ingest import jsonarray
    from mapreport.ingest import kineto_events as kineto

    monkeypatch.setattr(jsonarray, "BLOCK", block)
    real = kineto._Split.late.__func__  # type: ignore[attr-defined]

    def late(cls: Any, fh: Any, stream: Any, spill: Path) -> Any:
        while fh.complete() is None:
            time.sleep(0.001)
        return real(cls, fh, stream, spill)

    monkeypatch.setattr(kineto._Split, "late", classmethod(late))


@pytest.mark.parametrize("policy", ["quarantine", None])
def test_a_gzip_trace_read_by_two_processes_as_by_one(
    tmp_path: Path, monkeypatch: Any, policy: str | None
) -> None:
    """A gzip trace is decompressed into a plain spool while it is read; once the spool is
    whole a helper reads its second half: the tables, rejections and first error are those
    of one process reading the stream alone."""
    events: list[Any] = [{**GOOD, "name": f"k{i}", "ts": float(i)} for i in range(3000)]
    events[10] = {**GOOD, "dur": -1.0}
    events[2500] = {**GOOD, "ts": "soon"}
    if policy is None:  # abort: the first bad event is in the helper's half
        events[10] = GOOD
    plain = _plain_trace(tmp_path / "t.json", events)
    f = tmp_path / "t.json.gz"
    f.write_bytes(gzip.compress(plain.read_bytes()))
    _spool_waited_for(monkeypatch)
    one, two, used = _one_and_two_processes(tmp_path, f, monkeypatch, policy)
    assert used == [True]
    assert two == one
    if policy is None:
        assert one[:3] == ("error", 2501, None)
    else:
        assert one[1] == 2
        assert one[0]["op_exec"] == 2998


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: str(p.relative_to(HTA)))
def test_real_gzip_traces_read_by_two_processes_as_by_one(
    tmp_path: Path, trace: Path, monkeypatch: Any
) -> None:
    """Every real gzip trace through the spool and a helper (size threshold lowered to 0):
    every table as one process reading the stream leaves it."""
    _spool_waited_for(monkeypatch, 1 << 18)
    one, two, used = _one_and_two_processes(tmp_path, trace, monkeypatch)
    assert two == one
    assert used in ([True], [])
    if trace.parent.name == "control":
        assert used == [True]
