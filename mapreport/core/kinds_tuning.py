"""The categories of the tuning-ranking family (docs/metrics.md, "Did the compiler choose
well?"), beside `kinds` (which is at its size limit). Members are strings, as there."""

from __future__ import annotations

from enum import StrEnum


class Unranked(StrEnum):
    """Why a tuning run's workload gets no regret or no ranking figures."""

    ONE_CANDIDATE = "one_candidate"
    """Only one trial measured: there is nothing to choose between (most shipped TVM logs keep
    the best trial per workload only)."""
    NO_SUCCESS = "no_success"
    """Every trial failed: no time to choose by."""
    NO_SCORES = "no_scores"
    """The records hold no cost-model score or predicted time: the model's ranking cannot be
    judged, only the search's outcome."""


class RegretRemedy(StrEnum):
    """What the compiler lead does about a material regret (`tuning_actions.remedy`)."""

    FIX_COST_MODEL = "fix_cost_model"
    """The run's cost model is shown to rank its candidates poorly: a larger budget would be
    spent on the model's wrong picks, so the model is fixed (retrained) for that op first."""
    RETUNE = "retune"
    """The run stopped before the trial count at which the best run reached its best: retune
    with that budget."""
    PIN_BEST = "pin_best"
    """The run had the budget and still missed: pin the best measured config for the workload."""
