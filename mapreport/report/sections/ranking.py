"""Did the compiler choose well? Per tuned workload and run (tuning records that keep every
trial): the chosen config against the best measured, the regret with its interval, the search's
efficiency (trials to within 5% and 1% of its best, its best-so-far curve) and, where the records
carry the cost model's scores, how well it ranked (docs/metrics.md, "Did the compiler choose
well?"). Where a run's deployed kernel ran in a profiler trace of the slice, its tuned time against
its runtime per call (the transfer gap, analysis/tuning/transfer.py). findings.json `ranking` holds
a row per run and workload; slices without tuning records have no `ranking` key and no section.
The regret action's title, by its remedy, is worded here beside the figures it names."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from mapreport.analysis.actions.tuning_actions import Regret, choice_of, pairwise_pack_id
from mapreport.analysis.base.common import Interval
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.tuning.ranking import MATERIAL_REGRET, WITHIN, Ranking, TuningChoice
from mapreport.analysis.tuning.transfer import TRANSFER_TOLERANCE, TransferGap
from mapreport.core.kinds import JudgementFamily, RegretRemedy, Unranked
from mapreport.report import charts
from mapreport.report.filters import duration, pct, plural, ratio
from mapreport.report.sections.unit import Facts, Section
from mapreport.report.titles import titled

if TYPE_CHECKING:
    import plotly.graph_objects as go

UNRANKED: dict[str, str] = {
    Unranked.ONE_CANDIDATE: (
        "the records hold one measured trial for this workload, so there is nothing to rank"
    ),
    Unranked.NO_SUCCESS: "every trial of this workload failed, so no time can rank it",
    Unranked.NO_SCORES: (
        "the records hold no cost-model score, so only the search's outcome can be judged, not "
        "the model's ranking"
    ),
}
"""Why a workload gets no regret or no ranking figures."""
NO_PREDICTION = "no prediction recorded"
"""What the ranking columns say of a run whose records hold no cost-model score."""
MAX_ROWS = 60
"""Rows the tables list (the material regrets first); findings.json holds every one."""
MAX_CURVES = 10
"""Runs the search chart draws (the most trials first)."""
MIN_CURVE_TRIALS = 3
"""A run with fewer trials has no search to draw."""
LEGEND_ROW_PX = 16
"""The search chart's height per legend row."""
MAX_POINTS = 300
"""Points a curve keeps (its improvements and its last trial, thinned beyond this)."""


class RankingRow(msgspec.Struct):
    """One tuning run's workload: what it measured and picked, its regret, and how well its
    cost model ranked the candidates."""

    workload: str
    task_key: str
    plan_id: str
    target: str | None
    shape: str | None
    trials: int
    candidates: int
    errors: int
    best_us: float | None
    best_plan: str | None
    chosen_us: float | None
    chosen_trial: int | None
    chosen_config: str | None
    regret: float | None
    regret_ci: Interval | None
    material: bool
    trials_to_5pct: int | None
    trials_to_1pct: int | None
    cost_model: str | None
    k: int | None
    pairwise_accuracy: float | None
    pairwise_accuracy_ci: Interval | None
    kendall_tau: float | None
    kendall_tau_ci: Interval | None
    topk_recall: float | None
    topk_score: float | None
    topk_score_ci: Interval | None
    topk_slowdown: float | None
    unranked: Unranked | None
    unranked_text: str | None
    sources: tuple[str, ...]
    regret_pack: str | None = None
    """The evidence pack of the regret an action rests on (the action's id; None: no action)."""
    pairwise_pack: str | None = None
    """The evidence pack of that run's pairwise accuracy (None: no action, or no scores)."""
    runtime_kernel: str | None = None
    """The deployed kernel (the run's plan row) whose calls a profiler trace of the slice holds
    at the tuned shape; the runtime_ and transfer_ keys are null without one."""
    tuned_us: float | None = None
    """The mean of this run's own measured repeats of its pick, what the transfer ratio divides
    by (chosen_us pools every run that measured the config)."""
    runtime_us: float | None = None
    """The kernel's mean time per call at runtime."""
    runtime_median_us: float | None = None
    runtime_calls: int | None = None
    transfer_ratio: float | None = None
    """runtime_us / tuned_us: above 1, slower at runtime than tuned."""
    transfer_ratio_ci: Interval | None = None
    """Bootstrap over the calls and the tuned repeats (null: one value each side)."""
    transfer_beyond: bool | None = None
    """The whole interval lies beyond the transfer tolerance (1.25x either way): the ranking
    judgement is at risk."""


