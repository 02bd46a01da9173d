"""A profiler trace alone (issue 36): FLOPs and bytes by hand, the op x shape table of the real
H100 and MI300X traces against a computation of our own from the raw events, the device table,
the timeline, the headroom and idle findings and their actions."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from mapreport.analysis import Thresholds, analyze_slice
from mapreport.analysis.device.flops import parse_dims, work
from mapreport.analysis.device.roofline import roofline
from mapreport.analysis.device.timeline import covered, of_rows, overlap, union
from mapreport.app.cli import main
from mapreport.core.devices import DeviceConfig, by_name, configured, recognise
from mapreport.core.kinds import ActionKind, Bound, DeviceActivity, OpKind, Suspect
from mapreport.dataset.store import Dataset
from mapreport.demo import kineto
from mapreport.ingest import ingest_file
from mapreport.run.evidence import explain
from tests.conftest import REALDATA
from tests.pack_sql import check_pack_sql, stated_evidence

TRACELENS = REALDATA / "tracelens"
BERT = "gaunernst_bert-small-uncased__1016001.json.gz"
needs_realdata = pytest.mark.skipif(
    not TRACELENS.is_dir(), reason="../shared/realdata is not beside the repo"
)
BF16 = "c10::BFloat16"


# FLOPs and bytes, each against a count by hand ------------------------------------------


@pytest.mark.parametrize(
    ("op", "dims", "types", "flops", "nbytes"),
    [
        # mm (M,K) x (K,N): 2MNK; A, B read and C written once, 2 bytes each
        (
            "aten::mm",
            [[64, 128], [128, 256]],
            [BF16, BF16],
            2 * 64 * 256 * 128,
            2 * (64 * 128 + 128 * 256 + 64 * 256),
        ),
        # addmm(bias, A, B): the bias is read too
        (
            "aten::addmm",
            [[512], [141, 512], [512, 2048], [], []],
            [BF16] * 3 + ["Scalar"] * 2,
            2 * 141 * 2048 * 512,
            2 * (512 + 141 * 512 + 512 * 2048 + 141 * 2048),
        ),
        # linear(x (B,S,K), W (N,K), b): M = B*S
        (
            "aten::linear",
            [[2, 10, 32], [16, 32], [16]],
            ["float"] * 3,
            2 * 20 * 16 * 32,
            4 * (2 * 10 * 32 + 16 * 32 + 16 + 20 * 16),
        ),
        # bmm (B,M,K) x (B,K,N)
        (
            "aten::bmm",
            [[8, 4, 6], [8, 6, 5]],
            ["c10::Half"] * 2,
            2 * 8 * 4 * 5 * 6,
            2 * (8 * 4 * 6 + 8 * 6 * 5 + 8 * 4 * 5),
        ),
    ],
)
def test_gemm_work_by_hand(
    op: str, dims: list[list[int]], types: list[str], flops: int, nbytes: int
) -> None:
    w = work(op, dims, types, [])
    assert w is not None
    assert w.kind == OpKind.GEMM
    assert (w.flops, w.bytes) == (flops, nbytes)


@pytest.mark.parametrize(
    ("op", "dims", "concrete", "flops"),
    [
        # N=1, C=3, 224x224, 64 filters 7x7, stride 2, pad 3: out 112x112
        (
            "aten::convolution",
            [[1, 3, 224, 224], [64, 3, 7, 7], [64]],
            ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"],
            2 * 1 * 64 * 112 * 112 * 3 * 7 * 7,
        ),
        # 3x3, stride 1, pad 1 keeps 56x56; N=8, 64 -> 128 channels
        (
            "aten::conv2d",
            [[8, 64, 56, 56], [128, 64, 3, 3], []],
            ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
            2 * 8 * 128 * 56 * 56 * 64 * 9,
        ),
        # grouped (depthwise) 3x3: weight (32, 1, 3, 3), groups 32, stride 2 pad 1: 14 -> 7
        (
            "aten::cudnn_convolution",
            [[4, 32, 14, 14], [32, 1, 3, 3]],
            ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "32", "False", "False", "True"],
            2 * 4 * 32 * 7 * 7 * 1 * 9,
        ),
    ],
)
def test_conv_work_by_hand(op: str, dims: list[list[int]], concrete: list[str], flops: int) -> None:
    w = work(op, dims, ["float"] * len(dims), concrete)
    assert w is not None
    assert w.kind == OpKind.CONV
    assert w.flops == flops


@pytest.mark.parametrize(
    ("op", "dims", "concrete", "flops"),
    [
        # SDPA (B,H,S,D): QK^T and PV, 2*B*H*S*S*D each
        (
            "aten::scaled_dot_product_attention",
            [[1, 8, 141, 64]] * 3 + [[]] * 5,
            ["", "", "", "", "0.", "False", "", "False"],
            4 * 1 * 8 * 141 * 141 * 64,
        ),
        # causal halves it
        (
            "aten::scaled_dot_product_attention",
            [[2, 4, 100, 32]] * 3 + [[]] * 5,
            ["", "", "", "", "0.", "True", "", "False"],
            4 * 2 * 4 * 100 * 100 * 32 / 2,
        ),
        # flash forward is (B,S,H,D); Sq != Sk (decode against a cache)
        (
            "aten::_flash_attention_forward",
            [[1, 1, 8, 64], [1, 512, 8, 64], [1, 512, 8, 64]],
            [""] * 8 + ["False"],
            4 * 1 * 8 * 1 * 512 * 64,
        ),
    ],
)
def test_attention_work_by_hand(
    op: str, dims: list[list[int]], concrete: list[str], flops: float
) -> None:
    w = work(op, dims, [BF16] * 3 + [""] * (len(dims) - 3), concrete)
    assert w is not None
    assert w.kind == OpKind.ATTENTION
    assert w.flops == flops


@pytest.mark.parametrize(
    ("op", "dims", "types", "kind", "flops", "nbytes"),
    [
        # add of two tensors: one FLOP per element, two read and one written
        (
            "aten::add",
            [[1, 141, 512], [1, 141, 512], []],
            [BF16, BF16, "Scalar"],
            OpKind.ELEMENTWISE,
            141 * 512,
            3 * 2 * 141 * 512,
        ),
        # mul's out variant: the third tensor is written, not read
        (
            "aten::mul",
            [[4, 100], [], [4, 100]],
            ["float", "double", "float"],
            OpKind.ELEMENTWISE,
            400,
            2 * 4 * 400,
        ),
        # fill_ writes only
        ("aten::fill_", [[9, 4096], []], ["float", "Scalar"], OpKind.ELEMENTWISE, 0, 4 * 9 * 4096),
        # sum reads its input
        (
            "aten::sum",
            [[88, 4096], [], [], []],
            ["int", "", "", ""],
            OpKind.REDUCTION,
            88 * 4096,
            4 * 88 * 4096,
        ),
        # layer norm: 5 FLOPs per element, input and weights read, output written
        (
            "aten::native_layer_norm",
            [[1, 141, 512], [], [512], [512], []],
            [BF16, "", BF16, BF16, "Scalar"],
            OpKind.NORM,
            5 * 141 * 512,
            2 * (141 * 512 + 512 + 512) + 2 * 141 * 512,
        ),
    ],
)
def test_pointwise_work_by_hand(
    op: str, dims: list[list[int]], types: list[str], kind: OpKind, flops: int, nbytes: int
) -> None:
    w = work(op, dims, types, [])
    assert w is not None
    assert (w.kind, w.flops, w.bytes) == (kind, flops, nbytes)


def test_a_batched_gemm_names_its_batch() -> None:
    w = work("aten::bmm", [[96, 3137, 64], [96, 64, 3137]], [BF16] * 2, [])
    assert w is not None
    assert (w.gemm, w.batch, w.flops) == ((3137, 3137, 64), 96, 2 * 96 * 3137 * 3137 * 64)
    lin = work("aten::linear", [[4, 128, 768], [3072, 768], [3072]], [BF16] * 3, [])
    assert lin is not None
    assert (lin.gemm, lin.batch) == ((512, 3072, 768), 1)


def test_what_the_table_does_not_know_has_no_work() -> None:
    assert work("aten::my_custom_op", [[4, 4]], ["float"], []) is None
    assert work("aten::mm", [[4, 4], [5, 4]], ["float"] * 2, []) is None  # K does not match
    assert work("aten::mm", [[4, 4], [4, 4]], ["Scalar", "Scalar"], []) is None  # no dtype
    assert work("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3]], ["float"] * 2, []) is None
    assert parse_dims("512;141x512;();()") == [[512], [141, 512], [], []]
    assert parse_dims("batch=4") == []


# The device table ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "name"),
    [
        ({"name": "NVIDIA H100 80GB HBM3"}, "NVIDIA H100 SXM"),
        ({"name": "NVIDIA A100-SXM4-80GB"}, "NVIDIA A100 80GB"),
        ({"name": "NVIDIA A100-PG509-200"}, "NVIDIA A100 40GB"),
        ({"name": "NVIDIA B200"}, "NVIDIA B200"),
        ({"name": "AMD Instinct MI300X VF"}, "AMD Instinct MI300X"),
        ({"name": "AMD Instinct MI210"}, "AMD Instinct MI210"),
        # ROCm traces of vLLM leave the name empty: an AMD gfx9.4 part with 304 CUs
        (
            {"name": "", "warpSize": 64, "computeMajor": 9, "computeMinor": 4, "numSms": 304},
            "AMD Instinct MI300X",
        ),
    ],
)
def test_devices_are_recognised_as_traces_record_them(props: dict[str, Any], name: str) -> None:
    d = recognise(props)
    assert d is not None
    assert d.name == name
    assert d.source.startswith(("NVIDIA", "AMD"))
    assert d.memory_gbps > 0
    assert d.vector_tflops > 0


def test_an_unknown_device_is_not_guessed_and_the_config_adds_one() -> None:
    assert recognise({"name": "AMD Radeon Graphics", "numSms": 104}) is None
    assert recognise({"name": "ARTEMIS"}) is None
    mine = configured(None, DeviceConfig("mtia", 800.0, 50.0, {"fp16": 400.0}))
    assert mine is not None
    assert (mine.name, mine.memory_gbps, mine.peak_tflops(None, False)) == ("mtia", 800.0, 50.0)
    h100 = by_name("H100")
    faster = configured(h100, DeviceConfig(None, 4000.0))
    assert faster is not None
    assert faster.memory_gbps == 4000.0
    assert "replace the table's" in faster.source
    assert configured(None, DeviceConfig()) is None


# The timeline ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0, 50)), min_size=1, max_size=40))
def test_union_covers_each_instant_once(spans: list[tuple[float, float]]) -> None:
    s = np.array([a for a, _ in spans])
    e = np.array([a + d for a, d in spans])
    us, ue = union(s, e)
    assert np.all(us[1:] > ue[:-1])  # disjoint and sorted
    grid = np.linspace(0, 1050, 2001)
    inside = ((grid[:, None] >= s) & (grid[:, None] < e)).any(axis=1)
    in_union = ((grid[:, None] >= us) & (grid[:, None] < ue)).any(axis=1)
    assert np.array_equal(inside, in_union)
    assert overlap((us, ue), (us, ue)) == pytest.approx(covered(us, ue))


def test_timeline_by_hand() -> None:
    # one device, 0..100 us: compute 0-30 and 20-40 (union 40), communication 35-60 (5 of it
    # under compute: 20 exposed), a copy 70-80, idle 60-70 and 80-100 = 30
    t = of_rows(
        ["0"] * 4,
        ["trace"] * 4,
        ["compute", "compute", "communication", "memcpy"],
        [0.0, 20.0, 35.0, 70.0],
        [30.0, 40.0, 60.0, 80.0],
    )
    assert t.span_us == 80.0  # the last thing ran until 80
    assert t.shares[DeviceActivity.COMPUTE] == pytest.approx(40 / 80)
    assert t.shares[DeviceActivity.COMMUNICATION] == pytest.approx(25 / 80)
    assert t.shares[DeviceActivity.IDLE] == pytest.approx(10 / 80)
    assert t.exposed_communication == pytest.approx(20 / 80)
    idle = sum(i for i, _ in t.windows) / sum(w for _, w in t.windows)
    assert idle == pytest.approx(t.shares[DeviceActivity.IDLE])
    # the same device in a second file an hour later: two spans, not an hour of idle
    two = of_rows(
        ["0"] * 5,
        ["a"] * 4 + ["b"],
        [*["compute"] * 4, "compute"],
        [0.0, 20.0, 35.0, 70.0, 3.6e9],
        [30.0, 40.0, 60.0, 80.0, 3.6e9 + 20.0],
    )
    assert (two.devices, two.span_us) == (1, 100.0)


# Real traces ----------------------------------------------------------------------------


def _raw_gemms(path: Path) -> dict[tuple[int, int, int], tuple[int, float]]:
    """(M, N, K) -> (calls, summed kernel time) of aten::addmm, from the raw events: each
    call's kernels are the kernel events carrying its External id."""
    with gzip.open(path) as fh:
        events = json.load(fh)["traceEvents"]
    ops = {
        e["args"]["External id"]: e["args"]["Input Dims"]
        for e in events
        if e.get("cat") == "cpu_op" and e.get("name") == "aten::addmm"
    }
    per_call: dict[int, float] = defaultdict(float)
    for e in events:
        if e.get("cat") == "kernel" and e.get("args", {}).get("External id") in ops:
            per_call[e["args"]["External id"]] += e["dur"]
    out: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for ext, dur in per_call.items():
        _, a, b, *_ = ops[ext]
        out[(a[0], b[1], a[1])].append(dur)
    return {k: (len(v), sum(v)) for k, v in out.items()}


