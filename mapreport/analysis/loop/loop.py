"""The closed loop's state machine: where each action stands after a night, each transition
decided by a measured condition on that night's figures (docs/metrics.md, "Closed loop across
nights"):

- new: proposed tonight, not before (since it last ended);
- open: proposed tonight and on an earlier night;
- rollback_due: its rollback trigger's metric is above the stored threshold tonight, on fewer
  than the trigger's consecutive nights (proposed or not);
- rolled_back: above it on `actions.ROLLBACK_RUNS` (2) consecutive nights, tonight the last
  (its window completed); or held (proposed again on the compile plan it was rolled back under);
- verified: no longer proposed, and its target (the first row of its validation matrix) met
  tonight with its whole 95% CI within the target's bound;
- dropped: no longer proposed, its target missed or not judged (no figure, no CI).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from mapreport.analysis.actions.action_params import ActionParams, decode
from mapreport.analysis.actions.actions import SLICE_WIDE, Action
from mapreport.analysis.actions.tuning_actions import Regret, TuningFigures
from mapreport.analysis.base.common import Interval, Regression, Thresholds
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.loop.targets import (
    BACK_MARGIN,
    NOT_JUDGED,
    Bound,
    Curve,
    Target,
    TargetCheck,
    Valued,
    check,
)
from mapreport.core.kinds import ActionKind, Criterion, OwnerRole
from mapreport.core.kinds import ActionState as State
from mapreport.core.records import replace

TERMINAL = (State.VERIFIED, State.ROLLED_BACK, State.DROPPED)
ACTIVE = (State.NEW, State.OPEN, State.ROLLBACK_DUE)
ORDER = (
    State.ROLLED_BACK,
    State.ROLLBACK_DUE,
    State.NEW,
    State.OPEN,
    State.VERIFIED,
    State.DROPPED,
)
"""The loop's table order: what needs doing first."""


class ActionState(msgspec.Struct, frozen=True):
    """Where one action stands after this run, with the figures that decided it."""

    action_id: str
    kind: ActionKind
    shape: str
    title: str | None
    """The stored title of an action no longer proposed; None for tonight's actions, whose
    words the report gives."""
    owner_role: OwnerRole
    state: State
    """new, open, rollback_due, rolled_back, verified or dropped (the module's docstring)."""
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
    proposed: bool = False
    """Tonight's findings propose it (a rollback_due action may be proposed or not)."""
    target_criterion: Criterion | None = None
    target_limit: float | None = None
    target_reference: float | None = None
    """The target as proposed (fixed on its first night, like the rollback threshold)."""
    target_ci: Interval | None = None
    """The 95% CI of `target_now` (None: the figure has none, or too few samples)."""
    target_bound: Bound | None = None
    """The range `target_now` must lie in, CI and all, for the target to be met."""
    target_met: bool | None = None
    """Met tonight with its CI (None: not judged: no figure, no CI, too few samples)."""

    @property
    def rollback_exceeded(self) -> bool:
        """The rollback trigger's metric is above its stored threshold tonight."""
        t, now = self.rollback_threshold, self.rollback_now
        return t is not None and now is not None and now > t


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


def transition(
    proposed: bool, seen_before: bool, exceeded: bool, window_done: bool, met: bool | None
) -> State:
    """An action's state from tonight's measured conditions, the first that holds: rolled
    back (trigger exceeded tonight and on the nights before that complete its window),
    rollback due (exceeded tonight), new or open (proposed), verified (target met with its CI),
    else dropped."""
    if exceeded and window_done:
        return State.ROLLED_BACK
    if exceeded:
        return State.ROLLBACK_DUE
    if proposed:
        return State.OPEN if seen_before else State.NEW
    return State.VERIFIED if met else State.DROPPED


class Night(msgspec.Struct, frozen=True):
    """What the loop reads of tonight besides the actions: each shape's figures (and the
    slice's, `SLICE_WIDE`), last night's rows, and each shape's stored quantile functions."""

    values: Mapping[str, Valued]
    last: dict[str, dict[str, Any]]
    curves: dict[str, dict[str, Curve]]
    th: Thresholds
    seed_key: tuple[str, str]
    moved: dict[str, Regression] = msgspec.field(default_factory=dict)
    """Each shape's p95 against its reference night tonight (a regression's target reads the
    same comparison that keeps it open)."""
    tuned: Mapping[tuple[str, str], Valued] = msgspec.field(default_factory=dict)
    """Each tuning run's workload tonight, by the label a regret action names it with and
    its run (`tuning_actions.tonight`): a regret action's target and trigger read its own run's
    figures, proposed tonight or not."""


