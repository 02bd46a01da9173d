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