@needs_realdata
@pytest.mark.parametrize("device", ["h100", "mi300"])
def test_gemm_rows_match_the_raw_events(tmp_path: Path, device: str) -> None:
    trace = TRACELENS / device / BERT
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "bert"})
    rf = roofline(ds.connect(), "bert", "", Thresholds())
    assert rf is not None
    assert rf.device is not None
    expected = _raw_gemms(trace)
    rows = {x.gemm: x for x in rf.rows if x.op == "aten::addmm"}
    assert set(rows) == set(expected)
    for mnk, (calls, total) in expected.items():
        x = rows[mnk]
        m, n, k = mnk
        assert x.dtype == "bf16"
        assert (x.calls, x.total_us) == (calls, pytest.approx(total))
        assert x.tflops == pytest.approx(2 * m * n * k / (total / calls) / 1e6)
        assert x.roofline_pct is not None
        assert 0 < x.roofline_pct <= 1
    # the vocabulary projection is the largest GEMM: the most FLOP/s on both devices
    best = max(rows.values(), key=lambda x: x.tflops or 0)
    assert best.gemm == (141, 30522, 512)


@needs_realdata
def test_the_same_model_on_two_vendors_reads_the_same_ops(tmp_path: Path) -> None:
    """cuBLAS `sm90_xmma` and hipBLASLt `Cijk_` kernels are both `aten::addmm`: the op x shape
    rows line up across vendors, only their times differ."""
    keys = []
    for device in ("h100", "mi300"):
        ds = Dataset(tmp_path / device, create=True)
        ingest_file(ds, TRACELENS / device / BERT, hints={"workload": "bert"})
        rf = roofline(ds.connect(), "bert", "", Thresholds())
        assert rf is not None
        keys.append({(x.op, x.shape, x.dtype) for x in rf.rows if x.kind == OpKind.GEMM})
    assert keys[0] == keys[1]
    assert len(keys[0]) == 4


