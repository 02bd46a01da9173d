"""Did the compiler choose well? Per tuning run and workload (a tuner's task at its argument
shapes): the candidates it measured, the best, the run's pick, the regret of the pick against
the best measured for that workload in any run, with a bootstrap interval over the measured
repeats, how soon the search got within 5% and 1% of its own best, and, where the records
carry the cost model's scores, how well the model ranked (docs/metrics.md, "Did the compiler
choose well?"). Reads the canonical table `tuning_trial`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.base.stats import CI_LEVEL, seed_for
from mapreport.analysis.tuning.ranking_metrics import (
    FloatArray,
    pair_agreement,
    pairwise_accuracy,
    resampled_pairs,
    tau_b,
    top_k,
    topk_recall,
    topk_score,
    topk_slowdown,
)
from mapreport.core.connection import Connection
from mapreport.core.kinds import FigureUnit, JudgementFamily, Status, StatusReason, Unranked
from mapreport.core.records import replace

TOP_K = 5
"""The k of top-k recall, TenSet's top-k score and TpuGraphs' top-k slowdown."""
MATERIAL_REGRET = 0.05
"""A regret is material when its interval is clear of zero and it is at least this (5%)."""
WITHIN = (0.05, 0.01)
"""The distances from the run's own best that `trials_to_*` count to."""


class Trial(msgspec.Struct, frozen=True):
    """One measured candidate, as `tuning_trial` holds it."""

    plan_id: str
    task: str
    task_key: str
    """The workload's identity across runs (runs of the same key are compared)."""
    target: str | None
    shape: str | None
    trial: int
    config_id: str
    costs_us: tuple[float, ...] | None
    mean_us: float | None
    error: str | None
    score: float | None
    """The model's score (higher: predicted faster); a predicted time counts negated."""
    cost_model: str | None
    source_id: str


class Prediction(msgspec.Struct, frozen=True):
    """How well the cost model ranked one run's measured candidates."""

    cost_model: str | None
    scored: int
    k: int
    pairwise_accuracy: float
    pairwise_accuracy_ci: Interval | None
    kendall_tau: float | None
    kendall_tau_ci: Interval | None
    topk_recall: float
    topk_score: float
    topk_score_ci: Interval | None
    topk_slowdown: float


class TuningChoice(msgspec.Struct, frozen=True):
    """One tuning run's workload: what it measured, what it picked, and its regret."""

    plan_id: str
    task: str
    task_key: str
    target: str | None
    shape: str | None
    sources: tuple[str, ...]
    trials: int
    candidates: int
    """Successful trials."""
    errors: int
    best_us: float | None
    """The best mean time measured for this workload in any run."""
    best_plan: str | None
    best_trial: int | None
    chosen_us: float | None
    """This run's pick: its best measured trial, the one the tuner's database returns."""
    chosen_trial: int | None
    chosen_config: str | None
    regret: float | None
    """chosen / best - 1."""
    regret_ci: Interval | None
    material: bool
    """The regret's interval is clear of zero and the regret is at least MATERIAL_REGRET."""
    repeats: int | None
    """The fewest measured repeats of the chosen trial and the best: the regret's interval
    resamples them, so at 1 it has no spread to show (None: no regret)."""
    trials_to_5pct: int | None
    trials_to_1pct: int | None
    best_so_far_us: tuple[float | None, ...]
    """The run's best time after each trial in record order (None before the first success)."""
    prediction: Prediction | None
    unranked: Unranked | None
    """Why there is no regret (one candidate, none succeeded); None when there is one."""
    unscored: Unranked | None
    """Why there are no ranking figures; None when there are."""
    chosen_costs_us: tuple[float, ...] = ()
    """The chosen config's measured repeats (its mean alone where it records no repeats; empty:
    no choice): what `compare` resamples to tell two runs' choices apart."""


class Ranking(msgspec.Struct, frozen=True):
    """Every tuning run's workloads of a slice."""

    choices: tuple[TuningChoice, ...]
    trials: int
    one_per_workload: bool
    """Every run holds a single trial per workload: the records rank nothing."""


