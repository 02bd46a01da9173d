"""Words: every sentence a report says about a typed fact, in one place.

Analysis hands over kinds and figures; this module says them. Each enum member of
`mapreport.core.kinds` has its words here (a completeness test checks it).
"""

from __future__ import annotations

from collections.abc import Sequence

from mapreport.analysis.actions.action_params import Impact
from mapreport.analysis.actions.actions import SLICE_WIDE, ValidationRow
from mapreport.analysis.base.common import Evidence, Interval, Thresholds
from mapreport.analysis.serving.classify import DECIDING_SHARE
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.analysis.serving.tail import TAIL_SHARE
from mapreport.analysis.steps.results import SliceResult
from mapreport.analysis.steps.status import AT_RISK_HEADROOM
from mapreport.core.kinds import (
    AccuracyState,
    ActionKind,
    ActionState,
    BottleneckClass,
    CheckItem,
    CheckState,
    ClassBasis,
    Criterion,
    Decision,
    Driver,
    FigureUnit,
    GainBasis,
    GainState,
    Health,
    ImpactUnit,
    IngestStatus,
    OwnerRole,
    PitfallKind,
    PredictionGap,
    Reduction,
    RegressionKind,
    Status,
    StatusReason,
)
from mapreport.report.causes import adaptations, shape_list
from mapreport.report.filters import (
    DASH,
    ci,
    duration,
    metric_value,
    pct,
    pct_whole,
    plural,
    signed_pct,
)
from mapreport.report.judgements import FAMILY_NAMES, line

LABELLED = (
    Status,
    FigureUnit,
    Decision,
    BottleneckClass,
    Driver,
    OwnerRole,
    AccuracyState,
    GainState,
    GainBasis,
    PredictionGap,
    ActionKind,
    ActionState,
    RegressionKind,
    IngestStatus,
    Health,
    CheckState,
    Reduction,
)
LABELS: dict[str, str] = {str(m): m.value.replace("_", " ") for e in LABELLED for m in e}
LABELS[Health.SLA_MISSED] = "SLA missed"
LABELS[ActionKind.ROOFLINE_HEADROOM] = "roofline headroom"
LABELS[ActionKind.DEVICE_IDLE] = "device idle"
LABELS[ActionKind.GRAPH_PADDING] = "graph padding"


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

GLOSSARY: dict[str, tuple[str, str]] = {
    "ape": (
        "APE",
        "absolute percentage error of one shape's prediction: |predicted − measured| / "
        "measured, where measured is the median compute of the requests that ran the plan as "
        "built (static).",
    ),
    "signed-error": (
        "signed error",
        "(predicted − measured) / measured: positive when the plan predicted more time than "
        "was measured.",
    ),
    "mape": (
        "MAPE",
        "mean APE over the shapes with a measurement, weighted by their share of traffic.",
    ),
    "tolerance": (
        "tolerance",
        "the APE at or below which a shape's prediction counts as accurate (thresholds.tolerance).",
    ),
    "tau": (
        "Kendall τ",
        "rank correlation between predicted and measured cost across shapes: 1 when the plan "
        "orders the shapes exactly as measured, 0 when its order says nothing, −1 when reversed.",
    ),
    "jain": (
        "Jain's index",
        "(Σx)² / (n·Σx²) over n cores' (or streams') load: 1 when all carry the same, 1/n when "
        "one carries everything.",
    ),
    "gain": (
        "gain, net gain",
        "gain = 1 − adapted / baseline compute (p50 or p95), the baseline being the static "
        "plan (or the fallback path of an uncovered shape); net gain charges the adaptation's "
        "own cost per request against it. n adapted / base counts the requests on each side.",
    ),
    "material": (
        "material tail",
        "a shape's tail is material when its p95 is above tail_ratio × its p50 or it misses "
        "the SLA; an immaterial tail is noise, not a bottleneck.",
    ),
    "tail-excess": (
        "tail excess",
        "for each request above a shape's p95: its latency minus the shape's p50, split among "
        "blocking behind adaptation, queueing, mapping fallback, memory burst and core "
        "imbalance.",
    ),
    "blocked": (
        "blocked behind adaptation",
        "a request waited in a busy period of its worker (core; the slice's one worker when "
        "requests name none) after an earlier request of that period adapted (an adaptation "
        "event over its compute, or the fallback path): its queue wait is the adapting "
        "request's, not load's.",
    ),
    "residual": (
        "residual",
        "the part of the tail excess no measured driver explains (compute variance, or a "
        "driver without telemetry).",
    ),
    "impact": (
        "impact",
        "what an action acts on over the report's period (a night, on the nightly job), in "
        "its unit: the request latency its driver holds above the shape's p50 (or the wait "
        "behind adaptation); compute at the net p50 gain (≈); device time above the roofline "
        "bound or on graph padding; a tuned kernel's time above the best measured config, per "
        "call; the share of the devices' span idle; or the share of requests its shape "
        "carries.",
    ),
    "headroom": (
        "headroom",
        "against an SLA: (target − value) / target, positive with room to spare, negative when "
        "missed; above the roofline: the device time an op spends beyond its bound (never "
        "negative).",
    ),
    "blocker": (
        "blocker",
        "an action that must come before any tuning: a precision change without quality "
        "evidence, an unlocked environment, missing telemetry.",
    ),
    **{f"decision-{d.value}": (LABELS[d], meaning) for d, meaning in DECISION_MEANING.items()},
}
"""Each term the report uses without saying what it means, by anchor id (`term-<id>`)."""

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
    PitfallKind.DESCRIBED_PRECISION: "Description names a precision the plan does not run",
}