def _since_ended(
    rows: list[dict[str, Any]],
    current: bool,
    versions_now: dict[str, str | None],
    stored_shapes: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], bool] | None:
    """An action's stored rows of its current proposal and whether it is held; None when it
    ended on an earlier night and is not proposed tonight (reported on the night it ended)."""
    ended = bool(rows) and rows[-1]["state"] in TERMINAL
    if ended and not current:
        return None
    held = bool(
        ended
        and current
        and rows[-1]["state"] == State.ROLLED_BACK
        and not _new_evidence(rows[-1], versions_now, stored_shapes)
    )
    # a proposal after an ended one is a new proposal: its figures and trigger are fixed
    # on its own first night (a held one keeps the rolled-back proposal's)
    kept = rows[:-1] if held else rows
    since = max((i + 1 for i, r in enumerate(kept) if r["state"] in TERMINAL), default=0)
    return rows[since:], held


def action_states(
    actions: Sequence[Action],
    night: Night,
    prev_actions: Sequence[dict[str, Any]],
    versions_now: dict[str, str | None] | None = None,
    stored_shapes: Sequence[dict[str, Any]] = (),
) -> list[ActionState]:
    """Every action proposed tonight or still in the loop from earlier nights, in its state."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for a in prev_actions:
        by_id.setdefault(a["action_id"], []).append(a)
    current = {a.id: a for a in actions}
    out = []
    for aid in sorted(set(by_id) | set(current)):
        kept = _since_ended(by_id.get(aid, []), aid in current, versions_now or {}, stored_shapes)
        if kept is not None:
            out.append(_one(aid, current.get(aid), kept[0], kept[1], night))
    return sorted(out, key=lambda a: (ORDER.index(a.state), a.shape, a.kind))


def _one(
    aid: str, now: Action | None, rows: list[dict[str, Any]], held: bool, night: Night
) -> ActionState:
    """One action's state tonight from its stored rows (since it last ended) and tonight's
    proposal, if any."""
    first = rows[0] if rows else None
    title: str | None = None
    trigger: tuple[str | None, float | None, float | None, float | None]
    if now is not None:
        params: ActionParams | None = now.params
        row = now.validation_matrix[0] if now.validation_matrix else None
        proposed_target = (
            Target(row.metric, row.criterion, row.baseline, row.limit, row.reference)
            if row
            else Target(None, None, None)
        )
        rb = now.rollback_trigger
        trigger = (rb.metric, rb.threshold, rb.pre_change, rb.sla_us)
        kind, shape, role = now.kind, now.shape, now.owner_role
    else:
        assert first is not None
        proposed_target = Target(None, None, None)
        trigger = (None, None, None, None)
        kind, shape = ActionKind(first["class"]), first["shape"]
        role = OwnerRole(first["owner_role"])
        params = decode(first.get("params"))  # the facts it was first proposed with
        title = first["title"] if params is None else None  # older nights kept words
    target = _stored_target(first, proposed_target)
    rb_metric, rb_threshold, rb_pre, rb_sla = (
        (
            first["rollback_metric"],
            first["rollback_threshold"],
            first.get("rollback_pre_change"),
            first.get("rollback_sla_us"),
        )
        if first
        else trigger
    )
    tuned = params.plan_id if isinstance(params, Regret) else None
    m = night.tuned.get((shape, tuned)) if tuned is not None else night.values.get(shape)
    t_now, rb_now, rb_prev = _values(now, m, night.last, rows, shape, target.metric, rb_metric)
    judged = _back(target, night.moved.get(shape)) or _judge(
        target, m, t_now, night.curves.get(shape, {}), night, aid, now is None
    )
    exceeded = (
        first is not None and rb_threshold is not None and rb_now is not None
    ) and rb_now > rb_threshold
    # the trigger's window is ROLLBACK_RUNS = 2 nights: tonight and the previous night
    window_done = rb_prev is not None and rb_threshold is not None and rb_prev > rb_threshold
    state = (
        State.ROLLED_BACK
        if held
        else transition(now is not None, bool(rows), exceeded, window_done, judged.met)
    )
    return ActionState(
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
        target_metric=target.metric,
        target_baseline=target.baseline,
        target_now=t_now,
        rollback_metric=rb_metric,
        rollback_threshold=rb_threshold,
        rollback_now=rb_now,
        rollback_pre_change=rb_pre,
        rollback_sla_us=rb_sla,
        held=held,
        proposed=now is not None and state != State.ROLLED_BACK,
        target_criterion=target.criterion,
        target_limit=target.limit,
        target_reference=target.reference,
        target_ci=judged.ci,
        target_bound=judged.bound,
        target_met=judged.met,
    )


def _stored_target(first: dict[str, Any] | None, tonight: Target) -> Target:
    """The target as fixed on the proposal's first night (tonight's for a new proposal; a
    night recorded before targets were kept gives its metric and baseline only)."""
    if first is None:
        return tonight
    criterion = first.get("target_criterion")
    metric = first["target_metric"] if first["target_metric"] is not None else tonight.metric
    if not criterion:
        return replace(tonight, metric=metric, baseline=first["target_baseline"])
    return Target(
        metric,
        Criterion(criterion),
        first["target_baseline"],
        first.get("target_limit"),
        first.get("target_reference"),
    )


def _back(t: Target, g: Regression | None) -> TargetCheck | None:
    """A regression's target (back to its value before) read off tonight's comparison with
    the same night (`history._kind`): the change's CI in the metric's unit, met when it lies
    within `BACK_MARGIN` of the value before; None when tonight compared another night."""
    if t.criterion != Criterion.BACK_TO_BEFORE or g is None or t.limit is None:
        return None
    if not math.isclose(g.before_us, t.limit, rel_tol=1e-9):
        return None
    high = t.limit * (1 + BACK_MARGIN)
    ci = Interval(g.before_us * (1 + g.ci.low), g.before_us * (1 + g.ci.high))
    return TargetCheck(ci.high <= high, g.now_us, ci, (None, high), g.reference_n)


def _judge(
    t: Target,
    m: Valued | None,
    t_now: float | None,
    curves: dict[str, Curve],
    night: Night,
    aid: str,
    gone: bool,
) -> TargetCheck:
    """The target against tonight's figures and its shape's `curves` (an action whose metric
    no shape or run row holds, such as an op x shape's, states its own figure: it has no CI
    here, so it is not judged)."""
    if t.metric is None and t.criterion is None:
        return NOT_JUDGED
    seed = seed_for(night.th.seed, *night.seed_key, aid, "target")
    found = check(t, m, curves, night.th, seed, gone)
    if found.value is None and t_now is not None and found.met is None:
        return replace(found, value=t_now)
    return found


def _values(
    now: Action | None,
    m: Valued | None,
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
    last_night = last_shapes.get(SLICE_WIDE, {}).get("run_date")
    kept = rows[-1] if rows and rows[-1]["run_date"] == last_night else {}
    if now is not None and t_now is None and rb_now is None:
        t_now, rb_now = _own_figures(now)
        rb_prev = kept.get("rollback_now")
    elif isinstance(m, TuningFigures):
        # no shape row holds a tuning run's time: last night's is the loop's own row of it
        rb_prev = kept.get("rollback_now")
    return t_now, rb_now, rb_prev


def _own_figures(a: Action) -> tuple[float | None, float | None]:
    """Tonight's values of an action's target and rollback metrics, as the action states
    them (its target row's baseline, its trigger's pre-change value)."""
    target = a.validation_matrix[0].baseline if a.validation_matrix else None
    return target, a.rollback_trigger.pre_change


def with_stored_triggers(
    actions: Sequence[Action], states: Sequence[ActionState], run_date: str
) -> tuple[Action, ...]:
    """Tonight's actions as the loop holds them: each with the rollback trigger fixed on the
    night it was proposed (the one every page prints, and the one that fires), and without
    those rolled back (tonight, or held: `ActionState.held`): a rolled-back change is not
    proposed in the same breath."""
    by_id = {a.action_id: a for a in states}
    out = []
    for a in actions:
        st = by_id.get(a.id)
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
