"""Compile-time mapping accuracy: predicted versus measured static compute per shape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mapreport.analysis.common import Interval, Thresholds
from mapreport.analysis.stats import kendall_tau_b, weighted_mean
from mapreport.core.kinds import AccuracyState, PredictionGap


@dataclass(frozen=True)
class Accuracy:
    """Compile-time mapping accuracy across the slice's shapes."""

    mape_weighted: float | None
    within_tolerance_share: float | None
    kendall_tau: float | None
    shapes_measured: int
    measured_traffic_share: float
    tolerance: float

    @property
    def mape_within(self) -> bool | None:
        """The weighted MAPE is within the tolerance (None: not measured)."""
        return None if self.mape_weighted is None else self.mape_weighted <= self.tolerance


@dataclass(frozen=True)
class ShapeAccuracy:
    """The accuracy figures of one shape."""

    predicted_us: float | None
    measured_static_p50_us: float | None
    signed_error: float | None
    ape: float | None
    state: AccuracyState
    signed_error_ci: Interval | None = None
    """Bootstrap 95% CI of the signed error, resampling the static requests."""
    prediction_gap: PredictionGap | None = None
    """Why there is no prediction (state no_prediction)."""


def shape_accuracy(
    covered: bool,
    predicted_us: float | None,
    static_n: int,
    static_p50_us: float | None,
    th: Thresholds,
    gap: PredictionGap = PredictionGap.PLAN_STATES_NONE,
) -> ShapeAccuracy:
    """Signed error `(predicted - measured) / measured` and APE, when both sides have evidence.

    `measured` is the median compute of the shape's ok requests that ran the plan as built;
    it needs at least `min_samples` of them. `gap`: why the bucket's prediction would be
    missing (what its plan exported, `coverage.BucketRow`).
    """
    measured = static_p50_us if static_n >= th.min_samples else None
    if not covered:
        return ShapeAccuracy(None, measured, None, None, AccuracyState.UNCOVERED)
    if predicted_us is None:
        return ShapeAccuracy(None, measured, None, None, AccuracyState.NO_PREDICTION, None, gap)
    if measured is None or measured <= 0:
        return ShapeAccuracy(predicted_us, measured, None, None, AccuracyState.NOT_MEASURED)
    e = (predicted_us - measured) / measured
    state = AccuracyState.ACCURATE if abs(e) <= th.tolerance else AccuracyState.INACCURATE
    return ShapeAccuracy(predicted_us, measured, e, abs(e), state)


def summarise(per_shape: Sequence[tuple[float, ShapeAccuracy]], th: Thresholds) -> Accuracy:
    """Traffic-weighted MAPE, traffic share within tolerance, Kendall tau across shapes.

    `per_shape` pairs each shape's traffic share with its accuracy. MAPE and the within-
    tolerance share are taken over the traffic of measured shapes (reported beside them).
    """
    measured = [(w, a) for w, a in per_shape if a.ape is not None]
    weights = [w for w, _ in measured]
    mape = weighted_mean([a.ape for _, a in measured if a.ape is not None], weights)
    within = weighted_mean(
        [1.0 if a.ape is not None and a.ape <= th.tolerance else 0.0 for _, a in measured],
        weights,
    )
    tau = kendall_tau_b(
        [a.predicted_us for _, a in measured if a.predicted_us is not None],
        [a.measured_static_p50_us for _, a in measured if a.measured_static_p50_us is not None],
    )
    return Accuracy(
        mape_weighted=mape,
        within_tolerance_share=within,
        kendall_tau=tau,
        shapes_measured=len(measured),
        measured_traffic_share=sum(weights),
        tolerance=th.tolerance,
    )
