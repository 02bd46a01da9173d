"""The tuning-choices judgement (`ranking.judge`, docs/metrics.md "Judgements"): failing where a
run's chosen config is slower than the best measured with its whole regret interval beyond the
5% bound on repeated measurements, at risk where the regret is material short of that or a
run's every trial failed, healthy where every choice is within the bound or within noise of it
(hand-made runs, the real MetaSchedule runs of tests/corpus/tvm_tuned and the real Inductor
runs of tests/corpus/inductor_autotune), and in findings.json's `judgements`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.tuning.ranking import MATERIAL_REGRET, Trial, judge, rank, tuning_ranking
from mapreport.app.cli import main
from mapreport.core.kinds import FigureUnit, JudgementFamily, Status, StatusReason
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file
from tests.tuning_trials import trial as _t

TH = Thresholds(bootstrap_resamples=1000)
CORPUS = Path(__file__).resolve().parent / "corpus"


def _judged(trials: list[Trial]) -> tuple[Status, StatusReason, str]:
    j = judge(rank(trials, TH))
    assert j is not None
    assert j.family is JudgementFamily.RANKING
    return j.state, j.reason, j.subject


BIG = [_t("big", 1, [130.0, 131.0, 129.0]), _t("big", 2, [100.0, 100.5, 99.5])]
"""A run that found 100 us after trying 130 us."""


def test_a_choice_whose_whole_interval_is_beyond_the_bound_is_failing() -> None:
    small = [_t("small", 1, [140.0, 141.0, 139.0]), _t("small", 2, [120.0, 121.0, 119.0])]
    j = judge(rank(BIG + small, TH))
    assert j is not None
    assert (j.state, j.reason) == (Status.FAILING, StatusReason.REGRET_MATERIAL)
    assert j.subject == "mm at 8x8 (small)"
    assert j.figure == pytest.approx(0.2, abs=1e-12)
    assert (j.unit, j.bound, j.n) == (FigureUnit.SHARE, MATERIAL_REGRET, 2)
    assert j.ci is not None
    assert j.ci[0] >= MATERIAL_REGRET


def test_a_material_regret_whose_interval_reaches_below_the_bound_is_at_risk() -> None:
    # 8% slower on average, repeats spread so the interval is clear of 0 but not of 5%
    small = [_t("small", 1, [140.0, 141.0]), _t("small", 2, [103.0, 112.0, 109.0, 108.0])]
    r = rank(BIG + small, TH)
    c = next(c for c in r.choices if c.plan_id == "small")
    assert c.material
    assert c.regret_ci is not None
    assert c.regret_ci.low < MATERIAL_REGRET
    assert _judged(BIG + small) == (Status.AT_RISK, StatusReason.SEARCH_SHORT, "mm at 8x8 (small)")


def test_one_measurement_each_is_no_evidence_for_failing() -> None:
    """Inductor records one time per choice and block: a 20% regret between two single
    measurements has an interval of one point, which says nothing of the noise."""
    big = [_t("big", 1, [130.0]), _t("big", 2, [100.0])]
    small = [_t("small", 1, [140.0]), _t("small", 2, [120.0])]
    c = next(c for c in rank(big + small, TH).choices if c.plan_id == "small")
    assert (c.repeats, c.material) == (1, True)
    assert _judged(big + small)[:2] == (Status.AT_RISK, StatusReason.SEARCH_SHORT)


def test_a_regret_within_noise_stays_healthy() -> None:
    # 10% slower on average, but the repeats overlap the best's: the interval holds 0
    small = [_t("small", 1, [140.0]), _t("small", 2, [85.0, 140.0, 105.0])]
    c = next(c for c in rank(BIG + small, TH).choices if c.plan_id == "small")
    assert c.regret is not None
    assert c.regret >= MATERIAL_REGRET
    assert not c.material
    assert _judged(BIG + small)[:2] == (Status.HEALTHY, StatusReason.CHOSE_WELL)


def test_a_run_where_every_trial_failed_is_at_risk() -> None:
    failed = [_t("broken", 1, None), _t("broken", 2, None)]
    assert _judged(BIG + failed) == (
        Status.AT_RISK,
        StatusReason.TUNING_FAILED,
        "mm at 8x8 (broken)",
    )


def test_choices_within_the_bound_are_healthy_and_unranked_records_not_judged() -> None:
    close = [_t("close", 1, [103.0, 102.0, 104.0]), _t("close", 2, [101.0, 101.5, 100.5])]
    j = judge(rank(BIG + close, TH))
    assert j is not None
    assert (j.state, j.reason, j.n) == (Status.HEALTHY, StatusReason.CHOSE_WELL, 2)
    assert j.figure == pytest.approx(0.01, abs=1e-12)
    one = [_t("log", 1, [50.0], task="a"), _t("log", 1, [70.0], task="b")]
    j = judge(rank(one, TH))
    assert j is not None
    assert (j.state, j.reason, j.n) == (Status.NOT_JUDGED, StatusReason.NOTHING_RANKED, 2)
    assert judge(None) is None


def test_failing_outranks_at_risk_in_one_slice() -> None:
    small = [_t("small", 1, [140.0, 141.0, 139.0]), _t("small", 2, [120.0, 121.0, 119.0])]
    failed = [_t("broken", 1, None)]
    assert _judged(BIG + small + failed)[:2] == (Status.FAILING, StatusReason.REGRET_MATERIAL)


def _dataset(tmp_path: Path, files: list[Path], workload: str) -> Dataset:
    ds = Dataset(tmp_path / "ds", create=True)
    for f in files:
        assert ingest_file(ds, f, hints={"workload": workload}).rejected == 0
    return ds


def _tvm(*runs: str) -> list[Path]:
    return [next((CORPUS / "tvm_tuned" / r).glob("database_tuning_record.json*")) for r in runs]


def test_real_metaschedule_runs(tmp_path: Path) -> None:
    """The xgb runs chose their own best (regret 0): healthy. With the run whose every build
    timed out beside them, that run has no tuned config: at risk."""
    ds = _dataset(tmp_path / "a", _tvm("matmul_128_xgb", "conv2d_14x14x32_xgb"), "tvm")
    j = judge(tuning_ranking(ds.connect(), "tvm", "", TH))
    assert j is not None
    assert (j.state, j.reason, j.n, j.figure) == (Status.HEALTHY, StatusReason.CHOSE_WELL, 2, 0.0)
    runs = ("matmul_128_xgb", "conv2d_14x14x32_xgb", "matmul_128_random")
    ds = _dataset(tmp_path / "b", _tvm(*runs), "tvm")
    j = judge(tuning_ranking(ds.connect(), "tvm", "", TH))
    assert j is not None
    assert (j.state, j.reason, j.n) == (Status.AT_RISK, StatusReason.TUNING_FAILED, 32)
    assert j.subject.endswith("(matmul_128_random)")


def test_a_real_run_stopped_after_its_first_round_is_failing(tmp_path: Path) -> None:
    """The real 96-trial matmul run's first 16 records (its first round of 16 candidates: what a
    budget of 16 had measured, its workload file beside them) against the whole run: its best,
    197.3 us, is 54% above the 127.8 us the run found at trial 94, on 3 repeats each."""
    full = CORPUS / "tvm_tuned" / "matmul_128_xgb"
    first = tmp_path / "matmul_128_xgb_first16"
    first.mkdir()
    records = gzip.decompress((full / "database_tuning_record.json.gz").read_bytes())
    (first / "database_tuning_record.json").write_bytes(b"".join(records.splitlines(True)[:16]))
    workloads = gzip.decompress((full / "database_workload.json.gz").read_bytes())
    (first / "database_workload.json").write_bytes(workloads)
    ds = _dataset(tmp_path, [*_tvm("matmul_128_xgb"), first / "database_tuning_record.json"], "t")
    r = tuning_ranking(ds.connect(), "t", "", TH)
    j = judge(r)
    assert j is not None
    assert (j.state, j.reason) == (Status.FAILING, StatusReason.REGRET_MATERIAL)
    assert j.subject.endswith("(matmul_128_xgb_first16)")
    assert j.figure == pytest.approx(197.3 / 127.8 - 1, abs=0.01)
    assert j.ci is not None
    assert j.ci[0] >= MATERIAL_REGRET


INDUCTOR = CORPUS / "inductor_autotune"


@pytest.mark.parametrize(
    "runs",
    [("quiet_a",), ("quiet_a", "quiet_b", "loaded"), ("threads2",)],
    ids=["one-run", "three-runs-alike", "oversubscribed"],
)
def test_real_inductor_runs_that_pick_alike_stay_healthy(
    tmp_path: Path, runs: tuple[str, ...]
) -> None:
    """Inductor picks the same kernel in every run at 1 thread (quiet or loaded): no regret,
    healthy; the oversubscribed run alone picks its own best by mean."""
    ds = _dataset(tmp_path, [INDUCTOR / f"{r}.log" for r in runs], "ind")
    r = tuning_ranking(ds.connect(), "ind", "", TH)
    assert r is not None
    assert {c.regret for c in r.choices} == {0.0}
    j = judge(r)
    assert j is not None
    assert (j.state, j.reason, j.n) == (Status.HEALTHY, StatusReason.CHOSE_WELL, len(r.choices))


def test_findings_json_states_the_judgement(tmp_path: Path) -> None:
    runs = ("matmul_128_xgb", "conv2d_14x14x32_xgb", "matmul_128_random")
    ds = _dataset(tmp_path, _tvm(*runs), "tvm")
    out = tmp_path / "out"
    args = ["report", "--dataset", str(ds.root), "--out", str(out), "--no-pdf", "--slice", "tvm"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "tvm" / "findings.json").read_text())
    (line,) = [j for j in doc["judgements"] if j["family"] == "ranking"]
    assert (line["state"], line["reason"]) == ("at_risk", "tuning_failed")
    assert "every one of 32 trials failed" in line["words"]
