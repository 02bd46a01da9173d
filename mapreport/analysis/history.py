"""Closed loop across nights: the primary metric's trend, each action's state across runs, and
regressions against the previous run or a named baseline run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from mapreport.analysis.action_params import ActionParams, decode
from mapreport.analysis.actions import SLICE_WIDE, Action
from mapreport.analysis.changepoints import ChangePoint, change_points
from mapreport.analysis.common import Interval, Regression, Thresholds
from mapreport.analysis.stats import CI_LEVEL, seed_for
from mapreport.core.kinds import ActionKind, HistoryNote, OwnerRole, RegressionKind
from mapreport.core.kinds import ActionState as State
from mapreport.core.window import EVERYTHING, Window

if TYPE_CHECKING:
    from mapreport.analysis.shape import ShapeMetrics


@dataclass(frozen=True)
class RunPoint:
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


@dataclass(frozen=True)
class ActionState:
    """Where one action stands after this run."""

    action_id: str
    kind: ActionKind
    shape: str
    title: str | None
    """The stored title of an action no longer proposed; None for tonight's actions, whose
    words the report gives."""
    owner_role: OwnerRole
    state: State
    """new, open, verified (its target moved as expected), rolled_back (its trigger fired on
    two consecutive runs), dropped (the finding is gone but the target did not move)."""
    first_run_id: str
    first_run_date: str
    runs_seen: int
    target_metric: str | None
    target_baseline: float | None
    target_now: float | None
    rollback_metric: str | None
    rollback_threshold: float | None
    rollback_now: float | None
    params: ActionParams | None = None
    """The figures the action stated: tonight's, or those of the night it was first proposed
    (None for a night recorded before they were kept: `title` holds its words then)."""
    rollback_pre_change: float | None = None
    """The rollback metric's value on the night the action was proposed (the +10% base)."""
    rollback_sla_us: float | None = None
    """The SLA that bounded the threshold that night (None: it did not)."""
    held: bool = False
    """Rolled back earlier and proposed again tonight on evidence that is not new (its shape's
    compile plan version is the one it was rolled back under): it stays rolled back, and is
    not proposed."""


@dataclass(frozen=True)
class History:
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


TERMINAL = (State.VERIFIED, State.ROLLED_BACK, State.DROPPED)
IMPROVEMENT = 0.10
"""A target metric verified: it moved at least 10% the right way (lower is better)."""


def _redraw_p95(q: Sequence[float], n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """p95 of `resamples` samples of size n drawn from a stored quantile function Q, exactly,
    from two random numbers per resample instead of n: numpy's p95 interpolates between the
    order statistics j and j+1 (0-based, j = floor(0.95 (n-1))); of n uniforms the (j+1)-th
    smallest is Beta(j+1, n-j), the next lies a Beta(1, n-j-1) share of the way from it to 1,
    and Q, non-decreasing, maps the uniforms' order statistics onto the sample's."""
    grid = np.linspace(0, 1, len(q))
    qs = np.asarray(q, dtype=np.float64)
    h = 0.95 * (n - 1)
    j = int(np.floor(h))
    g = h - j
    lo = rng.beta(j + 1, n - j, resamples)
    hi = lo + (1 - lo) * rng.beta(1, n - j - 1, resamples) if j + 1 < n else lo
    return (1 - g) * np.interp(lo, grid, qs) + g * np.interp(hi, grid, qs)


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


@dataclass(frozen=True)
class Stored:
    """The history tables' rows of one slice, as the dataset holds them."""

    runs: Sequence[dict[str, Any]] = ()
    shapes: Sequence[dict[str, Any]] = ()
    actions: Sequence[dict[str, Any]] = ()
    ops: Sequence[dict[str, Any]] = ()


@dataclass(frozen=True)
class RunKey:
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
) -> History:
    """Trend, action states and regressions of this run against the stored nights before it
    (each night is one recording, keyed by its run date). `versions_now`: each shape's compile
    plan version tonight (what makes a rolled-back action's evidence new)."""
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
    states = _action_states(actions, values, last_values, prev_actions, versions_now, prev_shapes)
    baseline = key.baseline_run
    named = next((p for p in prev_runs if p["run_id"] == baseline), None) if baseline else None
    ref_run = reference_run(stored, key)
    against = ref_run["run_id"] if ref_run else None
    note = None
    if baseline and named is None:
        note = HistoryNote.BASELINE_MISSING
    if not prev_runs:
        note = HistoryNote.FIRST_RUN
    regressions = (
        list(moved)
        if moved is not None
        else regressions_of(ref_run, prev_shapes, shapes_now, quantiles, th, seed_key)
    )
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


