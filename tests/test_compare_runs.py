"""Comparing two builds recorded in one dataset (issue 37): sides chosen by their environment,
run-level intervals from several runs a side, evidence packs that `explain --compare` reruns."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from scipy import stats

from mapreport.analysis import Thresholds
from mapreport.analysis.comparing.runlevel import Run, compare_runs, welch_ratio
from mapreport.app.cli import main
from tests.pack_sql import check_compare_pack_sql

SHAPES = ("batch=1,seq=32", "batch=4,seq=96", "batch=8,seq=128")
START_US = datetime(2026, 11, 28, 2, tzinfo=UTC).timestamp() * 1e6


def _run_file(path: Path, version: str, factor: float, seed: int, n: int = 600) -> None:
    """One run's native runtime file: its environment first, then `n` requests over the
    shapes, compute lognormal around a per-shape median scaled by `factor`."""
    rng = np.random.default_rng(seed)
    lines = [json.dumps({"environment": {"compiler": "xla", "compiler_version": version}})]
    t = START_US + seed * 3_600e6
    for i in range(n):
        k = i % len(SHAPES)
        b, s = (int(x.split("=")[1]) for x in SHAPES[k].split(","))
        compute = float(rng.lognormal(np.log(800.0 * (k + 1)), 0.25)) * factor
        queue = float(rng.exponential(50.0))
        lines.append(
            json.dumps(
                {
                    "workload": "bert",
                    "request_id": f"{seed}-{i}",
                    "shape": {"batch": b, "seq": s},
                    "arrival_us": t,
                    "compute_start_us": t + queue,
                    "compute_end_us": t + queue + compute,
                }
            )
        )
        t += 2_000.0
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One dataset holding three runs of build 1.4 and three of build 1.5, 1.5 at x0.8."""
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file

    root = tmp_path_factory.mktemp("builds")
    ds = Dataset(root / "ds", create=True)
    for i in range(6):
        version, factor = ("1.4", 1.0) if i < 3 else ("1.5", 0.8)
        path = root / f"run{i}.jsonl"
        _run_file(path, version, factor, seed=i)
        ingest_file(ds, path)
    return ds.root


@pytest.mark.slow
def test_sides_chosen_by_environment_give_a_run_level_interval(
    two_builds: Path, tmp_path: Path
) -> None:
    """--a/--b KEY=VALUE choose each build's files; three runs a side give each quantile a
    run-level CI that holds the planted x0.8 and excludes 1; every pack reproduces."""
    out = tmp_path / "out"
    args = ["compare", str(two_builds), str(two_builds), "--out", str(out), "--no-pdf"]
    res = CliRunner().invoke(
        main, [*args, "--a", "compiler_version=1.4", "--b", "environment.compiler_version=1.5"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "compare.json").read_text())
    assert doc["schema_version"] == "1.6"
    assert (doc["a"]["requests"], doc["b"]["requests"]) == (1800, 1800)
    assert doc["a"]["label"].endswith("[compiler_version=1.4]")
    runs = doc["runs"]
    assert (runs["runs_a"], runs["runs_b"]) == (3, 3)
    for q in runs["quantiles"]:
        lo, hi = q["ci"]
        assert lo <= 0.8 <= hi, q
        assert hi < 1.0, q
        assert q["moved"], q
    for s in doc["shapes"]:
        assert s["verdict"] == "faster", s
        assert s["evidence"] is not None
    html = (out / "compare.html").read_text()
    assert "Across runs" in html
    assert "3 runs" in html
    ids = [t["evidence"] for t in doc["tail"]] + [s["evidence"] for s in doc["shapes"]]
    for pid in ids:
        got = CliRunner().invoke(main, ["explain", pid, "--compare", str(out)])
        assert got.exit_code == 0, got.output
        assert "reproduced exactly" in got.output
        assert "from 3 file(s)" in got.output  # each side's three runs, not the other build's


