"""Closed loop across nights: the primary metric's trend, each action's state across runs
(`loop`, the state machine), and each shape's regressions against its reference night (the
named baseline run, else the last night that met the SLA, else the previous night)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from mapreport.analysis.actions.action_params import Regressed, decode
from mapreport.analysis.actions.actions import SLICE_WIDE, Action
from mapreport.analysis.base.changepoints import ChangePoint, change_points
from mapreport.analysis.base.common import Interval, Regression, Thresholds
from mapreport.analysis.base.stats import CI_LEVEL, seed_for
from mapreport.analysis.loop import loop
from mapreport.analysis.loop.loop import ActionState
from mapreport.analysis.loop.targets import (
    BACK_MARGIN,
    Curve,
    Valued,
    curves_of,
    redraw_quantile,
)
from mapreport.core.kinds import ActionKind, HistoryNote, RegressionKind
from mapreport.core.window import EVERYTHING, Window

if TYPE_CHECKING:
    from mapreport.analysis.serving.shape import ShapeMetrics


class RunPoint(msgspec.Struct, frozen=True):
    """One run's headline numbers for the trend."""

    run_id: str
    run_date: str
    requests: int
    latency_p50_us: float | None
    latency_p95_us: float | None
    latency_p99_us: float | None
    covered_traffic_share: float | None
    mape_weighted: float | None
    actions: int
    current: bool
    revision: int = 1
    """1 for a night recorded once; higher when it was re-run with different inputs (late
    data, a backfill)."""
    blocked: int | None = None
    """Requests blocked behind adaptation (tonight's run; not kept for earlier ones)."""

    def metric(self, name: str) -> float | None:
        """A slice-wide metric by the name a slice-wide action's matrix or trigger uses."""
        values: dict[str, float | None] = {
            "latency_p50_us": self.latency_p50_us,
            "latency_p95_us": self.latency_p95_us,
            "latency_p99_us": self.latency_p99_us,
            "blocked_requests": None if self.blocked is None else float(self.blocked),
        }
        return values.get(name)

    @property
    def revised(self) -> bool:
        """The night was recorded again from other inputs than its first recording."""
        return self.revision > 1


class History(msgspec.Struct, frozen=True):
    """The history view of one slice, this run included."""

    runs: tuple[RunPoint, ...]
    actions: tuple[ActionState, ...]
    regressions: tuple[Regression, ...]
    compared_to: str | None
    note: HistoryNote | None
    baseline_run: str | None = None
    """The configured baseline run (named when it is not in the history)."""
    compared_night: str | None = None
    """The night of the run `compared_to` names."""
    change_points: tuple[ChangePoint, ...] = ()
    """Shifts of the slice's p95 and p99 (`*`) and of each shape's p95 across every night."""

    @property
    def rising(self) -> ChangePoint | None:
        """The slice's tail shifted up at its latest change point, and stays there tonight."""
        last: dict[str, ChangePoint] = {}
        for c in self.change_points:
            if c.series == "*":
                last[c.metric] = c
        ups = [c for c in last.values() if c.change > 0]
        return max(ups, key=lambda c: c.change) if ups else None


