"""Comparing two runs per request shape (issue 37): ratios with bootstrap CIs, verdicts held to
the false discovery rate, on A/A splits and planted factors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mapreport.analysis import Thresholds
from mapreport.analysis.comparing.compare import benjamini_hochberg, compare
from mapreport.core.kinds import CompareVerdict as Verdict
from tests.pack_sql import check_compare_pack_sql

SHAPES = [f"batch={b}" for b in (1, 2, 4, 8, 16, 32)]


def _side(
    rng: np.random.Generator, n: int, factor: float = 1.0, shape_scale: float = 1.0
) -> np.ndarray:
    return np.sort(rng.lognormal(np.log(1000.0 * shape_scale), 0.3, n) * factor)


def test_benjamini_hochberg_by_hand() -> None:
    # m = 4 at q = 0.05: thresholds 0.0125, 0.025, 0.0375, 0.05 by rank
    # sorted: 0.01 (rank 1), 0.03 (rank 2), 0.04 (rank 3: 0.04 > 0.0375), 0.20; the largest
    # rank under its threshold is 2 (0.03 <= 0.025? no), 1 (0.01 <= 0.0125): one discovery
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.20], 0.05) == [True, False, False, False]
    # 0.01, 0.02, 0.03, 0.04 all under their thresholds 0.0125 .. 0.05: all four
    assert benjamini_hochberg([0.04, 0.01, 0.03, 0.02], 0.05) == [True, True, True, True]
    assert benjamini_hochberg([0.2, 0.3], 0.05) == [False, False]
    assert benjamini_hochberg([], 0.05) == []


def test_an_a_a_split_flags_no_more_than_the_fdr_allows() -> None:
    """One run split in two halves by request, 20 seeds x 6 shapes: every shape is the same
    on both sides, so any discovery is a false one; Benjamini-Hochberg holds the chance of any
    at 5% per comparison (all hypotheses true), so 20 seeds see about one."""
    th = Thresholds(bootstrap_resamples=1000)
    flagged = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        whole = {s: _side(rng, 400, shape_scale=1 + i) for i, s in enumerate(SHAPES)}
        halves = [rng.permutation(len(v)) for v in whole.values()]
        a = {s: np.sort(v[h[:200]]) for (s, v), h in zip(whole.items(), halves, strict=True)}
        b = {s: np.sort(v[h[200:]]) for (s, v), h in zip(whole.items(), halves, strict=True)}
        result = compare(a, b, th, key=(str(seed),))
        assert result.tested == len(SHAPES)
        flagged += sum(1 for s in result.shapes if s.verdict != Verdict.SAME)
    assert flagged <= 3  # P(> 3 of 20 comparisons with a false discovery) < 2% at 5% each


@pytest.mark.parametrize(("n", "power"), [(50, 0.0), (200, 0.7), (1000, 0.95)])
def test_planted_factors_are_found_inside_their_cis(n: int, power: float) -> None:
    """x0.8, x1.0 and x1.3 planted on B's latencies, 40 seeds: each 95% CI holds its factor in
    at least 90% of the seeds, a verdict is never the wrong way round, and once n reaches the
    evidence thresholds the moves are called (at 200 requests a side 70% of the time, at
    1,000 95%; at 50, a p95 of 50 requests may not resolve 20%)."""
    th = Thresholds(bootstrap_resamples=1000)
    factors = {"batch=1": 0.8, "batch=2": 1.0, "batch=4": 1.3}
    want = {0.8: Verdict.FASTER, 1.0: Verdict.SAME, 1.3: Verdict.SLOWER}
    covered = dict.fromkeys(factors, 0)
    right = dict.fromkeys(factors, 0)
    seeds = 40
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        a = {s: _side(rng, n) for s in factors}
        b = {s: _side(rng, n, f) for s, f in factors.items()}
        by = {x.shape: x for x in compare(a, b, th, key=(str(seed),)).shapes}
        for shape, f in factors.items():
            got = by[shape]
            assert got.ci_p95 is not None
            covered[shape] += got.ci_p95[0] <= f <= got.ci_p95[1]
            if f != 1.0:  # a false alarm on x1.0 is what the FDR bounds, counted below
                assert got.verdict in (want[f], Verdict.SAME), (seed, shape, got)
            right[shape] += got.verdict == want[f]
    assert all(c >= 0.9 * seeds for c in covered.values()), covered
    # x1.0: "same", up to the FDR's false alarms: with p50, p95 and p99 each a test and six of
    # nine of them true moves at n = 1,000, Benjamini-Hochberg admits a null at p up to
    # 0.05 x 7/9, so its false alarms are a share of the discoveries (5%), not of the seeds
    assert right["batch=2"] >= 0.8 * seeds
    assert right["batch=1"] >= power * seeds, right
    assert right["batch=4"] >= power * seeds, right


def test_shapes_rank_by_what_they_add_to_the_mean_and_one_side_shapes_make_the_rest() -> None:
    """The shapes' contributions and the one-side shapes' part add up to the change of the
    slice's mean latency per request, and the shapes come largest |contribution| first: a
    busy shape x1.2 outranks a rare one x3."""
    rng = np.random.default_rng(4)
    a = {"busy": _side(rng, 400), "rare": _side(rng, 20), "gone": _side(rng, 30)}
    b = {"busy": _side(rng, 400, 1.2), "rare": _side(rng, 20, 3.0), "new": _side(rng, 50)}
    c = compare(a, b, Thresholds(bootstrap_resamples=200))
    assert [s.shape for s in c.shapes] == ["busy", "rare"]
    added = sum(s.contribution_us for s in c.shapes) + c.one_side_us
    assert added == pytest.approx(c.mean_b_us - c.mean_a_us, rel=1e-9)
    mean_a = sum(float(np.sum(v)) for v in a.values()) / 450
    assert c.mean_a_us == pytest.approx(mean_a)
    own = float(np.sum(b["new"])) / 470 - float(np.sum(a["gone"])) / 450
    assert c.one_side_us == pytest.approx(own)


def test_thin_shapes_and_one_sided_shapes_are_said_as_such() -> None:
    th = Thresholds()
    rng = np.random.default_rng(1)
    a = {"batch=1": _side(rng, 300), "batch=2": _side(rng, 10), "batch=8": _side(rng, 50)}
    b = {"batch=1": _side(rng, 300), "batch=2": _side(rng, 300), "batch=4": _side(rng, 50)}
    result = compare(a, b, th)
    by = {s.shape: s for s in result.shapes}
    assert by["batch=2"].verdict == Verdict.INSUFFICIENT  # 10 < min_samples_p95 on A
    assert by["batch=2"].ci_p95 is None
    assert (result.only_a, result.only_b) == (("batch=8",), ("batch=4",))
    assert result.tested == 1


def test_two_aiperf_runs_compare_through_the_cli(tmp_path: Path) -> None:
    """Two real AIPerf exports, each its own dataset: compare.json and compare.html written,
    every shape of either side listed once (on both sides, or only on one)."""
    from click.testing import CliRunner

    from mapreport.app.cli import main
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file
    from tests.conftest import REALDATA

    aiperf = REALDATA / "serving" / "aiperf"
    if not aiperf.is_dir():
        pytest.skip("../shared/realdata is missing")
    sides = []
    for name in ("run1_profile_export.jsonl", "qwen_concurrency1_profile_export.jsonl"):
        ds = Dataset(tmp_path / name.split("_")[0], create=True)
        ingest_file(ds, aiperf / name, hints={"workload": "llm"})
        sides.append(ds.root)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compare", str(sides[0]), str(sides[1]), "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "compare.json").read_text())
    assert doc["schema_version"] == "1.6"
    assert (doc["a"]["workload"], doc["b"]["workload"]) == ("llm", "llm")
    shapes = [s["shape"] for s in doc["shapes"]] + doc["only_a"] + doc["only_b"]
    assert len(shapes) == len(set(shapes))
    for s in doc["shapes"]:
        assert s["verdict"] in ("faster", "slower", "same", "insufficient")
        assert (s["ci_p95"] is None) == (s["verdict"] == "insufficient")
    html = (out / "compare.html").read_text()
    assert doc["verdict"].split(":")[0][:40] in html.replace("&#39;", "'")


def test_span_compares_spans_where_arrivals_are_recorded_and_quiet_prints_nothing(
    tmp_path: Path,
) -> None:
    """--span puts both sides on the span basis (as a run read from its trace is), though both
    record arrivals; --quiet prints nothing and still writes compare.json."""
    from click.testing import CliRunner

    from mapreport.app.cli import main
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file
    from tests.conftest import REALDATA

    export = REALDATA / "serving" / "aiperf" / "run1_profile_export.jsonl"
    if not export.is_file():
        pytest.skip("../shared/realdata is missing")
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, export, hints={"workload": "llm"})
    bases = {}
    for flags in ([], ["--span", "--quiet"]):
        out = tmp_path / ("span" if flags else "e2e")
        cmd = ["compare", str(ds.root), str(ds.root), "--out", str(out), "--no-pdf", *flags]
        res = CliRunner().invoke(main, cmd)
        assert res.exit_code == 0, res.output
        assert (res.output == "") == bool(flags)
        bases[out.name] = json.loads((out / "compare.json").read_text())["a"]["basis"]
    assert bases == {"e2e": "end_to_end", "span": "span"}


def test_a_side_must_name_its_slice_when_it_holds_several(tmp_path: Path) -> None:
    from mapreport.core.errors import UsageError
    from mapreport.dataset.store import Dataset
    from mapreport.run.comparing import pick_slice

    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(UsageError, match="holds 0 slices"):
        pick_slice(ds, None, "a")


def _raw_calls(path: Path, ops: tuple[str, ...]) -> dict[tuple[str, str], list[float]]:
    """(op, Input Dims as JSON) -> the device time of each call, from the raw events: a call's
    kernels are those carrying its External id."""
    import gzip

    with gzip.open(path) as fh:
        events = json.load(fh)["traceEvents"]
    calls = {
        e["args"]["External id"]: (e["name"], json.dumps(e["args"]["Input Dims"]))
        for e in events
        if e.get("cat") == "cpu_op" and e.get("name") in ops
    }
    per_call: dict[int, float] = {}
    for e in events:
        ext = e.get("args", {}).get("External id")
        if e.get("cat") == "kernel" and ext in calls:
            per_call[ext] = per_call.get(ext, 0.0) + e["dur"]
    out: dict[tuple[str, str], list[float]] = {}
    for ext, dur in per_call.items():
        out.setdefault(calls[ext], []).append(dur)
    return out


def test_h100_and_mi300x_ops_align_by_their_launching_op(tmp_path: Path) -> None:
    """The same model on two vendors: cuBLAS and hipBLASLt kernels, flash-attention kernels of
    each, aligned by aten op and input dims; every ratio is the raw events' own."""
    from mapreport.analysis.comparing.compare import compare_ops
    from mapreport.analysis.comparing.compare_whole import side_ops
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file
    from tests.conftest import REALDATA

    traces = REALDATA / "tracelens"
    if not traces.is_dir():
        pytest.skip("../shared/realdata is missing")
    name = "gaunernst_bert-small-uncased__1016001.json.gz"
    sides = []
    for device in ("h100", "mi300"):
        ds = Dataset(tmp_path / device, create=True)
        ingest_file(ds, traces / device / name, hints={"workload": "bert"})
        sides.append(side_ops(ds.connect(), "bert", "").calls)
    rows, only_a, only_b = compare_ops(sides[0], sides[1], Thresholds())
    # the same model: every op x shape one vendor ran, the other ran too
    assert (only_a, only_b) == ((), ())
    ops = ("aten::addmm", "aten::_flash_attention_forward")
    raw = [_raw_calls(traces / d / name, ops) for d in ("h100", "mi300")]
    checked = 0
    for o in rows:
        if o.op not in ops:
            continue
        dims = o.shape.split(";")
        key = next(k for k in raw[0] if k[0] == o.op and _dims(k[1]) == dims)
        a, b = raw[0][key], raw[1][key]
        assert (o.count_a, o.count_b) == (len(a), len(b))
        assert o.ratio == pytest.approx((sum(b) / len(b)) / (sum(a) / len(a)))
        assert o.dtype == "bf16"
        checked += 1
    assert checked == 5  # four GEMM shapes and the attention
    attention = next(o for o in rows if o.op == "aten::_flash_attention_forward")
    assert attention.ratio > 2  # MI300X's attention kernel is the slower here (28 vs 9 us)


