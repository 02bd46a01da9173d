"""The tuning-regret action (`tuning_actions.tuning_actions`, docs/metrics.md "Did the compiler
choose well?"): a run whose chosen config is a material regret on repeated measurements gets one
owned action (compiler lead) with its remedy, rollback trigger and validation matrix; a choice
within noise of the best, within the bound, measured once each, or with nothing to rank gets
none. Hand-made runs, the real MetaSchedule runs of tests/corpus/tvm_tuned (cut to their first
round, as a smaller budget had measured them), the real Inductor runs of
tests/corpus/inductor_autotune and the shipped TVM logs of ../shared/realdata."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from mapreport.analysis.actions import action_params as P
from mapreport.analysis.actions.actions import ROLLBACK_RUNS, Action, Scope
from mapreport.analysis.actions.tuning_actions import POOR_PAIRWISE, Regret, tuning_actions
from mapreport.analysis.base.common import Percentiles, Review, Thresholds
from mapreport.analysis.serving.blocking import Blocking
from mapreport.analysis.tuning.ranking import MATERIAL_REGRET, Ranking, rank, tuning_ranking
from mapreport.core.kinds import ActionKind, Criterion, OwnerRole, RegretRemedy
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file
from mapreport.report import prose, words
from tests.conftest import REALDATA
from tests.tuning_trials import trial as _t

TH = Thresholds(bootstrap_resamples=1000)
CORPUS = Path(__file__).resolve().parent / "corpus"
TUNED = CORPUS / "tvm_tuned"
INDUCTOR = CORPUS / "inductor_autotune"
SCOPE = Scope(
    "w",
    "",
    TH,
    Review(owners={OwnerRole.COMPILER_LEAD: "kai"}),
    (),
    None,
    Percentiles(0, None, None, None),
    Blocking(()),
    None,
)


BIG = [_t("big", 1, [130.0, 131.0, 129.0]), _t("big", 2, [100.0, 100.5, 99.5])]
"""A run that found 100 us after trying 130 us (within 1% of its best at trial 2)."""


def _one(r: Ranking) -> Action:
    (a,) = tuning_actions(SCOPE, r)
    assert (a.kind, a.owner_role, a.owner) == (
        ActionKind.TUNING_REGRET,
        OwnerRole.COMPILER_LEAD,
        "kai",
    )
    assert isinstance(a.params, Regret)
    assert prose.action_title(a, "w")
    return a


def test_a_material_regret_gets_one_owned_action_with_its_matrix_and_rollback() -> None:
    small = [_t("small", 1, [140.0, 141.0, 139.0]), _t("small", 2, [120.0, 121.0, 119.0])]
    other = [_t("big", 1, [50.0, 51.0, 49.0], task="add"), _t("big", 2, [60.0, 61.0], task="add")]
    a = _one(rank(BIG + small + other, TH))
    p = a.params
    assert isinstance(p, Regret)
    assert (p.plan_id, p.best_plan, p.best_trial, p.budget) == ("small", "big", 2, 2)
    assert p.regret == pytest.approx(0.2, abs=1e-12)
    assert p.remedy is RegretRemedy.PIN_BEST  # 2 trials, as many as the best run needed
    assert a.shape == "mm 8x8"
    assert (a.evidence.metric, a.evidence.value, a.evidence.n) == ("regret", p.regret, 3)
    assert a.evidence.ci is not None
    assert a.evidence.ci.low >= MATERIAL_REGRET
    target, guard = a.validation_matrix
    assert (target.shape, target.metric, target.criterion, target.limit) == (
        "mm 8x8",
        "regret",
        Criterion.REGRET_WITHIN,
        MATERIAL_REGRET,
    )
    assert (guard.shape, guard.metric, guard.baseline, guard.criterion) == (
        "add 8x8",
        "chosen_us",
        50.0,
        Criterion.GUARDS_NEIGHBOUR,
    )
    rb = a.rollback_trigger
    assert (rb.metric, rb.pre_change, rb.runs) == ("chosen_us", 120.0, ROLLBACK_RUNS)
    assert rb.threshold == pytest.approx(132.0)
    title = prose.action_title(a, "w")
    assert title.startswith("Pin the best measured config (config big-2) for mm at 8x8 on llvm")
    assert "20.0% slower than the 100 µs run big measured at trial 2" in title
    assert "≤ 5.0%" in words.criterion(target)
    assert P.decode(P.encode(p)) == p  # the history stores it and reads it back


def test_choices_within_noise_within_the_bound_or_measured_once_get_none() -> None:
    noisy = [_t("small", 1, [140.0]), _t("small", 2, [85.0, 140.0, 105.0])]  # CI holds 0
    close = [_t("close", 1, [103.0, 102.0, 104.0]), _t("close", 2, [101.0, 101.5, 100.5])]
    big_once = [_t("big", 1, [130.0]), _t("big", 2, [100.0])]
    once = [_t("once", 1, [140.0]), _t("once", 2, [120.0])]  # material, one point each
    failed = [_t("broken", 1, None), _t("broken", 2, None)]
    for trials in (BIG + noisy, BIG + close, big_once + once, BIG + failed):
        r = rank(trials, TH)
        assert tuning_actions(SCOPE, r) == [], [c.plan_id for c in r.choices if c.material]
    c = next(c for c in rank(big_once + once, TH).choices if c.plan_id == "once")
    assert (c.material, c.repeats) == (True, 1)
    assert tuning_actions(SCOPE, None) == []


def test_a_run_that_stopped_short_of_the_budget_is_retuned_with_it() -> None:
    # both searches improve 10 us a trial: the long one reaches 120 us at trial 8, the short
    # one stops at 170 us after 3
    long = [_t("long", n, [200 - 10 * n, 201 - 10 * n, 199 - 10 * n]) for n in range(1, 9)]
    short = [_t("short", n, [200 - 10 * n, 201 - 10 * n, 199 - 10 * n]) for n in range(1, 4)]
    a = _one(rank(long + short, TH))
    assert isinstance(a.params, Regret)
    assert (a.params.remedy, a.params.budget, a.params.trials) == (RegretRemedy.RETUNE, 8, 3)
    assert prose.action_title(a, "w").startswith("Retune mm at 8x8 on llvm with at least 8 trials")


def test_a_model_shown_to_rank_poorly_is_fixed_first() -> None:
    """The short run's model scores its 8 candidates in the reverse of their times: its
    pairwise accuracy is 0 with an interval wholly below the bar, so it is fixed first."""
    long = [_t("long", n, [200 - 10 * n, 201 - 10 * n, 199 - 10 * n]) for n in range(1, 13)]
    short = [_t("short", n, [300.0 - n, 301.0 - n, 299.0 - n], score=-n) for n in range(1, 9)]
    a = _one(rank(long + short, TH))
    p = a.params
    assert isinstance(p, Regret)
    assert p.remedy is RegretRemedy.FIX_COST_MODEL
    assert p.pairwise_accuracy == 0.0
    assert p.pairwise_high is not None
    assert p.pairwise_high < POOR_PAIRWISE
    assert [v.criterion for v in a.validation_matrix] == [
        Criterion.REGRET_WITHIN,
        Criterion.RANKS_WELL,
    ]
    assert prose.action_title(a, "w").startswith("Fix the cost model (xgb) for mm: it ranked 0.0%")


def _dataset(tmp_path: Path, files: list[Path], workload: str = "t") -> Dataset:
    ds = Dataset(tmp_path / "ds", create=True)
    for f in files:
        assert ingest_file(ds, f, hints={"workload": workload}).rejected == 0
    return ds


def _ranking(tmp_path: Path, files: list[Path]) -> Ranking:
    r = tuning_ranking(_dataset(tmp_path, files).connect(), "t", "", TH)
    assert r is not None
    return r


def _record(run: str) -> Path:
    return next((TUNED / run).glob("database_tuning_record.json*"))


def _first(tmp_path: Path, run: str, n: int) -> Path:
    """A real run's first `n` records (what a budget of n had measured), with its workload
    file and the cost model's scores of those trials beside them."""
    full, cut = TUNED / run, tmp_path / f"{run}_first{n}"
    cut.mkdir()
    records = gzip.decompress((full / "database_tuning_record.json.gz").read_bytes())
    (cut / "database_tuning_record.json").write_bytes(b"".join(records.splitlines(True)[:n]))
    workloads = gzip.decompress((full / "database_workload.json.gz").read_bytes())
    (cut / "database_workload.json").write_bytes(workloads)
    scores = gzip.decompress((full / "database_cost_model.json.gz").read_bytes())
    kept = [x for x in scores.splitlines(True) if json.loads(x)[1] <= n]
    (cut / "database_cost_model.json").write_bytes(b"".join(kept))
    return cut / "database_tuning_record.json"