class Fragment(msgspec.Struct):
    """findings.json `ranking` (absent without tuning records, so the findings of slices
    without tuning logs are as before)."""

    ranking: tuple[RankingRow, ...] | msgspec.UnsetType = msgspec.UNSET


Packs = Mapping[tuple[str, str, str | None, str | None], tuple[str, str | None]]
"""Per run and workload an action rests on (plan, task key, target, shape): its regret's and
its pairwise accuracy's evidence packs."""


def row(c: TuningChoice, packs: Packs | None = None, gap: TransferGap | None = None) -> RankingRow:
    """One run's workload as findings.json states it (`gap`: its deployed kernel at runtime)."""
    p = c.prediction
    reason = c.unranked or c.unscored
    regret_pack, pairwise_pack = (packs or {}).get(
        (c.plan_id, c.task_key, c.target, c.shape), (None, None)
    )
    return RankingRow(
        workload=c.task,
        task_key=c.task_key,
        plan_id=c.plan_id,
        target=c.target,
        shape=c.shape,
        trials=c.trials,
        candidates=c.candidates,
        errors=c.errors,
        best_us=c.best_us,
        best_plan=c.best_plan,
        chosen_us=c.chosen_us,
        chosen_trial=c.chosen_trial,
        chosen_config=c.chosen_config,
        regret=c.regret,
        regret_ci=c.regret_ci,
        material=c.material,
        trials_to_5pct=c.trials_to_5pct,
        trials_to_1pct=c.trials_to_1pct,
        cost_model=p.cost_model if p else None,
        k=p.k if p else None,
        pairwise_accuracy=p.pairwise_accuracy if p else None,
        pairwise_accuracy_ci=p.pairwise_accuracy_ci if p else None,
        kendall_tau=p.kendall_tau if p else None,
        kendall_tau_ci=p.kendall_tau_ci if p else None,
        topk_recall=p.topk_recall if p else None,
        topk_score=p.topk_score if p else None,
        topk_score_ci=p.topk_score_ci if p else None,
        topk_slowdown=p.topk_slowdown if p else None,
        unranked=reason,
        unranked_text=UNRANKED[reason] if reason else None,
        sources=c.sources,
        regret_pack=regret_pack,
        pairwise_pack=pairwise_pack,
        runtime_kernel=gap.kernel if gap else None,
        tuned_us=gap.tuned_us if gap else None,
        runtime_us=gap.runtime_us if gap else None,
        runtime_median_us=gap.runtime_median_us if gap else None,
        runtime_calls=gap.calls if gap else None,
        transfer_ratio=gap.ratio if gap else None,
        transfer_ratio_ci=gap.ratio_ci if gap else None,
        transfer_beyond=gap.beyond if gap else None,
    )


class Read(msgspec.Struct, frozen=True):
    """What the section reads of the slice: its tuning ranking, and the status's deciding
    judgement when it is the tuning choices' (page 1 then says why)."""

    ranking: Ranking | None
    deciding: Judgement | None
    packs: Packs = msgspec.field(default_factory=dict)
    """The evidence packs of the runs' workloads an action rests on."""
    transfer: tuple[TransferGap, ...] = ()
    """The runs' deployed kernels that ran in the slice's profiler trace at their tuned shape."""


def read(f: Facts) -> Read:
    """The slice's tuning ranking (the one place the report reads it off the result) and the
    evidence packs of its regret actions."""
    r = f.r
    st = r.status
    deciding = st.deciding if st is not None else None
    ranks = deciding is not None and deciding.family is JudgementFamily.RANKING
    ranking = r.compiled.ranking
    packs = {
        (c.plan_id, c.task_key, c.target, c.shape): (a.id, pairwise_pack_id(r.workload, r.slice, a))
        for a in r.actions
        if (c := choice_of(a, ranking)) is not None
    }
    return Read(ranking, deciding if ranks else None, packs, r.compiled.transfer)