TRIAL_COLUMNS = """plan_id, task, task_key, target, shape, trial, config_id, costs_us, mean_us,
        error, coalesce(predicted_score, -predicted_us) AS score, cost_model, source_id"""
"""The columns of a `Trial`, in its fields' order (`trial_of`); the evidence packs select them."""
TRIAL_ORDER = "ORDER BY plan_id, task_key, target, shape, trial, source_id, line"
"""Record order per run and workload: the order `rank` reads trials in. Total: two logs of
one file name in two folders are one run (its name is the stem) that numbers its trials twice
from 1, and trials tied on the rest came back in the engine's order of the day (the best so far,
the pooled costs and the chosen trial with it)."""
_TRIALS = f"""
    SELECT {TRIAL_COLUMNS}
    FROM tuning_trial WHERE workload = $w AND slice = $s
    {TRIAL_ORDER}
"""


def trial_of(r: Sequence[Any]) -> Trial:
    """One trial from a row of TRIAL_COLUMNS."""
    return Trial(
        plan_id=r[0],
        task=r[1],
        task_key=r[2],
        target=r[3],
        shape=r[4],
        trial=int(r[5]),
        config_id=r[6],
        costs_us=tuple(r[7]) if r[7] is not None else None,
        mean_us=r[8],
        error=r[9],
        score=r[10],
        cost_model=r[11],
        source_id=r[12],
    )


def load_trials(con: Connection, workload: str, slice_: str) -> list[Trial]:
    """The slice's trials in record order per run and workload."""
    return [trial_of(r) for r in con.execute(_TRIALS, {"w": workload, "s": slice_}).fetchall()]


def tuning_ranking(
    con: Connection, workload: str, slice_: str, thresholds: Thresholds
) -> Ranking | None:
    """The slice's ranking figures; None when it holds no tuning trials."""
    trials = load_trials(con, workload, slice_)
    return rank(trials, thresholds) if trials else None


def rank(trials: Sequence[Trial], thresholds: Thresholds) -> Ranking:
    """The figures of every run and workload of `trials` (pure)."""
    runs: dict[tuple[str, str, str | None, str | None], list[Trial]] = {}  # run and workload
    groups: dict[tuple[str, str | None, str | None], list[Trial]] = {}
    for t in trials:
        runs.setdefault((t.plan_id, t.task_key, t.target, t.shape), []).append(t)
        groups.setdefault((t.task_key, t.target, t.shape), []).append(t)
    choices = tuple(
        _choice(run, groups[key[1:]], thresholds) for key, run in sorted(runs.items(), key=str)
    )
    return Ranking(
        choices=choices,
        trials=len(trials),
        one_per_workload=all(c.trials == 1 for c in choices),
    )


def _ok(ts: Sequence[Trial]) -> list[Trial]:
    return [t for t in ts if t.error is None and t.mean_us is not None]


def _choice(run: list[Trial], group: list[Trial], th: Thresholds) -> TuningChoice:
    run = sorted(run, key=lambda t: t.trial)
    ok, pool = _ok(run), _ok(group)
    first = run[0]
    seed = seed_for(
        th.seed, "ranking", first.plan_id, first.task, str(first.target), str(first.shape)
    )
    chosen = min(ok, key=lambda t: (t.mean_us, t.trial)) if ok else None
    configs = _pooled(pool)
    best = min(configs, key=lambda t: (t.mean_us, t.plan_id, t.trial)) if configs else None
    picked = next(t for t in configs if t.config_id == chosen.config_id) if chosen else None
    unranked = (
        Unranked.NO_SUCCESS if not ok else (Unranked.ONE_CANDIDATE if len(configs) < 2 else None)
    )
    regret = ci = None
    if picked is not None and best is not None and unranked is None:
        regret = _mean(picked) / _mean(best) - 1
        ci = _regret_ci(picked, configs, th.bootstrap_resamples, seed)
    curve = _best_so_far(run)
    own = _mean(chosen) if chosen is not None else None
    scored = [t for t in ok if t.score is not None]
    prediction = _prediction(scored, th.bootstrap_resamples, seed) if len(scored) >= 2 else None
    return TuningChoice(
        plan_id=first.plan_id,
        task=first.task,
        task_key=first.task_key,
        target=first.target,
        shape=first.shape,
        sources=tuple(sorted({t.source_id for t in run})),
        trials=len(run),
        candidates=len(ok),
        errors=len(run) - len(ok),
        best_us=_mean(best) if best is not None else None,
        best_plan=best.plan_id if best is not None else None,
        best_trial=best.trial if best is not None else None,
        chosen_us=_mean(picked) if picked is not None else None,
        chosen_trial=chosen.trial if chosen is not None else None,
        chosen_config=chosen.config_id if chosen is not None else None,
        regret=regret,
        regret_ci=ci,
        material=bool(
            regret is not None and ci is not None and ci.low > 0 and regret >= MATERIAL_REGRET
        ),
        repeats=min(_repeats(picked), _repeats(best)) if regret is not None else None,
        trials_to_5pct=_trials_to(run, curve, own, WITHIN[0]),
        trials_to_1pct=_trials_to(run, curve, own, WITHIN[1]),
        best_so_far_us=curve,
        prediction=prediction,
        unranked=unranked,
        unscored=None if prediction is not None else (unranked or Unranked.NO_SCORES),
        chosen_costs_us=(picked.costs_us or (_mean(picked),)) if picked is not None else (),
    )


