"""The accuracy-versus-gain decision per shape (METRICS.md's two-by-two table)."""

from __future__ import annotations

from mapreport.core.kinds import AccuracyState, Decision, GainState


def decide(accuracy: AccuracyState, gain: GainState) -> Decision:
    """The decision of one shape from its accuracy and its gain.

    An uncovered shape counts as a compile-time miss (no bucket is the largest inaccuracy);
    a gain that is not significant and a significant regression both fall in the "no
    significant gain" column. Without a measured accuracy or gain there is no decision.
    """
    if accuracy in (AccuracyState.NOT_MEASURED, AccuracyState.NO_PREDICTION):
        return Decision.INSUFFICIENT_EVIDENCE
    if gain == GainState.NOT_MEASURED:
        return Decision.INSUFFICIENT_EVIDENCE
    significant = gain == GainState.SIGNIFICANT
    if accuracy == AccuracyState.ACCURATE:
        return Decision.SPECIALISE if significant else Decision.STATIC_SUFFICIENT
    return Decision.CLOSE_THE_LOOP if significant else Decision.FIND_BOTTLENECK
