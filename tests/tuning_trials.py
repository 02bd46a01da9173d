"""One tuning trial as the ranking reads it, for the tests of the ranking, its judgement and
its action (a run, its order, the repeats measured or None for a failed trial)."""

from __future__ import annotations

from mapreport.analysis.tuning.ranking import Trial


def trial(
    plan: str,
    n: int,
    costs: list[float] | None,
    score: float | None = None,
    task: str = "mm",
) -> Trial:
    """Trial `n` of run `plan` on task `task` (llvm, 8x8): its repeats `costs` (None: it
    failed), and the cost model's `score` when one is recorded."""
    return Trial(
        plan_id=plan,
        task=task,
        task_key=task,
        target="llvm",
        shape="8x8",
        trial=n,
        config_id=f"{plan}-{n}",
        costs_us=tuple(costs) if costs is not None else None,
        mean_us=sum(costs) / len(costs) if costs else None,
        error=None if costs is not None else "failed_time",
        score=score,
        cost_model="xgb" if score is not None else None,
        source_id=plan,
    )