def _pooled(pool: list[Trial]) -> list[Trial]:
    """One candidate per config: a config measured by several trials (Inductor's runs measure
    the same choices; a search may meet a schedule twice) pools their repeats, so two runs that
    chose the same config have one time and no regret between them. A config measured once is
    its trial, unchanged."""
    by_config: dict[str, list[Trial]] = {}
    for t in sorted(pool, key=lambda t: (t.plan_id, t.trial)):
        by_config.setdefault(t.config_id, []).append(t)
    out = []
    for trials in by_config.values():
        if len(trials) == 1:
            out.append(trials[0])
            continue
        costs = tuple(c for t in trials for c in (t.costs_us or (_mean(t),)))
        out.append(replace(trials[0], costs_us=costs, mean_us=sum(costs) / len(costs)))
    return out


def _repeats(t: Trial | None) -> int:
    """The measured repeats of a successful trial (one where it records its mean alone)."""
    return len(t.costs_us) if t is not None and t.costs_us else 1


def _mean(t: Trial) -> float:
    assert t.mean_us is not None  # only successful trials reach here
    return t.mean_us


def _best_so_far(run: list[Trial]) -> tuple[float | None, ...]:
    out: list[float | None] = []
    best: float | None = None
    for t in run:
        if t.error is None and t.mean_us is not None and (best is None or t.mean_us < best):
            best = t.mean_us
        out.append(best)
    return tuple(out)


def _trials_to(
    run: list[Trial], curve: tuple[float | None, ...], own: float | None, within: float
) -> int | None:
    """The trial (record order, 1-based, failed trials counted) after which the run's best so
    far is within `within` of its own final best."""
    if own is None:
        return None
    for t, b in zip(run, curve, strict=True):
        if b is not None and b <= own * (1 + within):
            return t.trial
    return None


def _interval(values: FloatArray) -> Interval | None:
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None
    tail = (1 - CI_LEVEL) / 2
    return Interval(float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail)))


def _regret_ci(chosen: Trial, pool: list[Trial], resamples: int, seed: int) -> Interval | None:
    """Resample each candidate's repeats: the chosen one's mean over the least mean."""
    rng = np.random.default_rng(seed)
    means = np.empty((len(pool), resamples))
    at = 0
    for i, t in enumerate(pool):
        costs = np.asarray(t.costs_us or (_mean(t),), dtype=np.float64)
        draw = rng.integers(0, len(costs), size=(resamples, len(costs)))
        means[i] = costs[draw].mean(axis=1)
        if t is chosen:
            at = i
    return _interval(means[at] / means.min(axis=0) - 1)