def _dims(raw: str) -> list[str]:
    """Input Dims JSON as the canonical shape's parts: [[512], [141, 512], []] -> 512;141x512;()"""
    return ["x".join(str(d) for d in t) if t else "()" for t in json.loads(raw)]


def test_the_slice_tail_is_compared_with_every_shape_pooled() -> None:
    th = Thresholds()
    rng = np.random.default_rng(3)
    a = {s: _side(rng, 300, shape_scale=1 + i) for i, s in enumerate(SHAPES[:3])}
    b = {s: _side(rng, 300, 1.3, shape_scale=1 + i) for i, s in enumerate(SHAPES[:3])}
    tail = {t.quantile: t for t in compare(a, b, th).tail}
    assert set(tail) == {"p50", "p95", "p99"}  # 900 requests a side: p99 has its evidence
    for t in tail.values():
        assert t.ci[0] <= 1.3 <= t.ci[1]
        assert t.moved
    thin = compare({"x": _side(rng, 50)}, {"x": _side(rng, 50)}, th).tail
    assert [t.quantile for t in thin] == ["p50", "p95"]  # 50 < min_samples_p99: no p99


@pytest.mark.slow
def test_the_mapping_of_a_run_against_itself_does_not_move(
    demo_dataset: Path, tmp_path: Path
) -> None:
    """The demo's resnet50-int8/prod compared with itself: every slice figure equal, each
    shape's signed error change 0 with a CI around it, no decision changed; and the mapping
    section and compare.json carry them."""
    from mapreport.run.comparing import compare_runs

    done = compare_runs(
        demo_dataset, demo_dataset, tmp_path / "out", "resnet50-int8/prod", "resnet50-int8/prod"
    )
    mc = done.mapping
    assert mc is not None
    for fig in (mc.coverage, mc.mape, mc.within_tolerance, mc.kendall_tau):
        assert fig.change == 0
    assert mc.decisions_changed == ()
    measured = [m for m in mc.shapes if m.change is not None]
    assert measured
    for m in measured:
        assert m.change == 0
        assert m.change_ci is not None
        assert m.change_ci.low < 0 < m.change_ci.high
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert doc["mapping"]["mape_weighted"]["change"] == 0
    assert all(s["verdict"] in ("same", "insufficient") for s in doc["shapes"])
    assert "The mapping, compared" in (tmp_path / "out" / "compare.html").read_text()
    import pypdf

    pdf = pypdf.PdfReader(tmp_path / "out" / "compare.pdf")
    assert 1 <= len(pdf.pages) <= 4
    assert "no change shown" in pdf.pages[0].extract_text() or "B is" in pdf.pages[0].extract_text()


