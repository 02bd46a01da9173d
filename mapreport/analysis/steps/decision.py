"""The accuracy-versus-gain decision per shape (METRICS.md's two-by-two table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mapreport.core.kinds import AccuracyState, Decision, GainBasis, GainState

if TYPE_CHECKING:
    from mapreport.analysis.base.common import Thresholds
    from mapreport.analysis.serving.adaptation import ShapeGain


def decide(accuracy: AccuracyState, gain: GainState, borrowed: bool = False) -> Decision:
    """The decision of one shape from its accuracy and its gain.

    An uncovered shape counts as a compile-time miss (no bucket is the largest inaccuracy);
    a gain that is not significant and a significant regression both fall in the "no
    significant gain" column. Without a measured accuracy or gain there is no decision, nor
    with a gain `borrowed` from comparable shapes for a shape too thin to act on (`borrows`).
    """
    if accuracy in (AccuracyState.NOT_MEASURED, AccuracyState.NO_PREDICTION):
        return Decision.INSUFFICIENT_EVIDENCE
    if gain == GainState.NOT_MEASURED or borrowed:
        return Decision.INSUFFICIENT_EVIDENCE
    significant = gain == GainState.SIGNIFICANT
    if accuracy == AccuracyState.ACCURATE:
        return Decision.SPECIALISE if significant else Decision.STATIC_SUFFICIENT
    return Decision.CLOSE_THE_LOOP if significant else Decision.FIND_BOTTLENECK


def borrows(gain: ShapeGain, n: int, th: Thresholds) -> bool:
    """The shape's gain is compared with the other path pooled from comparable shapes, and the
    shape has fewer than `min_samples_p95` requests of its own: a pooled figure is shown (and
    says so) but acts on no shape below that threshold, since an action's validation matrix
    and rollback trigger read the shape's own p95."""
    return gain.basis == GainBasis.COMPARABLE_SHAPES and n < th.min_samples_p95
