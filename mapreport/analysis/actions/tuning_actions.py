"""The action a tuning run's choice calls for: a run whose chosen config is materially slower
than the best measured for its workload gets one owned action (compiler lead); a choice within
noise of the best gets none (docs/metrics.md, "Did the compiler choose well?").

What to do follows from what the records show: a cost model shown to rank the run's candidates
poorly is fixed first (a larger budget spends it on the model's wrong picks); a run
that stopped before the trial count at which the best run reached its best is retuned with that
budget; a run that had the budget and still missed pins the best measured config."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import msgspec

from mapreport.analysis.actions.action_params import ActionParams, Impact, owners
from mapreport.analysis.actions.actions import (
    NEIGHBOURS,
    ROLLBACK_MARGIN,
    ROLLBACK_RUNS,
    Action,
    PackRequest,
    RollbackTrigger,
    Scope,
    ValidationRow,
    action_id,
    make_action,
)
from mapreport.analysis.base.common import Evidence, Interval
from mapreport.analysis.base.packs import TuningParams
from mapreport.analysis.tuning.ranking import MATERIAL_REGRET, Ranking, TuningChoice
from mapreport.core.kinds import (
    ActionKind,
    Criterion,
    ImpactUnit,
    OwnerRole,
    Reduction,
    RegretRemedy,
)
from mapreport.core.records import replace


class Regret(ActionParams, frozen=True):
    """A tuning run whose chosen config is materially slower than the best measured for its
    workload: the two, the regret with its interval, and what the remedy rests on (the budget
    that found the best, the run's cost model's ranking)."""

    OWNERS = owners({ActionKind.TUNING_REGRET: OwnerRole.COMPILER_LEAD})

    task: str
    shape: str | None
    target: str | None
    plan_id: str
    """The run that chose."""
    trials: int
    chosen_us: float
    chosen_trial: int | None
    best_us: float
    best_plan: str | None
    best_trial: int | None
    best_config: str | None
    regret: float
    regret_low: float
    regret_high: float
    repeats: int
    budget: int | None
    """The trials the best run needed to come within 1% of its own best (its whole run when
    it never did): the budget a retune names."""
    cost_model: str | None
    pairwise_accuracy: float | None
    pairwise_low: float | None
    pairwise_high: float | None
    remedy: RegretRemedy

    def impact(self) -> Impact:
        """Tuning records count no calls: the time each call of the chosen config spends above the
        best measured one, not a total over the period."""
        return Impact(ImpactUnit.DEVICE_US_PER_CALL, self.chosen_us - self.best_us)


POOR_PAIRWISE = 0.7
"""A cost model ranks poorly when its pairwise accuracy's whole interval lies below this share
of pairs ranked right (chance is 0.5; a trained model clears it): only a few candidates leave
the interval too wide to show it, and then the budget decides the remedy."""

Group = tuple[str, str | None, str | None]
"""A workload across runs: its task key, target and shape (as `ranking.rank` groups them)."""


def _group(c: TuningChoice) -> Group:
    return c.task_key, c.target, c.shape


def acts_on(c: TuningChoice) -> bool:
    """A regret an action rests on: material (`TuningChoice.material`: at least
    MATERIAL_REGRET, its interval clear of 0) on repeated measurements of the chosen config
    and the best (one time each has an interval of one point, which says nothing of the noise:
    the judgement holds it at risk, and no action rests on it)."""
    ci = c.regret_ci
    return c.material and ci is not None and ci.low > 0 and (c.repeats or 0) >= 2


def ranks_poorly(c: TuningChoice) -> bool:
    """The run's cost model is shown to rank its candidates poorly: its pairwise accuracy's
    interval (the figure itself without one) lies wholly below POOR_PAIRWISE."""
    p = c.prediction
    if p is None:
        return False
    ci = p.pairwise_accuracy_ci
    return (ci.high if ci is not None else p.pairwise_accuracy) < POOR_PAIRWISE


def budget_of(best: TuningChoice | None) -> int | None:
    """The trials the run that found the best needed to come within 1% of its own best (all
    its trials when it never did)."""
    if best is None:
        return None
    return best.trials_to_1pct if best.trials_to_1pct is not None else best.trials


def remedy(c: TuningChoice, budget: int | None) -> RegretRemedy:
    """What to do about a material regret: fix a model shown to rank poorly, retune a run
    that stopped short of the budget that found the best, else pin the best measured."""
    if ranks_poorly(c):
        return RegretRemedy.FIX_COST_MODEL
    if budget is not None and c.trials < budget:
        return RegretRemedy.RETUNE
    return RegretRemedy.PIN_BEST


def _labels(choices: Sequence[TuningChoice]) -> dict[Group, str]:
    """Each workload as an action names it: its task at its shapes (with its key where two
    workloads would read alike: another dtype, stride or target)."""
    plain = {_group(c): f"{c.task} {c.shape}" if c.shape else c.task for c in choices}
    seen = Counter(plain.values())
    return {g: x if seen[x] == 1 else f"{x} [{g[0]}]" for g, x in plain.items()}


def regret_action(
    s: Scope,
    c: TuningChoice,
    best: TuningChoice | None,
    label: str,
    guards: Sequence[tuple[str, TuningChoice]] = (),
) -> Action:
    """The compiler lead's action on one run's material regret: its target the regret back
    under MATERIAL_REGRET (and a fixed model's ranking above POOR_PAIRWISE), the other tuned
    workloads' picks guarded; rolled back when the deployed config measures 10% over the one
    it replaced on two nights running."""
    # acts_on(c): a ranked choice, so its regret, interval and both times are there
    assert c.regret is not None
    assert c.regret_ci is not None
    assert c.chosen_us is not None
    assert c.best_us is not None
    budget = budget_of(best)
    what = remedy(c, budget)
    p = c.prediction
    rows = [ValidationRow(label, "regret", c.regret, Criterion.REGRET_WITHIN, MATERIAL_REGRET)]
    if what is RegretRemedy.FIX_COST_MODEL and p is not None:
        rows.append(
            ValidationRow(
                label,
                "pairwise_accuracy",
                p.pairwise_accuracy,
                Criterion.RANKS_WELL,
                POOR_PAIRWISE,
            )
        )
    rows += [
        ValidationRow(x, "chosen_us", g.chosen_us, Criterion.GUARDS_NEIGHBOUR) for x, g in guards
    ]
    rollback = RollbackTrigger(
        "chosen_us", c.chosen_us * (1 + ROLLBACK_MARGIN), ROLLBACK_RUNS, c.chosen_us
    )
    sources = tuple(sorted({*c.sources, *(best.sources if best else ())}))
    ev = Evidence("regret", c.regret, c.repeats or 0, c.regret_ci, sources)
    pci = p.pairwise_accuracy_ci if p is not None else None
    params = Regret(
        task=c.task,
        shape=c.shape,
        target=c.target,
        plan_id=c.plan_id,
        trials=c.trials,
        chosen_us=c.chosen_us,
        chosen_trial=c.chosen_trial,
        best_us=c.best_us,
        best_plan=c.best_plan,
        best_trial=c.best_trial,
        best_config=(
            best.chosen_config if best is not None and best.chosen_trial == c.best_trial else None
        ),
        regret=c.regret,
        regret_low=c.regret_ci.low,
        regret_high=c.regret_ci.high,
        repeats=c.repeats or 0,
        budget=budget,
        cost_model=p.cost_model if p is not None else None,
        pairwise_accuracy=p.pairwise_accuracy if p is not None else None,
        pairwise_low=pci.low if pci is not None else None,
        pairwise_high=pci.high if pci is not None else None,
        remedy=what,
    )
    kind = ActionKind.TUNING_REGRET
    action = make_action(s, label, kind, ev, rollback, tuple(rows), c.regret, params)
    return replace(action, packs=_packs(s, action, c))


def _packs(s: Scope, a: Action, c: TuningChoice) -> tuple[PackRequest, ...]:
    """A regret action's packs: its regret (the action's id) and, where its run's records hold
    the cost model's scores, their pairwise accuracy (`pairwise_pack_id`), which chose the
    remedy; both select the workload's trials by its run, task key, target and shape."""
    params = TuningParams(c.plan_id, c.task_key, c.target, c.shape)
    out = [PackRequest(a.id, a.evidence, Reduction.REGRET, params)]
    pid, x = pairwise_pack_id(s.workload, s.slice, a), c.prediction
    if pid is not None and x is not None:
        ev = Evidence(
            "pairwise_accuracy", x.pairwise_accuracy, x.scored, x.pairwise_accuracy_ci, c.sources
        )
        out.append(PackRequest(pid, ev, Reduction.PAIRWISE_ACCURACY, params))
    return tuple(out)


