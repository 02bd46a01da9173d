"""The words of the tuning-ranking family (docs/metrics.md, "Did the compiler choose well?")."""

from __future__ import annotations

from mapreport.core.kinds_tuning import Unranked

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