class ChoiceLine(msgspec.Struct, frozen=True):
    """One run's workload as the tables print it."""

    c: TuningChoice
    workload: str
    """Its task at its argument shapes (and target)."""
    best_where: str
    """Which run and trial measured the best ('' when it is this run's own pick)."""
    standing: str
    """The choice against the best, in words (material, within noise, ...)."""
    style: str
    """The standing's class: 'bad' a proven material regret, 'warn' one short of proof,
    'muted-text' nothing to rank, '' otherwise."""
    no_prediction: str
    """Why the ranking columns are empty ('' when the model's scores were recorded)."""


class TransferLine(msgspec.Struct, frozen=True):
    """One run's deployed kernel, tuned against runtime, as the section states it."""

    g: TransferGap
    workload: str
    standing: str
    """The ratio against the tolerance, in words."""
    style: str
    """'warn' beyond the tolerance (the ranking judgement is at risk), '' otherwise."""


class Curve(msgspec.Struct, frozen=True):
    """One run's search: its best so far over the best measured for its workload, per trial
    (only where it improved, and its last trial)."""

    label: str
    trials: tuple[int, ...]
    ratio: tuple[float, ...]


class RankingView(msgspec.Struct, frozen=True):
    """What the section prints, findings.json states and page 1 says of the tuning records."""

    ranking: Ranking | None
    lines: tuple[ChoiceLine, ...]
    """The runs' workloads the tables list (at most MAX_ROWS, the material regrets first)."""
    shown_of: int
    """How many runs' workloads there are (the tables may list fewer)."""
    one_candidate: int
    """Workloads with one measured trial in a run, not listed (nothing to rank)."""
    runs: int
    workloads: int
    trials: int
    ranked: int
    material: int
    failed: int
    predicted: int
    """Runs' workloads whose cost model's scores were recorded."""
    curves: tuple[Curve, ...]
    curves_of: int
    """Runs with a search to draw (the chart draws at most MAX_CURVES)."""
    sentence: str
    """Page 1's line when the tuning choices decide the slice's status ('' otherwise)."""
    bound: float = MATERIAL_REGRET
    """A regret is material from here (its interval clear of 0)."""
    within_far: float = WITHIN[0]
    within_near: float = WITHIN[1]
    """The distances from a run's own best that its trials to within count to."""
    no_prediction: str = NO_PREDICTION
    packs: Packs = msgspec.field(default_factory=dict)
    """The evidence packs of the runs' workloads an action rests on (findings.json's)."""
    transfer: tuple[TransferLine, ...] = ()
    """Each run's deployed kernel that ran in the slice's profiler trace, the farthest off
    first."""
    transfer_beyond: int = 0
    """Of those, the ones whose whole ratio interval lies beyond the tolerance."""
    tolerance: float = TRANSFER_TOLERANCE
    tolerance_low: float = 1 / TRANSFER_TOLERANCE


def workload(c: TuningChoice | Regret | TransferGap) -> str:
    """A tuned workload as the report names it: its task at its argument shapes (and target)."""
    at = f" at {c.shape}" if c.shape else ""
    on = f" on {c.target}" if c.target else ""
    return f"{c.task}{at}{on}"


def standing(c: TuningChoice) -> tuple[str, str]:
    """The choice against the best measured, in a few words, and its cell's style."""
    if c.unranked is not None:
        return UNRANKED[c.unranked], "muted-text"
    ci, repeats = c.regret_ci, c.repeats or 0
    if c.material and ci is not None and ci.low >= MATERIAL_REGRET and repeats >= 2:
        return f"material (whole CI ≥ {pct(MATERIAL_REGRET)})", "bad"
    if c.material and repeats < 2:
        return "material, one measurement each", "warn"
    if c.material:
        return f"material (CI reaches below {pct(MATERIAL_REGRET)})", "warn"
    if not c.regret:
        return "chose the best", ""
    if c.regret < MATERIAL_REGRET:
        return f"within {pct(MATERIAL_REGRET)}", ""
    return "within noise (CI holds 0)", ""


