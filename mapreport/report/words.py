"""Words: every sentence a report says about a typed fact, in one place.

Analysis hands over kinds and figures; this module says them. Each enum member of
`mapreport.kinds` has its words here (a completeness test checks it).
"""

from __future__ import annotations

from mapreport.analysis.actions import Action, RollbackTrigger, ValidationRow
from mapreport.analysis.checklist import ChecklistItem, Pitfall
from mapreport.analysis.classify import DECIDING_SHARE
from mapreport.analysis.common import Thresholds
from mapreport.analysis.history import History
from mapreport.analysis.results import ShapeMetrics, SliceResult
from mapreport.analysis.scheduling import Scheduling
from mapreport.kinds import (
    BLOCKERS,
    AccuracyState,
    ActionKind,
    ActionState,
    BottleneckClass,
    CheckItem,
    ClassBasis,
    Criterion,
    Decision,
    Driver,
    FusionGap,
    GainGap,
    GainState,
    Health,
    HistoryNote,
    IngestStatus,
    OwnerRole,
    PitfallKind,
    RegressionKind,
)
from mapreport.report.filters import (
    DASH,
    duration,
    duration_ms,
    pct,
    plural,
    plural_word,
    signed_pct,
)

LABELLED = (
    Decision,
    BottleneckClass,
    Driver,
    OwnerRole,
    AccuracyState,
    GainState,
    ActionKind,
    ActionState,
    RegressionKind,
    IngestStatus,
    Health,
)
LABELS: dict[str, str] = {m: m.value.replace("_", " ") for e in LABELLED for m in e}
"""Short names of the categories shown in tables (the `label` filter)."""

DECISION_MEANING: dict[Decision, str] = {
    Decision.SPECIALISE: "The cost model was right but the plan was not specialised for this "
    "shape: add a bucket for it.",
    Decision.STATIC_SUFFICIENT: "Static mapping suffices: adaptation only costs here; consider "
    "disabling it for this shape.",
    Decision.CLOSE_THE_LOOP: "The runtime compensates for a compile-time miss: feed the adapted "
    "mapping and its measured cost back into the compile plan and cost model.",
    Decision.FIND_BOTTLENECK: "Neither layer handles this shape: find the bottleneck class "
    "before any tuning.",
    Decision.INSUFFICIENT_EVIDENCE: "Not enough evidence for a decision; no action may rest on it.",
}
"""What each decision asks of the team."""

CHECK_ITEMS: dict[CheckItem, str] = {
    CheckItem.SCOPE: "Workload scope and SLA targets are explicit",
    CheckItem.ENVIRONMENT: "Environment metadata is locked and reproducible",
    CheckItem.EVIDENCE: "Mechanism classification is evidence-backed",
    CheckItem.OWNERSHIP: "Owner, rollback trigger and validation matrix documented for every "
    "action",
    CheckItem.SIGNOFF: "Owners signed",
}

PITFALLS: dict[PitfallKind, str] = {
    PitfallKind.SYNTHETIC_ONLY: "Optimising synthetic kernels without production-shape validation",
    PitfallKind.AVERAGE_ONLY: "Average-only claims (no tail statistic behind a claim)",
    PitfallKind.PRECISION_WITHOUT_QUALITY: "Precision change without quality evidence",
}

CRITERIA: dict[Criterion, str] = {
    Criterion.HALVED: "at most half the current value",
    Criterion.TENTH_LOWER: "<= 0.9 x current",
    Criterion.TENTH_LOWER_IN_BUDGET: "<= 0.9 x current, no request over budget",
    Criterion.NO_FALLBACK: "0 requests on the fallback path",
    Criterion.APE_WITHIN: "<= {limit}",
    Criterion.APE_WITHIN_AFTER_UPDATE: "<= {limit} after the cost model update",
    Criterion.NOT_WORSE_THAN_STATIC: "no worse than the static plan",
    Criterion.AT_MOST_ADAPTED: "<= adapted p50 (no adaptation needed)",
    Criterion.NO_WORSE: "no worse than before (CI of the change includes or is below zero)",
    Criterion.NO_ERROR_INCREASE: "no increase",
    Criterion.GUARDS_NEIGHBOUR: "no regression > 2% (guards the neighbours)",
    Criterion.QUALITY_GUARD: "drop versus baseline <= the configured max_drop",
    Criterion.QUALITY_MAX_DROP: "drop versus baseline <= max_drop",
    Criterion.PRESENT_IN_EVERY_FILE: "present in every file",
    Criterion.PRESENT_ON_EVERY_REQUEST: "present on every request",
    Criterion.SAME_ON_BOTH_SIDES: "same on both sides",
}

