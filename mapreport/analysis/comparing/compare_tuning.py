"""Two tuning runs compared (docs/compare.md, "Tuning, compared"): per workload both sides
tuned (the tuner's workload key, target and shape, as the ranking groups them), which side
chose better and which side's cost model ranks better, and the same over every such workload.
A pure function over the two sides' rankings (`SliceResult.compiled.ranking`).

- **Chose better**: B's chosen config's time over A's, its 95% CI a percentile bootstrap of
  the two chosen configs' measured repeats (each resampled on its own side, the difference's
  own interval); the regret of each against the best measured on either side. A side is
  better where that CI excludes 1, as a compared shape's or the whole's ratio is `moved`; on
  one measurement a side the interval has no spread to show and neither is called better (the
  ranking's own rule: a regret resting on one measurement is never proven).
- **Ranks better**: B's pairwise accuracy less A's, its 95% CI combined from the two sides'
  bootstrap CIs as independent (`compare_mapping.change_interval`, the mapping's rule for a
  change of two sides' figures); better where it excludes 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.base.stats import CI_LEVEL, seed_for
from mapreport.analysis.comparing.compare_mapping import Z95, change_interval
from mapreport.analysis.tuning.ranking import Ranking, TuningChoice
from mapreport.core.kinds import TuningEdge

FloatArray = npt.NDArray[np.float64]
Key = tuple[str, str | None, str | None]
"""A workload across runs: the tuner's workload key, target and shape."""


class SideTuned(msgspec.Struct, frozen=True):
    """One side's run of a workload."""

    plan_id: str
    candidates: int
    chosen_us: float | None
    regret: float | None
    """The chosen config's time over the best measured on either side, less 1."""
    regret_ci: Interval | None
    pairwise_accuracy: float | None
    pairwise_ci: Interval | None
    kendall_tau: float | None
    scored: int
    """Candidates with a cost-model score (0: no ranking figures)."""


class WorkloadTuned(msgspec.Struct, frozen=True):
    """One workload both sides tuned."""

    task: str
    target: str | None
    shape: str | None
    a: SideTuned
    b: SideTuned
    best_us: float | None
    """The best measured on either side."""
    chosen_ratio: float | None
    """B's chosen config's time over A's."""
    chosen_ci: Interval | None
    chose: TuningEdge
    pairwise_change: float | None
    """B's pairwise accuracy less A's."""
    pairwise_change_ci: Interval | None
    ranks: TuningEdge


class Pooled(msgspec.Struct, frozen=True):
    """Pairwise accuracy over the workloads both sides scored, a side: each workload weighted
    by its pairs of scored candidates, the CI the sides' own intervals combined as independent
    (one workload: its own CI)."""

    value: float
    ci: Interval | None


class TuningComparison(msgspec.Struct, frozen=True):
    """The two sides' tuning runs, workload by workload, and over every workload both tuned."""

    workloads: tuple[WorkloadTuned, ...]
    tuned_a: int
    """Workloads A tuned (A's ranking's distinct workloads)."""
    tuned_b: int
    several: tuple[str, ...]
    """Workloads both tuned that a side holds several runs of: not compared (which run is the
    side's?)."""
    chosen_ratio: float | None
    """The geometric mean over the workloads of B's chosen time over A's."""
    chosen_ci: Interval | None
    chose: TuningEdge
    ranked: int
    """Workloads whose pairwise accuracy both sides measured."""
    pairwise_a: Pooled | None
    pairwise_b: Pooled | None
    pairwise_change_ci: Interval | None
    ranks: TuningEdge


def _key(c: TuningChoice) -> Key:
    return (c.task_key, c.target, c.shape)


def _runs(choices: Sequence[TuningChoice]) -> dict[Key, list[TuningChoice]]:
    out: dict[Key, list[TuningChoice]] = {}
    for c in choices:
        out.setdefault(_key(c), []).append(c)
    return out


def _interval(values: FloatArray) -> Interval | None:
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None
    tail = (1 - CI_LEVEL) / 2
    return Interval(float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail)))


def _draws(costs: tuple[float, ...], rng: np.random.Generator, resamples: int) -> FloatArray:
    """The mean of each resample of a config's repeats."""
    x = np.asarray(costs, dtype=np.float64)
    means: FloatArray = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    return means


def _edge(ci: Interval | None, null: float, lower: bool, spread: bool = True) -> TuningEdge:
    """Which side the interval of B against A (`null`: no change) favours: B where it lies
    wholly below `null` when `lower` is better (a ratio of times), above it otherwise (an
    accuracy's change)."""
    if ci is None:
        return TuningEdge.UNMEASURED
    if not spread or ci.low <= null <= ci.high:
        return TuningEdge.WITHIN_NOISE
    return TuningEdge.B_BETTER if (ci.high < null) == lower else TuningEdge.A_BETTER


def _side(c: TuningChoice, best: float | None, regret_ci: Interval | None) -> SideTuned:
    p = c.prediction
    return SideTuned(
        plan_id=c.plan_id,
        candidates=c.candidates,
        chosen_us=c.chosen_us,
        regret=None if c.chosen_us is None or best is None else c.chosen_us / best - 1,
        regret_ci=regret_ci,
        pairwise_accuracy=p.pairwise_accuracy if p is not None else None,
        pairwise_ci=p.pairwise_accuracy_ci if p is not None else None,
        kendall_tau=p.kendall_tau if p is not None else None,
        scored=p.scored if p is not None else 0,
    )