def _line(c: TuningChoice) -> ChoiceLine:
    # a pick with no regret is the best config (measured in another run too, maybe): no where
    own = not c.regret or (c.best_plan in (None, c.plan_id) and c.best_trial == c.chosen_trial)
    trial = f", trial {c.best_trial:,}" if c.best_trial is not None else ""
    words, style = standing(c)
    reason = c.unscored
    missing = NO_PREDICTION if reason in (None, Unranked.NO_SCORES) else UNRANKED[reason]
    return ChoiceLine(
        c,
        workload(c),
        "" if own or c.best_us is None else f"run {c.best_plan}{trial}",
        words,
        style,
        "" if c.prediction is not None else missing,
    )


def transfer_standing(g: TransferGap) -> tuple[str, str]:
    """The tuned time against the runtime in a few words, and its cell's style."""
    if g.ratio_ci is None:
        return "one value each side: no interval to judge", "muted-text"
    if g.beyond:
        way = "slower" if g.ratio > 1 else "faster"
        return (
            f"ran {way} than tuned beyond {ratio(TRANSFER_TOLERANCE)}× (whole CI): the tuning "
            "time did not predict production",
            "warn",
        )
    return f"within {ratio(TRANSFER_TOLERANCE)}× either way (CI reaches inside)", ""


def _transfer_line(g: TransferGap) -> TransferLine:
    words, style = transfer_standing(g)
    return TransferLine(g, workload(g), words, style)


def _ordered(choices: list[TuningChoice]) -> list[TuningChoice]:
    """By workload, the workloads with a material regret first (the largest first), and within
    a workload its material runs first, then by run."""
    worst: dict[str, tuple[int, float]] = {}
    for c in choices:
        key = (0 if c.material else 1, -(c.regret or 0.0))
        worst[workload(c)] = min(worst.get(workload(c), key), key)
    return sorted(
        choices,
        key=lambda c: (
            worst[workload(c)],
            workload(c),
            not c.material,
            -(c.regret or 0.0),
            c.plan_id,
        ),
    )


def _curve(c: TuningChoice) -> Curve | None:
    """A run's best so far over the best measured, where it improved and at its last trial."""
    best = c.best_us
    if best is None or c.trials < MIN_CURVE_TRIALS:
        return None
    so_far = c.best_so_far_us
    keep = [
        (n, b)
        for n, (b, before) in enumerate(zip(so_far, (None, *so_far[:-1]), strict=True), 1)
        if b is not None and (b != before or n == len(so_far))
    ]
    if len(keep) > MAX_POINTS:  # thin evenly, keeping the first and the last
        step = (len(keep) - 1) / (MAX_POINTS - 1)
        keep = [keep[round(i * step)] for i in range(MAX_POINTS)]
    if not keep:
        return None
    return Curve(
        f"{c.plan_id} · {workload(c)}",
        tuple(n for n, _ in keep),
        tuple(b / best for _, b in keep),
    )


def view(x: Read) -> RankingView:
    """The tables' lines, the counts, the chart's curves and page 1's line."""
    r = x.ranking
    choices = r.choices if r is not None else ()
    listed = [c for c in choices if c.unranked is not Unranked.ONE_CANDIDATE]
    curves = [
        cv for c in sorted(choices, key=lambda c: (-c.trials, c.plan_id)) if (cv := _curve(c))
    ]
    ranked = [c for c in choices if c.regret is not None]
    material = [c for c in ranked if c.material]
    failed = [c for c in choices if c.unranked is Unranked.NO_SUCCESS]
    return RankingView(
        ranking=r,
        lines=tuple(_line(c) for c in _ordered(listed)[:MAX_ROWS]),
        shown_of=len(listed),
        one_candidate=len(choices) - len(listed),
        runs=len({c.plan_id for c in choices}),
        workloads=len({(c.task_key, c.target, c.shape) for c in choices}),
        trials=r.trials if r is not None else 0,
        ranked=len(ranked),
        material=len(material),
        failed=len(failed),
        predicted=sum(1 for c in choices if c.prediction is not None),
        curves=tuple(curves[:MAX_CURVES]),
        curves_of=len(curves),
        sentence=_sentence(ranked, material, failed, x.transfer) if x.deciding is not None else "",
        packs=x.packs,
        transfer=tuple(
            _transfer_line(g)
            for g in sorted(x.transfer, key=lambda g: (-abs(math.log(g.ratio)), g.plan_id))
        ),
        transfer_beyond=sum(1 for g in x.transfer if g.beyond),
    )


