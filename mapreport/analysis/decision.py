"""The accuracy-versus-gain decision per shape (METRICS.md's two-by-two table)."""

from __future__ import annotations

from mapreport.analysis.results import AccuracyState, Decision, GainState

ACTIONS: dict[Decision, str] = {
    "specialise": "The cost model was right but the plan was not specialised for this shape: "
    "add a bucket for it.",
    "static_sufficient": "Static mapping suffices: adaptation only costs here; consider "
    "disabling it for this shape.",
    "close_the_loop": "The runtime compensates for a compile-time miss: feed the adapted "
    "mapping and its measured cost back into the compile plan and cost model.",
    "find_bottleneck": "Neither layer handles this shape: find the bottleneck class before "
    "any tuning.",
    "insufficient_evidence": "Not enough evidence for a decision; no action may rest on it.",
}
"""What each decision asks of the team, as the report states it."""


def decide(accuracy: AccuracyState, gain: GainState, gain_reason: str) -> tuple[Decision, str]:
    """The decision and the reason it was (or could not be) taken.

    An uncovered shape counts as a compile-time miss (no bucket is the largest inaccuracy);
    a gain that is not significant and a significant regression both fall in the "no
    significant gain" column.
    """
    if accuracy == "not_measured":
        return "insufficient_evidence", "accuracy not measured: too few static requests"
    if accuracy == "no_prediction":
        return (
            "insufficient_evidence",
            "the compile plan states no whole-model cost for this bucket (no __total__ and no "
            "per-op predictions): the per-operator section compares its mapping with measured "
            "times instead",
        )
    if gain == "not_measured":
        return "insufficient_evidence", gain_reason
    significant = gain == "significant"
    if accuracy == "accurate":
        return ("specialise" if significant else "static_sufficient"), gain_reason
    miss = (
        "no compile bucket holds this shape"
        if accuracy == "uncovered"
        else ("prediction outside tolerance")
    )
    return ("close_the_loop" if significant else "find_bottleneck"), f"{miss}; {gain_reason}"