GAIN_GAPS: dict[GainGap, str] = {
    GainGap.NO_ADAPTED: "no adapted requests",
    GainGap.NO_BASELINE: "no {variant} requests to compare with",
    GainGap.TOO_FEW: "too few samples: {na} adapted, {nb} {variant} (need {need})",
}

CLASS_BASES: dict[ClassBasis, str] = {
    ClassBasis.TOO_FEW_REQUESTS: "n = {n} < {need}: too few requests to read the tail",
    ClassBasis.NO_DRIVER_DECIDES: "tail is material (p95 {p95} µs vs p50 {p50} µs) but no "
    "driver reaches {deciding} (largest {top} {share}, residual {residual}){missing}",
    ClassBasis.TIE: "tie: {top} {share} and {second} {second_share} have overlapping "
    "confidence intervals",
    ClassBasis.DRIVER_DECIDES: "{top} drives {share} of the tail excess",
    ClassBasis.PREDICTION_OFF: "prediction off by {error} of measured, and adaptation does not "
    "make up for it",
    ClassBasis.ADAPTATION_COSTS: "adaptation costs more than it gains: net p50 gain {net}",
    ClassBasis.NOTHING_FOUND: "tail immaterial and no mapping or adaptation problem measured",
}

FUSION_GAPS: dict[FusionGap, str] = {
    FusionGap.NO_GROUPS: "not measured: no fusion groups",
    FusionGap.NOT_BOTH_RAN: "not measured: ops are fused in {n}, but no shape ran "
    "both a fused and an unfused plan of the same bucket",
}

HISTORY_NOTES: dict[HistoryNote, str] = {
    HistoryNote.FIRST_RUN: "first recorded run: no earlier night to compare with",
    HistoryNote.BASELINE_MISSING: "baseline run {baseline!r} is not in the history; compared "
    "with the last run",
}


def label(x: str | None) -> str:
    """A category's short name; other identifiers with their underscores as spaces."""
    if not x:
        return DASH
    return LABELS.get(x, x.replace("_", " "))


def _p(x: float | None) -> str:
    return f"{x:.0%}" if x is not None else DASH


def gain_reason(m: ShapeMetrics, th: Thresholds) -> str:
    """Why a shape's gain is what it is (or why it is not measured)."""
    g = m.gain
    variant = "static" if m.covered else "fallback"
    if g.gap is not None:
        gap = GAIN_GAPS[g.gap].format(
            variant=variant, na=g.n_adapted, nb=g.n_baseline, need=th.min_samples
        )
        return f"gain not measured: {gap}"
    assert g.net_gain_p50 is not None
    assert g.net_gain_p50_ci is not None
    ci = g.net_gain_p50_ci
    return (
        f"net p50 gain {g.net_gain_p50:+.1%} (95% CI {ci.low:+.1%} to {ci.high:+.1%}), "
        f"n={g.n_adapted} vs {g.n_baseline}"
    )


def decision_reason(m: ShapeMetrics, th: Thresholds) -> str:
    """Why a shape got its decision (or could not get one)."""
    acc = m.accuracy.state
    if acc == AccuracyState.NOT_MEASURED:
        return "accuracy not measured: too few static requests"
    if acc == AccuracyState.NO_PREDICTION:
        return (
            "the compile plan states no whole-model cost for this bucket (no __total__ and no "
            "per-op predictions): the per-operator section compares its mapping with measured "
            "times instead"
        )
    reason = gain_reason(m, th)
    if m.gain.state == GainState.NOT_MEASURED or acc == AccuracyState.ACCURATE:
        return reason
    miss = (
        "no compile bucket holds this shape"
        if acc == AccuracyState.UNCOVERED
        else "prediction outside tolerance"
    )
    return f"{miss}; {reason}"