def _state(fired: bool, proposed: bool, seen_before: bool, wide: bool, moved: bool) -> State:
    """An action's state from what happened to it tonight."""
    if fired:
        return State.ROLLED_BACK
    if proposed:
        return State.OPEN if seen_before else State.NEW
    return State.VERIFIED if wide or moved else State.DROPPED


def _new_evidence(
    rolled: dict[str, Any],
    versions_now: dict[str, str | None],
    stored_shapes: Sequence[dict[str, Any]],
) -> bool:
    """A rolled-back action's evidence is new when its shape now runs another compile plan
    version than on the night it was rolled back (a rebuilt plan: the change can be tried
    again); the same symptom on the same plan is not new."""
    then = next(
        (
            s.get("plan_version")
            for s in stored_shapes
            if s["run_date"] == rolled["run_date"] and s["shape"] == rolled["shape"]
        ),
        None,
    )
    now = versions_now.get(rolled["shape"])
    return now is not None and then is not None and now != then


def _action_states(
    actions: Sequence[Action],
    shapes_now: dict[str, ShapeMetrics | RunPoint],
    last_shapes: dict[str, dict[str, Any]],
    prev_actions: Sequence[dict[str, Any]],
    versions_now: dict[str, str | None] | None = None,
    stored_shapes: Sequence[dict[str, Any]] = (),
) -> list[ActionState]:
    by_id: dict[str, list[dict[str, Any]]] = {}
    for a in prev_actions:
        by_id.setdefault(a["action_id"], []).append(a)
    current = {a.id: a for a in actions}
    out = []
    for aid in sorted(set(by_id) | set(current)):
        rows = by_id.get(aid, [])
        ended = rows and rows[-1]["state"] in TERMINAL
        if ended and aid not in current:
            continue  # reported on the night it ended
        held = bool(
            ended
            and aid in current
            and rows[-1]["state"] == State.ROLLED_BACK
            and not _new_evidence(rows[-1], versions_now or {}, stored_shapes)
        )
        # a proposal after an ended one is a new proposal: its figures and trigger are fixed
        # on its own first night (a held one keeps the rolled-back proposal's)
        since = max((i + 1 for i, r in enumerate(rows) if r["state"] in TERMINAL), default=0)
        if held:
            since = max(
                (i + 1 for i, r in enumerate(rows[:-1]) if r["state"] in TERMINAL), default=0
            )
        rows = rows[since:]
        now = current.get(aid)
        first = rows[0] if rows else None
        title: str | None = None
        params: ActionParams | None = None
        if now is not None:
            params = now.params
            target = now.validation_matrix[0] if now.validation_matrix else None
            t_metric = target.metric if target else None
            t_base = first["target_baseline"] if first else (target.baseline if target else None)
            rb = now.rollback_trigger
            rb_metric = first["rollback_metric"] if first else rb.metric
            rb_threshold = first["rollback_threshold"] if first else rb.threshold
            rb_pre = first.get("rollback_pre_change") if first else rb.pre_change
            rb_sla = first.get("rollback_sla_us") if first else rb.sla_us
            kind, shape, role = now.kind, now.shape, now.owner_role
        else:
            assert first is not None
            t_metric, t_base = first["target_metric"], first["target_baseline"]
            rb_metric, rb_threshold = first["rollback_metric"], first["rollback_threshold"]
            rb_pre, rb_sla = first.get("rollback_pre_change"), first.get("rollback_sla_us")
            kind, shape = ActionKind(first["class"]), first["shape"]
            role = OwnerRole(first["owner_role"])
            params = decode(first.get("params"))  # the facts it was first proposed with
            title = first["title"] if params is None else None  # older nights kept words
        t_now, rb_now, rb_prev = _values(
            now, shapes_now.get(shape), last_shapes, rows, shape, t_metric, rb_metric
        )
        fired = (
            first is not None
            and rb_threshold is not None
            and rb_now is not None
            and rb_prev is not None
            and rb_now > rb_threshold
            and rb_prev > rb_threshold
        )
        moved = t_now is not None and t_base is not None and t_now <= t_base * (1 - IMPROVEMENT)
        state = (
            State.ROLLED_BACK
            if held
            else _state(fired, now is not None, bool(rows), shape == SLICE_WIDE, moved)
        )
        out.append(
            ActionState(
                action_id=aid,
                kind=kind,
                shape=shape,
                title=title,
                params=params,
                owner_role=role,
                state=state,
                first_run_id=first["first_run_id"] if first else "",
                first_run_date=first["run_date"] if first else "",
                runs_seen=len({x["run_date"] for x in rows}) + (1 if now is not None else 0),
                target_metric=t_metric,
                target_baseline=t_base,
                target_now=t_now,
                rollback_metric=rb_metric,
                rollback_threshold=rb_threshold,
                rollback_now=rb_now,
                rollback_pre_change=rb_pre,
                rollback_sla_us=rb_sla,
                held=held,
            )
        )
    order = [State.ROLLED_BACK, State.NEW, State.OPEN, State.VERIFIED, State.DROPPED]
    return sorted(out, key=lambda a: (order.index(a.state), a.shape, a.kind))


