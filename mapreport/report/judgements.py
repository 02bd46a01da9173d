"""The judgements of a slice in words: one line per family (its state, why, and the figure it
rests on with its n and CI), the rows page 1 and the appendix list under the status, and their
findings.json fragment (`judgements`). The rules are the analysis's (`analysis/judgement.py`);
this only says what they decided."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import FigureUnit, JudgementFamily, Status, StatusReason
from mapreport.report.filters import DASH, duration, num, pct, plural, ratio

FAMILY_NAMES: dict[JudgementFamily, str] = {
    JudgementFamily.SLA: "Latency against the SLA",
    JudgementFamily.COMPILES: "Compiles",
    JudgementFamily.DEVICE: "Device idle",
    JudgementFamily.LOOP: "Closed loop",
    JudgementFamily.REGRESSION: "Regressions",
    JudgementFamily.TAIL: "Latency tail",
    JudgementFamily.QUALITY: "Quality evidence",
    JudgementFamily.EAGER_FALLBACK: "Eager fallback",
    JudgementFamily.ROOFLINE: "Roofline headroom",
    JudgementFamily.CUDA_GRAPHS: "CUDA graphs",
    JudgementFamily.GRAPH_BREAKS: "Graph breaks",
    JudgementFamily.ENVIRONMENT: "Environment lock",
    JudgementFamily.RANKING: "Tuning choices",
}
"""Each family as a reader names it."""

WORDS: dict[StatusReason, str] = {
    StatusReason.SLA_MISSED: "{subject} {figure} misses its SLA of {bound}",
    StatusReason.LITTLE_HEADROOM: "{subject} {figure} meets its SLA of {bound} with under 10% "
    "to spare",
    StatusReason.WITHIN_SLA: "{subject} {figure} meets its SLA of {bound}",
    StatusReason.NO_SLA: "no SLA set: p95 {figure} over {n}, not judged",
    StatusReason.NO_REQUESTS: "no per-request latency measured in this slice, not judged",
    StatusReason.TOO_FEW_SAMPLES: "{subject} target {bound} set, but {n} are too few to state "
    "it: not judged",
    StatusReason.FIRST_NIGHT: "no earlier night to compare with: not judged",
    StatusReason.REGRESSED: "{figure} regressed beyond their CIs against {subject}",
    StatusReason.RISING: "the slice's tail shifted up {figure} at its latest change point",
    StatusReason.NO_REGRESSION: "no shape regressed beyond its CI since {subject}",
    StatusReason.COMPILE_FAILED: "{figure} failed, of {n}: what ran is not what was compiled",
    StatusReason.RECOMPILE_LIMIT: "{figure} refused at the recompile limit (the frame ran "
    "eagerly), of {n}",
    StatusReason.MANY_RECOMPILES: "frame {subject} recompiled {figure} times (the limit is "
    "{bound})",
    StatusReason.COMPILED: "{n} compiled; no frame reached {bound} recompiles (the most: {figure})",
    StatusReason.ALL_COMPILED: "every one of {n} compiled",
    StatusReason.DEVICE_IDLE: "the devices sat idle {figure} of their span {ci} over {n}",
    StatusReason.DEVICE_BUSY: "the devices sat idle {figure} of their span {ci}, under {bound}",
    StatusReason.ROLLBACK_DUE: "{n} exceeded tonight, the furthest on {subject}: {figure} "
    "against {bound}",
    StatusReason.LOOP_ON_TRACK: "{n} open, each within its rollback trigger",
    StatusReason.QUALITY_DROP: "{subject}'s quality drop exceeds its record's bound",
    StatusReason.NO_QUALITY_EVIDENCE: "{subject} runs without a quality record",
    StatusReason.DESCRIBED_PRECISION: "the description names {subject}, which no plan runs",
    StatusReason.QUALITY_HELD: "every precision change holds its quality bound",
    StatusReason.EAGER_REQUESTS: "{figure} of requests ran the generic (eager) path (at risk "
    "from {bound}), the most of them of {subject}",
    StatusReason.NO_EAGER_REQUESTS: "no request ran the generic (eager) path",
    StatusReason.ROOFLINE_HEADROOM: "{subject} spends {figure} of device time above its "
    "roofline bound {ci}",
    StatusReason.NEAR_ROOFLINE: "no op x shape's time above its roofline bound is material "
    "({figure} of device time in all)",
    StatusReason.NO_DEVICE_LIMITS: "the device's limits are unknown ([device] in the config): "
    "not judged",
    StatusReason.PADDING_WASTE: "padding wastes {figure} of the graph replays' device time {ci}",
    StatusReason.DEVICE_CAPTURE: "the traces are graph captures (the server's start-up, "
    "{n}): the device waits while graphs are recorded, not while serving; not judged",
    StatusReason.GRAPHS_REPLAYED: "graphs replayed over {n}; padding waste {figure}",
    StatusReason.GRAPH_BREAKS: "{figure}, the first at {subject}",
    StatusReason.NO_GRAPH_BREAKS: "every compiled frame compiled whole",
    StatusReason.ENVIRONMENT_DIFFERS: "compile and runtime differ in {figure} ({subject} first)",
    StatusReason.ENVIRONMENT_LOCKED: "compile and runtime match on {n}",
    StatusReason.ENVIRONMENT_NOT_RECORDED: "not applicable: the compile side ({subject}) "
    "compiled in the serving process, in the runtime's environment (a JIT compiler's log "
    "records none of its own)",
    StatusReason.ENVIRONMENT_ONE_SIDE: "one side records no environment to compare: not judged",
    StatusReason.TAIL_HEAVY: "p99 is {figure} its shape's median {ci}, beyond {bound}: "
    "{subject} drives it",
    StatusReason.TAIL_UNEXPLAINED: "p99 is {figure} its shape's median {ci}, beyond {bound}; "
    "no driver decides it (see what to profile next)",
    StatusReason.TAIL_LIGHT: "p99 is {figure} its shape's median {ci}, not beyond {bound}",
    StatusReason.TAIL_FEW_SAMPLES: "{n} with a measured latency, in shapes with a median, are "
    "too few for a p99 ({bound} needed): not judged",
    StatusReason.TAIL_BLOCKED: "{figure} of {n} {ci} waited behind adaptation, more than a p95 "
    "tail holds ({bound}); their latency is not recorded (profiler spans)",
    StatusReason.REGRET_MATERIAL: "{subject}: the chosen config is {figure} slower than the best "
    "measured {ci}, beyond {bound}",
    StatusReason.SEARCH_SHORT: "{subject}: the search stopped {figure} above the best measured "
    "{ci} (at risk from {bound})",
    StatusReason.TUNING_FAILED: "{subject}: every one of {n} failed, so no tuned config exists",
    StatusReason.CHOSE_WELL: "every one of {n} chose within {bound} of the best measured, or "
    "within noise of it (the most: {figure}, {subject})",
    StatusReason.NOTHING_RANKED: "{n} with one measured candidate each: nothing to rank, not "
    "judged",
    StatusReason.TRANSFER_GAP: "{subject} ran at {figure} its tuned time per call {ci} over {n}, "
    "the whole interval more than {bound} off either way: the tuning-time measurement did not "
    "predict production, so the choice ranked on it may not hold",
}
"""Each rule's outcome in one line; `{figure}`, `{bound}`, `{n}` and `{ci}` are the
judgement's, in its unit."""