def test_the_ship_decision_reads_the_sla_and_the_tail() -> None:
    from mapreport.analysis.comparing.compare import QuantileComparison, ship_check
    from mapreport.core.kinds import ShipReason

    def q(name: str, a: float, b: float, lo: float, hi: float) -> QuantileComparison:
        return QuantileComparison(name, 500, 500, a, b, b / a, (lo, hi), not lo <= 1 <= hi)

    flat = (q("p95", 5_000, 5_100, 0.97, 1.05), q("p99", 8_000, 8_100, 0.95, 1.08))
    assert ship_check(flat, {}).reason == ShipReason.NO_SLA
    assert ship_check(flat, {}).safe is None
    assert ship_check(flat, {"p95": 9_000, "p99": 12_000}).reason == ShipReason.SAFE
    missed = ship_check(flat, {"p99": 8_000})
    assert (missed.reason, missed.quantile, missed.safe) == (ShipReason.MISSES_SLA, flat[1], False)
    rose = (q("p95", 5_000, 6_000, 1.1, 1.3),)
    assert ship_check(rose, {"p95": 9_000}).reason == ShipReason.TAIL_ROSE
    # a target on a quantile without its evidence (no p99 measured) decides nothing
    assert ship_check(rose[:1], {"p99": 1.0}).reason == ShipReason.NO_SLA


