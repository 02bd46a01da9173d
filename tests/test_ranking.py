"""The tuning-ranking family on hand-computed cases: TenSet's pairwise accuracy, top-k recall and
weighted top-k score, TpuGraphs' top-k slowdown, and the regret of a run's pick."""

from __future__ import annotations

import numpy as np
import pytest

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.stats import kendall_tau_b
from mapreport.analysis.tuning.ranking import MATERIAL_REGRET, rank
from mapreport.analysis.tuning.ranking_metrics import (
    pairwise_accuracy,
    topk_recall,
    topk_score,
    topk_slowdown,
)
from mapreport.core.kinds import Unranked
from tests.tuning_trials import trial as _t

TH = Thresholds(bootstrap_resamples=1000)


def _tenset_pairwise(preds: np.ndarray, labels: np.ndarray) -> float:
    """TenSet's metric.py, transliterated: vec_to_pair_com and the upper triangle's xor."""

    def vec_to_pair_com(vec: np.ndarray) -> np.ndarray:
        return np.asarray((vec.reshape((-1, 1)) - vec) > 0)

    n = len(preds)
    if n <= 1:
        return 0.5
    p, lab = vec_to_pair_com(preds), vec_to_pair_com(labels)
    correct = np.triu(np.logical_not(np.logical_xor(p, lab)), k=1).sum()
    return float(correct / (n * (n - 1) / 2))


def test_pairwise_accuracy_by_hand() -> None:
    # pairs (0,1) disagree, (0,2) agree, (0,3) agree, (1,2) and (1,3) disagree, (2,3) agree
    assert pairwise_accuracy([0.9, 0.2, 0.5, 0.4], [0.5, 1.0, 0.25, 0.2]) == 0.5
    # a tie in the scores against a strict order in the measurements is a miss (TenSet's rule)
    assert pairwise_accuracy([1.0, 1.0], [1.0, 0.5]) == 0.0
    # a tie on both sides agrees
    assert pairwise_accuracy([1.0, 1.0], [0.5, 0.5]) == 1.0
    assert pairwise_accuracy([1.0], [1.0]) == 0.5


def test_pairwise_accuracy_is_tensets_formula() -> None:
    rng = np.random.default_rng(5)
    for n in (2, 3, 17, 64):
        preds = rng.integers(0, 6, n).astype(float)  # ties on purpose
        labels = rng.integers(0, 6, n).astype(float)
        assert pairwise_accuracy(preds, labels) == pytest.approx(
            _tenset_pairwise(preds, labels), abs=1e-12
        )


def test_topk_recall_by_hand() -> None:
    # the model's top 2 are {0, 2}, the measured top 2 are {1, 0}: one of two recalled
    assert topk_recall([0.9, 0.2, 0.5, 0.4], [0.5, 1.0, 0.25, 0.2], 2) == 0.5
    assert topk_recall([0.9, 0.2, 0.5, 0.4], [0.5, 1.0, 0.25, 0.2], 4) == 1.0


def test_tenset_weighted_topk_score_by_hand() -> None:
    task1 = (2.0, [0.1, 0.9, 0.5], [10.0, 20.0, 30.0])  # the model's top pick runs 20, best 10
    task2 = (1.0, [1.0, 0.0], [5.0, 4.0])  # its top pick runs 5, best 4
    assert topk_score([task1, task2], 1) == pytest.approx((2 * 10 + 4) / (2 * 20 + 5), abs=1e-15)
    # top 2: task 1's picks hold 20 and 30 (best of them 20), task 2's hold both (4)
    assert topk_score([task1, task2], 2) == pytest.approx((2 * 10 + 4) / (2 * 20 + 4), abs=1e-15)
    assert topk_score([task1, task2], 3) == 1.0


def test_tpugraphs_topk_slowdown_by_hand() -> None:
    scores, lat = [0.1, 0.9, 0.5], [10.0, 20.0, 30.0]
    assert topk_slowdown(scores, lat, 1) == 1.0  # picks 20 against the best 10
    assert topk_slowdown(scores, lat, 2) == 1.0  # 20 and 30
    assert topk_slowdown(scores, lat, 3) == 0.0


def test_regret_against_the_best_of_any_run_and_search_efficiency() -> None:
    big = [
        _t("big", 1, [130.0, 131.0, 129.0], 0.2),
        _t("big", 2, None, 0.9),
        _t("big", 3, [104.0, 105.0, 106.0], 0.5),
        _t("big", 4, [100.0, 100.5, 99.5], 0.7),
    ]
    small = [_t("small", 1, [140.0, 141.0, 139.0]), _t("small", 2, [120.0, 121.0, 119.0])]
    r = rank(big + small, TH)
    by = {c.plan_id: c for c in r.choices}
    b, s = by["big"], by["small"]
    assert (b.trials, b.candidates, b.errors) == (4, 3, 1)
    assert (b.best_us, b.chosen_us, b.regret) == (100.0, 100.0, 0.0)
    assert b.regret_ci is not None
    assert b.regret_ci.low == 0.0
    assert not b.material
    assert b.trials_to_5pct == 3
    assert b.trials_to_1pct == 4
    assert b.best_so_far_us == (130.0, 130.0, 105.0, 100.0)
    # the small run picked 120 against 100 measured by the big one: 20% regret, clear of 0
    assert s.best_plan == "big"
    assert s.chosen_us == 120.0
    assert s.regret == pytest.approx(0.2, abs=1e-12)
    assert s.regret_ci is not None
    assert s.regret_ci.low > 0.15
    assert s.regret is not None
    assert s.regret >= MATERIAL_REGRET
    assert s.material
    assert s.unscored is Unranked.NO_SCORES
    assert s.prediction is None
    # big's model: scores 0.2, 0.5, 0.7 for 130, 105, 100: every pair right
    assert b.prediction is not None
    assert b.prediction.pairwise_accuracy == 1.0
    assert b.prediction.kendall_tau == 1.0
    assert b.prediction.topk_slowdown == 0.0
    assert b.prediction.k == 3


def test_the_same_input_gives_the_same_intervals() -> None:
    trials = [_t("a", i, [100.0 + i, 101.0 + i, 99.0 + 2 * i], float(i)) for i in range(1, 9)]
    one, two = rank(trials, TH), rank(list(reversed(trials)), TH)
    assert one == two


def test_a_log_with_one_trial_per_workload_ranks_nothing() -> None:
    trials = [_t("log", 1, [50.0], task="a"), _t("log", 1, [70.0], task="b")]
    r = rank(trials, TH)
    assert r.one_per_workload
    for c in r.choices:
        assert c.unranked is Unranked.ONE_CANDIDATE
        assert c.regret is None
        assert c.regret_ci is None
        assert not c.material
        assert c.unscored is Unranked.ONE_CANDIDATE
    failed = rank([_t("x", 1, None), _t("x", 2, None)], TH).choices[0]
    assert failed.unranked is Unranked.NO_SUCCESS
    assert failed.chosen_us is None


def test_kendall_tau_is_the_shared_tau_b() -> None:
    scores = [0.3, 0.1, 0.9, 0.5, 0.5, 0.2]
    lat = [20.0, 40.0, 10.0, 12.0, 30.0, 25.0]
    r = rank([_t("a", i + 1, [x], s) for i, (x, s) in enumerate(zip(lat, scores, strict=True))], TH)
    p = r.choices[0].prediction
    assert p is not None
    thr = [min(lat) / x for x in lat]
    assert p.kendall_tau == pytest.approx(kendall_tau_b(scores, thr), abs=1e-12)