def _values(
    now: Action | None,
    m: ShapeMetrics | RunPoint | None,
    last_shapes: dict[str, dict[str, Any]],
    rows: list[dict[str, Any]],
    shape: str,
    t_metric: str | None,
    rb_metric: str | None,
) -> tuple[float | None, float | None, float | None]:
    """An action's target and rollback metrics tonight, and the rollback metric last night:
    from its shape's (or the run's) figures, or, for a metric neither holds (an op x shape's,
    the device's), from the action's own figures and the row the history kept of it."""
    t_now = m.metric(t_metric) if m is not None and t_metric else None
    rb_now = m.metric(rb_metric) if m is not None and rb_metric else None
    rb_prev = last_shapes.get(shape, {}).get(rb_metric or "") if rb_metric else None
    if now is not None and t_now is None and rb_now is None:
        t_now, rb_now = _own_figures(now)
        last_night = last_shapes.get(SLICE_WIDE, {}).get("run_date")
        kept = rows[-1] if rows and rows[-1]["run_date"] == last_night else {}
        rb_prev = kept.get("rollback_now")
    return t_now, rb_now, rb_prev


def _own_figures(a: Action) -> tuple[float | None, float | None]:
    """Tonight's values of an action's target and rollback metrics, as the action states
    them (its target row's baseline, its trigger's pre-change value)."""
    target = a.validation_matrix[0].baseline if a.validation_matrix else None
    return target, a.rollback_trigger.pre_change


def with_stored_triggers(
    actions: Sequence[Action], h: History | None, run_date: str
) -> tuple[Action, ...]:
    """Tonight's actions as the loop holds them: each with the rollback trigger fixed on the
    night it was proposed (the one every page prints, and the one that fires), and without
    those rolled back (tonight, or held: `ActionState.held`): a rolled-back change is not
    proposed in the same breath."""
    states = {a.action_id: a for a in h.actions} if h is not None else {}
    out = []
    for a in actions:
        st = states.get(a.id)
        if st is not None and st.state == State.ROLLED_BACK:
            continue  # rolled back tonight, or held: not proposed again
        t = a.rollback_trigger
        if st is not None and st.first_run_date and t.metric != "none":
            t = replace(
                t,
                metric=st.rollback_metric or t.metric,
                threshold=st.rollback_threshold,
                pre_change=st.rollback_pre_change,
                sla_us=st.rollback_sla_us,
                since=st.first_run_date,
            )
        elif t.metric != "none":
            t = replace(t, since=run_date)
        out.append(replace(a, rollback_trigger=t))
    return tuple(out)


def reference_run(stored: Stored, key: RunKey) -> dict[str, Any] | None:
    """The night tonight is compared with: the configured baseline run, else the last
    recorded night before tonight."""
    prev_runs = [p for p in stored.runs if p["run_date"] < key.run_date]
    baseline = key.baseline_run
    named = next((p for p in prev_runs if p["run_id"] == baseline), None) if baseline else None
    return named or (prev_runs[-1] if prev_runs else None)


def tonight_regressions(
    shapes: Sequence[ShapeMetrics],
    quantiles: dict[str, tuple[float, ...]],
    stored: Stored,
    key: RunKey,
    th: Thresholds,
    seed_key: tuple[str, str],
) -> list[Regression]:
    """Each shape's p95 against the reference night (`reference_run`)."""
    ref = reference_run(stored, key)
    shapes_then = [s for s in stored.shapes if ref is not None and s["run_date"] == ref["run_date"]]
    return regressions_of(ref, shapes_then, {m.shape: m for m in shapes}, quantiles, th, seed_key)


def regressions_of(
    ref_run: dict[str, Any] | None,
    prev_shapes: Sequence[dict[str, Any]],
    shapes_now: dict[str, ShapeMetrics],
    quantiles: dict[str, tuple[float, ...]],
    th: Thresholds,
    seed_key: tuple[str, str],
) -> list[Regression]:
    """Each shape's p95 tonight against the reference night's, with its bootstrap CI."""
    against = ref_run["run_id"] if ref_run else None
    regressions = []
    if ref_run is not None and against is not None:
        ref_date = ref_run["run_date"]
        ref = {s["shape"]: s for s in prev_shapes if s["run_date"] == ref_date}
        for shape, m in shapes_now.items():
            old = ref.get(shape)
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
            kind = (
                RegressionKind.REGRESSION
                if ci.low > 0
                else RegressionKind.IMPROVEMENT
                if ci.high < 0
                else RegressionKind.NO_CHANGE
            )
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