def _sentence(
    ranked: list[TuningChoice],
    material: list[TuningChoice],
    failed: list[TuningChoice],
    transfer: tuple[TransferGap, ...] = (),
) -> str:
    """Page 1's line when the tuning choices decide: how many choices are material regrets
    (the worst's times), how many runs found nothing, and the deployed kernels whose runtime
    strayed from their tuned time beyond the tolerance (the farthest's figures)."""
    parts = []
    if material:
        worst = max(material, key=lambda c: (c.regret or 0.0, c.plan_id))
        parts.append(
            f"{len(material)} of {plural(len(ranked), 'ranked tuning choice')} "
            f"{'is' if len(material) == 1 else 'are'} materially slower than the best measured "
            f"(the worst, {workload(worst)}: {duration(worst.chosen_us)} chosen by run "
            f"{worst.plan_id} against {duration(worst.best_us)})"
        )
    if failed:
        parts.append(
            f"{plural(len(failed), 'tuned workload')} found no working config (every trial failed)"
        )
    off = [g for g in transfer if g.beyond]
    if off:
        g = max(off, key=lambda g: (abs(math.log(g.ratio)), g.plan_id))
        parts.append(
            f"{plural(len(off), 'deployed kernel')} ran more than {ratio(TRANSFER_TOLERANCE)}× "
            f"off {'its' if len(off) == 1 else 'their'} tuned time (the farthest, {g.kernel} for "
            f"{workload(g)}: {duration(g.runtime_us)} a call at runtime against "
            f"{duration(g.tuned_us)} tuned), so the ranking's measurements may not hold there"
        )
    return "Tuning: " + "; ".join(parts) + "." if parts else ""


def fragment(v: RankingView) -> Fragment:
    """A row per run and workload; nothing without tuning records."""
    r = v.ranking
    if r is None:
        return Fragment()
    gaps: dict[tuple[str, str, str | None, str | None], TransferGap] = {
        (t.g.plan_id, t.g.task_key, t.g.target, t.g.shape): t.g for t in v.transfer
    }
    return Fragment(
        tuple(
            row(c, v.packs, gaps.get((c.plan_id, c.task_key, c.target, c.shape))) for c in r.choices
        )
    )


TICKS = ((1.0, "best"), (1.2, "+20%"), (1.5, "+50%"), (2.0, "2×"), (3.0, "3×"), (5.0, "5×"))
"""The search chart's y ticks (a log axis of best so far over best): its ratios and names."""


def search_curves(v: RankingView) -> go.Figure | None:
    """Each run's best so far over the best measured for its workload, per trial, with the
    5% and 1% lines; None without a search to draw."""
    if not v.curves:
        return None
    fig = charts.figure()
    for cv in v.curves:
        fig.add_trace(
            charts.scatter(
                x=list(cv.trials),
                y=list(cv.ratio),
                mode="lines+markers",
                line_shape="hv",
                name=cv.label,
                hovertemplate="trial %{x}<br>%{y:.3f} × the best<extra></extra>",
            )
        )
    for within in (v.within_far, v.within_near):
        fig.add_hline(y=1 + within, line={"dash": "dot", "color": "#777", "width": 1})
    top = max(max(cv.ratio) for cv in v.curves)
    ticks = [t for t in TICKS if t[0] <= top] + [
        (float(10**e), f"{10**e:,}×") for e in range(1, 7) if 10 ** (e - 1) < top
    ]
    fig.update_xaxes(title="trial (record order, failed trials counted)", rangemode="tozero")
    fig.update_yaxes(
        title="best so far / best measured",
        type="log",
        tickvals=[t for t, _ in ticks],
        ticktext=[x for _, x in ticks],
    )
    # a legend row a run (their names are long): below the plot, where it grows the figure
    # rather than climbing into the title
    rows = LEGEND_ROW_PX * len(v.curves)
    fig = charts.layout(fig, "Search efficiency: best so far per trial", height=420 + rows)
    fig.update_layout(
        legend={"font": {"size": 9}, "y": -0.12 - rows / 1000, "yanchor": "top"},
        margin={"t": 60, "b": 90 + rows},
    )
    return fig