@pytest.mark.slow
def test_each_shape_carries_its_queue_and_compute_on_both_sides(
    demo_dataset: Path, tmp_path: Path
) -> None:
    """Issue 37: per shape, latency, queue and compute p50/p95/p99 of A and B; a served
    model's client-side timing measures no queue or compute, and says so with null."""
    from mapreport.analysis.comparing.compare_sides import side_parts
    from mapreport.dataset.store import Dataset
    from mapreport.run.comparing import compare_runs

    compare_runs(demo_dataset, demo_dataset, tmp_path / "out", "bert-base", "bert-base", pdf=False)
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    con = Dataset(demo_dataset).connect()
    parts = side_parts(con, "bert-base", "")
    for s in doc["shapes"]:
        for side in ("a", "b"):
            for part in ("latency", "queue", "compute"):
                want = parts[s["shape"]][part]
                got = s[f"{part}_{side}"]
                assert want is not None
                assert [got["p50_us"], got["p95_us"], got["p99_us"]] == pytest.approx(list(want))
        # the latency p95 stated twice is one value
        assert s["latency_b"]["p95_us"] == pytest.approx(s["p95_b_us"])


def test_the_printed_page_holds_the_moved_and_the_busiest_shapes() -> None:
    """Issue 49: the PDF prints `PRINTED_ROWS` of a long per-shape table (laying out 4,000 rows
    took minutes and gigabytes): every shape that moved, then the busiest, in the table's
    order, and it says how many it leaves out; a short table is printed whole."""
    from mapreport.report.compare import PRINTED_ROWS, lines, printed

    rng = np.random.default_rng(5)
    names = [f"batch={i}" for i in range(PRINTED_ROWS + 50)]
    a = {s: _side(rng, 30 + i) for i, s in enumerate(names)}
    b = {s: _side(rng, 30 + i, 3.0 if i < 8 else 1.0) for i, s in enumerate(names)}
    # 10,000 resamples: a p-value can reach what Benjamini-Hochberg asks of 150 tests
    c = compare(a, b, Thresholds(bootstrap_resamples=10_000))
    moved = {s.shape for s in c.moved_most(len(c.shapes))}
    assert moved == set(names[:8])
    part = printed(c, None)
    shown = [x.s.shape for x in part.lines]
    assert len(shown) == PRINTED_ROWS
    assert moved <= set(shown)
    # then the busiest: the thinnest shapes (the lowest index, fewest requests) are left out
    assert set(names[-(PRINTED_ROWS - 8) :]) <= set(shown)
    assert shown == [s.shape for s in c.shapes if s.shape in set(shown)]  # the table's order
    assert part.left_out.shapes.startswith(f"Printed: {PRINTED_ROWS} of {len(names)} shapes")
    few = compare({k: a[k] for k in names[:5]}, {k: b[k] for k in names[:5]}, Thresholds())
    whole = printed(few, None)
    assert whole.lines == lines(few)
    assert (whole.left_out.shapes, whole.more_a, whole.more_b) == ("", 0, 0)