def _workload(
    a: TuningChoice, b: TuningChoice, th: Thresholds
) -> tuple[WorkloadTuned, FloatArray | None]:
    """One workload both tuned, and the resampled log ratio of B's chosen time over A's."""
    bests = [x for x in (a.best_us, b.best_us) if x is not None]
    best = min(bests) if bests else None
    log_ratio = None
    ratio = ci = ci_a = ci_b = None
    spread = False
    ua, ub = a.chosen_us, b.chosen_us
    if a.chosen_costs_us and b.chosen_costs_us and ua and ub and best is not None:
        rng = np.random.default_rng(seed_for(th.seed, "tuning", *map(str, _key(a))))
        da = _draws(a.chosen_costs_us, rng, th.bootstrap_resamples)
        db = _draws(b.chosen_costs_us, rng, th.bootstrap_resamples)
        # the best measured on either side: the chosen ones' draws where one of them is it,
        # else that other run's mean, held
        floor = np.minimum(np.minimum(da, db), best)
        ci_a, ci_b = _interval(da / floor - 1), _interval(db / floor - 1)
        log_ratio = np.log(db) - np.log(da)
        ratio = ub / ua
        low, high = _interval(log_ratio) or (math.nan, math.nan)
        ci = Interval(math.exp(low), math.exp(high))
        spread = min(len(a.chosen_costs_us), len(b.chosen_costs_us)) >= 2
    sa, sb = _side(a, best, ci_a), _side(b, best, ci_b)
    change = None
    if sa.pairwise_accuracy is not None and sb.pairwise_accuracy is not None:
        change = sb.pairwise_accuracy - sa.pairwise_accuracy
    change_ci = change_interval(sa.pairwise_ci, sb.pairwise_ci, change)
    row = WorkloadTuned(
        task=a.task,
        target=a.target,
        shape=a.shape,
        a=sa,
        b=sb,
        best_us=best,
        chosen_ratio=ratio,
        chosen_ci=ci,
        chose=_edge(ci, 1.0, True, spread),
        pairwise_change=change,
        pairwise_change_ci=change_ci,
        ranks=_edge(change_ci, 0.0, False),
    )
    return row, (log_ratio if spread else None)


def _pooled(sides: Sequence[SideTuned]) -> Pooled | None:
    """Pairwise accuracy over workloads, weighted by each one's pairs of scored candidates."""
    if not sides:
        return None
    w = np.asarray([s.scored * (s.scored - 1) / 2 for s in sides], dtype=np.float64)
    v = np.asarray([s.pairwise_accuracy for s in sides], dtype=np.float64)
    value = float((w * v).sum() / w.sum())
    if len(sides) == 1:
        return Pooled(value, sides[0].pairwise_ci)
    if any(s.pairwise_ci is None for s in sides):
        return Pooled(value, None)
    se = np.asarray([(c.high - c.low) / (2 * Z95) for s in sides if (c := s.pairwise_ci)])
    half = Z95 * math.sqrt(float((w**2 * se**2).sum())) / float(w.sum())
    return Pooled(value, Interval(value - half, value + half))


def compare_tuning(
    ra: Ranking | None, rb: Ranking | None, th: Thresholds
) -> TuningComparison | None:
    """Both sides' tuning runs compared (each side's `SliceResult.compiled.ranking`; None when
    neither side holds tuning records)."""
    if ra is None and rb is None:
        return None
    runs_a = _runs(ra.choices if ra is not None else ())
    runs_b = _runs(rb.choices if rb is not None else ())
    rows, draws, several = [], [], []
    logs: list[float] = []
    for key in sorted(runs_a.keys() & runs_b.keys(), key=str):
        ca, cb = runs_a[key], runs_b[key]
        if len(ca) > 1 or len(cb) > 1:
            several.append(" at ".join(x for x in (ca[0].task, ca[0].shape) if x))
            continue
        row, d = _workload(ca[0], cb[0], th)
        rows.append(row)
        if d is not None and row.chosen_ratio is not None:
            draws.append(d)
            logs.append(math.log(row.chosen_ratio))
    ratio = ci = None
    if draws:
        # the geometric mean over the workloads, per resample: the same draws as each row's
        low, high = _interval(np.mean(draws, axis=0)) or (math.nan, math.nan)
        ratio, ci = math.exp(sum(logs) / len(logs)), Interval(math.exp(low), math.exp(high))
    chose = _edge(ci, 1.0, True) if draws else _chose_without_spread(rows)
    scored = [r for r in rows if r.pairwise_change is not None]
    pa, pb = _pooled([r.a for r in scored]), _pooled([r.b for r in scored])
    change_ci = (
        change_interval(pa.ci, pb.ci, pb.value - pa.value) if pa is not None and pb else None
    )
    return TuningComparison(
        workloads=tuple(rows),
        tuned_a=len(runs_a),
        tuned_b=len(runs_b),
        several=tuple(several),
        chosen_ratio=ratio,
        chosen_ci=ci,
        chose=chose,
        ranked=len(scored),
        pairwise_a=pa,
        pairwise_b=pb,
        pairwise_change_ci=change_ci,
        ranks=_edge(change_ci, 0.0, False) if scored else TuningEdge.UNMEASURED,
    )


def _chose_without_spread(rows: Sequence[WorkloadTuned]) -> TuningEdge:
    """No workload's choices measured with repeats on both sides: within noise where a
    choice was measured, unmeasured where none was."""
    measured = any(r.chosen_ratio is not None for r in rows)
    return TuningEdge.WITHIN_NOISE if measured else TuningEdge.UNMEASURED