def class_reason(m: ShapeMetrics, th: Thresholds) -> str:
    """Why a shape got its bottleneck class."""
    c, t = m.diagnosis, m.tail
    top = c.top.value if c.top else ""
    share = t.shares.get(c.top, 0.0) if t is not None and c.top else 0.0
    second = c.runner_up.value if c.runner_up else ""
    second_share = t.shares.get(c.runner_up, 0.0) if t is not None and c.runner_up else 0.0
    unmeasured = ", ".join(t.unmeasured) if t is not None else ""
    return CLASS_BASES[c.basis].format(
        n=m.n,
        need=th.min_samples_p95,
        p95=f"{t.p95_us:.0f}" if t is not None and t.p95_us is not None else DASH,
        p50=f"{t.p50_us:.0f}" if t is not None and t.p50_us is not None else DASH,
        deciding=_p(DECIDING_SHARE),
        top=top,
        share=_p(share),
        residual=_p(t.shares.get(Driver.RESIDUAL, 0.0) if t is not None else 0.0),
        missing=f"; not measurable without telemetry: {unmeasured}" if unmeasured else "",
        second=second,
        second_share=_p(second_share),
        error=f"{m.accuracy.signed_error:+.0%}" if m.accuracy.signed_error is not None else DASH,
        net=f"{m.gain.net_gain_p50:+.1%}" if m.gain.net_gain_p50 is not None else DASH,
    )


def _err(x: object) -> str:
    return f"{x:+.0%}" if isinstance(x, float) else DASH


def action_title(a: Action, name: str) -> str:
    """One action as its owner reads it: what to change and the figures that call for it."""
    p, shape = a.params, a.shape
    share = pct(p.get("share"), 0)
    k = a.kind
    if k == ActionKind.QUEUEING:
        return (
            f"Cut queueing delay for {shape}: queue wait drives {share} of its tail (queue p95 "
            f"{duration(p['queue_p95_us'])} vs p50 {duration(p['queue_p50_us'])}); revisit "
            "admission, batching window and replica count"
        )
    if k == ActionKind.CORE_IMBALANCE:
        where = (
            f"core {p['core']} runs it {p['slowdown']:.0%} slower than the median core"
            if p.get("core") is not None
            else "per-core compute differs"
        )
        return (
            f"Rebalance core placement for {shape}: {where}; core imbalance drives {share} of "
            "its tail"
        )
    if k == ActionKind.MAPPING_FALLBACK:
        title = (
            f"Compile a mapping for {shape}: {p['n_fallback']} of its {p['n']} requests ran "
            f"the generic fallback path, which drives {share} of its tail"
        )
        if not p["covered"]:
            title += " (no compile bucket holds it)"
        if p.get("net_gain_p50") is not None:
            title += (
                f"; seed the new bucket with the adapted mapping (net gain "
                f"{signed_pct(p['net_gain_p50'])})"
            )
        return title
    if k == ActionKind.MEMORY_BURST:
        return (
            f"Re-plan fusion and tiling memory for {shape}: requests above its memory budget "
            f"drive {share} of its tail"
        )
    if k == ActionKind.MAPPING_INACCURACY:
        return (
            f"Recalibrate the cost model for {shape}: predicted {duration(p['predicted_us'])}, "
            f"measured {duration(p['measured_us'])} ({_err(p['signed_error'])}); adaptation "
            "does not recover it"
        )
    if k == ActionKind.ADAPTATION_OVERHEAD:
        return (
            f"Disable runtime adaptation for {shape}: it costs "
            f"{duration(p['cost_per_request_us'])} per adapted request and the net p50 gain is "
            f"{signed_pct(p['net_gain_p50'])}"
        )
    if k == ActionKind.SPECIALISE:
        return (
            f"Add a compile bucket for {shape}: the cost model is right "
            f"({_err(p['signed_error'])}) but the plan is not specialised; the adapted mapping "
            f"gains {signed_pct(p['net_gain_p50'])} net"
        )
    if k == ActionKind.CLOSE_THE_LOOP:
        miss = (
            "no bucket holds it"
            if not p["covered"]
            else f"prediction off by {_err(p['signed_error'])}"
        )
        return (
            f"Feed the adapted mapping for {shape} back into the compile plan and cost model: "
            f"{miss}, and adaptation gains {signed_pct(p['net_gain_p50'])} net"
        )
    if k == ActionKind.OBSERVABILITY and "side" in p:
        return (
            f"Export the environment record with the {p['side']}-side files of {name}: without "
            "it the environment lock cannot be checked"
        )
    if k == ActionKind.OBSERVABILITY:
        return (
            f"Record {p['field']} on the requests of {shape}: its tail cannot be attributed "
            "without it"
        )
    if k == ActionKind.ENVIRONMENT_MISMATCH:
        differ = p["mismatches"]
        keys = ", ".join(
            f"{key} ({'/'.join(c) or '-'} vs {'/'.join(r) or '-'})" for key, c, r in differ
        )
        verb = "differs" if len(differ) == 1 else "differ"
        return (
            f"Re-lock the environment of {name}: {keys} {verb} between compile and runtime; "
            "rebuild the plan on the serving environment or pin it"
        )
    if k == ActionKind.PRECISION_WITHOUT_QUALITY:
        return (
            f"Run the quality evaluation of the {p['precision']} plan on {name} before relying "
            "on it: there is no quality evidence for this precision change"
        )
    raise AssertionError(f"no title for action kind {k}")