def tuning_actions(s: Scope, r: Ranking | None) -> list[Action]:
    """One action per workload whose choice in some run is a material regret (`acts_on`):
    the run with the highest interval low end; none where every choice is within noise of
    the best (None: no tuning records)."""
    if r is None:
        return []
    labels = _labels(r.choices)
    runs = {(_group(c), c.plan_id): c for c in r.choices}
    out = []
    for g in dict.fromkeys(_group(c) for c in r.choices):
        acting = [c for c in r.choices if _group(c) == g and acts_on(c)]
        if not acting:
            continue
        c = max(acting, key=lambda c: (c.regret_ci.low if c.regret_ci else 0.0, c.plan_id))
        best = runs.get((g, c.best_plan or ""))
        out.append(regret_action(s, c, best, labels[g], _guards(r.choices, c, labels)))
    return out


def _guards(
    choices: Sequence[TuningChoice], c: TuningChoice, labels: dict[Group, str]
) -> list[tuple[str, TuningChoice]]:
    """The heaviest other tuned workloads (by their chosen time; in the same run where it
    tuned them): a retune or a refitted model must not slow their picks."""
    others: dict[Group, TuningChoice] = {}
    for x in sorted(choices, key=lambda x: x.plan_id != c.plan_id):
        if _group(x) != _group(c) and x.chosen_us is not None:
            others.setdefault(_group(x), x)
    heaviest = sorted(others.values(), key=lambda x: -(x.chosen_us or 0.0))[:NEIGHBOURS]
    return [(labels[_group(x)], x) for x in heaviest]