@needs_realdata
def test_a_trace_alone_gets_findings_and_actions(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, TRACELENS / "h100" / BERT, hints={"workload": "bert"})
    r = analyze_slice(ds.connect(), "bert", "", Thresholds())
    assert r.device.roofline is not None
    assert r.device.timeline is not None
    kinds = [a.kind for a in r.actions]
    assert ActionKind.DEVICE_IDLE in kinds
    assert ActionKind.ROOFLINE_HEADROOM in kinds
    for a in r.actions:
        ev = a.evidence
        assert ev.ci is not None
        assert ev.ci.low > 0
        assert ev.n >= r.thresholds.min_samples
        assert a.owner_role is not None
    top = next(a for a in r.actions if a.kind == ActionKind.ROOFLINE_HEADROOM)
    assert top.shape == "aten::addmm M=141 N=512 K=512 bf16"
    row = r.device.roofline.findings[0].row
    assert row.bound == Bound.MEMORY
    assert top.evidence.value == pytest.approx(row.headroom_us)


# CUDA graphs ----------------------------------------------------------------------------


def graph_trace(path: Path, batches: list[int], sizes: tuple[int, ...] = (8, 16)) -> None:
    """A served model's trace: captures at `sizes`, then one step per batch that replays the
    smallest captured size holding it (kernels of 2 us per unit of that size, on the device),
    or launches its kernels one by one when none does (1 us per unit)."""
    host = {"pid": 1, "tid": 1}
    events: list[dict[str, Any]] = []
    t = 1_000.0
    for size in sizes:
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"capture_{size}_FULL",
                "ts": t,
                "dur": 5_000.0,
                **host,
            }
        )
        t += 6_000
    corr = 1
    for b in batches:
        name = f"execute_{b}_context_0(sq0sk0)_generation_{b}(sq{b}sk99)"
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": name, "ts": t, "dur": 500.0, **host}
        )
        size = next((s for s in sorted(sizes) if s >= b), None)
        launch = "cudaGraphLaunch" if size is not None else "cudaLaunchKernel"
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": launch,
                "ts": t + 10,
                "dur": 5.0,
                "args": {"correlation": corr},
                **host,
            }
        )
        dur = 2.0 * size if size is not None else 1.0 * b
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm_kernel",
                "pid": 0,
                "tid": 7,
                "ts": t + 20,
                "dur": dur,
                "args": {"correlation": corr, "device": 0},
            }
        )
        corr += 1
        t += 1_000
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}],
        "traceEvents": events,
    }
    path.write_text(json.dumps(doc))


