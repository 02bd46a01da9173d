"""Issue 51, items 1-3: requests compared by their span where no arrival is recorded, the
block length chosen from the latency autocorrelation, and op x shapes aligned across an out=
buffer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mapreport.analysis.comparing.compare_ops import align_out_buffers
from mapreport.analysis.comparing.compare_stats import LatencyBasis, block_quantiles, choose_block
from mapreport.report.compare_tests import LATENCY_WORDS

GOLDEN = Path(__file__).parent / "golden"


def test_every_latency_basis_has_its_words() -> None:
    assert all(LATENCY_WORDS.get(m) for m in LatencyBasis)


def test_independent_requests_get_blocks_of_one_and_bursts_longer_ones() -> None:
    rng = np.random.default_rng(1)
    assert choose_block(rng.normal(size=2000)).length == 1
    ar = np.zeros(2000)  # AR(1) at 0.8: the autocorrelation at lag k is 0.8^k
    for i in range(1, len(ar)):
        ar[i] = 0.8 * ar[i - 1] + rng.normal()
    got = choose_block(ar)
    assert got.lag1 is not None
    assert got.lag1 > 0.7
    # 0.8^k falls under the band 1.96/sqrt(2000) = 0.044 at k = 14
    assert 8 <= got.length <= 25, got


def test_block_bootstrap_widens_an_interval_by_what_the_bursts_cost() -> None:
    rng = np.random.default_rng(2)
    level = np.repeat(rng.normal(size=40), 25)  # bursts of 25 consecutive requests
    x = np.exp(0.3 * level + 0.05 * rng.normal(size=1000))
    block = choose_block(np.log(x) - np.median(np.log(x))).length
    iid = block_quantiles(x, 0.5, 1, 2000, np.random.default_rng(3))
    blocked = block_quantiles(x, 0.5, block, 2000, np.random.default_rng(3))
    assert block >= 10
    assert np.std(blocked) > 2 * np.std(iid)


def test_an_out_buffer_does_not_stop_two_calls_aligning() -> None:
    """Inductor calls aten::addmm with the output buffer it allocated (6 inputs), eager with 5."""
    types = '["float","float","float","Scalar","Scalar"]'
    eager = ("aten::addmm", "512;8x256;256x512;();()", types)
    inductor = (
        "aten::addmm",
        "512;8x256;256x512;();();8x512",
        '["float","float","float","Scalar","Scalar","float"]',
    )
    other = ("aten::addmm", "1024;8x256;256x1024;();();8x1024", '["float"]')
    a = {eager: np.ones(3)}
    b = {inductor: np.ones(4), other: np.ones(2)}
    a2, b2 = align_out_buffers(a, b)
    assert set(a2) == {eager}
    assert set(b2) == {eager, other}
    assert len(b2[eager]) == 4


@pytest.mark.parametrize("case", ["torch-limit", "torch-dims-load"])
@pytest.mark.slow
def test_requests_read_from_trace_spans_are_compared_by_their_span(
    case: str, tmp_path: Path
) -> None:
    """A profiler trace's requests have no arrival: compare.json holds their shapes, on the
    span basis, each shape's median the server's own compute median (requests.csv.gz, read
    with pandas) within 2% (the span is the record_function's, the log's the server's clock)."""
    from click.testing import CliRunner

    from mapreport.app.cli import main
    from mapreport.run.comparing import compare_runs

    src = GOLDEN / case / "input"
    ds = tmp_path / "ds"
    files = [src / "profiler.w0.json.gz", *sorted((src / "torch_trace").glob("*.log.gz"))]
    args = ["ingest", "--dataset", str(ds), "--workload", "torch-serving", *map(str, files)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    compare_runs(ds, ds, out, pdf=False)
    doc = json.loads((out / "compare.json").read_text())
    assert doc["basis"] == "span"
    assert doc["a"]["basis"] == "span"
    log = pd.read_csv(src / "requests.csv.gz")
    log["compute"] = log["compute_end_us"] - log["compute_start_us"]
    want = log.groupby(["batch", "seq"])["compute"].median()
    got = {s["shape"]: s for s in doc["shapes"]}
    assert sum(s["n_a"] for s in doc["shapes"]) == len(log)
    for (b, s), med in want.items():
        shape = next(k for k in got if k.replace("x", ",").split(",")[-2:] == [str(b), str(s)])
        assert got[shape]["p50_a_us"] == pytest.approx(med, rel=0.02)
        assert got[shape]["ratio_p50"] == pytest.approx(1.0)


def test_a_trace_annotated_by_dims_and_its_named_export_align_shape_by_shape(
    tmp_path: Path,
) -> None:
    """torch-dims-load read from its profiler trace names its shapes `1x128`, its native export
    `batch=1,seq=128`: compared on the span basis, every shape aligns by its numbers (none is
    one side's only), each shape's median span agrees within 2% and none moves; the shapes'
    contributions add up to the change of the mean."""
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file
    from mapreport.run.comparing import compare_runs

    src = GOLDEN / "torch-dims-load" / "input"
    raw = Dataset(tmp_path / "raw", create=True)
    ingest_file(raw, src / "profiler.w0.json.gz", hints={"workload": "torch-serving"})
    export = Dataset(tmp_path / "export", create=True)
    ingest_file(export, src / "serving.runtime.jsonl.gz")
    out = tmp_path / "out"
    compare_runs(raw.root, export.root, out, pdf=False, span=True)
    doc = json.loads((out / "compare.json").read_text())
    assert (doc["only_a"], doc["only_b"]) == ([], [])
    assert len(doc["renamed_b"]) == len(doc["shapes"]) == 12
    assert {"b": "batch=1,seq=128", "a": "1x128"} in doc["renamed_b"]
    for shape in doc["shapes"]:
        assert shape["n_a"] == shape["n_b"]
        assert shape["ratio_p50"] == pytest.approx(1.0, rel=0.02)
        assert shape["verdict"] in ("same", "insufficient")
    mean = doc["mean_latency"]
    added = sum(shape["contribution_us"] for shape in doc["shapes"]) + mean["one_side_us"]
    assert added == pytest.approx(mean["change_us"], abs=1e-6)
    ranked = [abs(shape["contribution_us"]) for shape in doc["shapes"]]
    assert ranked == sorted(ranked, reverse=True)
    assert "aligned with A's by the numbers in their names" in doc["verdict"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["torch-serving", "torch-workers"])
def test_a_real_run_split_by_request_id_flags_no_shape(case: str, tmp_path: Path) -> None:
    """A/A: one real torch.compile serving run (its native export, arrivals recorded, compile
    stalls of 1.9-3.3 s in it) split into even and odd request ids: no shape and no pooled
    quantile moves at p50 or p95, through the command line."""
    import gzip

    from click.testing import CliRunner

    from mapreport.app.cli import main
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file

    src = GOLDEN / case / "input" / "serving.runtime.jsonl.gz"
    with gzip.open(src, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    sides = []
    for parity in (0, 1):
        part = tmp_path / f"side{parity}.jsonl"
        part.write_text(
            "".join(
                json.dumps(r) + "\n"
                for r in rows
                if "request_id" in r and int(r["request_id"].lstrip("r")) % 2 == parity
            )
        )
        ds = Dataset(tmp_path / f"ds{parity}", create=True)
        ingest_file(ds, part)
        sides.append(str(ds.root))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compare", *sides, "--out", str(out), "--no-pdf"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "compare.json").read_text())
    tested = [s for s in doc["shapes"] if s["verdict"] != "insufficient"]
    assert tested, doc["shapes"]
    assert {s["verdict"] for s in tested} == {"same"}, [(s["shape"], s["verdict"]) for s in tested]
    assert "No shape's p50 or p95 moved beyond its CI" in doc["verdict"]


def test_one_run_a_side_tests_each_shape_against_the_runs_shift() -> None:
    """A machine twice as fast on B (every shape x0.5) is the run's shift: with one run a
    side no shape is flagged against it, and the shift is stated with its CI; a shape that
    also slowed x2 on top of it (x1.0 against A) is flagged slower against the shift. Tested
    against 1 (runs a side), every shape of the first pair is faster."""
    from mapreport.analysis.base.common import Thresholds
    from mapreport.analysis.comparing.compare import compare
    from mapreport.core.kinds import CompareVerdict as Verdict

    th = Thresholds(bootstrap_resamples=1000)
    rng = np.random.default_rng(5)
    shapes = [f"b={i}" for i in range(1, 7)]
    a = {s: rng.lognormal(np.log(1000.0 * (i + 1)), 0.3, 300) for i, s in enumerate(shapes)}
    b = {s: rng.lognormal(np.log(500.0 * (i + 1)), 0.3, 300) for i, s in enumerate(shapes)}
    shifted = compare(a, b, th, key=("shift",), relative=True)
    assert {s.verdict for s in shifted.shapes} == {Verdict.SAME}
    (p50, p95) = shifted.shifts[:2]
    assert p50.moved
    assert p50.ratio == pytest.approx(0.5, rel=0.1)
    assert p95.shapes == len(shapes)
    absolute = compare(a, b, th, key=("shift",))
    assert {s.verdict for s in absolute.shapes} == {Verdict.FASTER}
    assert absolute.shifts == ()
    b["b=3"] = rng.lognormal(np.log(1000.0 * 3), 0.3, 300)  # x1.0 against A: x2 the shift
    one = compare(a, b, th, key=("shift",), relative=True)
    verdicts = {s.shape: s.verdict for s in one.shapes}
    assert verdicts.pop("b=3") == Verdict.SLOWER
    assert set(verdicts.values()) == {Verdict.SAME}
    moved = next(s for s in one.shapes if s.shape == "b=3").decisive
    assert moved is not None
    assert moved.vs_shift == pytest.approx(2.0, rel=0.15)
    from mapreport.report.compare_tests import shift_sentence

    assert "over 6 shapes, moved" in shift_sentence(shifted)
    same = compare(a, {s: x * 1.0 for s, x in a.items()}, th, key=("aa",), relative=True)
    assert not any(r.moved for r in same.shifts)
    assert "moved" not in shift_sentence(same).split(". ")[0].replace("no move shown", "")


@pytest.mark.slow
def test_a_real_pair_compares_alike_from_its_traces_and_its_exports(tmp_path: Path) -> None:
    """tests/corpus/torch_pair: B runs two shapes eagerly. Read from the profiler traces and
    from the exports (span basis), compare gives the same shapes and verdicts, p50 ratios within
    3%; each shape's p50 ratio is the server logs' compute median ratio (pandas) within 3%; the
    eager shape whose median moved most is flagged slower, and no shape that ran compiled on
    both sides is flagged."""
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file
    from mapreport.run.comparing import compare_runs

    pair = Path(__file__).parent / "corpus" / "torch_pair"
    docs = {}
    for kind, name, hints in (
        ("raw", "profiler.w0.json.gz", {"workload": "torch-serving"}),
        ("export", "serving.runtime.jsonl.gz", {}),
    ):
        roots = []
        for side in ("a", "b"):
            ds = Dataset(tmp_path / f"{kind}-{side}", create=True)
            ingest_file(ds, pair / side / name, hints=hints)
            roots.append(ds.root)
        out = tmp_path / f"out-{kind}"
        compare_runs(roots[0], roots[1], out, pdf=False, span=True)
        docs[kind] = {
            s["shape"]: s for s in json.loads((out / "compare.json").read_text())["shapes"]
        }
    raw, export = docs["raw"], docs["export"]
    assert set(raw) == set(export)
    assert len(raw) == 12
    for shape, got in raw.items():
        assert got["verdict"] == export[shape]["verdict"], shape
        assert got["ratio_p50"] == pytest.approx(export[shape]["ratio_p50"], rel=0.03)
    logs = []
    for side in ("a", "b"):
        log = pd.read_csv(pair / side / "requests.csv.gz")
        log["compute"] = log["compute_end_us"] - log["compute_start_us"]
        logs.append(log.groupby(["batch", "seq"])["compute"].median())
    for (b, s), median_a in logs[0].items():
        reference = logs[1][(b, s)] / median_a
        assert raw[f"batch={b},seq={s}"]["ratio_p50"] == pytest.approx(reference, rel=0.03)
    ran_eagerly = log[log["eager"]].groupby(["batch", "seq"]).size()  # B's own log says which
    eager = {f"batch={b},seq={s}" for b, s in ran_eagerly.index}
    assert eager == {"batch=1,seq=32", "batch=1,seq=64"}
    moved_most = max(eager, key=lambda shape: raw[shape]["ratio_p50"])
    assert raw[moved_most]["verdict"] == "slower"
    assert {s for s, got in raw.items() if got["verdict"] != "same"} <= eager