def test_a_real_run_cut_to_its_first_round_is_retuned_with_the_budget_that_found_the_best(
    tmp_path: Path,
) -> None:
    """The real 96-trial matmul run's first 16 records against the whole run: 197.3 us chosen
    against the 127.8 us found at trial 94 (54%, 3 repeats each); the cut run's first-round
    scores rank its 12 candidates with an interval too wide to show the model poor, so the
    budget decides: retune with the 94 trials the whole run needed."""
    r = _ranking(tmp_path, [_record("matmul_128_xgb"), _first(tmp_path, "matmul_128_xgb", 16)])
    a = _one(r)
    p = a.params
    assert isinstance(p, Regret)
    assert (p.plan_id, p.best_plan, p.best_trial) == (
        "matmul_128_xgb_first16",
        "matmul_128_xgb",
        94,
    )
    assert (p.remedy, p.budget, p.trials, p.repeats) == (RegretRemedy.RETUNE, 94, 16, 3)
    assert p.regret == pytest.approx(197.3 / 127.8 - 1, abs=0.01)
    assert p.regret_low > MATERIAL_REGRET
    assert a.shape == "workload#0 128x128;128x128;128x128"
    assert "with at least 94 trials" in prose.action_title(a, "w")


def test_a_real_run_whose_model_ranks_poorly_gets_the_model_fixed(tmp_path: Path) -> None:
    """The real conv2d run's first 16 records against the whole run: it chose 28% above the
    best (found at trial 19), and its XGBoost scores ranked 36% of its 8 candidates' pairs
    right, the whole interval below 70%: fix the model, then retune."""
    cut = _first(tmp_path, "conv2d_14x14x32_xgb", 16)
    a = _one(_ranking(tmp_path, [_record("conv2d_14x14x32_xgb"), cut]))
    p = a.params
    assert isinstance(p, Regret)
    assert (p.remedy, p.budget, p.cost_model) == (RegretRemedy.FIX_COST_MODEL, 19, "xgb")
    assert p.pairwise_accuracy == pytest.approx(10 / 28, abs=1e-9)
    assert p.regret_low > MATERIAL_REGRET