def test_graph_buckets_padding_and_eager_steps(tmp_path: Path) -> None:
    # 12 steps at batch 5 (padded to 8), 12 at 12 (padded to 16), 2 at 20 (eager)
    batches = [5] * 12 + [12] * 12 + [20] * 2
    trace = tmp_path / "serve.json"
    graph_trace(trace, batches)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "llm"})
    r = analyze_slice(ds.connect(), "llm", "", Thresholds())
    g = r.device.graphs
    assert g is not None
    by_size = {b.size: b for b in g.buckets}
    assert set(by_size) == {8, 16, None}
    b8, b16, eager = by_size[8], by_size[16], by_size[None]
    assert (b8.captured, b8.mode, b8.capture_us) == (True, "FULL", 5_000.0)
    assert (b8.steps, b8.real, b8.padded, b8.graph_us) == (12, 60, 96, 12 * 16.0)
    # 3 of every 8 units padded, at 2 us each
    assert b8.padding_waste_us == pytest.approx(12 * 3 * 2.0)
    assert b16.padding_waste_us == pytest.approx(12 * 4 * 2.0)
    assert (eager.steps, eager.launches, eager.eager_us, eager.padding_waste_us) == (
        2,
        0,
        40.0,
        None,
    )
    assert g.padding_waste_us == pytest.approx(72 + 96)
    f = g.finding
    assert f is not None
    assert f.share == pytest.approx(168 / (12 * 16 + 12 * 32))
    assert [b for b, _ in f.sizes] == [12, 5]  # the batch whose steps pay the most first
    assert f.evidence.n == 24
    action = next(a for a in r.actions if a.kind == ActionKind.GRAPH_PADDING)
    assert action.evidence.value == pytest.approx(168.0)
    assert action.owner_role.value == "model_serving_architect"


def test_too_few_padded_steps_are_no_finding(tmp_path: Path) -> None:
    trace = tmp_path / "serve.json"
    graph_trace(trace, [5] * 4)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "llm"})
    r = analyze_slice(ds.connect(), "llm", "", Thresholds())
    assert r.device.graphs is not None
    assert r.device.graphs.padding_waste_us == pytest.approx(4 * 3 * 2.0)
    assert r.device.graphs.finding is None  # 4 steps: below min_samples
    assert ActionKind.GRAPH_PADDING not in {a.kind for a in r.actions}