PAIRWISE_PACK = "tuning_regret.pairwise_accuracy"
"""The key of a regret action's second pack (its run's pairwise accuracy, which chose the
remedy) beside its own id (the regret's pack)."""


def pairwise_pack_id(workload: str, slice_: str, a: Action) -> str | None:
    """The id of a regret action's pairwise-accuracy pack (None: no other action, or its run's
    records hold no cost-model scores), stable across nights like the action's."""
    if not isinstance(a.params, Regret) or a.params.pairwise_accuracy is None:
        return None
    return action_id(workload, slice_, a.shape, PAIRWISE_PACK)


def choice_of(a: Action, r: Ranking | None) -> TuningChoice | None:
    """The run's workload a regret action was drawn from (None for any other action)."""
    p = a.params
    if r is None or not isinstance(p, Regret):
        return None
    labels = _labels(r.choices)
    return next(
        (c for c in r.choices if c.plan_id == p.plan_id and labels[_group(c)] == a.shape), None
    )


class TuningFigures(msgspec.Struct, frozen=True):
    """One run's workload tonight as the closed loop reads it (`loop.targets.figure`): its
    regret, its model's pairwise accuracy and its chosen time, each with the interval and n it
    rests on. A regret on one measurement each has no interval here: it judges nothing."""

    values: Mapping[str, float | None]
    intervals: Mapping[str, Interval | None]
    ns: Mapping[str, int]

    def metric(self, name: str) -> float | None:
        """Tonight's value of `name` (regret, pairwise_accuracy, chosen_us)."""
        return self.values.get(name)


def _figures(c: TuningChoice) -> TuningFigures:
    p = c.prediction
    repeats = c.repeats or 0
    return TuningFigures(
        {
            "regret": c.regret,
            "pairwise_accuracy": p.pairwise_accuracy if p else None,
            "chosen_us": c.chosen_us,
        },
        {
            "regret": c.regret_ci if repeats >= 2 else None,
            "pairwise_accuracy": p.pairwise_accuracy_ci if p else None,
        },
        {"regret": repeats, "pairwise_accuracy": p.scored if p else 0},
    )


def tonight(r: Ranking | None) -> dict[tuple[str, str], TuningFigures]:
    """Every run's workload tonight by the label a regret action names it with and its run
    (`Regret.plan_id`): what the loop reads a regret action's target and trigger from on a
    later night, proposed or not."""
    if r is None:
        return {}
    labels = _labels(r.choices)
    return {(labels[_group(c)], c.plan_id): _figures(c) for c in r.choices}
