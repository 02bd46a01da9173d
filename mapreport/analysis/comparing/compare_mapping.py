"""The mapping of two runs compared (docs/compare.md, "The mapping, compared"): did the new
compiler build predict better, and did it need to adapt less? From each side's finished slice
analysis: coverage, weighted MAPE, the share within tolerance and Kendall's tau; per shape the
signed error (with the CI of its change), the net adaptation gain, fallbacks and the decision.
"""

from __future__ import annotations

import math

import msgspec

from mapreport.analysis.base.common import Interval
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import Decision

Z95 = 1.959963984540054
"""The normal quantile of a two-sided 95% interval."""


class Figure(msgspec.Struct, frozen=True):
    """One slice-wide figure on both sides."""

    a: float | None
    b: float | None

    @property
    def change(self) -> float | None:
        """B minus A (None when either is not measured)."""
        return None if self.a is None or self.b is None else self.b - self.a


class ShapeMapping(msgspec.Struct, frozen=True):
    """One request shape's mapping on both sides."""

    shape: str
    signed_error_a: float | None
    signed_error_b: float | None
    change: float | None
    change_ci: Interval | None
    """95% CI of the signed error's change, from each side's bootstrap CI (independent sides,
    normal approximation): None where either side has no CI."""
    net_gain_a: float | None
    net_gain_b: float | None
    fallback_a: int
    fallback_b: int
    decision_a: Decision
    decision_b: Decision

    @property
    def decision_changed(self) -> bool:
        """The shape's decision differs between the sides."""
        return self.decision_a != self.decision_b


class MappingComparison(msgspec.Struct, frozen=True):
    """The two sides' compile-time mapping and runtime adaptation."""

    coverage: Figure
    mape: Figure
    within_tolerance: Figure
    kendall_tau: Figure
    shapes: tuple[ShapeMapping, ...]
    adaptation_events: Figure
    fallback_requests: Figure

    @property
    def decisions_changed(self) -> tuple[ShapeMapping, ...]:
        """The shapes whose decision changed."""
        return tuple(s for s in self.shapes if s.decision_changed)


def change_interval(
    a: Interval | None, b: Interval | None, change: float | None
) -> Interval | None:
    """The 95% CI of B minus A from the sides' own 95% CIs: each half-width over 1.96 is a
    standard error, the two independent."""
    if a is None or b is None or change is None:
        return None
    se = math.hypot((a.high - a.low) / (2 * Z95), (b.high - b.low) / (2 * Z95))
    return Interval(change - Z95 * se, change + Z95 * se)


def compare_mapping(a: SliceResult, b: SliceResult) -> MappingComparison | None:
    """Both sides' mapping figures (None when neither side has a compile plan)."""
    if not a.coverage.plans and not b.coverage.plans:
        return None
    shapes = []
    by_b = {m.shape: m for m in b.shapes}
    for ma in a.shapes:
        mb = by_b.get(ma.shape)
        if mb is None:
            continue
        ea, eb = ma.accuracy.signed_error, mb.accuracy.signed_error
        change = None if ea is None or eb is None else eb - ea
        shapes.append(
            ShapeMapping(
                ma.shape,
                ea,
                eb,
                change,
                change_interval(ma.accuracy.signed_error_ci, mb.accuracy.signed_error_ci, change),
                ma.gain.net_gain_p50,
                mb.gain.net_gain_p50,
                ma.n_fallback,
                mb.n_fallback,
                ma.decision,
                mb.decision,
            )
        )
    return MappingComparison(
        coverage=Figure(a.coverage.covered_traffic_share, b.coverage.covered_traffic_share),
        mape=Figure(a.accuracy.mape_weighted, b.accuracy.mape_weighted),
        within_tolerance=Figure(
            a.accuracy.within_tolerance_share, b.accuracy.within_tolerance_share
        ),
        kendall_tau=Figure(a.accuracy.kendall_tau, b.accuracy.kendall_tau),
        shapes=tuple(shapes),
        adaptation_events=Figure(
            float(sum(m.gain.adaptation_events for m in a.shapes)),
            float(sum(m.gain.adaptation_events for m in b.shapes)),
        ),
        fallback_requests=Figure(
            float(sum(m.n_fallback for m in a.shapes)), float(sum(m.n_fallback for m in b.shapes))
        ),
    )