@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize(
    ("run", "size", "mode", "launches"),
    [
        ("vllm_decode_full", 32, "FULL", 1),
        ("vllm_prefilldecode_piecewise", 8192, "PIECEWISE", 25),
        ("sglang_decode", 32, "FULL", 1),
    ],
)
def test_real_graph_runs_report_their_captured_size(
    tmp_path: Path, run: str, size: int, mode: str, launches: int
) -> None:
    """Each run folder with its harness's record of the capture: the size and the graph mode
    it records (SGLang's capture annotation says DECODE, its forward mode; the record FULL)."""
    folder = TRACELENS / "inference" / run
    ds = Dataset(tmp_path / "ds", create=True)
    for trace in sorted([*folder.rglob("*.json.gz"), *folder.rglob("execution_details.json")]):
        ingest_file(ds, trace, hints={"workload": run})
    details = json.loads((folder / "capture_traces" / "execution_details.json").read_text())
    assert (details[0]["batch_size"], details[0]["mode"]) == (size, mode)
    r = analyze_slice(ds.connect(), run, "", Thresholds())
    g = r.device.graphs
    assert g is not None
    (bucket,) = g.buckets
    assert (bucket.size, bucket.mode, bucket.captured) == (size, mode, True)
    assert bucket.capture_us is not None
    assert bucket.capture_us > 0
    assert (bucket.steps, bucket.launches) == (1, launches)
    assert bucket.real == size  # the traced step filled its graph: no padding
    assert bucket.padding_waste_us == 0
    assert bucket.graph_us > bucket.eager_us > 0
    assert g.finding is None


def _explained(
    tmp_path: Path, ds: Dataset, monkeypatch: pytest.MonkeyPatch
) -> dict[str, list[str]]:
    """Every action's pack of the dataset's one slice, rerun by `explain`, and its `.sql` run in
    plain DuckDB (it prints the report's figure)."""
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main, ["report", "--dataset", str(ds.root), "--out", str(out), "--no-pdf"]
    )
    assert res.exit_code == 0, res.output
    (doc,) = [json.loads(f.read_text()) for f in out.rglob("findings.json")]
    explained = {}
    for a in doc["actions"]:
        lines, ok = explain(ds.root, a["id"])
        assert ok, lines
        explained[a["class"]] = lines
    for sql in sorted(out.rglob("evidence/*.sql")):
        check_pack_sql(sql, stated_evidence(doc), monkeypatch)
    return explained


def test_device_findings_reproduce_from_their_packs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "serve.json"
    graph_trace(trace, [5] * 12 + [12] * 12 + [20] * 2)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "llm"})
    assert "graph_padding" in _explained(tmp_path, ds, monkeypatch)


@pytest.mark.slow
@needs_realdata
def test_headroom_and_idle_reproduce_from_their_packs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, TRACELENS / "h100" / BERT, hints={"workload": "bert"})
    assert {"roofline_headroom", "device_idle"} <= set(_explained(tmp_path, ds, monkeypatch))


@pytest.mark.slow
@needs_realdata
def test_an_unrecognised_device_is_named_and_the_configured_one_is_used(tmp_path: Path) -> None:
    """HTA's MI250 trace records its dies as "AMD Radeon Graphics": no roofline, and the report
    names the key; `[device]` in the configuration gives it one."""
    from mapreport.analysis.base.common import Review
    from mapreport.report.devicetime import DEVICE_KEY, device_line

    trace = REALDATA / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "toy"})
    bare = analyze_slice(ds.connect(), "toy", "", Thresholds())
    assert bare.device.roofline is not None
    assert bare.device.roofline.device is None
    assert bare.device.roofline.device_names == ("AMD Radeon Graphics",)
    assert all(x.roofline_pct is None for x in bare.device.roofline.rows)
    assert DEVICE_KEY in device_line(bare.device.roofline)
    review = Review(device=DeviceConfig(name="MI250X"))
    held = analyze_slice(ds.connect(), "toy", "", Thresholds(), review)
    assert held.device.roofline is not None
    assert held.device.roofline.device is not None
    assert held.device.roofline.device.name == "AMD Instinct MI250X (one die)"
    assert held.device.roofline.device.recognised_by == "the run configuration's [device]"
    assert any(x.roofline_pct is not None for x in held.device.roofline.rows)


def served_trace(path: Path, calls: dict[str, list[float]]) -> None:
    """A server's trace on an H100: per request shape `batch=<b>`, requests whose span holds
    one `aten::mm` (b x 4096 by 4096 x 4096, bf16) that launches one kernel of the given
    device time."""
    host = {"pid": 1, "tid": 1}
    events: list[dict[str, Any]] = []
    t, ext = 1_000.0, 1
    for shape, durations in calls.items():
        b = int(shape.split("=")[1])
        for i, dur in enumerate(durations):
            events.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"request {shape}-{i} {shape}",
                    "ts": t,
                    "dur": 400.0,
                    **host,
                }
            )
            args = {
                "External id": ext,
                "Input Dims": [[b, 4096], [4096, 4096]],
                "Input type": [BF16, BF16],
            }
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::mm",
                    "ts": t + 10,
                    "dur": 50.0,
                    "args": args,
                    **host,
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "ts": t + 20,
                    "dur": 5.0,
                    "args": {"External id": ext, "correlation": ext},
                    **host,
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "sm90_xmma_gemm",
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 30,
                    "dur": dur,
                    "args": {"External id": ext, "correlation": ext, "device": 0},
                }
            )
            t += 500
            ext += 1
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}],
        "traceEvents": events,
    }
    path.write_text(json.dumps(doc))


