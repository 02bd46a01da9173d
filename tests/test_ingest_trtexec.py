"""The trtexec reader on TensorRT's real exports (trt-engine-explorer examples): layer mapping,
per-layer times, per-inference times, metadata; the per-op join in the report; bad files."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from mapreport.analysis import Review, Thresholds, analyze_slice
from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from mapreport.ingest.trtexec import engine_name, precision_of
from tests.conftest import REALDATA

TRT = REALDATA / "tensorrt" / "trex"
A100_FP16 = TRT / "pytorch" / "resnet" / "A100" / "fp16"
pytestmark = pytest.mark.skipif(not TRT.is_dir(), reason="../shared/realdata is missing")


def _engines() -> list[Path]:
    return sorted({p.parent / engine_name(p) for p in TRT.rglob("*.json")})


@pytest.mark.slow
def test_every_export_is_detected_and_read(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    for path in sorted(TRT.rglob("*.json")):
        assert detect(path).name == "trtexec", path
        assert ingest_file(ds, path).rejected == 0
    con = ds.connect()
    # independently: every layer of every graph.json, every profile entry, every timing record
    for engine in _engines():
        graph = json.loads(engine.with_name(engine.name + ".graph.json").read_text())
        profile = json.loads(engine.with_name(engine.name + ".profile.json").read_text())
        timing = json.loads(engine.with_name(engine.name + ".timing.json").read_text())
        slice_ = "/".join(engine.parent.parts[-2:])
        got = con.execute(
            "SELECT (SELECT count(*) FROM compile_plan WHERE slice = $s),"
            " (SELECT count(*) FROM op_exec WHERE slice = $s),"
            " (SELECT count(*) FROM request WHERE slice = $s)",
            {"s": slice_},
        ).fetchone()
        assert got == (len(graph["Layers"]), len(profile) - 1, len(timing)), engine
    layers = con.execute("SELECT slice, count(*) FROM compile_plan GROUP BY 1 ORDER BY 1")
    assert layers.fetchall() == [
        ("A100/fp16", 36),
        ("A100/fp32", 32),
        ("A100/qat", 37),
        ("RTX-3090/fp16", 86),
        ("RTX-3090/fp32", 103),
        ("RTX-3090/qat", 63),
    ]


def test_layers_tactics_fusion_and_shape(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, A100_FP16 / "resnet.onnx.engine.graph.json")
    rows = (
        ds.connect()
        .execute(
            "SELECT op, kernel, precision, fusion_group, shape_bucket, predicted_us, workload, "
            "slice, plan_id FROM compile_plan ORDER BY line, op"
        )
        .fetchall()
    )
    first = next(r for r in rows if r[0] == "Conv_0 + Relu_1")
    assert first[1] == (
        "trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32_nhwc_nhwc_k64r7s7c4_stride2x2"
    )
    assert first[2] == "fp16"
    assert first[3] == "Conv_0 + Relu_1"
    assert first[4] == "input.1_d0=32,input.1_d1=3,input.1_d2=224,input.1_d3=224"
    assert first[5] is None  # TensorRT exports no per-layer cost estimate
    assert first[6:] == ("resnet", "A100/fp16", "resnet.onnx.engine")
    # a reformat layer quotes the fused layer it feeds but is not itself a fusion
    reformat = next(r for r in rows if r[0].startswith("Reformatting CopyNode for Input"))
    assert reformat[1] == "Reformat"
    assert reformat[3] is None
    fused = {r[0] for r in rows if r[3] is not None}
    assert "Conv_5 + Add_6 + Relu_7" in fused
    assert "MaxPool_2" not in fused
    assert len({r[4] for r in rows}) == 1


def test_profile_and_timing_values(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    for suffix in (".profile.json", ".timing.json"):
        ingest_file(ds, A100_FP16 / ("resnet.onnx.engine" + suffix))
    con = ds.connect()
    profile = json.loads((A100_FP16 / "resnet.onnx.engine.profile.json").read_text())
    got = dict(con.execute("SELECT name, dur_us FROM op_exec").fetchall())
    assert got == {p["name"]: pytest.approx(p["medianMs"] * 1e3) for p in profile[1:]}
    assert got["Conv_0 + Relu_1"] == pytest.approx(111.616)
    timing = json.loads((A100_FP16 / "resnet.onnx.engine.timing.json").read_text())
    n, p50, shape, line = con.execute(
        "SELECT count(*), median(compute_end_us - compute_start_us), any_value(shape), "
        "min(line) FROM request"
    ).fetchone()
    assert n == len(timing) == 3698
    assert line == 2
    assert p50 == pytest.approx(
        statistics.median((t["endComputeMs"] - t["startComputeMs"]) * 1e3 for t in timing)
    )
    assert shape == "input.1_d0=32,input.1_d1=3,input.1_d2=224,input.1_d3=224"
    hardware = {r[0] for r in con.execute("SELECT hardware FROM environment").fetchall()}
    assert hardware == {"NVIDIA A100 80GB PCIe"}


def test_per_op_join_in_the_analysis(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    for path in sorted(A100_FP16.iterdir()):
        ingest_file(ds, path)
    r = analyze_slice(ds.connect(), "resnet", "A100/fp16", Thresholds(), Review())
    ops = r.device.operators
    assert ops is not None
    assert (ops.planned_ops, ops.measured_ops, ops.matched_ops) == (36, 36, 36)
    assert ops.matched_time_share == pytest.approx(1.0)
    profile = json.loads((A100_FP16 / "resnet.onnx.engine.profile.json").read_text())[1:]
    total = sum(p["medianMs"] for p in profile)
    assert ops.rows[0].op == "Conv_0 + Relu_1"
    assert ops.rows[0].time_share == pytest.approx(0.111616 / total)
    reformat = sum(p["medianMs"] for p in profile if p["name"].startswith("Reformatting"))
    assert ops.reformat_time_share == pytest.approx(reformat / total)
    layer_sum, e2e = ops.layer_sum_vs_compute["resnet.onnx.engine"]
    assert layer_sum == pytest.approx(total * 1e3)
    assert e2e == pytest.approx(r.shapes[0].compute.p50)
    assert ops.predicted_ops == 0
    assert ops.mape_time_weighted is None
    assert r.shapes[0].accuracy.state == "no_prediction"


def test_precision_names() -> None:
    assert precision_of("Channel major FP16 format where channel % 8 == 0") == "fp16"
    assert precision_of("Four wide channel vectorized row major Int8 format") == "int8"
    assert precision_of("Row major linear FP32") == "fp32"
    assert precision_of(None) is None


def _copy(tmp_path: Path, names: tuple[str, ...]) -> Path:
    folder = tmp_path / "A100" / "fp16"
    folder.mkdir(parents=True)
    for n in names:
        shutil.copy(A100_FP16 / n, folder / n)
    return folder


def test_truncated_export_names_the_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path, ("resnet.onnx.engine.graph.json",))
    path = folder / "resnet.onnx.engine.graph.json"
    path.write_bytes(path.read_bytes()[:5000])
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, path, fmt="trtexec")
    assert e.value.line is not None
    assert e.value.line > 100
    assert "invalid JSON" in e.value.reason
    assert not ds.live()


def test_bad_profile_entry_is_rejected_with_its_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path, ("resnet.onnx.engine.profile.json",))
    path = folder / "resnet.onnx.engine.profile.json"
    lines = path.read_text().split("\n")
    lines[4] = lines[4].replace('"medianMs" : ', '"medianMs" : -')
    path.write_text("\n".join(lines))
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, path)
    assert (e.value.line, e.value.field) == (5, "medianMs")
    res = ingest_file(ds, path, policy="quarantine")
    assert res.rejected == 1
    assert res.rows["op_exec"] == 35


def test_timing_without_its_siblings_says_what_is_missing(tmp_path: Path) -> None:
    folder = _copy(tmp_path, ("resnet.onnx.engine.timing.json",))
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError, match=r"keep the engine's \.graph\.json"):
        ingest_file(ds, folder / "resnet.onnx.engine.timing.json")


def test_a_mixed_precision_engine_states_every_precision_it_runs(tmp_path: Path) -> None:
    """The A100 QAT engine runs fp16, fp32 and int8 layers: its bucket states all three, and
    the precision check asks a quality record of fp16 and of int8 on every analysis (a bucket
    stated one of them, the engine's pick of the day, and the action came and went between
    runs); the fp32 engine beside it, a clean control, asks none."""
    plans = TRT / "pytorch" / "resnet" / "A100"
    if not plans.is_dir():
        pytest.skip(f"{plans} is absent (../shared/realdata)")
    ds = Dataset(tmp_path / "ds", create=True)
    for f in sorted(plans.rglob("*.json")):
        ingest_file(ds, f)
    con = ds.connect()
    for _ in range(2):
        qat = analyze_slice(con, "resnet-qat", "A100/qat", Thresholds(), Review())
        assert qat.precision.missing == ("fp16", "int8")
    fp32 = analyze_slice(con, "resnet", "A100/fp32", Thresholds(), Review())
    assert fp32.precision.missing == ()