CRITERIA: dict[Criterion, str] = {
    Criterion.HALVED: "at most half the current value",
    Criterion.TENTH_LOWER: "≤ 0.9 × now",
    Criterion.TENTH_LOWER_IN_BUDGET: "≤ 0.9 × now, no request over its memory budget",
    Criterion.NO_FALLBACK: "0 requests on the fallback path",
    Criterion.APE_WITHIN: "≤ {limit}",
    Criterion.APE_WITHIN_AFTER_UPDATE: "≤ {limit} after the cost model update",
    Criterion.BACK_WITHIN_TOLERANCE: "within {limit} of its first nights' {reference} after "
    "the cost model is re-fitted",
    Criterion.NOT_WORSE_THAN_STATIC: "≤ {limit}, the static plan's p50 tonight",
    Criterion.AT_MOST_ADAPTED: "≤ {limit}, the adapted mapping's p50 tonight (no adaptation "
    "needed)",
    Criterion.NO_WORSE: "no worse than before (CI of the change includes or is below zero)",
    Criterion.NO_ERROR_INCREASE: "no increase",
    Criterion.GUARDS_NEIGHBOUR: "no regression > 2% (guards the neighbours)",
    Criterion.QUALITY_GUARD: "drop from the baseline {reference} ≤ {limit} (the largest drop "
    "the quality record allows)",
    Criterion.QUALITY_MAX_DROP: "a quality record exists and its drop from the baseline is within "
    "the largest drop it allows",
    Criterion.PRESENT_IN_EVERY_FILE: "present in every file",
    Criterion.AGREES_WITHIN: "records and server counters within {limit} of each other",
    Criterion.BACK_TO_BEFORE: "≤ {limit}, its value before the regression",
    Criterion.PRESENT_ON_EVERY_REQUEST: "present on every request",
    Criterion.SAME_ON_BOTH_SIDES: "same on both sides",
    Criterion.REGRET_WITHIN: "≤ {limit}, the whole 95% CI, on repeated measurements of the "
    "deployed config and the best",
    Criterion.RANKS_WELL: "above {limit} of pairs ranked right, the whole 95% CI",
}

CLASS_BASES: dict[ClassBasis, str] = {
    ClassBasis.TOO_FEW_REQUESTS: "n = {n} < {need}: too few requests to read the tail",
    ClassBasis.NO_DRIVER_DECIDES: "tail is material (p95 {p95} µs vs p50 {p50} µs) but no "
    "driver reaches {deciding} (largest {top} {share}, residual {residual}){missing}",
    ClassBasis.WEAK_EVIDENCE: "{top} drives {share} of the tail excess, but over {n_tail} tail "
    "request(s) its 95% CI {ci} includes zero: too few to decide",
    ClassBasis.TIE: "tie: {top} {share} and {second} {second_share} have overlapping "
    "confidence intervals",
    ClassBasis.DRIVER_DECIDES: "{top} drives {share} of the tail excess",
    ClassBasis.PREDICTION_OFF: "prediction off by {error} of measured, and adaptation does not "
    "make up for it",
    ClassBasis.ADAPTATION_COSTS: "adaptation costs more than it gains: net p50 gain {net}",
    ClassBasis.NOTHING_FOUND: "tail immaterial and no mapping or adaptation problem measured",
    ClassBasis.LATENCY_NOT_MEASURED: "latency not measured: the requests record no arrival "
    "(profiler spans give compute only)",
    ClassBasis.BLOCKED_SHARE: "latency not measured; {blocked_share} of the requests started "
    "behind an adapting request (95% CI {ci}), against the {tail_share} a p95 tail holds",
}