def test_headroom_rolls_up_per_request_shape(tmp_path: Path) -> None:
    calls = {"batch=1": [30.0] * 12, "batch=8": [40.0] * 12}
    trace = tmp_path / "serve.json"
    served_trace(trace, calls)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "llm"})
    rf = roofline(ds.connect(), "llm", "", Thresholds())
    assert rf is not None
    rows = {x.shape: x for x in rf.rows}
    by_shape = {x.shape: x for x in rf.by_request_shape}
    assert set(by_shape) == {"batch=1", "batch=8"}
    for shape, durations in calls.items():
        b = int(shape.split("=")[1])
        row = rows[f"{b}x4096;4096x4096"]
        assert row.roof_us is not None
        # 2 x b x 4096 x 4096 FLOPs against 2 x (b x 4096 + 4096^2 + b x 4096) bytes: memory
        assert row.bound == Bound.MEMORY
        got = by_shape[shape]
        assert (got.calls, got.device_us) == (12, pytest.approx(sum(durations)))
        assert got.headroom_us == pytest.approx(sum(durations) - 12 * row.roof_us)
    assert [x.shape for x in rf.by_request_shape] == ["batch=8", "batch=1"]


REAL_TRACES = sorted(
    p
    for p in [*TRACELENS.rglob("*.json.gz"), *(REALDATA / "hta").rglob("*.json.gz")]
    if not p.name.endswith("_et.json.gz")  # HTA's execution trace (Chakra) is no profile
)


@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("trace", REAL_TRACES, ids=lambda p: str(p.relative_to(REALDATA)))
def test_every_real_trace_says_where_its_device_time_went(tmp_path: Path, trace: Path) -> None:
    """Issue 36: every real trace reads under abort, and its summary speaks of its device: the
    idle share and the op with the most headroom (or time), or what it holds without one.
    Issue 49: no real op's records are suspect (the suspect rule flags none)."""
    from mapreport.report import devicetime
    from mapreport.report.filters import pct

    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "w"}, policy="abort")
    r = analyze_slice(ds.connect(), "w", "", Thresholds())
    said = devicetime.summary(r)
    assert said
    assert r.device.roofline is None or r.device.roofline.suspects == ()
    if r.device.timeline is not None:
        assert f"idle {pct(r.device.timeline.shares[DeviceActivity.IDLE])}" in said
    else:
        assert "holds no kernel" in said


# Suspect records (issue 49): op records that cannot be real are not figures --------------

Call = tuple[str, list[list[int]], list[str], list[str], list[float]]
"""(op, Input Dims, Input type, Concrete Inputs, its kernels' durations in us)."""
H100 = "NVIDIA H100 80GB HBM3"
GEMM_4096 = ("aten::mm", [[4096, 4096], [4096, 4096]], [BF16, BF16], [])
"""2 x 4096^3 = 1.37e11 FLOPs: 139 us at an H100's bf16 peak, its floor and its roof."""


def op_trace(
    path: Path,
    calls: list[Call],
    device: str | None = H100,
    legacy: bool = False,
    first_correlation: int = 10_000,
) -> None:
    """A trace of op calls one after another on one thread, each launching its kernels. A
    `legacy` trace gives each launch its correlation as its External id (as PyTorch 1.x wrote
    them), so that only the operator span holding the launch names its operator."""
    events: list[dict[str, Any]] = []
    t, ext, corr = 1_000.0, 1, first_correlation
    for op, dims, types, concrete, kernels in calls:
        events.append(kineto.op_event(op, t, 90.0, ext, dims, types, concrete))
        for i, dur in enumerate(kernels):
            named = corr if legacy else ext
            ids = (named, corr)
            events += kineto.launch_events(
                t + 10 + 10 * i, t + 20 + 1_000 * i, dur, ids, f"kernel_{i}"
            )
            corr += 1
        t += 5_000
        ext += 1
    path.write_text(json.dumps(kineto.trace_doc(events, device)))


def _roofline_of(tmp_path: Path, calls: list[Call], **kw: Any) -> Any:
    trace = tmp_path / "t.json"
    op_trace(trace, calls, **kw)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "w"}, policy="abort")
    rf = roofline(ds.connect(), "w", "", Thresholds())
    assert rf is not None
    return rf


def test_degenerate_convolution_arguments_give_no_count_not_an_error() -> None:
    conv = [[1, 3, 224, 224], [64, 3, 7, 7], [64]]
    good = ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"]
    assert work("aten::convolution", conv, ["float"] * 3, good) is not None
    for at, value in [(3, "[0, 0]"), (8, "0"), (5, "[0, 0]"), (3, "[-1, 2]"), (8, "2")]:
        bad = [*good[:at], value, *good[at + 1 :]]  # groups 2: 3 input channels are not 2 x 3
        assert work("aten::convolution", conv, ["float"] * 3, bad) is None, (at, value)
    assert work("aten::conv2d", conv, ["float"] * 3, ["", "", "", "0", "0", "1", "0"]) is None


