"""findings.json `ranking`, a part with no page section (docs/findings.md): a row per tuning run
and workload, stating whether the compiler chose well (docs/metrics.md, "Did the compiler
choose well?"); slices without tuning records have no `ranking` key at all."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import Interval
from mapreport.analysis.tuning.ranking import Ranking, TuningChoice
from mapreport.core.kinds_tuning import Unranked
from mapreport.report.sections.unit import Facts, Section, same

UNRANKED: dict[str, str] = {
    Unranked.ONE_CANDIDATE: (
        "the records hold one measured trial for this workload, so there is nothing to rank"
    ),
    Unranked.NO_SUCCESS: "every trial of this workload failed, so no time can rank it",
    Unranked.NO_SCORES: (
        "the records hold no cost-model score, so only the search's outcome can be judged, not "
        "the model's ranking"
    ),
}
"""Why a workload gets no regret or no ranking figures."""


class RankingRow(msgspec.Struct):
    """One tuning run's workload: what it measured and picked, its regret, and how well its
    cost model ranked the candidates."""

    workload: str
    task_key: str
    plan_id: str
    target: str | None
    shape: str | None
    trials: int
    candidates: int
    errors: int
    best_us: float | None
    best_plan: str | None
    chosen_us: float | None
    chosen_trial: int | None
    chosen_config: str | None
    regret: float | None
    regret_ci: Interval | None
    material: bool
    trials_to_5pct: int | None
    trials_to_1pct: int | None
    cost_model: str | None
    k: int | None
    pairwise_accuracy: float | None
    pairwise_accuracy_ci: Interval | None
    kendall_tau: float | None
    kendall_tau_ci: Interval | None
    topk_recall: float | None
    topk_score: float | None
    topk_score_ci: Interval | None
    topk_slowdown: float | None
    unranked: Unranked | None
    unranked_text: str | None
    sources: tuple[str, ...]


class Fragment(msgspec.Struct):
    """findings.json `ranking` (absent without tuning records, so the findings of slices
    without tuning logs are as before)."""

    ranking: tuple[RankingRow, ...] | msgspec.UnsetType = msgspec.UNSET


def row(c: TuningChoice) -> RankingRow:
    """One run's workload as findings.json states it."""
    p = c.prediction
    reason = c.unranked or c.unscored
    return RankingRow(
        workload=c.task,
        task_key=c.task_key,
        plan_id=c.plan_id,
        target=c.target,
        shape=c.shape,
        trials=c.trials,
        candidates=c.candidates,
        errors=c.errors,
        best_us=c.best_us,
        best_plan=c.best_plan,
        chosen_us=c.chosen_us,
        chosen_trial=c.chosen_trial,
        chosen_config=c.chosen_config,
        regret=c.regret,
        regret_ci=c.regret_ci,
        material=c.material,
        trials_to_5pct=c.trials_to_5pct,
        trials_to_1pct=c.trials_to_1pct,
        cost_model=p.cost_model if p else None,
        k=p.k if p else None,
        pairwise_accuracy=p.pairwise_accuracy if p else None,
        pairwise_accuracy_ci=p.pairwise_accuracy_ci if p else None,
        kendall_tau=p.kendall_tau if p else None,
        kendall_tau_ci=p.kendall_tau_ci if p else None,
        topk_recall=p.topk_recall if p else None,
        topk_score=p.topk_score if p else None,
        topk_score_ci=p.topk_score_ci if p else None,
        topk_slowdown=p.topk_slowdown if p else None,
        unranked=reason,
        unranked_text=UNRANKED[reason] if reason else None,
        sources=c.sources,
    )


def read(f: Facts) -> Ranking | None:
    """The slice's tuning ranking."""
    return f.r.ranking


def fragment(r: Ranking | None) -> Fragment:
    """A row per run and workload; nothing without tuning records."""
    return Fragment() if r is None else Fragment(tuple(row(c) for c in r.choices))


SECTION = Section("ranking", "", read, same, fragment)
