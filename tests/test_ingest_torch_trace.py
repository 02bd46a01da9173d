"""The TORCH_TRACE reader on tlparse's real logs: compiles, shapes, recompile reasons, cache
hits, and the deliberately corrupted log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

TLPARSE = REALDATA / "tlparse"
LOGS = sorted(p for p in TLPARSE.rglob("*") if p.is_file())
RANK1 = TLPARSE / "inputs" / "multi_rank_logs" / "dedicated_log_torch_trace_rank_1.log"
pytestmark = pytest.mark.skipif(not TLPARSE.is_dir(), reason="../shared/realdata is missing")


def events(ds: Dataset) -> list[tuple[object, ...]]:
    return (
        ds.connect()
        .execute(
            "SELECT compile_id, shape, compile_ms, recompile_reason, cache_hit, op_count, frame "
            "FROM compile_event ORDER BY ts_us, line"
        )
        .fetchall()
    )


BROKEN_ON_PURPOSE = {"simple_corrupted_json.log"}
TORCH_2_13 = Path(__file__).parent / "corpus" / "torch" / "recompile_2_13.log.gz"
"""A real TORCH_TRACE log of PyTorch 2.13 (recompile_2_13.py beside it): three compiles of
one frame, two recompiles, one `recompile_reasons` payload as plain text, one as JSON."""


def test_every_log_is_read(tmp_path: Path) -> None:
    """Every real log reads under abort (the policy of the demo's own config), except the one
    tlparse's tests corrupt on purpose."""
    total = 0
    for log in [*LOGS, TORCH_2_13]:
        assert detect(log).name == "torch-trace", log
        ds = Dataset(tmp_path / log.name, create=True)
        if log.name in BROKEN_ON_PURPOSE:
            assert ingest_file(ds, log).rejected == 1  # the corrupted payload, nothing else
            continue
        res = ingest_file(ds, log, policy="abort")
        assert res.rejected == 0, log
        total += res.rows.get("compile_event", 0)
    assert total == 66 + 3


def test_recompile_reasons_as_plain_text_or_json(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, TORCH_2_13, policy="abort")
    rows = ds.connect().execute(
        "SELECT compile_id, shape, recompile_reason FROM compile_event ORDER BY compile_id"
    )
    assert rows.fetchall() == [
        ("0/0", "2x128x16", None),
        (
            "0/1",
            "2x64x16",
            "0/0: tensor 'x' size mismatch at index 1. expected 128, actual 64",
        ),
        (
            "0/2",
            "2x32x16",
            "0/1: tensor 'x' size mismatch at index 1. expected 64, actual 32",
        ),
    ]


def test_one_frame_recompiled_for_fifteen_shapes(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, RANK1, hints={"workload": "toy"})
    rows = events(ds)
    # independent reading of the same log: metrics records and tensor sizes, by regex
    text = RANK1.read_text()
    metrics = [
        json.loads(m)["compilation_metrics"]
        for m in re.findall(r'\] (\{"compilation_metrics".*)$', text, flags=re.M)
    ]
    sizes = re.findall(
        r'"describe_tensor": \{"id": 0, "ndim": 2, [^}]*?"size": \[(\d+), (\d+)\]', text
    )
    assert len(rows) == len(metrics) == len(sizes) == 15
    for row, m, (a, b) in zip(rows, metrics, sizes, strict=True):
        compile_id, shape, ms, reason, _hit, ops, frame = row
        assert compile_id == m["compile_id"]
        assert shape == f"{a}x{b}"
        assert ms == pytest.approx(m["entire_frame_compile_time_s"] * 1000)
        assert reason == m.get("recompile_reason")
        assert ops == m["graph_op_count"] == 1
        assert frame == "kernel"
    assert [r[1] for r in rows] == [f"{n}x{n}" for n in range(2, 17)]
    assert rows[0][3] is None
    assert rows[5][3] == "0/4: tensor 'x' size mismatch at index 0. expected 6, actual 7"
    assert [r[4] for r in rows] == [True] * 10 + [False] * 5
    assert {
        r[0] for r in ds.connect().execute("SELECT workload FROM compile_event").fetchall()
    } == {"toy"}


def test_corrupted_log_is_counted_not_fatal(tmp_path: Path) -> None:
    log = TLPARSE / "inputs" / "simple_corrupted_json.log"
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, log)
    assert (res.rows["compile_event"], res.rejected) == (1, 1)
    (q,) = ds.connect().execute("SELECT line, field, reason FROM quarantine").fetchall()
    assert q[:2] == (13, "payload")
    assert "corrupted JSON payload" in q[2]
    with pytest.raises(InputError) as err:
        ingest_file(Dataset(tmp_path / "strict", create=True), log, policy="abort")
    assert (err.value.line, err.value.field) == (13, "payload")