ENV_KEY_WORDS = {
    "compiler_version": "compiler version",
    "runtime_version": "runtime version",
    "container_digest": "container digest",
    "git_sha": "git commit",
    "captured_at": "capture time",
}
"""Environment keys as a sentence says them (the tables show the keys themselves)."""


def env_keys(keys: Sequence[str]) -> str:
    """Environment keys in words, joined: `compiler_version` is "compiler version"."""
    return ", ".join(ENV_KEY_WORDS.get(k, k.replace("_", " ")) for k in keys)


def shape_name(shape: str) -> str:
    """A shape as a reader reads it: the slice-wide marker is "whole slice"."""
    return "whole slice" if shape == SLICE_WIDE else shape


def label(x: str | None) -> str:
    """A category's short name; other identifiers with their underscores as spaces."""
    if not x:
        return DASH
    return LABELS.get(x, x.replace("_", " "))


def _p(x: float | None) -> str:
    return pct(x, 0)


def class_reason(m: ShapeMetrics, r: SliceResult) -> str:
    """Why a shape got its bottleneck class; a shape whose tail is mostly blocking behind
    adaptation names the slice's blocking finding as its cause."""
    reason = _basis(m, r.thresholds)
    b = r.blocking
    finding = (
        "the slice's blocking finding"
        if r.blocking_drives_tail
        else "too little of the slice's tail for a finding"
    )
    behind = adaptations(tuple(sorted({e.how for e in b.material})), len(b.material))
    victims = next((v for v in b.victims if v.shape == m.shape), None)
    unread = m.diagnosis.basis == ClassBasis.LATENCY_NOT_MEASURED
    if victims is not None and (m.diagnosis.top == Driver.BLOCKED_BEHIND_ADAPTATION or unread):
        waited = (
            f"waited {duration(victims.wait_us)} in all"
            if victims.wait_us is not None
            else "started back to back"
        )
        reason += (
            f"; cause: {victims.blocked:,} of its requests {waited} behind {behind} of "
            f"{shape_list(b.triggers)} ({finding})"
        )
    blocked = sum(e.blocked for e in b.material if e.shape == m.shape)
    if blocked:
        reason += (
            f"; its adapting requests held the worker while {plural(blocked, 'request')} "
            f"waited behind them ({finding})"
        )
    return reason


def _basis(m: ShapeMetrics, th: Thresholds) -> str:
    """The rule that decided a shape's class, with its figures."""
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
        error=signed_pct(m.accuracy.signed_error, 0),
        net=signed_pct(m.gain.net_gain_p50),
        n_tail=t.n_tail if t is not None else 0,
        ci=_ci(c.evidence.ci if c.evidence else None),
        blocked_share=_p(c.evidence.value if c.evidence else None),
        tail_share=_p(TAIL_SHARE),
    )


def _ci(ci: Interval | None) -> str:
    """A share's CI as the reason states it: [0%, 100%]."""
    return DASH if ci is None else f"[{_p(ci.low)}, {_p(ci.high)}]"