def test_a_bad_convolution_record_does_not_fail_the_slice(tmp_path: Path) -> None:
    """The tester's record: stride 0 and groups 0 raised ZeroDivisionError for the slice."""
    conv = [[1, 3, 224, 224], [64, 3, 7, 7], [64]]
    concrete = ["", "", "", "[0, 0]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "0"]
    calls: list[Call] = [
        ("aten::convolution", conv, ["float"] * 3, concrete, [50.0]),
        (*GEMM_4096, [150.0]),
    ]
    rf = _roofline_of(tmp_path, calls)
    rows = {x.op: x for x in rf.rows}
    assert rows["aten::convolution"].flops is None
    assert rows["aten::convolution"].roofline_pct is None
    assert rows["aten::mm"].roofline_pct is not None


def test_counts_beyond_float_range_are_infinite_not_an_error() -> None:
    huge = 2**1100  # beyond float range (1.8e308)
    w = work("aten::mm", [[huge, 2], [2, 2]], [BF16, BF16], [])
    assert w is not None
    assert (w.flops, w.bytes) == (math.inf, math.inf)
    add = work("aten::add", [[huge], [huge]], [BF16, BF16], [])
    assert add is not None
    assert add.bytes == math.inf


@pytest.mark.parametrize(
    ("op", "dims", "types", "concrete", "nbytes"),
    [
        # index_select of a 1-D table: one element per index (was 1024 x 755000 elements)
        ("aten::index_select", [[755000], [], [1024]], ["float", "Scalar", "long int"], [], 8192),
        # ... of rows: one row of 512 per index, along dim 0
        (
            "aten::index_select",
            [[1000, 512], [], [64]],
            [BF16, "Scalar", "long int"],
            ["", "0", ""],
            2 * 64 * 512 * 2,
        ),
        # gather: one element per index, whatever the table's width (was 888 x 2880 x 2880)
        (
            "aten::gather",
            [[25136, 2880], [], [888, 2880], [], [888, 2880]],
            [BF16, "Scalar", "long int", "Scalar", BF16],
            ["", "0", "", "False", ""],
            2 * 888 * 2880 * 2,
        ),
        # embedding: a row of the table per index
        ("aten::embedding", [[30522, 512], [1, 141]], [BF16, "long int"], [], 2 * 141 * 512 * 2),
    ],
)
def test_a_lookup_moves_what_it_gathers(
    op: str, dims: list[list[int]], types: list[str], concrete: list[str], nbytes: int
) -> None:
    w = work(op, dims, types, concrete)
    assert w is not None
    assert (w.kind, w.flops, w.bytes) == (OpKind.COPY, 0, nbytes)


@pytest.mark.parametrize(
    ("calls", "device"),
    [
        # the tester's: a 4096^3 GEMM in 0.001 us printed 1.37e8 TFLOP/s, 1.39e5 of the roof
        ([(*GEMM_4096, [0.001])], H100),
        # one impossible call among credible ones makes the row's mean no figure either
        ([(*GEMM_4096, [150.0])] * 11 + [(*GEMM_4096, [0.001])], H100),
        # without a known device it is held to the fastest one [device] accepts
        ([(*GEMM_4096, [0.001])], None),
        # whole microseconds: even read 1 us short, 1 us is under two-thirds of 139 us
        ([(*GEMM_4096, [1.0])], H100),
    ],
    ids=["0.001us", "one-of-twelve", "no-device", "whole-us"],
)
def test_a_call_faster_than_the_device_is_suspect(
    tmp_path: Path, calls: list[Call], device: str | None
) -> None:
    rf = _roofline_of(tmp_path, calls, device=device)
    (row,) = rf.rows
    assert row.suspect == Suspect.FASTER_THAN_DEVICE
    assert row.suspect_calls == 1
    assert (row.tflops, row.gbps, row.roofline_pct, row.roof_us) == (None, None, None, None)
    assert (row.headroom_us, row.headroom_share) == (None, None)
    assert row.flops == 2 * 4096**3  # the count itself is sound: the time is not
    assert row.min_us == pytest.approx(min(c[4][0] for c in calls))
    assert rf.suspects == (row,)
    assert (rf.suspect_calls, rf.headroom_us, rf.findings) == (1, 0.0, ())


def test_dims_of_two_to_the_forty_are_suspect(tmp_path: Path) -> None:
    """The tester's: 2^40-sized dims gave 6.8e16 TFLOP/s. A GEMM of them, or dims a shape holds
    (up to 2^53) but no device (over 16 TiB), have no count; a 2 TiB add in 20 us is faster
    than any device."""
    big = 2**40
    calls: list[Call] = [
        ("aten::mm", [[big, big], [big, big]], [BF16, BF16], [], [20.0]),
        ("aten::mm", [[2**52, 2], [2, 2]], [BF16, BF16], [], [20.0]),
        ("aten::add", [[big], [big]], [BF16, BF16], [], [20.0]),
    ]
    rf = _roofline_of(tmp_path, calls)
    why = {x.shape: x.suspect for x in rf.rows}
    assert why == {
        f"{big}x{big};{big}x{big}": Suspect.ABSURD_WORK,
        f"{2**52}x2;2x2": Suspect.ABSURD_WORK,
        f"{big};{big}": Suspect.FASTER_THAN_DEVICE,
    }
    for x in rf.rows:
        assert (x.tflops, x.gbps, x.roofline_pct, x.headroom_us) == (None,) * 4
        assert (x.suspect_calls, x.total_us) == (1, 20.0)  # its time still counts
        if x.suspect == Suspect.ABSURD_WORK:
            assert (x.flops, x.bytes, x.floor_us) == (None, None, None)
    assert (rf.suspect_calls, len(rf.suspects)) == (3, 3)


@pytest.mark.parametrize(
    ("device", "dur", "pct"),
    [
        (H100, 150.0, 138.9 / 150),  # at 93% of the roof
        (H100, 100.0, 1.389),  # 1.39x the roof: over it, but within the margin
        ("NVIDIA A100-SXM4-80GB", 500.0, 440.4 / 500),  # bf16 at 312 TFLOP/s
    ],
)
def test_real_calls_near_the_roof_stay_figures(
    tmp_path: Path, device: str, dur: float, pct: float
) -> None:
    rf = _roofline_of(tmp_path, [(*GEMM_4096, [dur])] * 12, device=device)
    (row,) = rf.rows
    assert (row.suspect, row.suspect_calls, rf.suspect_calls) == (None, 0, 0)
    assert row.roofline_pct == pytest.approx(pct, rel=1e-3)
    assert row.tflops == pytest.approx(2 * 4096**3 / dur / 1e6)


def test_an_fp32_gemm_may_run_at_the_tf32_peak_and_a_conv_as_winograd(tmp_path: Path) -> None:
    """Neither is visible in a trace: an fp32 GEMM at 5.7x the fp32 roof (TF32, as HTA's A100
    trace has them) and a 3x3 convolution at 2x its direct count's are real."""
    conv = [[32, 256, 56, 56], [256, 256, 3, 3]]
    concrete = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]
    conv_roof = 2 * 32 * 256 * 56 * 56 * 256 * 9 / 312e6  # compute-bound at bf16's 312
    calls: list[Call] = [
        *[("aten::mm", [[2048, 1024], [1024, 4864]], ["float"] * 2, [], [183.0])] * 6,
        *[("aten::conv2d", conv, [BF16] * 2, concrete, [conv_roof / 2])] * 4,
    ]
    rf = _roofline_of(tmp_path, calls, device="NVIDIA A100-SXM4-40GB")
    rows = {x.op: x for x in rf.rows}
    assert rows["aten::mm"].roofline_pct == pytest.approx(1046.2 / 183, rel=1e-3)
    assert rows["aten::conv2d"].roofline_pct == pytest.approx(2.0)
    assert rf.suspect_calls == 0