def _prediction(scored: list[Trial], resamples: int, seed: int) -> Prediction:
    scores = np.asarray([t.score for t in scored], dtype=np.float64)
    lat = np.asarray([_mean(t) for t in scored], dtype=np.float64)
    thr = lat.min() / lat  # TenSet's labels: the best time over each candidate's
    k = min(TOP_K, len(scored))
    i, j = (a.astype(np.int64) for a in np.triu_indices(len(scored), k=1))
    rng = np.random.default_rng(seed + 1)
    pair, tau, top = (np.full(resamples, np.nan) for _ in range(3))
    for b in range(resamples):
        draw = rng.integers(0, len(scored), size=len(scored)).astype(np.int64)
        p, q = resampled_pairs(draw, i, j)
        if len(p):
            pair[b] = pair_agreement(scores, thr, p, q)
            tau[b] = np.nan if (v := tau_b(scores, thr, p, q)) is None else v
        top[b] = lat[draw].min() / lat[draw][top_k(scores[draw], k)].min()
    models = {t.cost_model for t in scored}
    return Prediction(
        cost_model=models.pop() if len(models) == 1 else None,
        scored=len(scored),
        k=k,
        pairwise_accuracy=pairwise_accuracy(scores, thr),
        pairwise_accuracy_ci=_interval(pair),
        kendall_tau=tau_b(scores, thr, i, j),
        kendall_tau_ci=_interval(tau),
        topk_recall=topk_recall(scores, thr, k),
        topk_score=topk_score([(1.0, scores, lat)], k),
        topk_score_ci=_interval(top),
        topk_slowdown=topk_slowdown(scores, lat, k),
    )


def _subject(c: TuningChoice) -> str:
    """A run's workload as the judgement names it: the task at its shape, in its run."""
    at = f" at {c.shape}" if c.shape else ""
    return f"{c.task}{at} ({c.plan_id})"


def judge(r: Ranking | None) -> Judgement | None:
    """Did the compiler choose well (docs/metrics.md, "Judgements"): failing when a run's
    chosen config is slower than the best measured for its workload with the whole regret
    interval at or above MATERIAL_REGRET, resting on repeated measurements; at risk when a
    run's regret is material short of that (its interval clear of 0 but reaching below the
    bound, or one measurement each), or when every trial of a run's workload failed (no tuned
    config to deploy); healthy when every ranked workload's choice is within the bound or
    within noise of the best; not judged when no workload has two candidates (None: no tuning
    records)."""
    if r is None or not r.choices:
        return None
    family = JudgementFamily.RANKING
    ranked = [c for c in r.choices if c.regret is not None]
    proven = [
        c
        for c in ranked
        if c.regret_ci is not None and c.regret_ci.low >= MATERIAL_REGRET and (c.repeats or 0) >= 2
    ]
    if proven:
        c = max(proven, key=lambda c: (c.regret_ci.low if c.regret_ci else 0.0, c.plan_id))
        return _judged(family, Status.FAILING, StatusReason.REGRET_MATERIAL, c, len(ranked))
    short = [c for c in ranked if c.material]
    if short:
        c = max(short, key=lambda c: (c.regret or 0.0, c.plan_id))
        return _judged(family, Status.AT_RISK, StatusReason.SEARCH_SHORT, c, len(ranked))
    failed = [c for c in r.choices if c.unranked is Unranked.NO_SUCCESS]
    if failed:
        c = max(failed, key=lambda c: (c.trials, c.plan_id))
        return Judgement(
            family,
            Status.AT_RISK,
            StatusReason.TUNING_FAILED,
            float(c.errors),
            n=c.trials,
            subject=_subject(c),
        )
    if not ranked:
        return Judgement(family, Status.NOT_JUDGED, StatusReason.NOTHING_RANKED, n=len(r.choices))
    c = max(ranked, key=lambda c: (c.regret or 0.0, c.plan_id))
    return _judged(family, Status.HEALTHY, StatusReason.CHOSE_WELL, c, len(ranked))


def _judged(
    family: JudgementFamily, state: Status, reason: StatusReason, c: TuningChoice, n: int
) -> Judgement:
    """The judgement resting on one run's workload: its regret, interval and the bound."""
    ci = (c.regret_ci.low, c.regret_ci.high) if c.regret_ci is not None else None
    return Judgement(
        family,
        state,
        reason,
        c.regret,
        FigureUnit.SHARE,
        MATERIAL_REGRET,
        n,
        ci,
        _subject(c),
    )
