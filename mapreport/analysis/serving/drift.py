"""Cost-model drift across nights: per plan version and shape, the signed prediction error of
each recorded night, and whether tonight's has moved beyond tolerance from the plan's first
nights (the cost model is going stale while the plan stays the same)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.device.operators import OpRow
from mapreport.analysis.mapping.coverage import PlanVersion

if TYPE_CHECKING:
    from mapreport.analysis.serving.shape import ShapeMetrics

FIRST_NIGHTS = 3
"""The nights of a plan version whose mean signed error is its baseline."""


class ErrorPoint(msgspec.Struct, frozen=True):
    """One night's signed prediction error of a shape under one plan version."""

    run_date: str
    signed_error: float
    ci: Interval | None
    current: bool


class ShapeDrift(msgspec.Struct, frozen=True):
    """A shape's signed error across the nights of the plan version in force tonight."""

    shape: str
    plan_id: str
    plan_version: str
    """The plan file (source id) whose predictions the nights compare."""
    points: tuple[ErrorPoint, ...]
    baseline: float | None
    """Mean signed error of the version's first FIRST_NIGHTS nights before tonight."""
    baseline_nights: int
    drift: float | None
    """Tonight's signed error minus the baseline."""
    drifting: bool
    """|drift| > tolerance, and tonight's CI lies wholly beyond baseline ± tolerance."""

    @property
    def now(self) -> ErrorPoint:
        """Tonight's point."""
        return self.points[-1]


def in_force(plans: Sequence[PlanVersion], plan_id: str | None) -> str | None:
    """The source id of the version of `plan_id` in force (None: no such plan)."""
    return next((p.source_id for p in plans if p.plan_id == plan_id and p.in_force), None)


def earlier_nights(
    stored: Sequence[dict[str, Any]], run_date: str, version: str, **key: str
) -> list[dict[str, Any]]:
    """The stored rows before `run_date` of one plan version with a signed error and the
    given key (`shape=`, `op=`, `plan_id=`), oldest first."""
    return sorted(
        (
            s
            for s in stored
            if s["run_date"] < run_date
            and s.get("plan_version") == version
            and s.get("signed_error") is not None
            and all(s.get(k) == v for k, v in key.items())
        ),
        key=lambda s: s["run_date"],
    )


def _ci(row: dict[str, Any]) -> Interval | None:
    lo, hi = row.get("signed_error_lo"), row.get("signed_error_hi")
    return None if lo is None or hi is None else Interval(float(lo), float(hi))


def shape_drift(
    m: ShapeMetrics,
    version: str | None,
    stored: Sequence[dict[str, Any]],
    run_date: str,
    th: Thresholds,
) -> ShapeDrift | None:
    """A shape's drift against the earlier nights of the same plan version (None without a
    signed error tonight, or without its plan)."""
    e, ci = m.accuracy.signed_error, m.accuracy.signed_error_ci
    if e is None or m.plan_id is None or version is None:
        return None
    earlier = earlier_nights(stored, run_date, shape=m.shape, plan_id=m.plan_id, version=version)
    before = [ErrorPoint(s["run_date"], float(s["signed_error"]), _ci(s), False) for s in earlier]
    points = (*before, ErrorPoint(run_date, e, ci, True))
    first = [p.signed_error for p in points[:-1][:FIRST_NIGHTS]]
    baseline = sum(first) / len(first) if first else None
    drift = None if baseline is None else e - baseline
    tol = th.tolerance
    beyond = (
        baseline is not None
        and ci is not None
        and (ci.low > baseline + tol or ci.high < baseline - tol)
    )
    drifting = drift is not None and abs(drift) > tol and beyond
    return ShapeDrift(m.shape, m.plan_id, version, points, baseline, len(first), drift, drifting)


def drifts(
    shapes: Sequence[ShapeMetrics],
    plans: Sequence[PlanVersion],
    stored: Sequence[dict[str, Any]],
    run_date: str,
    th: Thresholds,
) -> tuple[ShapeDrift, ...]:
    """Every shape's signed error across the nights of its plan version in force."""
    out = []
    for m in shapes:
        d = shape_drift(m, in_force(plans, m.plan_id), stored, run_date, th)
        if d is not None:
            out.append(d)
    return tuple(out)


class OpDrift(msgspec.Struct, frozen=True):
    """One planned op's signed error across the nights of its plan version (per-op times)."""

    plan_id: str
    plan_version: str
    op: str
    points: tuple[tuple[str, float, int], ...]
    """(run date, signed error, profiled executions) per night, tonight last."""
    baseline: float | None
    drift: float | None
    drifting: bool
    """|drift| > tolerance, with at least `min_samples` executions tonight and on each
    baseline night (a per-op median has no CI here: its sample count guards it)."""


def op_drifts(
    rows: Sequence[OpRow],
    plans: Sequence[PlanVersion],
    stored: Sequence[dict[str, Any]],
    run_date: str,
    th: Thresholds,
) -> tuple[OpDrift, ...]:
    """Per planned op with a signed error tonight, its drift from the plan version's first
    nights."""
    out = []
    for o in rows:
        version = in_force(plans, o.plan_id)
        if o.signed_error is None or version is None:
            continue
        earlier = earlier_nights(stored, run_date, op=o.op, plan_id=o.plan_id, version=version)
        first = earlier[:FIRST_NIGHTS]
        baseline = sum(s["signed_error"] for s in first) / len(first) if first else None
        drift = None if baseline is None else o.signed_error - baseline
        enough = o.runs >= th.min_samples and all(s["runs"] >= th.min_samples for s in first)
        points = (
            *((s["run_date"], float(s["signed_error"]), int(s["runs"])) for s in earlier),
            (run_date, o.signed_error, o.runs),
        )
        drifting = drift is not None and abs(drift) > th.tolerance and enough
        out.append(OpDrift(o.plan_id, version, o.op, points, baseline, drift, drifting))
    return tuple(out)