def test_kernels_of_one_call_in_an_older_trace_are_one_call(tmp_path: Path) -> None:
    """Older traces give each launch its own id: a GEMM and its split-K reduction were two calls,
    the reduction's 8 us at 33 TB/s (HTA's A100 trace); now one call of 291 us."""
    mm = ("aten::mm", [[30, 98304], [98304, 647]], ["float"] * 2, [])
    rf = _roofline_of(
        tmp_path, [(*mm, [283.0, 8.0])] * 6, device="NVIDIA A100-SXM4-40GB", legacy=True
    )
    (row,) = rf.rows
    assert (row.calls, row.kernels, row.mean_us, row.min_us) == (6, 12, 291.0, 291.0)
    assert row.suspect is None


def test_an_older_traces_launch_ids_name_no_operator(tmp_path: Path) -> None:
    """In an older trace a launch's own id can equal an unrelated operator's External id: the
    mm's launch (id 2) named the add (External id 2), as alexnet's memcpys named aten::view."""
    add = ("aten::add", [[4096], [4096]], [BF16, BF16], [], [2.0])
    rf = _roofline_of(tmp_path, [(*GEMM_4096, [150.0]), add], legacy=True, first_correlation=2)
    assert {(x.op, x.calls, x.total_us) for x in rf.rows} == {
        ("aten::mm", 1, 150.0),
        ("aten::add", 1, 2.0),
    }


def test_calls_of_two_trace_files_stay_apart(tmp_path: Path) -> None:
    """Two workers' traces reuse external ids: their calls are not summed into one."""
    ds = Dataset(tmp_path / "ds", create=True)
    for name, dur in (("a.json", 150.0), ("b.json", 152.0)):
        op_trace(tmp_path / name, [(*GEMM_4096, [dur])] * 3)
        ingest_file(ds, tmp_path / name, hints={"workload": "w"})
    rf = roofline(ds.connect(), "w", "", Thresholds())
    assert rf is not None
    (row,) = rf.rows
    assert (row.calls, row.mean_us, row.min_us) == (6, 151.0, 150.0)


def test_suspects_are_named_in_the_report_and_in_findings(tmp_path: Path) -> None:
    from mapreport.analysis.steps.results import SliceResult
    from mapreport.report import devicetime
    from mapreport.report.findings import plain
    from mapreport.report.sections import roofline as section
    from mapreport.report.sections.unit import Facts

    big = ("aten::mm", [[8192, 8192], [8192, 8192]], [BF16, BF16], [], [0.001])
    calls: list[Call] = [(*GEMM_4096, [150.0])] * 12 + [big]
    trace = tmp_path / "t.json"
    op_trace(trace, calls)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, trace, hints={"workload": "w"})
    r: SliceResult = analyze_slice(ds.connect(), "w", "", Thresholds())
    v = section.view(section.read(Facts(r)))
    assert v is not None
    assert v.suspect_line.startswith("1 op x shape (1 call) cannot be real and is left out")
    (line,) = v.suspects
    assert line.startswith("aten::mm M=8192 N=8192 K=8192 bf16: 1 of 1 calls ran faster")
    assert "(fastest 0.001 µs; it needs at least 1.11 ms)" in line
    said = devicetime.summary(r)
    assert said is not None
    assert v.suspect_line in said
    doc = plain(section.fragment(v))
    assert doc["device"]["suspect_ops"] == 1
    assert doc["device"]["suspect_calls"] == 1
    marked = [x for x in doc["ops"] if x["suspect"]]
    assert [(x["suspect"], x["suspect_calls"], x["tflops"]) for x in marked] == [
        ("faster_than_device", 1, None)
    ]
    assert marked[0]["floor_us"] == pytest.approx(2 * 8192**3 / 989.5e6)