def figures(v: RankingView) -> Mapping[str, go.Figure]:
    """Its chart, when a run has a search to draw."""
    fig = search_curves(v)
    return {"search_curves": fig} if fig else {}


SECTION = Section(
    "ranking",
    "Did the compiler choose well?",
    read,
    view,
    fragment,
    figures,
    ("search_curves",),
    captions={
        "search_curves": "Each run's best time so far after each trial, in the order the "
        "search measured them (failed trials count: they cost budget), over the best measured "
        "for its workload in any run: 1 is the best; the dotted lines are 5% and 1% above it. "
        "A curve that ends above 1 is a run whose choice has a regret. Inductor lists its "
        "choices fastest first, not in a search order: its curves say nothing of a search."
    },
    has=lambda v: v.ranking is not None,
    family=JudgementFamily.RANKING,
)


REGRET_REMEDIES: dict[RegretRemedy, str] = {
    RegretRemedy.FIX_COST_MODEL: "fix the cost model for this op first: it is shown to rank the "
    "run's candidates poorly, so a larger budget would be spent on its wrong picks",
    RegretRemedy.RETUNE: "retune with the budget that found the best: the run stopped before "
    "the trial count at which the best run reached it",
    RegretRemedy.PIN_BEST: "pin the best measured config: the run had the budget and still "
    "missed it",
}
"""What each remedy asks of the compiler lead, and why it is the one."""


def _chose(p: Regret, stopped: bool = False) -> str:
    """What the run chose against the best measured, with the regret's interval."""
    trial = f" at trial {p.best_trial:,}" if p.best_trial is not None else ""
    after = f" stopped after {p.trials:,} trials and" if stopped else ""
    return (
        f"run {p.plan_id}{after} chose {duration(p.chosen_us)}, {pct(p.regret)} slower than "
        f"the {duration(p.best_us)} run {p.best_plan or p.plan_id} measured{trial} (95% CI "
        f"{pct(p.regret_low)} to {pct(p.regret_high)}, {p.repeats:,} repeats)"
    )


def _budget(p: Regret) -> str:
    return f"at least {p.budget:,} trials" if p.budget is not None else "a larger trial budget"


@titled(Regret)
def regret_title(p: Regret, *_: object) -> str:
    """A run's material regret: what to change, by its remedy, and the figures that call for
    it."""
    if p.remedy is RegretRemedy.FIX_COST_MODEL:
        model = f" ({p.cost_model})" if p.cost_model else ""
        interval = (
            f" (95% CI {pct(p.pairwise_low)} to {pct(p.pairwise_high)}; chance is 50%)"
            if p.pairwise_low is not None and p.pairwise_high is not None
            else " (chance is 50%)"
        )
        return (
            f"Fix the cost model{model} for {p.task}: it ranked {pct(p.pairwise_accuracy)} of "
            f"the candidate pairs of {workload(p)} right{interval}, and {_chose(p)}; retrain it "
            f"on these records, then retune with {_budget(p)}"
        )
    if p.remedy is RegretRemedy.RETUNE:
        return (
            f"Retune {workload(p)} with {_budget(p)} (what the best run needed to come within "
            f"1% of its best): {_chose(p, stopped=True)}; pin that config meanwhile"
        )
    config = f" (config {p.best_config})" if p.best_config else ""
    enough = (
        f"; its {p.trials:,} trials were as many as the best run needed ({p.budget:,}), so "
        "more budget would not have found it"
        if p.budget is not None
        else ""
    )
    return f"Pin the best measured config{config} for {workload(p)}: {_chose(p)}{enough}"