METRIC_NAMES: dict[str, str] = {
    "latency": "latency",
    "queue": "queue wait",
    "compute": "compute",
}
METRIC_WORDS: dict[str, str] = {
    "latency_p95_change": "p95 latency change against the compared night",
    "ape": "APE (|predicted - measured| / measured)",
    "error_rate": "error rate",
    "fallback_share": "share of requests on the fallback path",
    "net_gain_p50": "net p50 adaptation gain",
    "signed_error": "signed prediction error",
    "signed_error_drift": "signed prediction error's move from the plan's first nights",
    "cost_per_request_us": "adaptation cost per request",
    "headroom_us": "time above the roofline bound",
    "device_time_us": "device time",
    "op_device_time_us": "the op's device time",
    "device_idle_share": "share of the device's span idle",
    "padding_waste_us": "device time spent on graph padding",
    "graph_device_time_us": "device time of the graph replays",
    "regret": "regret of the chosen config against the best measured",
    "pairwise_accuracy": "the cost model's pairwise ranking accuracy",
    "chosen_us": "the deployed config's measured time",
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


def evidence(e: Evidence | None) -> str:
    """What a finding rests on: the metric in words, its value, CI and n (the template links
    the files it rests on)."""
    if e is None:
        return DASH
    parts = [f"{metric(e.metric)} = {metric_value(e.value, e.metric)}"]
    if e.ci is not None and e.metric.endswith("_us"):
        parts.append(f"95% CI [{duration(e.ci.low)}, {duration(e.ci.high)}]")
    elif e.ci is not None:
        parts.append(
            f"95% CI {ci(e.ci)}"
            if "gain" in e.metric or "error" in e.metric or e.metric == "ape"
            else f"95% CI [{pct(e.ci.low)}, {pct(e.ci.high)}]"
        )
    if e.n:
        parts.append(f"n = {e.n:,}")
    note = evidence_note(e)
    if note:
        parts.append(note)
    return "; ".join(parts)


def evidence_note(e: Evidence) -> str:
    """What an evidence record's figure is, where its metric name does not say it."""
    if e.pooled_n:
        return (
            f"n counts this shape's own requests; the other path is {e.pooled_n:,} requests "
            "pooled from comparable shapes"
        )
    if e.metric.startswith("tail_share."):
        return f"share of the excess of {e.n} requests above p95"
    if e.metric == "ape" and e.ci is not None:
        return "CI is of the signed error"
    if e.metric in ("environment.compile", "environment.runtime"):
        return "record missing"
    if e.metric.startswith("quality."):
        return "no quality record"
    if e.metric.startswith("consistency."):
        return "records against the server's counters, same window"
    if e.metric == "headroom_us":
        return "the CI spans its calls in this trace: op variance, not run-to-run noise"
    if e.metric == "device_idle_share":
        return "CI over 20 equal windows of each device's span (block bootstrap)"
    if e.metric == "padding_waste_us":
        return "CI over the replayed steps"
    if e.metric == "regret":
        return "n: the fewer repeats of the chosen config and the best; CI over the repeats"
    return ""


def criterion(v: ValidationRow) -> str:
    """When one validation row passes."""
    return CRITERIA[v.criterion].format(
        limit=metric_value(v.limit, v.metric), reference=metric_value(v.reference, v.metric)
    )


IMPACT_UNITS: dict[ImpactUnit, str] = {
    ImpactUnit.LATENCY_US: "{value} of request latency",
    ImpactUnit.COMPUTE_US: "≈ {value} of compute",
    ImpactUnit.DEVICE_US: "{value} of device time",
    ImpactUnit.DEVICE_SHARE: "{value} of the devices' span, idle",
    ImpactUnit.DEVICE_US_PER_CALL: "{value} of device time per call",
    ImpactUnit.REQUEST_SHARE: "{value} of requests",
    ImpactUnit.NONE: "none: a record, not a change",
}
"""An action's impact in its unit (the glossary's "impact" says what each is)."""


def impact(i: Impact) -> str:
    """An action's impact with its unit: `13.28 s of request latency`, `7.1% of requests`."""
    if i.unit != ImpactUnit.NONE and i.value is None:
        return DASH
    timed = i.unit in (
        ImpactUnit.LATENCY_US,
        ImpactUnit.COMPUTE_US,
        ImpactUnit.DEVICE_US,
        ImpactUnit.DEVICE_US_PER_CALL,
    )
    text = IMPACT_UNITS[i.unit].format(value=duration(i.value) if timed else pct(i.value))
    return f"{text} ({pct(i.share)})" if i.share is not None else text


STATUS_REASONS: dict[StatusReason, str] = {
    StatusReason.SLA_MISSED: "{q} {value} misses its SLA of {target} by {over}",
    StatusReason.LITTLE_HEADROOM: "{q} {value} meets its SLA of {target} with {headroom} to "
    "spare, under {limit}",
    StatusReason.REGRESSED: "{q} meets its SLA, but {shapes} regressed beyond their CIs "
    "since {night}",
    StatusReason.RISING: "{q} meets its SLA, but its tail shifted up {shift} on {night}",
    StatusReason.WITHIN_SLA: "{q} {value} meets its SLA of {target} with {headroom} to spare",
    StatusReason.NO_SLA: "no SLA target it has the evidence to be judged against",
    StatusReason.NO_REQUESTS: "no request latency to judge against an SLA (no per-request "
    "records in this slice)",
}
"""Why a slice has its status, in one line."""


def status_reason(r: SliceResult) -> str:
    """The one line that says why the slice has its status: the deciding judgement's (with the
    SLA check's words where the slice's latency was judged against a target)."""
    st = r.status
    if st is None:
        return ""
    c = st.check
    deciding = st.deciding
    judged_sla = c is not None and st.reason in STATUS_REASONS
    if deciding is not None and not judged_sla:
        return f"{FAMILY_NAMES[deciding.family]}: {line(deciding)}"
    return STATUS_REASONS[st.reason].format(
        q=c.quantile if c else "",
        value=duration(c.value_us) if c else "",
        target=duration(c.target_us) if c else "",
        over=pct(c.excess) if c else "",
        headroom=pct(st.headroom),
        limit=pct_whole(AT_RISK_HEADROOM),
        shapes=shape_list(st.regressed) if st.regressed else "",
        night=(
            st.shift.night
            if st.shift
            else (st.deciding.subject if st.deciding else "") or st.compared_night or ""
        ),
        shift=signed_pct(st.shift.change) if st.shift else "",
    )