def test_garbage_lines_are_rejected_by_line(tmp_path: Path) -> None:
    lines = RANK1.read_text().splitlines()
    end = max(i for i in range(60) if not lines[i].startswith("\t"))  # a whole-record cut
    head = lines[:end]
    records = [
        i for i, line in enumerate(head) if not line.startswith("\t") and '"describe_' in line
    ]  # records that carry no payload
    a, b = records[0], records[1]
    head[a] = "this is not a record"
    head[b] = head[b].split("] ", 1)[0] + '] {"broken": '
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join(head) + "\n")
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, bad)
    lines = [
        r[0] for r in ds.connect().execute("SELECT line FROM quarantine ORDER BY line").fetchall()
    ]
    assert lines == [a + 1, b + 1]
    assert res.rejected == 2


def test_inductor_estimates_become_the_compile_plan(tmp_path: Path) -> None:
    log = TLPARSE / "inputs" / "multi_rank_runtime" / "dedicated_log_torch_trace_rank_0.log"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, log, hints={"workload": "mm"})
    con = ds.connect()
    rows = con.execute(
        "SELECT plan_id, op, predicted_us, kernel, precision, shape_bucket, line "
        "FROM compile_plan ORDER BY line, op"
    ).fetchall()
    # independently: every op of every inductor_runtime_and_tensor_meta payload, by regex
    lines = log.read_text().split("\n")
    expected = []
    for i, line in enumerate(lines, 1):
        if '"name": "inductor_runtime_and_tensor_meta"' not in line:
            continue
        env = json.loads(line.split("] ", 1)[1])
        payload = []
        for nxt in lines[i:]:
            if not nxt.startswith("\t"):
                break
            payload.append(nxt[1:])
        for op in json.loads("\n".join(payload))["ops"]:
            key = f"{env['frame_id']}/{env['frame_compile_id']}"
            # Inductor's 0 is "no estimate", not a prediction of no time
            est = op["estimated_runtime_ns"] / 1e3 or None
            expected.append((key, op["name"], est, op["type"], i))
    assert len(rows) == len(expected) == 39
    # an op listed twice in one graph (two matmuls) is two ops: `name#1`, `name#2`
    got = sorted((r[0], r[1].split("#")[0], r[2], r[6]) for r in rows)
    for g, e in zip(got, sorted(expected), strict=True):
        assert g[:2] == e[:2]
        assert g[2] == (None if e[2] is None else pytest.approx(e[2]))
        assert g[3] == e[4]
    assert len({(r[0], r[1]) for r in rows}) == 39
    mm = next(r for r in rows if r[1] == "extern_kernels.mm#1")
    assert mm[2] == pytest.approx(6885.841870239033)
    assert mm[4] == "fp16"
    # the graph's one user input, L['args'][0]; the two weights are parameters
    assert mm[5] == "1024x1024"
    # a compile whose metrics follow its estimates names its plan; in this log the metrics
    # after the estimates of compiles 0/2 and 0/3 say "0/1" (the file repeats a block), so
    # only 0/0 and 0/1 are linked, and those two plans are not attributed to another compile
    planned = con.execute("SELECT compile_id, plan_id FROM compile_event WHERE plan_id IS NOT NULL")
    assert sorted(planned.fetchall()) == [("0/0", "0/0"), ("0/1", "0/1")]
    assert {e[0] for e in expected} == {"0/0", "0/1", "0/2", "0/3"}


def test_inductor_ops_are_named_by_the_kernels_they_launched(tmp_path: Path) -> None:
    """Inductor's wrapper code (`inductor_output_code`) launches the scheduled ops in order:
    each fused op gets the Triton kernel the profiler records; a library op on a GPU graph has
    no kernel name in the code and gets none. A graph's prediction sums all its ops, both
    matmuls included."""
    log = TLPARSE / "inputs" / "multi_rank_runtime" / "dedicated_log_torch_trace_rank_0.log"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, log, hints={"workload": "mm"})
    con = ds.connect()
    rows = con.execute(
        "SELECT op, kernel, fusion_group FROM compile_plan WHERE plan_id = '0/1' ORDER BY line, op"
    ).fetchall()
    kernels = {op: (kernel, fused) for op, kernel, fused in rows}
    # from the log's wrapper code of compile 0/1 (its `call` function, read by eye)
    assert kernels["op1_op2_op4"] == (
        "triton_per_fused_all_reduce_gelu_native_layer_norm_0",
        "op1 + op2 + op4",
    )
    assert kernels["op8"] == ("triton_poi_fused_all_gather_into_tensor_relu_1", None)
    assert kernels["op13"] == ("triton_poi_fused_add_mul_repeat_2", None)
    assert kernels["extern_kernels.mm#2"] == (None, None)
    (total,) = con.execute(
        "SELECT sum(predicted_us) FROM compile_plan WHERE plan_id = '0/0'"
    ).fetchone()
    assert total == pytest.approx(2 * 6885.841870239033 + 2 * 2.1671957671957675 + 30.071, 1e-3)
