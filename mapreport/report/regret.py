"""The words of a tuning choice: the regret action's title by its remedy, and the remedies as
the report names them (docs/metrics.md, "Did the compiler choose well?")."""

from __future__ import annotations

from mapreport.analysis.actions import action_params as P
from mapreport.core.kinds import RegretRemedy
from mapreport.report.filters import duration, pct

REGRET_REMEDIES: dict[RegretRemedy, str] = {
    RegretRemedy.FIX_COST_MODEL: "fix the cost model for this op first: it is shown to rank the "
    "run's candidates poorly, so a larger budget would be spent on its wrong picks",
    RegretRemedy.RETUNE: "retune with the budget that found the best: the run stopped before "
    "the trial count at which the best run reached it",
    RegretRemedy.PIN_BEST: "pin the best measured config: the run had the budget and still "
    "missed it",
}
"""What each remedy asks of the compiler lead, and why it is the one."""


def workload(p: P.Regret) -> str:
    """The tuned workload: its task at its argument shapes (and target)."""
    at = f" at {p.shape}" if p.shape else ""
    on = f" on {p.target}" if p.target else ""
    return f"{p.task}{at}{on}"


def _chose(p: P.Regret, stopped: bool = False) -> str:
    """What the run chose against the best measured, with the regret's interval."""
    trial = f" at trial {p.best_trial:,}" if p.best_trial is not None else ""
    after = f" stopped after {p.trials:,} trials and" if stopped else ""
    return (
        f"run {p.plan_id}{after} chose {duration(p.chosen_us)}, {pct(p.regret)} slower than "
        f"the {duration(p.best_us)} run {p.best_plan or p.plan_id} measured{trial} (95% CI "
        f"{pct(p.regret_low)} to {pct(p.regret_high)}, {p.repeats:,} repeats)"
    )


def _budget(p: P.Regret) -> str:
    return f"at least {p.budget:,} trials" if p.budget is not None else "a larger trial budget"


def regret_title(p: P.Regret) -> str:
    """A run's material regret: what to change, by its remedy, and the figures that call for
    it."""
    if p.remedy is RegretRemedy.FIX_COST_MODEL:
        model = f" ({p.cost_model})" if p.cost_model else ""
        interval = (
            f" (95% CI {pct(p.pairwise_low)} to {pct(p.pairwise_high)}; chance is 50%)"
            if p.pairwise_low is not None and p.pairwise_high is not None
            else " (chance is 50%)"
        )
        return (
            f"Fix the cost model{model} for {p.task}: it ranked {pct(p.pairwise_accuracy)} of "
            f"the candidate pairs of {workload(p)} right{interval}, and {_chose(p)}; retrain it "
            f"on these records, then retune with {_budget(p)}"
        )
    if p.remedy is RegretRemedy.RETUNE:
        return (
            f"Retune {workload(p)} with {_budget(p)} (what the best run needed to come within "
            f"1% of its best): {_chose(p, stopped=True)}; pin that config meanwhile"
        )
    config = f" (config {p.best_config})" if p.best_config else ""
    enough = (
        f"; its {p.trials:,} trials were as many as the best run needed ({p.budget:,}), so "
        "more budget would not have found it"
        if p.budget is not None
        else ""
    )
    return f"Pin the best measured config{config} for {workload(p)}: {_chose(p)}{enough}"
