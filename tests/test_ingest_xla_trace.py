"""The TensorFlow/JAX profiler's XLA traces: a JAX CPU run (a jitted dense layer at two batch
sizes, 5 calls each, `jax.profiler.trace`, jax 0.10.2) as the profiler wrote it, its trace JSON
and its XPlane, read into the same op_exec rows."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from mapreport.analysis import Thresholds
from mapreport.analysis.device.roofline import roofline
from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file

CORPUS = Path(__file__).parent / "corpus" / "xla"
TRACE = CORPUS / "jax_cpu_layer.trace.json.gz"
XPLANE = CORPUS / "jax_cpu_layer.xplane.pb"


def _kernels(ds: Dataset) -> list[tuple[str, str, float]]:
    rows = (
        ds.connect()
        .execute(
            """SELECT json_extract_string(extra, '$.op'), plan_id, dur_us FROM op_exec
           WHERE category = 'kernel' ORDER BY ts_us, dur_us"""
        )
        .fetchall()
    )
    return [(str(a), str(b), float(c)) for a, b, c in rows]


def test_the_trace_json_is_read_as_xla_ops(tmp_path: Path) -> None:
    assert detect(TRACE).name == "xla-trace"
    with gzip.open(TRACE) as fh:
        events = json.load(fh)["traceEvents"]
    hlo = [e for e in events if e.get("ph") == "X" and "hlo_op" in e.get("args", {})]
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, TRACE, hints={"workload": "jax"})
    assert res.rejected == 0
    assert res.rows["op_exec"] == sum(1 for e in events if e.get("ph") == "X")
    got = _kernels(ds)
    assert len(got) == len(hlo) == 384
    assert sum(d for *_, d in got) == pytest.approx(sum(e["dur"] for e in hlo))
    assert {m for _, m, _ in got} == {e["args"]["hlo_module"] for e in hlo}
    # the jitted layer compiled to two fusions (the dot, the gelu's multiplies), each run
    # once per call: 2 batch sizes x 5 calls
    layer = [x for x in got if x[1] == "jit_layer"]
    assert sorted({op for op, *_ in layer}) == [
        "jit_layer:multiply_multiply_fusion",
        "jit_layer:ynn_fusion",
    ]
    assert len(layer) == 20


def test_the_op_table_holds_each_module_instruction(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, TRACE, hints={"workload": "jax"})
    rf = roofline(ds.connect(), "jax", "", Thresholds())
    assert rf is not None
    ops = {x.op: x for x in rf.rows}
    assert ops["jit_layer:ynn_fusion"].calls == 10
    assert rf.device is None  # a CPU trace gets a roofline only from [device]


def test_the_xplane_reads_as_its_trace_json(tmp_path: Path) -> None:
    pytest.importorskip("xprof")
    assert detect(XPLANE).name == "xplane"
    a = Dataset(tmp_path / "a", create=True)
    ingest_file(a, TRACE, hints={"workload": "jax"})
    b = Dataset(tmp_path / "b", create=True)
    copy = tmp_path / "in" / XPLANE.name
    copy.parent.mkdir()
    copy.write_bytes(XPLANE.read_bytes())
    ingest_file(b, copy, hints={"workload": "jax"})
    assert sorted(_kernels(b)) == sorted(_kernels(a))
    # the converter's caches are written in the staging folder, never beside the input
    assert sorted(p.name for p in copy.parent.iterdir()) == [XPLANE.name]


def test_without_xprof_an_xplane_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "xprof", None)
    monkeypatch.setitem(sys.modules, "xprof.convert", None)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError, match=r"needs xprof: .* -m pip install -e '.*\[xplane\]'"):
        ingest_file(ds, XPLANE, hints={"workload": "jax"})


def test_a_hostile_xplane_is_refused_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("xprof")
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f" + b"\x00" * 64)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError, match=r"bad\.xplane\.pb"):
        ingest_file(ds, bad, hints={"workload": "jax"})


def test_malformed_events_are_rejected_by_their_index(tmp_path: Path) -> None:
    """A bad event names its position in traceEvents and loses nothing else: no name, a ts
    that is not a number, a negative or absurd dur; under quarantine the rest is read."""
    proc = {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}}
    op = {"ph": "X", "pid": 1, "tid": 2, "args": {"hlo_op": "dot.1", "hlo_module": "jit_f"}}
    events = [
        proc,
        {**op, "name": "dot.1", "ts": 1.0, "dur": 2.0},
        {**op, "ts": 3.0, "dur": 1.0},
        {**op, "name": "dot.1", "ts": "soon", "dur": 1.0},
        {**op, "name": "dot.1", "ts": 5.0, "dur": -1.0},
        {**op, "name": "dot.1", "ts": 6.0, "dur": 1e300},
        "not an event",
        {**op, "name": "dot.1", "ts": 7.0, "dur": 1.0},
    ]
    path = tmp_path / "x.trace.json"
    path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    assert detect(path).name == "xla-trace"
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, path, hints={"workload": "jax"}, policy="quarantine")
    assert res.rows["op_exec"] == 2
    assert res.rejected == 4
    (log,) = ds.connect().execute("SELECT rejections FROM ingest_log").fetchall()
    reasons = [r["reason"] for r in json.loads(log[0])]
    assert reasons[0].startswith("traceEvents[2]: event has no name")
    assert all("traceEvents[" in r for r in reasons)
    with pytest.raises(InputError, match=r"traceEvents\[2\]"):
        ingest_file(Dataset(tmp_path / "ds2", create=True), path, hints={"workload": "jax"})
