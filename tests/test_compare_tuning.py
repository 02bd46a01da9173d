"""Two tuning runs compared (`compare_tuning`, docs/compare.md "Tuning, compared"): per
workload both sides tuned, which side chose better (B's chosen time over A's, a bootstrap of
the chosen configs' repeats) and which side's cost model ranks better (pairwise accuracy, the
change's CI from the sides' own); the real MetaSchedule matmul run of tests/corpus/tvm_tuned
cut to its first 16 trials against the whole run, through the CLI, and the run against itself
as the clean control."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mapreport.analysis.comparing.compare_tuning import compare_tuning
from mapreport.analysis.tuning.ranking import Trial, rank, tuning_ranking
from mapreport.app.cli import main
from mapreport.core.kinds import TuningEdge
from mapreport.run.api_compare import read_compare
from tests.test_tuning_actions import TH, _dataset, _first, _record


def _t(plan: str, trial: int, mean: float, score: float, task: str = "mm") -> Trial:
    costs = (mean * 0.99, mean, mean * 1.01)
    return Trial(plan, task, task, "llvm", "8x8", trial, f"{plan}-{trial}", costs, mean, None,
                 score, "xgb", plan)  # fmt: skip


def test_a_model_that_orders_every_pair_ranks_better_than_one_that_inverts_them() -> None:
    """40 candidates a side, the same times: A's scores order them all (pairwise accuracy 1),
    B's invert them (0); both picked the same best time, so neither chose better."""
    times = [100.0 + 5 * i for i in range(40)]
    a = rank([_t("a", i + 1, m, -m) for i, m in enumerate(times)], TH)
    b = rank([_t("b", i + 1, m, m) for i, m in enumerate(times)], TH)
    t = compare_tuning(a, b, TH)
    assert t is not None
    (w,) = t.workloads
    assert (w.a.pairwise_accuracy, w.b.pairwise_accuracy) == (1.0, 0.0)
    assert (w.ranks, t.ranks) == (TuningEdge.A_BETTER, TuningEdge.A_BETTER)
    assert w.chosen_ratio == 1.0
    assert (w.chose, t.chose) == (TuningEdge.WITHIN_NOISE, TuningEdge.WITHIN_NOISE)
    assert compare_tuning(None, None, TH) is None


def _compare(tmp_path: Path, a: Path, b: Path) -> dict[str, Any]:
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compare", str(a), str(b), "--out", str(out), "--no-pdf"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads((out / "compare.json").read_text())
    assert doc["schema_version"] == "1.6"
    assert doc["tuning"]["text"] in doc["verdict"]
    assert doc["tuning"]["text"] in res.output.replace("\n          ", " ")
    html = (out / "compare.html").read_text()
    assert "Tuning, compared" in html
    back = read_compare(out)
    assert back.tuning is not None
    assert back.tuning.chose.value == doc["tuning"]["chose"]
    return doc


def test_a_run_cut_to_16_trials_against_the_whole_run_chose_worse(tmp_path: Path) -> None:
    """The real 96-trial matmul run's first 16 records (A) against the whole run (B), each its
    own dataset: A chose 197.3 us, B 127.8 us, x0.65 of A's time with a CI clear of 1 (3
    repeats each): B chose better; A's regret against the best either side measured is the
    regret the two runs' ranking gives in one dataset (54.4%). Their models' pairwise
    accuracies (0.56 over 12 candidates, 0.52 over 67) are within noise of each other."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "ab").mkdir()
    cut = _first(tmp_path / "a", "matmul_128_xgb", 16)
    da = _dataset(tmp_path / "a", [cut], "tvm")
    db = _dataset(tmp_path / "b", [_record("matmul_128_xgb")], "tvm")
    doc = _compare(tmp_path, da.root, db.root)
    t = doc["tuning"]
    (w,) = t["workloads"]
    assert (t["chose"], t["ranks"]) == ("b_better", "within_noise")
    assert (w["a"]["plan_id"], w["b"]["plan_id"]) == ("matmul_128_xgb_first16", "matmul_128_xgb")
    assert w["chosen_ratio"] == pytest.approx(127.78 / 197.34, abs=1e-3)
    assert w["chosen_ci"][1] < 1
    assert t["chosen_ratio"] == pytest.approx(w["chosen_ratio"], rel=1e-12)
    # the cross-side regret is the one-dataset ranking's, from the same records
    both = tuning_ranking(_dataset(tmp_path / "ab", [cut, _record("matmul_128_xgb")], "tvm")
                          .connect(), "tvm", "", TH)  # fmt: skip
    assert both is not None
    (own,) = [c for c in both.choices if c.plan_id == "matmul_128_xgb_first16"]
    assert w["a"]["regret"] == pytest.approx(own.regret, rel=1e-12)
    assert w["a"]["regret_ci"][0] > 0
    assert w["b"]["regret"] == 0
    assert (w["a"]["scored"], w["b"]["scored"]) == (12, 67)
    assert w["pairwise_change_ci"][0] < 0 < w["pairwise_change_ci"][1]
    assert t["text"].startswith("Neither side's cost model ranks better: pairwise accuracy 0.56")
    assert "B chose better: its chosen configs take x0.65" in t["text"]


def test_the_same_run_on_both_sides_shows_no_difference(tmp_path: Path) -> None:
    """The clean control: the whole run on both sides chose the same config and ranks the
    same; neither is called better."""
    ds = _dataset(tmp_path, [_record("matmul_128_xgb")], "tvm")
    t = _compare(tmp_path, ds.root, ds.root)["tuning"]
    (w,) = t["workloads"]
    assert (t["chose"], t["ranks"], w["chose"], w["ranks"]) == ("within_noise",) * 4
    assert w["chosen_ratio"] == 1.0
    assert w["chosen_ci"][0] < 1 < w["chosen_ci"][1]
    assert w["pairwise_change"] == 0
    assert "the choices are within noise of each other" in t["text"]