def test_a_tampered_pack_is_not_reproduced_and_a_broken_one_is_refused(
    two_builds: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["compare", str(two_builds), str(two_builds), "--out", str(out), "--no-pdf"]
    sides = ["--a", "compiler_version=1.4", "--b", "compiler_version=1.5"]
    res = CliRunner().invoke(main, [*args, *sides])
    assert res.exit_code == 0, res.output
    pid = json.loads((out / "compare.json").read_text())["shapes"][0]["evidence"]
    spec = out / "evidence" / f"{pid}.json"
    data = json.loads(spec.read_text())
    data["ratio"] *= 1.5
    spec.write_text(json.dumps(data))
    got = CliRunner().invoke(main, ["explain", pid, "--compare", str(out)])
    assert got.exit_code == 5
    assert "NOT reproduced" in got.output
    # SQL text in a spec is never run: the query is rebuilt from the parameters; a field of
    # the wrong type is a one-line error, not a traceback
    data["shape"] = ["batch=1'; DROP TABLE request; --"]
    spec.write_text(json.dumps(data))
    got = CliRunner().invoke(main, ["explain", pid, "--compare", str(out)])
    assert got.exit_code == 5
    assert "not a usable pack spec" in got.output
    assert "Traceback" not in got.output
    # a value that is text is a literal: it selects no rows, and nothing else happens
    data["shape"] = "batch=1'; DROP TABLE request; --"
    spec.write_text(json.dumps(data))
    got = CliRunner().invoke(main, ["explain", pid, "--compare", str(out)])
    assert got.exit_code == 5
    assert "n 0 vs 0" in got.output


def test_a_selection_that_matches_nothing_names_what_the_files_state(
    two_builds: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["compare", str(two_builds), str(two_builds), "--out", str(out), "--no-pdf"]
    res = CliRunner().invoke(main, [*args, "--a", "compiler_version=9.9"])
    assert res.exit_code == 2
    assert "no file of bert states compiler_version=9.9" in res.output
    assert "values stated: 1.4, 1.5" in res.output
    res = CliRunner().invoke(main, [*args, "--a", "colour=red"])
    assert res.exit_code == 2
    assert "not an environment key" in res.output
    res = CliRunner().invoke(main, [*args, "--b", "compiler_version"])
    assert res.exit_code == 2
    assert "KEY=VALUE" in res.output
    assert not out.exists()


def test_one_run_a_side_claims_nothing_run_to_run() -> None:
    th = Thresholds()
    a = (Run("a", 500, (1.0, 2.0, 3.0)),)
    b = (Run("b", 500, (1.0, 2.0, 3.0)), Run("c", 500, (1.1, 2.1, 3.1)))
    for q in compare_runs(a, b, th):
        assert q.ci is None
        assert q.ratio is None
        assert not q.moved
        assert (q.runs_a, q.runs_b) == (1, 2)
    # a run under a quantile's evidence threshold does not count for it
    thin = (Run("x", 50, (1.0, 2.0, 3.0)), Run("y", 50, (1.0, 2.0, 3.0)))
    p99 = compare_runs(thin, thin, th)[2]
    assert p99.quantile == "p99"
    assert p99.runs_a == 0


def test_welch_ratio_is_the_t_interval_on_the_logs() -> None:
    """By hand: the CI of the difference of log means with Welch's degrees of freedom, as
    scipy's unequal-variance t test gives it."""
    a = np.array([10.0, 11.0, 10.5])
    b = np.array([8.0, 8.4, 8.1, 8.3])
    ratio, (lo, hi) = welch_ratio(a, b)
    test = stats.ttest_ind(np.log(b), np.log(a), equal_var=False)
    want = test.confidence_interval(0.95)
    assert ratio == pytest.approx(np.exp(np.log(b).mean() - np.log(a).mean()))
    assert (lo, hi) == pytest.approx((np.exp(want.low), np.exp(want.high)))
    same = np.array([5.0, 5.0])
    assert welch_ratio(same, same) == (1.0, (1.0, 1.0))


def test_run_level_intervals_cover_over_seeds() -> None:
    """A/A over 40 seeds, 3 runs a side whose level varies run to run (sd 5%): the interval
    holds 1 in at least 90% of seeds; x0.8 planted: it holds 0.8 as often."""
    th = Thresholds()
    held = {1.0: 0, 0.8: 0}
    for seed in range(40):
        rng = np.random.default_rng(seed)
        for factor in held:

            def runs(f: float, tag: str, rng: np.random.Generator = rng) -> tuple[Run, ...]:
                levels = rng.lognormal(0.0, 0.05, 3) * f
                return tuple(Run(f"{tag}{i}", 500, (x, 2 * x, 3 * x)) for i, x in enumerate(levels))

            q = compare_runs(runs(1.0, "a"), runs(factor, "b"), th)[1]
            assert q.ci is not None
            held[factor] += q.ci[0] <= factor <= q.ci[1]
    assert held[1.0] >= 36, held
    assert held[0.8] >= 36, held


def test_ops_are_compared_across_trace_files_only_with_two_a_side() -> None:
    from mapreport.analysis.comparing.runlevel import compare_op_runs

    k1 = ("aten::mm", "64x64;64x64", '["float"]')
    k2 = ("aten::add", "64x64", '["float"]')
    a = {k1: {"f1": 10.0, "f2": 11.0, "f3": 10.4}, k2: {"f1": 2.0, "f2": 2.1}}
    b = {k1: {"g1": 8.0, "g2": 8.5, "g3": 8.2}, k2: {"g1": 2.0}}
    (only,) = compare_op_runs(a, b)
    assert (only.op, only.runs_a, only.runs_b) == ("aten::mm", 3, 3)
    want = welch_ratio(np.array([10.0, 11.0, 10.4]), np.array([8.0, 8.5, 8.2]))
    assert (only.ratio, only.ci) == want
    assert only.moved
    assert only.ci[1] < 1.0


def test_the_moved_most_are_ranked_by_traffic_times_effect() -> None:
    """A x2 move on 1% of the traffic matters less than a x1.2 move on 60% of it."""
    from mapreport.analysis.comparing.compare import compare

    rng = np.random.default_rng(3)
    a = {
        "rare": np.sort(rng.lognormal(7, 0.1, 50)),
        "busy": np.sort(rng.lognormal(7, 0.1, 3000)),
        "mid": np.sort(rng.lognormal(7, 0.1, 1900)),
    }
    b = {"rare": a["rare"] * 2.0, "busy": a["busy"] * 1.2, "mid": a["mid"]}
    c = compare(a, b, Thresholds(bootstrap_resamples=500))
    moved = c.moved_most()
    assert [s.shape for s in moved] == ["busy", "rare"]
    assert moved[0].impact == pytest.approx(3000 / 4950 * np.log(1.2), rel=1e-9)


def test_an_out_folder_inside_a_dataset_is_refused(two_builds: Path, tmp_path: Path) -> None:
    """Issue 49: OUT that is dataset A or B, a folder inside either, or a link that points
    into one is a usage error (exit 2) in one line naming OUT and the dataset, and nothing is
    written: the packs would have gone into the dataset's own evidence/ folder."""
    other = tmp_path / "other"
    shutil.copytree(two_builds, other)
    link = tmp_path / "link"
    link.symlink_to(two_builds / "evidence", target_is_directory=True)
    before = sorted(p.relative_to(two_builds) for p in two_builds.rglob("*"))
    sides = ["--a", "compiler_version=1.4", "--b", "compiler_version=1.5"]
    for a, b, out, which in (
        (two_builds, two_builds, two_builds, "A"),
        (two_builds, two_builds, two_builds / "evidence", "A"),
        (two_builds, two_builds, two_builds / "new" / "out", "A"),
        (two_builds, two_builds, link / "out", "A"),
        (other, two_builds, two_builds / ".." / two_builds.name / "out", "B"),
    ):
        args = ["compare", str(a), str(b), "--out", str(out), "--no-pdf", *sides]
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, (out, res.output)
        said = res.output.strip().splitlines()
        assert len(said) == 1, res.output
        assert f"--out {out} is inside dataset {which} ({b if which == 'B' else a})" in said[0]
    assert sorted(p.relative_to(two_builds) for p in two_builds.rglob("*")) == before
    # a sibling whose name only starts with the dataset's is outside it
    beside = two_builds.with_name(two_builds.name + "-out")
    args = ["compare", str(two_builds), str(two_builds), "--out", str(beside), "--no-pdf"]
    res = CliRunner().invoke(main, [*args, *sides])
    assert res.exit_code == 0, res.output
    assert (beside / "compare.json").is_file()


@pytest.mark.slow
def test_every_pack_holds_the_rows_its_own_query_selects(
    two_builds: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A side's rows are read once for all of its packs (issue 49: a query per pack made a
    comparison of thousands of shapes quadratic); each pack's Parquet is still exactly what
    its own SQL selects, row for row and in order."""
    from mapreport.run.compare_packs import FOLDER, _connection, load

    out = tmp_path / "out"
    args = ["compare", str(two_builds), str(two_builds), "--out", str(out), "--no-pdf"]
    res = CliRunner().invoke(
        main, [*args, "--a", "compiler_version=1.4", "--b", "compiler_version=1.5"]
    )
    assert res.exit_code == 0, res.output
    ids = sorted({f.name.split(".")[0] for f in (out / FOLDER).iterdir()})
    assert len(ids) == 3 + 3 * len(SHAPES)  # pooled p50, p95, p99; each shape's p50, p95, p99
    cons: dict = {}
    for pid in ids:
        p = load(out, pid)
        for name, side in (("a", p.a), ("b", p.b)):
            want = _connection(cons, side).sql(p.sql(side)).to_arrow_table()
            got = pq.read_table(out / FOLDER / f"{pid}.{name}.parquet")
            assert got.num_rows > 0
            assert got.equals(want), (pid, name)
        # the .sql is self-contained: plain DuckDB makes each side's views and rows, then
        # prints the ratio compare.json states (to 1e-9) and each side's n
        check_compare_pack_sql(out / FOLDER / f"{pid}.sql", monkeypatch)


@pytest.mark.slow
def test_a_shape_b_names_otherwise_is_reproduced_from_b_own_rows(tmp_path: Path) -> None:
    """B's export names its shapes `1x32` where A's says `batch=1,seq=32`: the shapes align,
    and every shape pack selects B's rows by B's own name, so `explain` reproduces it."""
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file

    roots = []
    for side, factor in (("a", 1.0), ("b", 0.8)):
        path = tmp_path / f"{side}.jsonl"
        _run_file(path, "1.4", factor, seed=len(roots))
        if side == "b":
            rows = [json.loads(line) for line in path.read_text().splitlines()]
            for row in rows:
                if "shape" in row:
                    row["shape"] = "{batch}x{seq}".format(**row["shape"])
            path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        ds = Dataset(tmp_path / f"ds-{side}", create=True)
        ingest_file(ds, path)
        roots.append(str(ds.root))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compare", *roots, "--out", str(out), "--no-pdf", "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "compare.json").read_text())
    assert (doc["only_a"], doc["only_b"], len(doc["renamed_b"])) == ([], [], 3)
    packs = [t["evidence"] for s in doc["shapes"] for t in s["quantiles"]]
    assert len(packs) == 9
    for pid in packs:
        got = CliRunner().invoke(main, ["explain", pid, "--compare", str(out)])
        assert got.exit_code == 0, got.output
        assert "n 200 vs 200" in got.output


def test_files_that_overlap_in_time_are_one_run_and_runs_that_follow_are_not() -> None:
    """Two workers of one server write a file each over the same minutes: one run. Runs
    repeated one after another are runs. A chain of overlaps is one run."""
    from mapreport.analysis.comparing.runlevel import group_runs

    workers = [("w0", 0.0, 60.0), ("w1", 0.5, 61.0)]
    assert group_runs(workers) == {"w0": 0, "w1": 0}
    repeated = [("r2", 200.0, 260.0), ("r1", 100.0, 160.0), ("r0", 0.0, 60.0)]
    assert group_runs(repeated) == {"r0": 0, "r1": 1, "r2": 2}
    chain = [("a", 0.0, 10.0), ("b", 9.0, 20.0), ("c", 19.0, 30.0), ("d", 31.0, 40.0)]
    assert group_runs(chain) == {"a": 0, "b": 0, "c": 0, "d": 1}


def test_two_workers_of_each_run_count_as_one_run_a_side(tmp_path: Path) -> None:
    """Each side is one server run with two workers, a file each (their requests interleaved
    in time): one run a side, so the shapes are tested against the run's shift, as the same
    run's single export would be."""
    from mapreport.dataset.store import Dataset
    from mapreport.ingest import ingest_file
    from mapreport.run.comparing import compare_runs

    roots = []
    for side, factor in (("a", 1.0), ("b", 0.7)):
        ds = Dataset(tmp_path / f"ds-{side}", create=True)
        for worker in (0, 1):
            path = tmp_path / f"{side}{worker}.jsonl"
            _run_file(path, "1.4", factor, seed=worker, n=300)
            rows = [json.loads(line) for line in path.read_text().splitlines()]
            for row in rows[1:]:  # seed 1 starts an hour later: back, 1 ms after worker 0's
                for key in ("arrival_us", "compute_start_us", "compute_end_us"):
                    row[key] += worker * (1_000.0 - 3_600e6)
            path.write_text("".join(json.dumps(row) + "\n" for row in rows))
            ingest_file(ds, path)
        roots.append(ds.root)
    out = tmp_path / "out"
    done = compare_runs(roots[0], roots[1], out, pdf=False)
    assert done.runs is not None
    assert (done.runs.runs_a, done.runs.runs_b) == (1, 1)
    doc = json.loads((out / "compare.json").read_text())
    assert doc["run_shift"], "one run a side: the shapes are tested against its shift"
    assert {s["verdict"] for s in doc["shapes"]} == {"same"}
