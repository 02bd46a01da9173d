"""findings.json `ranking`: a row per tuning run and workload (docs/findings.md)."""

from __future__ import annotations

from typing import Any

from mapreport.analysis.base.common import Interval
from mapreport.analysis.tuning.ranking import Ranking, TuningChoice
from mapreport.report.ranking_words import UNRANKED


def _ci(i: Interval | None) -> list[float] | None:
    return None if i is None else [i.low, i.high]


def row(c: TuningChoice) -> dict[str, Any]:
    """One run's workload as findings.json states it."""
    p = c.prediction
    reason = c.unranked or c.unscored
    return {
        "workload": c.task,
        "task_key": c.task_key,
        "plan_id": c.plan_id,
        "target": c.target,
        "shape": c.shape,
        "trials": c.trials,
        "candidates": c.candidates,
        "errors": c.errors,
        "best_us": c.best_us,
        "best_plan": c.best_plan,
        "chosen_us": c.chosen_us,
        "chosen_trial": c.chosen_trial,
        "chosen_config": c.chosen_config,
        "regret": c.regret,
        "regret_ci": _ci(c.regret_ci),
        "material": c.material,
        "trials_to_5pct": c.trials_to_5pct,
        "trials_to_1pct": c.trials_to_1pct,
        "cost_model": p.cost_model if p else None,
        "k": p.k if p else None,
        "pairwise_accuracy": p.pairwise_accuracy if p else None,
        "pairwise_accuracy_ci": _ci(p.pairwise_accuracy_ci) if p else None,
        "kendall_tau": p.kendall_tau if p else None,
        "kendall_tau_ci": _ci(p.kendall_tau_ci) if p else None,
        "topk_recall": p.topk_recall if p else None,
        "topk_score": p.topk_score if p else None,
        "topk_score_ci": _ci(p.topk_score_ci) if p else None,
        "topk_slowdown": p.topk_slowdown if p else None,
        "unranked": reason.value if reason else None,
        "unranked_text": UNRANKED[reason] if reason else None,
        "sources": list(c.sources),
    }


def fragment(r: Ranking | None) -> dict[str, Any]:
    """`{"ranking": rows}` for a slice with tuning records; nothing for one without (so the
    findings of slices without tuning logs are as before)."""
    if r is None:
        return {}
    return {"ranking": [row(c) for c in r.choices]}
