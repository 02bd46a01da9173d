"""Compile-time mapping accuracy: predicted versus measured static compute per shape."""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.base.stats import kendall_tau_b, weighted_mean
from mapreport.core.kinds import AccuracyGap, AccuracyState, PredictionGap


class Accuracy(msgspec.Struct, frozen=True):
    """Compile-time mapping accuracy across the slice's shapes."""

    mape_weighted: float | None
    within_tolerance_share: float | None
    kendall_tau: float | None
    shapes_measured: int
    measured_traffic_share: float
    tolerance: float
    gap: AccuracyGap | None = None
    """Why no shape was measured (None when one was, or when there is nothing to measure)."""
    prediction_gap: PredictionGap | None = None
    """With gap no_prediction: why the busiest covered shape's bucket has no prediction."""
    predicted_buckets: int = 0
    """Compiled buckets that carry a prediction, whether or not any request ran them."""

    @property
    def mape_within(self) -> bool | None:
        """The weighted MAPE is within the tolerance (None: not measured)."""
        return None if self.mape_weighted is None else self.mape_weighted <= self.tolerance


class ShapeAccuracy(msgspec.Struct, frozen=True):
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


def summarise(
    per_shape: Sequence[tuple[float, ShapeAccuracy]], th: Thresholds, predicted_buckets: int = 0
) -> Accuracy:
    """Traffic-weighted MAPE, traffic share within tolerance, Kendall tau across shapes.

    `per_shape` pairs each shape's traffic share with its accuracy. MAPE and the within-
    tolerance share are taken over the traffic of measured shapes (reported beside them).
    `predicted_buckets`: compiled buckets with a prediction (run or not).
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
    gap = None if measured else _gap(per_shape, predicted_buckets)
    return Accuracy(
        mape_weighted=mape,
        within_tolerance_share=within,
        kendall_tau=tau,
        shapes_measured=len(measured),
        measured_traffic_share=math.fsum(weights),
        tolerance=th.tolerance,
        gap=gap,
        prediction_gap=_prediction_gap(per_shape) if gap == AccuracyGap.NO_PREDICTION else None,
        predicted_buckets=predicted_buckets,
    )


def _gap(per_shape: Sequence[tuple[float, ShapeAccuracy]], predicted: int) -> AccuracyGap | None:
    """Why no shape was measured: the reason that holds for the most traffic among covered
    shapes; with no requests, whether there was a prediction to check."""
    if not per_shape:
        return AccuracyGap.NO_RUNS if predicted else None
    covered = [(w, a) for w, a in per_shape if a.state != AccuracyState.UNCOVERED]
    if not covered:
        return AccuracyGap.NONE_COVERED
    _, top = max(covered, key=lambda p: p[0])
    return (
        AccuracyGap.NO_PREDICTION
        if top.state == AccuracyState.NO_PREDICTION
        else AccuracyGap.TOO_FEW_STATIC
    )


def _prediction_gap(per_shape: Sequence[tuple[float, ShapeAccuracy]]) -> PredictionGap | None:
    """Why the busiest shape without a prediction has none."""
    found = [(w, a) for w, a in per_shape if a.state == AccuracyState.NO_PREDICTION]
    return max(found, key=lambda p: p[0])[1].prediction_gap if found else None