@pytest.mark.parametrize(
    "runs",
    [
        ("matmul_128_xgb", "conv2d_14x14x32_xgb"),
        ("matmul_128_xgb", "conv2d_14x14x32_xgb", "matmul_128_random"),
    ],
    ids=["xgb-runs", "with-a-run-that-found-nothing"],
)
def test_real_runs_that_chose_their_best_get_none(tmp_path: Path, runs: tuple[str, ...]) -> None:
    """The xgb runs pick their own best (regret 0); the run whose every build timed out has
    no regret to act on (its judgement is at risk: tuning failed)."""
    r = _ranking(tmp_path, [_record(x) for x in runs])
    assert tuning_actions(SCOPE, r) == []


@pytest.mark.parametrize(
    ("runs", "regret"),
    [(("quiet_a", "quiet_b", "loaded"), 0.0), (("quiet_a", "quiet_b", "threads2"), 0.217)],
    ids=["alike", "within-noise"],
)
def test_real_inductor_runs_within_noise_get_none(
    tmp_path: Path, runs: tuple[str, ...], regret: float
) -> None:
    """At 1 thread every run picks the same kernel (regret 0); beside a run at 2 threads on the
    shared 2-core machine, that run's pick at batch 128 is 21.7% above the best, its interval
    holding 0: within its noise, no action."""
    r = _ranking(tmp_path, [INDUCTOR / f"{x}.log" for x in runs])
    assert max(c.regret or 0.0 for c in r.choices) == pytest.approx(regret, abs=1e-3)
    assert not any(c.material for c in r.choices)
    assert tuning_actions(SCOPE, r) == []


SHIPPED = sorted((REALDATA / "tvm").rglob("*.json")) if (REALDATA / "tvm").is_dir() else []


@pytest.mark.skipif(not SHIPPED, reason="../shared/realdata is missing")
def test_shipped_logs_of_one_trial_per_workload_get_none(tmp_path: Path) -> None:
    for n, path in enumerate(SHIPPED):
        ds = Dataset(tmp_path / str(n), create=True)
        ingest_file(ds, path, hints={"workload": "shipped"})
        r = tuning_ranking(ds.connect(), "shipped", "", TH)
        assert r is not None
        assert r.one_per_workload
        assert tuning_actions(SCOPE, r) == [], path


def test_a_report_of_a_material_regret_lists_the_action(tmp_path: Path) -> None:
    """End to end: the cut matmul run beside the whole run, reported; the action stands in
    findings.json with its owner, and the clean control (the xgb runs) has none."""
    from click.testing import CliRunner

    from mapreport.app.cli import main

    cut = _first(tmp_path, "matmul_128_xgb", 16)
    ds = _dataset(tmp_path, [_record("matmul_128_xgb"), cut], "tvm")
    out = tmp_path / "out"
    args = ["report", "--dataset", str(ds.root), "--out", str(out), "--no-pdf", "--slice", "tvm"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "tvm" / "findings.json").read_text())
    (action,) = [a for a in doc["actions"] if a["class"] == "tuning_regret"]
    assert action["owner_role"] == "compiler_lead"
    assert action["title"].startswith("Retune workload#0 at 128x128;128x128;128x128")
    # its impact: the chosen config's time above the best, per call (197.3 - 127.8 us)
    (row,) = [x for x in doc["ranking"] if x["plan_id"] == "matmul_128_xgb_first16"]
    impact = action["impact"]
    assert impact["unit"] == "device_us_per_call"
    assert impact["value"] == pytest.approx(row["chosen_us"] - row["best_us"], rel=1e-12)
    assert impact["value"] == pytest.approx(197.3 - 127.8, abs=0.1)
    assert impact["text"].endswith("of device time per call")
