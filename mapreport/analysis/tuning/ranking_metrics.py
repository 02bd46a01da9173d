"""The ranking-quality formulas of the tuning literature, exactly as their anchors define them,
as pure functions over arrays (docs/metrics.md, "Did the compiler choose well?").

`scores` are a cost model's scores (higher: predicted faster; a predicted time is negated
first), `throughputs` the measured ones (TenSet's labels: the task's best time over the
candidate's, so 1.0 is the best), `latencies` the measured times. Ties in a top-k pick are
broken by record order (a stable sort), where TenSet's `np.argsort` leaves them unspecified.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _a(x: Sequence[float] | FloatArray) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def pairwise_accuracy(
    scores: Sequence[float] | FloatArray, throughputs: Sequence[float] | FloatArray
) -> float:
    """TenSet's `metric_pairwise_comp_accuracy`: over the pairs i < j, the share where
    `scores[i] > scores[j]` agrees with `throughputs[i] > throughputs[j]` (a tie on both sides
    agrees); 0.5 below two candidates."""
    s, t = _a(scores), _a(throughputs)
    n = len(s)
    if n <= 1:
        return 0.5
    i, j = np.triu_indices(n, k=1)
    agree = (s[i] > s[j]) == (t[i] > t[j])
    return float(np.sum(agree)) / (n * (n - 1) / 2)


def top_k(scores: Sequence[float] | FloatArray, k: int) -> IntArray:
    """The indices of the k highest scores, ties by record order."""
    order = np.argsort(-_a(scores), kind="stable")
    return np.asarray(order[:k], dtype=np.int64)


def topk_recall(
    scores: Sequence[float] | FloatArray, throughputs: Sequence[float] | FloatArray, k: int
) -> float:
    """TenSet's `metric_top_k_recall`: |model's top k ∩ measured top k| / k."""
    hit = set(top_k(scores, k).tolist()) & set(top_k(throughputs, k).tolist())
    return len(hit) / k


def topk_score(
    tasks: Sequence[tuple[float, Sequence[float] | FloatArray, Sequence[float] | FloatArray]],
    k: int,
) -> float:
    """TenSet's weighted top-k score over tasks of (weight, scores, latencies): the sum of
    weight x best latency over the sum of weight x the best latency among the model's k top
    picks. 1.0: the model's top k always hold the best."""
    best = picked = 0.0
    for weight, scores, latencies in tasks:
        lat = _a(latencies)
        best += weight * float(np.min(lat))
        picked += weight * float(np.min(lat[top_k(scores, k)]))
    return best / picked


def topk_slowdown(
    scores: Sequence[float] | FloatArray, latencies: Sequence[float] | FloatArray, k: int
) -> float:
    """TpuGraphs' top-k slowdown: (the best latency among the model's k top picks - the best)
    / the best: the regret of choosing among the model's top k only."""
    lat = _a(latencies)
    best = float(np.min(lat))
    return (float(np.min(lat[top_k(scores, k)])) - best) / best


def tau_b(x: FloatArray, y: FloatArray, i: IntArray, j: IntArray) -> float | None:
    """Kendall's tau-b over the given pairs (i, j); None when either side has only ties."""
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    n0 = len(i)
    denom = np.sqrt((n0 - float(np.sum(dx == 0))) * (n0 - float(np.sum(dy == 0))))
    if denom == 0:
        return None
    return float(np.sum(dx * dy)) / float(denom)


def pair_agreement(x: FloatArray, y: FloatArray, i: IntArray, j: IntArray) -> float:
    """TenSet's pairwise agreement over the given pairs (the share that agree)."""
    return float(np.mean((x[i] > x[j]) == (y[i] > y[j])))


def resampled_pairs(draw: IntArray, p: IntArray, q: IntArray) -> tuple[IntArray, IntArray]:
    """The pairs of a bootstrap draw of candidates (`p`, `q`: the upper triangle's indices of
    its length), less those that drew the same candidate twice (a candidate compared with
    itself is no evidence of ranking)."""
    keep = draw[p] != draw[q]
    return np.asarray(draw[p[keep]], dtype=np.int64), np.asarray(draw[q[keep]], dtype=np.int64)
