"""The transfer gap (issue 55, item 3): the tuned time of each run's deployed kernel against the
time it took per call at runtime. On a real pair made here (tests/corpus/transfer_gap, README
there: Inductor's AUTOTUNE blocks and Kineto traces of the same compiled linears) every figure
equals a computation straight from the raw files to 1e-9, and the slice's analysis carries
them; hand-made pairs show which runtime rows join and which do not."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.steps.slice import analyze_slice
from mapreport.analysis.tuning.ranking import tuning_ranking
from mapreport.analysis.tuning.transfer import TransferGap, transfer_gaps
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file

PAIR = Path(__file__).resolve().parent / "corpus" / "transfer_gap"
TH = Thresholds(bootstrap_resamples=500)


def _tuned(log: Path) -> dict[str, list[float]]:
    """Per AUTOTUNE header's sizes (canonical), every time of `_mkl_linear` in us."""
    out: dict[str, list[float]] = defaultdict(list)
    sizes = ""
    for line in log.read_text().splitlines():
        if m := re.fullmatch(r"AUTOTUNE packed_linear\((.*)\)", line):
            sizes = m[1].replace(", ", ";")
        elif m := re.fullmatch(r"  _mkl_linear (\S+) ms .*", line):
            out[sizes].append(float(m[1]) * 1e3)
    return dict(out)


def _runtime(trace: Path) -> dict[str, list[float]]:
    """Per input sizes (canonical, the scalar arguments left off), every `mkl::_mkl_linear`
    duration in us."""
    out: dict[str, list[float]] = defaultdict(list)
    for e in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]:
        if e.get("name") == "mkl::_mkl_linear":
            dims = [d for d in e["args"]["Input Dims"] if d]
            out[";".join("x".join(map(str, d)) for d in dims)].append(float(e["dur"]))
    return dict(out)


def _gaps(ds: Dataset, workload: str) -> tuple[TransferGap, ...]:
    con = ds.connect()
    return transfer_gaps(con, workload, "", tuning_ranking(con, workload, "", TH), TH)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    ds = Dataset(tmp_path_factory.mktemp("pair") / "ds", create=True)
    for f in sorted(PAIR.glob("*.log")) + sorted(PAIR.glob("*.json.gz")):
        assert ingest_file(ds, f, policy="abort", hints={"workload": "lin"}).rejected == 0
    return ds


def test_the_real_pair_equals_a_computation_from_its_raw_files(pair: Dataset) -> None:
    tuned = _tuned(PAIR / "autotune.log")
    runtime: dict[str, list[float]] = {}
    for trace in sorted(PAIR.glob("profile_*.json.gz")):
        runtime.update(_runtime(trace))
    gaps = _gaps(pair, "lin")
    assert sorted(g.shape for g in gaps) == sorted(tuned) == sorted(runtime)
    for g in gaps:
        t, r = tuned[g.shape], runtime[g.shape]
        assert (g.kernel, g.task, g.tuned_repeats, g.calls) == (
            "_mkl_linear",
            "packed_linear",
            3,
            200,
        )
        assert g.tuned_us == pytest.approx(sum(t) / len(t), rel=1e-9)
        assert g.runtime_us == pytest.approx(sum(r) / len(r), rel=1e-9)
        assert g.ratio == pytest.approx((sum(r) / len(r)) / (sum(t) / len(t)), rel=1e-9)
        assert g.ratio_ci is not None
        assert g.ratio_ci.low <= g.ratio <= g.ratio_ci.high
        assert len(g.sources) == 1
    by_shape = {g.shape.split(";")[0]: round(g.ratio, 3) for g in gaps}
    assert by_shape == {"128x1024": 0.958, "32x256": 0.868, "64x512": 1.022}  # the README's


def test_the_slice_analysis_carries_the_gaps(pair: Dataset) -> None:
    result = analyze_slice(pair.connect(), "lin", "", TH)
    assert len(result.compiled.transfer) == 3
    assert result.compiled.ranking is not None


def test_tuning_records_alone_have_no_gap(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, PAIR / "autotune.log", hints={"workload": "lin"})
    assert _gaps(ds, "lin") == ()
    assert analyze_slice(ds.connect(), "lin", "", TH).compiled.transfer == ()


BLOCK = """\
AUTOTUNE mm(64x128, 128x32)
strides: [128, 1], [32, 1]
dtypes: torch.float32, torch.float32
  mm 0.0100 ms 100.0%
  cpp_CppMicroGemmFP32Vec_0 0.0200 ms 50.0%
SingleProcess AUTOTUNE benchmarking takes 1.0000 seconds and 0.0000 seconds precompiling
"""


def _pair(tmp_path: Path, log: str, ops: list[tuple[str, list[list[int]], float]]) -> Dataset:
    """A dataset of an AUTOTUNE log and a trace of `ops` (name, input dims, duration in us)."""
    (tmp_path / "tune.log").write_text(log)
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 1000.0 + 100 * i,
         "dur": dur, "args": {"Input Dims": dims}}
        for i, (name, dims, dur) in enumerate(ops)
    ]  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    ds = Dataset(tmp_path / "ds", create=True)
    for f in ("tune.log", "run.json"):
        ingest_file(ds, tmp_path / f, policy="abort", hints={"workload": "w"})
    return ds


def test_which_runtime_rows_join(tmp_path: Path) -> None:
    """By name (with or without a namespace) at the tuned shape, scalar arguments after it
    allowed; another shape, a longer tensor list, another kernel: not joined."""
    ops = [
        ("aten::mm", [[64, 128], [128, 32]], 12.0),
        ("mm", [[64, 128], [128, 32], [], []], 14.0),
        ("aten::mm", [[64, 128], [128, 32], [2, 2]], 99.0),
        ("aten::mm", [[64, 128], [128, 64]], 99.0),
        ("aten::addmm", [[64, 128], [128, 32]], 99.0),
        ("aten::mmx", [[64, 128], [128, 32]], 99.0),
    ]
    (gap,) = _gaps(_pair(tmp_path, BLOCK, ops), "w")
    assert (gap.kernel, gap.shape, gap.calls) == ("mm", "64x128;128x32", 2)
    assert gap.tuned_us == pytest.approx(10.0)
    assert gap.runtime_us == pytest.approx(13.0)
    assert gap.ratio == pytest.approx(1.3)
    assert gap.ratio_ci is not None  # two calls: the calls are resampled


def test_an_op_tuned_for_two_dtypes_at_one_shape_is_not_joined(tmp_path: Path) -> None:
    """Two plan rows for one op and shape (float32 and bfloat16): the runtime rows' shapes do
    not say which dtype ran, so neither is joined."""
    log = BLOCK + BLOCK.replace("torch.float32", "torch.bfloat16")
    ds = _pair(tmp_path, log, [("aten::mm", [[64, 128], [128, 32]], 12.0)])
    assert _gaps(ds, "w") == ()