TRACELENS_PAIRS = (
    "gaunernst_bert-small-uncased__1016001.json.gz",
    "facebook_timesformer-base-finetuned-k400__1016002.json.gz",
    "Falconsai_nsfw_image_detection__1016002.json.gz",
)
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _raw_device(path: Path) -> tuple[float, float, dict[tuple[str, str], float]]:
    """From the raw trace alone: the summed durations of its device rows (kernels, copies and
    sets) and of its kernels, and the device time per launching op x dims, a launching op inside
    an `aten::convolution` span on its thread counted as that convolution (TraceLens's rule)."""
    import gzip

    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    by_id = {e["args"]["External id"]: e for e in ops if "External id" in e.get("args", {})}
    convs = [e for e in ops if e["name"] == "aten::convolution"]

    def owner(op: dict[str, Any]) -> dict[str, Any]:
        for c in convs:
            same = (c["pid"], c["tid"]) == (op["pid"], op["tid"])
            if same and c["ts"] <= op["ts"] and c["ts"] + c["dur"] >= op["ts"] + op["dur"]:
                return dict(c)
        return op

    total = kernels = 0.0
    per: dict[tuple[str, str], float] = {}
    for e in events:
        if e.get("cat") not in DEVICE_CATS or e.get("ph") != "X":
            continue
        total += e["dur"]
        kernels += e["dur"] if e["cat"] == "kernel" else 0.0
        op = owner(by_id[e["args"]["External id"]])
        k = (op["name"], ";".join(_dims(json.dumps(op["args"]["Input Dims"]))))
        per[k] = per.get(k, 0.0) + e["dur"]
    return total, kernels, per