NOUNS: dict[StatusReason, tuple[str, str]] = {
    StatusReason.NO_SLA: ("n", "request"),
    StatusReason.TOO_FEW_SAMPLES: ("n", "request"),
    StatusReason.REGRESSED: ("figure", "shape"),
    StatusReason.COMPILE_FAILED: ("figure", "compile attempt"),
    StatusReason.RECOMPILE_LIMIT: ("figure", "compile attempt"),
    StatusReason.COMPILED: ("n", "compile attempt"),
    StatusReason.ALL_COMPILED: ("n", "compile attempt"),
    StatusReason.DEVICE_IDLE: ("n", "kernel"),
    StatusReason.DEVICE_CAPTURE: ("n", "kernel"),
    StatusReason.LOOP_ON_TRACK: ("n", "action"),
    StatusReason.ROLLBACK_DUE: ("n", "rollback trigger"),
    StatusReason.GRAPHS_REPLAYED: ("n", "step"),
    StatusReason.GRAPH_BREAKS: ("figure", "graph break"),
    StatusReason.ENVIRONMENT_DIFFERS: ("figure", "key"),
    StatusReason.ENVIRONMENT_LOCKED: ("n", "compared key"),
    StatusReason.TAIL_FEW_SAMPLES: ("n", "request"),
    StatusReason.TAIL_BLOCKED: ("n", "request"),
    StatusReason.TUNING_FAILED: ("n", "trial"),
    StatusReason.CHOSE_WELL: ("n", "tuned workload"),
    StatusReason.NOTHING_RANKED: ("n", "tuned workload"),
    StatusReason.TRANSFER_GAP: ("n", "call"),
}
"""Counts that read with their noun ("3 shapes", "14 compile attempts")."""


def _value(x: float | None, unit: FigureUnit) -> str:
    """A figure in its unit: a duration, a share, or a whole count."""
    if x is None:
        return DASH
    if unit is FigureUnit.US:
        return duration(x)
    if unit is FigureUnit.SHARE:
        return pct(x)
    if unit is FigureUnit.RATIO:
        return f"{ratio(x)}x"
    return num(round(x))


def _ci(x: float, unit: FigureUnit) -> str:
    """One end of a CI: a ratio's in its unit, any other's as a share (as the rules state them)."""
    return _value(x, unit) if unit is FigureUnit.RATIO else pct(x)


def line(j: Judgement) -> str:
    """What one judgement decided, in one line."""
    values = {
        "figure": _value(j.figure, j.unit),
        "bound": _value(j.bound, j.unit),
        "n": num(j.n) if j.n is not None else DASH,
        "ci": f"(95% CI {_ci(j.ci[0], j.unit)} to {_ci(j.ci[1], j.unit)})" if j.ci else "",
        "subject": j.subject or DASH,
    }
    if j.reason is StatusReason.TAIL_HEAVY:  # the driver's class, as a reader names it
        values["subject"] = j.subject.replace("_", " ")
    counted = NOUNS.get(j.reason)
    if counted is not None:
        field, noun = counted
        count = j.n if field == "n" else j.figure
        if count is not None:
            values[field] = plural(round(count), noun)
    return " ".join(WORDS[j.reason].format(**values).split())


class JudgementRow(msgspec.Struct, frozen=True):
    """One judgement as page 1 and the appendix list it."""

    family: str
    """The family's name (`FAMILY_NAMES`)."""
    state: Status
    words: str
    deciding: bool


def rows(r: SliceResult) -> tuple[JudgementRow, ...]:
    """Every judgement of the slice, most severe first, the deciding one marked."""
    st = r.status
    if st is None:
        return ()
    return tuple(
        JudgementRow(FAMILY_NAMES[j.family], j.state, line(j), j is st.deciding)
        for j in st.judgements
    )