def rollback_window(t: RollbackTrigger) -> str:
    """How long a rollback trigger must hold."""
    return f"{t.runs} consecutive nightly runs" if t.runs else "-"


METRIC_NAMES: dict[str, str] = {
    "latency": "latency",
    "queue": "queue wait",
    "compute": "compute",
}
METRIC_WORDS: dict[str, str] = {
    "ape": "APE (|predicted - measured| / measured)",
    "error_rate": "error rate",
    "fallback_share": "share of requests on the fallback path",
    "net_gain_p50": "net p50 adaptation gain",
    "cost_per_request_us": "adaptation cost per request",
}


def metric(name: str) -> str:
    """A metric identifier (findings.json's) in words: `queue_p95_us` is "p95 queue wait"."""
    parts = name.split("_")
    if len(parts) == 3 and parts[0] in METRIC_NAMES and parts[1][:1] == "p" and parts[2] == "us":
        return f"{parts[1]} {METRIC_NAMES[parts[0]]}"
    if name in METRIC_WORDS:
        return METRIC_WORDS[name]
    head, _, rest = name.partition(".")
    if head == "tail_share" and rest:
        return f"share of the tail excess from {label(rest)}"
    if head == "missing" and rest:
        return f"{rest} on every request"
    if head == "environment" and rest:
        return f"environment {rest.replace('_', ' ')}"
    return name.replace("_", " ")


def rollback_text(a: Action, name: str) -> str:
    """When to roll an action's change back, as one sentence."""
    t = a.rollback_trigger
    if t.runs == 0:
        return "not a runtime change: nothing to roll back"
    bound = (f"> SLA {duration(t.sla_us)} or " if t.sla_us is not None else "> ") + (
        f"+10% over the pre-change {duration(t.pre_change)}"
    )
    what = metric(t.metric)
    return f"{what} of {name} at {a.shape} {bound} for {rollback_window(t)}"


def criterion(v: ValidationRow) -> str:
    """When one validation row passes."""
    return CRITERIA[v.criterion].format(limit=_p(v.limit))


def check_reason(c: ChecklistItem, r: SliceResult) -> str:
    """Why a checklist item passed or failed."""
    rv, env = r.review, r.environment
    if c.item == CheckItem.SCOPE:
        sla = [
            f"p95 {duration(rv.sla_p95_us)}" if rv.sla_p95_us else "",
            f"p99 {duration(rv.sla_p99_us)}" if rv.sla_p99_us else "",
        ]
        text = ", ".join(s for s in sla if s)
        if text:
            return f"SLA configured: {text}"
        return f"no SLA target configured for {r.name} ([[slices]] in the config)"
    if c.item == CheckItem.ENVIRONMENT:
        if env.locked:
            return f"both sides match on {', '.join(env.compared_keys)}"
        return "; ".join(
            [f"no environment record on the {s} side" for s in env.missing_sides]
            + [
                f"{m.key} differs ({'/'.join(m.compile) or '-'} vs {'/'.join(m.runtime) or '-'})"
                for m in env.mismatches
            ]
        )
    if c.item == CheckItem.EVIDENCE:
        if c.passed:
            return "every action rests on n and a CI that excludes zero"
        return "; ".join(
            f"{b.action_id} ({b.kind} at {b.shape}): confidence interval missing or includes zero"
            if b.n is None
            else f"{b.action_id}: n = {b.n} below {r.thresholds.min_samples}"
            for b in c.breaches
        )
    if c.item == CheckItem.OWNERSHIP:
        if not c.roles:
            return (
                f"{plural(len(r.actions), 'action')}, each with an owner, a rollback trigger and a "
                "validation matrix"
            )
        roles = f"{plural_word(len(c.roles), 'role')} {', '.join(c.roles)}"
        return f"no owner configured for the {roles} ([owners] in the config)"
    if c.passed:
        return "signed by " + ", ".join(f"{k}: {v}" for k, v in sorted(rv.signoffs.items()))
    return "missing sign-off: " + ", ".join(c.roles)