@pytest.mark.parametrize("name", TRACELENS_PAIRS, ids=lambda n: n.split("_")[0])
@pytest.mark.slow
def test_h100_and_mi300x_open_with_the_whole_and_list_every_op(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51, items 4 and 5: the comparison of an H100 and an MI300X trace of one model
    opens with the devices and the total device time B/A, within 1% of the raw traces' own sum;
    the op that leads the parts moves with the whole, not against it; and every device
    microsecond of either side is in an op x shape compared or listed (vendor convolutions
    aligned under `aten::convolution`, the host-device copies counted)."""
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file
    from mapreport.run.comparing import compare_runs
    from tests.conftest import REALDATA

    traces = REALDATA / "tracelens"
    if not traces.is_dir():
        pytest.skip("../shared/realdata is missing")
    for device in ("h100", "mi300"):
        ds = Dataset(tmp_path / device, create=True)
        ingest_file(ds, traces / device / name, hints={"workload": "m"})
    done = compare_runs(tmp_path / "h100", tmp_path / "mi300", tmp_path / "out", pdf=False)
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    # every op x shape's pack prints its ratio in plain DuckDB, as compare.json states it
    packs = sorted((tmp_path / "out" / "evidence").glob("*.sql"))
    assert "op" in {check_compare_pack_sql(sql, monkeypatch) for sql in packs}
    raw = [_raw_device(traces / d / name) for d in ("h100", "mi300")]
    whole = doc["whole"]
    assert whole["devices_a"] == ["NVIDIA H100 80GB HBM3"]
    assert whole["devices_b"] == ["AMD Instinct MI300X VF"]
    assert whole["ratio"] == pytest.approx(raw[1][0] / raw[0][0], rel=0.01)
    assert whole["a_us"] == pytest.approx(raw[0][0], rel=1e-9)
    assert whole["ci"][0] <= whole["ratio"] <= whole["ci"][1]
    # the whole first: the verdict opens with it, and its first part moves with it
    assert doc["verdict"].startswith("Device time, every op of both traces")
    overall = "B is slower overall" if whole["ratio"] > 1 else "B is faster overall"
    assert doc["verdict"].split("; by category")[0].endswith(overall)
    parts = done.comparison.ops_by_contribution(1)
    assert parts[0].contribution is not None
    assert parts[0].contribution > 0
    assert parts[0].op in doc["verdict"].split("Largest parts of the change:")[1][:60]
    # nothing disappears: the compared and the listed add up to each side's raw device time
    for side, (total, _, per) in zip("ab", raw, strict=True):
        listed = sum(o[f"mean_us_{side}"] * o[f"count_{side}"] for o in doc["ops"])
        listed += sum(o["total_us"] for o in doc[f"ops_only_{side}"])
        assert listed == pytest.approx(total, rel=1e-9)
        got = {(o["op"], o["shape"]) for o in (*doc["ops"], *doc[f"ops_only_{side}"])}
        # a tensor list's dims (aten::cat's) are canonicalised by the reader to the list's
        # first tensor: those keys are checked by their time above, not by their dims here
        assert {k for k in per if "[" not in k[1]} <= got
    assert not [o for o in doc["ops"] if "cudnn" in o["op"] or "miopen" in o["op"]]
    assert (doc["ops_only_a"], doc["ops_only_b"]) == ([], [])
    assert sum(c["contribution"] for c in whole["categories"]) == pytest.approx(1.0)
    html = (tmp_path / "out" / "compare.html").read_text()
    assert html.index("The whole") < html.index("The parts that made the change")


def test_an_op_only_one_side_ran_is_listed_with_its_share_and_unrecorded_dims_are_marked() -> None:
    from mapreport.analysis.comparing.compare import compare_ops, shape_recorded

    th = Thresholds(bootstrap_resamples=200)
    mm = ("aten::mm", "64x64;64x64", '["float", "float"]')
    cat = ("aten::cat", "();()", '["TensorList", "Scalar"]')
    conv = ("aten::cudnn_convolution", "1x3x8x8;4x3x3x3", '["float", "float"]')
    a = {mm: np.full(20, 10.0), cat: np.full(20, 1.0), conv: np.full(2, 50.0)}
    b = {mm: np.full(20, 8.0), cat: np.full(20, 4.0)}
    rows, only_a, only_b = compare_ops(a, b, th)
    assert only_b == ()
    (gone,) = only_a
    assert (gone.op, gone.count, gone.total_us) == (conv[0], 2, 100.0)
    assert gone.share == pytest.approx(100.0 / 320.0)
    # the whole went 320 -> 240 us: the convolution's 100 us gone are 1.25 of that change,
    # the slower cat's +60 us 0.75 against it
    assert gone.contribution == pytest.approx(1.25)
    by = {o.op: o for o in rows}
    assert not by["aten::cat"].recorded
    assert by["aten::mm"].recorded
    assert by["aten::cat"].contribution == pytest.approx(-0.75)
    assert shape_recorded("()", '["float"]')  # a 0-dim tensor (.item()) is recorded
    assert not shape_recorded("", "[]")


def test_host_time_is_each_op_own_time_and_adds_up_to_the_top_level_ops(tmp_path: Path) -> None:
    """A CPU trace (no device rows): the whole is host time, each call its own time (its span
    less its children's on the thread), so nested ops count each microsecond once."""
    import gzip

    from mapreport.analysis.comparing.compare_whole import side_ops
    from mapreport.core.kinds import TimeBasis
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file

    def op(name: str, ts: float, dur: float) -> dict[str, Any]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}

    events = [
        op("aten::linear", 0, 100),
        op("aten::t", 2, 8),
        op("aten::addmm", 12, 80),
        op("aten::copy_", 20, 30),
        op("aten::relu", 150, 20),
    ]
    path = tmp_path / "cpu.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, hints={"workload": "cpu"})
    side = side_ops(ds.connect(), "cpu", "")
    assert side.basis == TimeBasis.HOST
    own = {k[0]: float(v.sum()) for k, v in side.calls.items()}
    assert own == {
        "aten::linear": 12.0,
        "aten::t": 8.0,
        "aten::addmm": 50.0,
        "aten::copy_": 30.0,
        "aten::relu": 20.0,
    }
    assert sum(own.values()) == 120.0  # the two top-level ops' spans


def test_a_whole_over_a_different_mix_of_requests_is_not_called_faster() -> None:
    """Two runs whose shapes' shares differ by 2 points or more did different work: the whole
    says B spent less time on a different mix, not that B is faster, and page 1 names the
    shape whose share moved most; the same mix keeps 'B is faster overall'."""
    from mapreport.analysis.comparing.compare_whole import TotalComparison
    from mapreport.core.kinds import TimeBasis
    from mapreport.report.compare import headline

    rng = np.random.default_rng(6)
    a = {"small": _side(rng, 300), "large": _side(rng, 300, shape_scale=4.0)}
    fewer_large = {"small": _side(rng, 400), "large": _side(rng, 200, shape_scale=4.0)}
    total = TotalComparison(
        TimeBasis.HOST, TimeBasis.HOST, (), (), 9e6, 7e6, 600, 600, 7 / 9, (0.7, 0.85), True, ()
    )
    mixed = compare(a, fewer_large, Thresholds(bootstrap_resamples=200))
    assert mixed.mix_moved is not None
    assert mixed.mix_moved.shape in ("small", "large")
    said = headline(mixed, total)
    assert "B spent less time overall, on a different mix of requests" in said
    assert "B is faster overall" not in said
    assert "The sides served different mixes of shapes" in said
    same = compare(a, {k: v * 0.8 for k, v in a.items()}, Thresholds(bootstrap_resamples=200))
    assert same.mix_moved is None
    assert "B is faster overall" in headline(same, total)