def _redraw_p95(q: Sequence[float], n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """p95 of `resamples` samples of size n drawn from a stored quantile function Q, exactly,
    from two random numbers per resample instead of n: numpy's p95 interpolates between the
    order statistics j and j+1 (0-based, j = floor(0.95 (n-1))); of n uniforms the (j+1)-th
    smallest is Beta(j+1, n-j), the next lies a Beta(1, n-j-1) share of the way from it to 1,
    and Q, non-decreasing, maps the uniforms' order statistics onto the sample's."""
    grid = tuple(float(x) for x in np.linspace(0, 1, len(q)))
    return redraw_quantile(Curve(tuple(q), grid, n), 0.95, resamples, rng)


def quantile_of(quantiles: Sequence[float], q: float) -> float:
    """The q-quantile read off a stored, evenly spaced quantile function."""
    return float(np.interp(q, np.linspace(0, 1, len(quantiles)), quantiles))


def p95_change(
    before: Sequence[float],
    n_before: int,
    now: Sequence[float],
    n_now: int,
    resamples: int,
    seed: int,
) -> tuple[float, Interval]:
    """Relative p95 change (now / before - 1) and its 95% CI, resampling both runs from their
    stored latency quantile functions with their real sample counts."""
    rng = np.random.default_rng(seed)
    b = _redraw_p95(before, n_before, resamples, rng)
    a = _redraw_p95(now, n_now, resamples, rng)
    ratio = a / b - 1
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(ratio, [alpha, 1 - alpha])
    point = quantile_of(now, 0.95) / quantile_of(before, 0.95) - 1
    return point, Interval(float(lo), float(hi))


class Stored(msgspec.Struct, frozen=True):
    """The history tables' rows of one slice, as the dataset holds them."""

    runs: Sequence[dict[str, Any]] = ()
    shapes: Sequence[dict[str, Any]] = ()
    actions: Sequence[dict[str, Any]] = ()
    ops: Sequence[dict[str, Any]] = ()


class RunKey(msgspec.Struct, frozen=True):
    """Which run this is, and what it is compared with."""

    run_id: str
    run_date: str
    baseline_run: str | None = None
    window: Window = EVERYTHING
    """The time the run covers (its night's window; everything for an ad-hoc report)."""
    inputs: str = ""
    """A digest of the source files the window read: a night re-run on other inputs is a
    revision."""
    revision: int = 1
    recorded_at: str = ""
    """When the run was made (UTC, ISO): the history row keeps it."""


def history_view(
    tonight: RunPoint,
    shapes: Sequence[ShapeMetrics],
    actions: Sequence[Action],
    quantiles: dict[str, tuple[float, ...]],
    stored: Stored,
    key: RunKey,
    th: Thresholds,
    seed_key: tuple[str, str],
    versions_now: dict[str, str | None] | None = None,
    moved: Sequence[Regression] | None = None,
    queue: Mapping[str, Curve] | None = None,
    tuned: Mapping[tuple[str, str], Valued] | None = None,
) -> History:
    """Trend, action states and regressions of this run against the stored nights before it
    (each night is one recording, keyed by its run date). `versions_now`: each shape's compile
    plan version tonight (what makes a rolled-back action's evidence new); `queue`: each
    shape's queue-wait quantile function tonight (what a queueing action's target reads);
    `tuned`: each tuning run's workload tonight (what a regret action's target reads)."""
    prev_runs = [p for p in stored.runs if p["run_date"] < key.run_date]
    nights = {p["run_date"] for p in prev_runs}
    prev_shapes = [s for s in stored.shapes if s["run_date"] in nights]
    prev_actions = [a for a in stored.actions if a["run_date"] in nights]
    runs = [_point(p) for p in prev_runs] + [tonight]
    shapes_now = {m.shape: m for m in shapes}
    last = prev_runs[-1] if prev_runs else None
    last_shapes = {s["shape"]: s for s in prev_shapes if last and s["run_date"] == last["run_date"]}
    # a slice-wide action's metrics are the slice's own (tonight's point, the last run's row)
    values: dict[str, ShapeMetrics | RunPoint] = {**shapes_now, SLICE_WIDE: tonight}
    last_values = {**last_shapes, **({SLICE_WIDE: last} if last else {})}
    regressions = (
        list(moved)
        if moved is not None
        else tonight_regressions(shapes, quantiles, stored, key, th, seed_key)
    )
    curves = {m.shape: curves_of(m.shape, quantiles, m.n, queue or {}) for m in shapes}
    by_shape = {g.shape: g for g in regressions}
    night_now = loop.Night(values, last_values, curves, th, seed_key, by_shape, tuned or {})
    states = loop.action_states(actions, night_now, prev_actions, versions_now, prev_shapes)
    baseline = key.baseline_run
    named = next((p for p in prev_runs if p["run_id"] == baseline), None) if baseline else None
    ref_run = reference_run(stored, key)
    against = ref_run["run_id"] if ref_run else None
    note = None
    if baseline and named is None:
        note = HistoryNote.BASELINE_MISSING
    if not prev_runs:
        note = HistoryNote.FIRST_RUN
    night = ref_run["run_date"] if ref_run else None
    shifts = _shifts(runs, prev_shapes, shapes_now, key.run_date)
    return History(
        tuple(runs), tuple(states), tuple(regressions), against, note, baseline, night, shifts
    )


def _shifts(
    runs: Sequence[RunPoint],
    prev_shapes: Sequence[dict[str, Any]],
    shapes_now: dict[str, ShapeMetrics],
    run_date: str,
) -> tuple[ChangePoint, ...]:
    """Change points of the slice's p95 and p99 and of each shape's p95, every night."""
    nights = [p.run_date for p in runs]
    out = [
        *change_points(nights, [p.latency_p95_us for p in runs], SLICE_WIDE, "latency_p95_us"),
        *change_points(nights, [p.latency_p99_us for p in runs], SLICE_WIDE, "latency_p99_us"),
    ]
    by_shape: dict[str, dict[str, float | None]] = {}
    for row in prev_shapes:
        by_shape.setdefault(row["shape"], {})[row["run_date"]] = row.get("latency_p95_us")
    for shape, m in shapes_now.items():
        series = {**by_shape.get(shape, {}), run_date: m.latency.p95}
        dates = sorted(series)
        out += change_points(dates, [series[d] for d in dates], shape, "latency_p95_us")
    return tuple(out)


def _point(p: dict[str, Any]) -> RunPoint:
    """A stored run's trend point."""
    return RunPoint(
        p["run_id"],
        p["run_date"],
        p["requests"],
        p["latency_p50_us"],
        p["latency_p95_us"],
        p["latency_p99_us"],
        p["covered_traffic_share"],
        p["mape_weighted"],
        p["actions"],
        False,
        p.get("revision") or 1,
    )


def with_stored_triggers(
    actions: Sequence[Action], h: History | None, run_date: str
) -> tuple[Action, ...]:
    """Tonight's actions with the rollback triggers the loop stored, without those rolled
    back (`loop.with_stored_triggers`)."""
    return loop.with_stored_triggers(actions, h.actions if h is not None else (), run_date)


def reference_run(stored: Stored, key: RunKey) -> dict[str, Any] | None:
    """The night tonight is compared with: the configured baseline run; else the last
    earlier night that met the slice's SLA (as that night judged it: `sla_met`), so that a
    slide from met to missed stays a slide on the nights after it; else the last earlier
    night (no SLA, or none met it)."""
    prev_runs = [p for p in stored.runs if p["run_date"] < key.run_date]
    baseline = key.baseline_run
    named = next((p for p in prev_runs if p["run_id"] == baseline), None) if baseline else None
    met = [p for p in prev_runs if p.get("sla_met")]
    return named or (met[-1] if met else prev_runs[-1] if prev_runs else None)


def references(
    stored: Stored, key: RunKey, shapes: Sequence[str]
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Each shape's reference night (a run row), and the shapes whose regression is still open:
    `reference_run`, except that a shape whose regression was open on the last recorded night
    stays compared with the night that regression was measured against until it is back
    within its bound (a move back from worse to less bad is not an improvement). A
    configured baseline run holds for every shape."""
    ref = reference_run(stored, key)
    if ref is None:
        return {}, set()
    prev_runs = [p for p in stored.runs if p["run_date"] < key.run_date]
    by_night = {p["run_date"]: p for p in prev_runs}
    held: dict[str, dict[str, Any]] = {}
    if not key.baseline_run:
        last = prev_runs[-1]["run_date"]
        for a in stored.actions:
            if (
                a["run_date"] == last
                and a["class"] == ActionKind.LATENCY_REGRESSION
                and a.get("proposed")
                and isinstance(p := decode(a.get("params")), Regressed)
                and p.night in by_night
            ):
                held[a["shape"]] = by_night[p.night]
    return {s: held.get(s, ref) for s in shapes}, set(held) & set(shapes)


def tonight_regressions(
    shapes: Sequence[ShapeMetrics],
    quantiles: dict[str, tuple[float, ...]],
    stored: Stored,
    key: RunKey,
    th: Thresholds,
    seed_key: tuple[str, str],
) -> list[Regression]:
    """Each shape's p95 against its reference night (`references`)."""
    refs, held = references(stored, key, [m.shape for m in shapes])
    nights = {r["run_date"] for r in refs.values()}
    shapes_then = [s for s in stored.shapes if s["run_date"] in nights]
    now = {m.shape: m for m in shapes}
    return regressions_of(refs, shapes_then, now, quantiles, th, seed_key, held)


def _kind(ci: Interval, held: bool) -> RegressionKind:
    """A change's kind: a regression when its CI lies above zero; an open regression (`held`)
    stays one until its whole CI lies within `BACK_MARGIN` above the value before it (back
    within its bound: its action's target met); an improvement when the CI lies below
    zero."""
    if ci.high > BACK_MARGIN if held else ci.low > 0:
        return RegressionKind.REGRESSION
    return RegressionKind.IMPROVEMENT if ci.high < 0 else RegressionKind.NO_CHANGE


def regressions_of(
    refs: Mapping[str, dict[str, Any]],
    prev_shapes: Sequence[dict[str, Any]],
    shapes_now: dict[str, ShapeMetrics],
    quantiles: dict[str, tuple[float, ...]],
    th: Thresholds,
    seed_key: tuple[str, str],
    held: Collection[str] = (),
) -> list[Regression]:
    """Each shape's p95 tonight against its reference night's (`refs`: a run row by shape),
    with its bootstrap CI (`held`: the shapes whose regression is still open, `_kind`)."""
    rows = {(s["run_date"], s["shape"]): s for s in prev_shapes}
    regressions = []
    for shape, m in shapes_now.items():
        ref_run = refs.get(shape)
        if ref_run is not None:
            against, ref_date = ref_run["run_id"], ref_run["run_date"]
            old = rows.get((ref_date, shape))
            q = quantiles.get(shape)
            if (
                old is None
                or not old["latency_quantiles_us"]
                or not q
                or old["n"] < th.min_samples_p95
                or m.n < th.min_samples_p95
            ):
                continue
            change, ci = p95_change(
                old["latency_quantiles_us"],
                old["n"],
                q,
                m.n,
                th.bootstrap_resamples,
                seed_for(th.seed, *seed_key, shape, "history"),
            )
            kind = _kind(ci, shape in held)
            before = quantile_of(old["latency_quantiles_us"], 0.95)
            now = float(m.latency.p95 or 0.0)
            regressions.append(
                Regression(
                    shape,
                    against,
                    ref_date,
                    before,
                    now,
                    change,
                    ci,
                    kind,
                    tuple(old["latency_quantiles_us"]),
                    int(old["n"]),
                )
            )
    return regressions