def pitfall_detail(p: Pitfall, r: SliceResult) -> str:
    """What a pitfall found (or that it found nothing)."""
    if p.kind == PitfallKind.SYNTHETIC_ONLY:
        synthetic = r.coverage.synthetic_only_buckets
        if not synthetic:
            return "every compiled bucket served production traffic"
        return ", ".join(f"{b.plan_id}: {b.bucket}" for b in synthetic) + " compiled, never served"
    if p.kind == PitfallKind.AVERAGE_ONLY:
        if not p.actions:
            return "every action's shape has a p95 with enough samples"
        return ", ".join(f"{aid} at {shape}" for aid, shape in p.actions) + (
            " rest on shapes without a p95"
        )
    q = r.precision
    return (
        "; ".join(
            [f"{x}: no quality record" for x in q.missing]
            + [f"{x}: quality drop exceeds max_drop" for x in q.failing]
        )
        or "every precision change has passing quality evidence"
    )


def fusion_note(s: Scheduling) -> str:
    """Why no fusion effect is shown ('' when one is)."""
    if s.fusion_gap is None:
        return ""
    return FUSION_GAPS[s.fusion_gap].format(n=plural(s.fused_buckets, "compiled bucket"))


def history_note(h: History) -> str:
    """What limits tonight's comparison with earlier nights ('' when nothing does)."""
    return "" if h.note is None else HISTORY_NOTES[h.note].format(baseline=h.baseline_run)


def _offline(r: SliceResult) -> list[str]:
    """What a slice without requests does hold: per-op mapping, compiles, a load sweep."""
    parts = []
    ops = r.operators
    if ops is not None:
        parts.append(
            f"{ops.matched_ops} of {ops.planned_ops} planned ops joined with measured times "
            f"({pct(ops.matched_time_share)} of measured op time)"
        )
    c = r.compiles
    if c is not None:
        parts.append(
            f"{plural(c.compiles, 'compile')}, {plural(c.recompiles, 'recompile')} over "
            f"{plural(len(c.shapes), 'shape')}, "
            f"{duration_ms(c.compile_ms)} compiling"
        )
    w = r.sweep
    if w is not None:
        parts.append(
            f"{plural(w.configs_total, 'model config')} swept at "
            f"{plural(w.points, 'load point')}, best {w.best or DASH}"
        )
    return parts or ["nothing to report beyond the data sources"]


def summary(r: SliceResult, sla_state: tuple[str, float | None, float | None, bool | None]) -> str:
    """One sentence: tail latency against the SLA, coverage, cost-model error, and the top
    action (or that none is called for). `sla_state` is the view's (quantile, value, SLA, met)."""
    q, value, sla, met = sla_state
    against = (
        " (no SLA configured)"
        if sla is None
        else f" against an SLA of {duration(sla)} ({'met' if met else 'missed'})"
    )
    if r.requests:
        head = (
            f"{r.name}: {q} latency {duration(value)}{against} over {r.ok_requests:,} requests; "
            f"{pct(r.coverage.covered_traffic_share)} of traffic covered by the compile plan, "
            f"cost-model MAPE {pct(r.accuracy.mape_weighted)}."
        )
    else:
        head = f"{r.name}: no request telemetry; " + "; ".join(_offline(r)) + "."
    if not r.actions:
        return head + " No action is called for."
    first = r.actions[0]
    lead = "first, a blocker" if first.kind in BLOCKERS else "the biggest"
    count = plural(len(r.actions), "action")
    return head + f" {count}; {lead}: {action_title(first, r.name)}."
