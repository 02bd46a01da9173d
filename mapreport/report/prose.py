"""Prose: the report's sentences that combine several facts of a slice (an action's title,
its rollback trigger, a ticket, the executive summary), built from the words of `words`."""

from __future__ import annotations

import re

from mapreport.analysis.actions import action_params as P
from mapreport.analysis.actions.actions import SLICE_WIDE, Action, RollbackTrigger
from mapreport.analysis.actions.compile_actions import Recompiled
from mapreport.analysis.actions.device_actions import Headroom, Idle, Padding
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import (
    BLOCKERS,
    AccuracyGap,
    ActionKind,
    BottleneckClass,
    ClassBasis,
    HeadroomRemedy,
)
from mapreport.report import decisions, devicetime
from mapreport.report.causes import REMEDIES, adaptations, dims_text, shape_list
from mapreport.report.filters import (
    DASH,
    duration,
    duration_ms,
    metric_value,
    pct,
    plural,
    signed_pct,
)
from mapreport.report.sources import source_paths
from mapreport.report.titles import title_of, titled
from mapreport.report.words import criterion, evidence, label, metric, shape_name


def action_title(a: Action, name: str) -> str:
    """One action as its owner reads it: what to change and the figures that call for it."""
    return title_of(a.kind, a.shape, a.params, name)


@titled(
    P.Blocking,
    P.Queueing,
    P.CoreImbalance,
    P.Fallback,
    P.TailShare,
    P.Inaccuracy,
    P.Overhead,
    P.Drift,
    P.Regressed,
    P.GainDecision,
    P.MissingSide,
    P.MissingField,
    P.Consistency,
    P.Mismatch,
    P.Quality,
    Idle,
    Headroom,
    Padding,
    Recompiled,
)
def _title(p: P.ActionParams, k: ActionKind, shape: str, name: str) -> str:
    """The titles of the kinds `actions`, `device_actions` and `compile_actions` build."""
    if isinstance(p, P.Blocking):
        return blocking_title(p, name)
    if isinstance(p, P.Queueing):
        return (
            f"Cut queueing delay for {shape}: queue wait drives {pct(p.share, 0)} of its tail "
            f"(queue p95 {duration(p.queue_p95_us)} vs p50 {duration(p.queue_p50_us)}); revisit "
            "admission, batching window and replica count"
        )
    if isinstance(p, P.CoreImbalance):
        where = (
            f"core {p.core} runs it {p.slowdown:.0%} slower than the median core"
            if p.core is not None and p.slowdown is not None
            else "per-core compute differs"
        )
        return (
            f"Rebalance core placement for {shape}: {where}; core imbalance drives "
            f"{pct(p.share, 0)} of its tail"
        )
    if isinstance(p, P.Fallback):
        title = (
            f"Compile a mapping for {shape}: {p.n_fallback:,} of its {p.n:,} requests ran "
            f"the generic fallback path, which drives {pct(p.share, 0)} of its tail"
        )
        if not p.covered:
            title += " (no compile bucket holds it)"
        if p.net_gain_p50 is not None:
            title += (
                f"; seed the new bucket with the adapted mapping (net gain "
                f"{signed_pct(p.net_gain_p50)})"
            )
        return title
    if isinstance(p, P.TailShare):
        return (
            f"Re-plan fusion and tiling memory for {shape}: requests above its memory budget "
            f"drive {pct(p.share, 0)} of its tail"
        )
    if isinstance(p, P.Inaccuracy):
        return (
            f"Recalibrate the cost model for {shape}: predicted {duration(p.predicted_us)}, "
            f"measured {duration(p.measured_us)} ({signed_pct(p.signed_error, 0)}); "
            "adaptation does not recover it"
        )
    if isinstance(p, P.Overhead):
        return (
            f"Disable runtime adaptation for {shape}: it costs "
            f"{duration(p.cost_per_request_us)} per adapted request and the net p50 gain is "
            f"{signed_pct(p.net_gain_p50)}"
        )
    if isinstance(p, P.Drift):
        return drift_title(p, shape)
    if isinstance(p, P.Regressed):
        return (
            f"Find what slowed {shape}: its p95 rose {signed_pct(p.change)} (95% CI "
            f"{signed_pct(p.ci_low)} to {signed_pct(p.ci_high)}) since {p.night}, from "
            f"{duration(p.before_us)} to {duration(p.now_us)}; bisect the builds, configs and "
            "inputs between the two nights"
        )
    if isinstance(p, P.GainDecision) and k == ActionKind.SPECIALISE:
        return (
            f"Add a compile bucket for {shape}: the cost model is right "
            f"({signed_pct(p.signed_error, 0)}) but the plan is not specialised; the adapted "
            f"mapping gains {signed_pct(p.net_gain_p50)} net"
        )
    if isinstance(p, P.GainDecision):
        miss = (
            "no bucket holds it"
            if not p.covered
            else f"prediction off by {signed_pct(p.signed_error, 0)}"
        )
        return (
            f"Feed the adapted mapping for {shape} back into the compile plan and cost model: "
            f"{miss}, and adaptation gains {signed_pct(p.net_gain_p50)} net"
        )
    if isinstance(p, P.MissingSide | P.MissingField | P.Consistency):
        return _observability_title(p, shape, name)
    if isinstance(p, P.Mismatch):
        differ = p.mismatches
        keys = ", ".join(
            f"{key} ({'/'.join(c) or '-'} vs {'/'.join(r) or '-'})" for key, c, r in differ
        )
        verb = "differs" if len(differ) == 1 else "differ"
        return (
            f"Re-lock the environment of {name}: {keys} {verb} between compile and runtime; "
            "rebuild the plan on the serving environment or pin it"
        )
    if isinstance(p, P.Quality):
        return (
            f"Run the quality evaluation of the {p.precision} plan on {name} before relying "
            "on it: there is no quality evidence for this precision change"
        )
    if isinstance(p, Idle):
        return idle_title(p, name)
    if isinstance(p, Headroom | Padding | Recompiled):
        return trace_title(p)
    raise TypeError(f"no title for {type(p).__name__}")  # `titled` lists what reaches here


def trace_title(p: Headroom | Padding | Recompiled) -> str:
    """The title of an action a trace or compile log alone calls for."""
    if isinstance(p, Headroom):
        return headroom_title(p)
    if isinstance(p, Padding):
        return padding_title(p)
    return recompiled_title(p)


HEADROOM_REMEDIES = {
    HeadroomRemedy.FUSE_OR_BATCH: "each call is too small to fill the device: fuse it with "
    "its neighbours or batch more work per launch",
    HeadroomRemedy.FUSE_OR_LAYOUT: "fuse it with its neighbours to cut its memory traffic, "
    "or change its layout",
    HeadroomRemedy.TUNE_KERNEL: "pick another kernel or tiling (autotune this shape)",
}
HEADROOM_VERBS = {
    HeadroomRemedy.FUSE_OR_BATCH: "Fuse or batch",
    HeadroomRemedy.FUSE_OR_LAYOUT: "Cut the memory traffic of",
    HeadroomRemedy.TUNE_KERNEL: "Tune the kernel of",
}


def headroom_title(p: Headroom) -> str:
    """An op x shape far from its roofline: how far, what it costs, what to change."""
    bound = f"{p.bound}-bound, " if p.bound else ""
    return (
        f"{HEADROOM_VERBS[p.remedy]} {p.label}: {duration(p.mean_us)} a call against a "
        f"roofline bound of {duration(p.roof_us)} ({bound}{pct(p.roofline_pct)} of the roof), "
        f"{duration(p.headroom_us)} above it over {p.calls:,} calls ({pct(p.share)} of device "
        f"time); {HEADROOM_REMEDIES[p.remedy]}"
    )


def idle_title(p: Idle, name: str) -> str:
    """A device that sat idle: how much, and what keeps it waiting."""
    if p.replays_graphs:
        # the steps already replay a captured graph: capturing it again changes nothing; the
        # idle time lies between the replays, in the host's work for the next step
        why = (
            "its steps already replay captured graphs, so the gaps are between the replays: cut "
            "the host's work between steps (scheduling, sampling, detokenisation) and overlap it "
            "with the running step (asynchronous scheduling)"
        )
        if p.eager_steps:  # only where steps ran outside every captured size
            why += (
                f"; capture the batch sizes of the {p.eager_steps:,} "
                f"{'step' if p.eager_steps == 1 else 'steps'} that still ran eagerly"
            )
    elif p.launch_bound:
        why = (
            "its kernels are too short to hide their launches: capture the step in a CUDA or "
            'HIP graph (torch.compile mode="reduce-overhead") or batch more work per launch'
        )
    else:
        why = (
            "the host or the input pipeline stalls it: overlap data loading and remove "
            "synchronisations between steps"
        )
    median = f", median kernel {duration(p.median_kernel_us)}" if p.median_kernel_us else ""
    return (
        f"Keep the device of {name} fed: it sat idle {pct(p.idle_share)} of its "
        f"{duration(p.span_us)} span ({p.kernels:,} kernels{median}); {why}"
    )


def recompiled_title(p: Recompiled) -> str:
    """A frame that recompiled for the shapes it met: how often against the limit, and what to
    change by the guard that failed (a size: mark it dynamic or bucket it; another: hold it
    constant, or raise the limit when every variant is wanted)."""
    refused = (
        f"; {p.refused:,} attempts were refused at the limit and ran eagerly" if p.refused else ""
    )
    head = (
        f"Stop {p.frame or 'the frame'} recompiling: it recompiled {p.recompiles:,} times "
        f"in {p.attempts:,} compile attempts (torch.compile's limit is {p.limit}){refused}"
    )
    if p.dims:
        dims = ", ".join(f"{d.tensor} dim {d.dim} ({d.low:,} to {d.high:,})" for d in p.dims)
        return (
            f"{head}; the sizes of {dims} changed: mark those dims dynamic "
            "(torch._dynamo.mark_dynamic, or dynamic=True) or pad the inputs to a few sizes"
        )
    why = "; ".join(p.reasons) if p.reasons else "not recorded"
    return (
        f"{head}; the guards that failed: {why}: hold those values constant across calls "
        "(or mark a varying size dynamic), or raise torch._dynamo.config.recompile_limit if "
        "every variant is wanted"
    )


def padding_title(p: Padding) -> str:
    """Steps padded up to captured graph sizes: what it costs and which sizes to add."""
    sizes = ", ".join(f"{b:,}" for b in p.sizes)
    cost = (
        f"; each more capture costs about {duration(p.capture_us)} at start-up (the mean of "
        "those traced)"
        if p.capture_us is not None
        else ""
    )
    return (
        f"Capture graphs at batch {sizes}: padding up to the captured sizes cost "
        f"{pct(p.share)} of the replays' device time ({duration(p.waste_us)} over "
        f"{p.steps:,} steps), most of it at these batches{cost}"
    )


def drift_title(p: P.Drift, shape: str) -> str:
    """The drift action: where the shape's signed error was and where it is."""
    nights = plural(p.baseline_nights, "night")
    return (
        f"Re-fit the cost model of {p.plan_id} for {shape}: its signed error moved from "
        f"{signed_pct(p.baseline, 0)} on the plan's first {nights} (from "
        f"{p.first_night}) to {signed_pct(p.signed_error, 0)} tonight "
        f"({signed_pct(p.drift, 0)}), with the plan unchanged: the model is going stale"
    )


def blocking_title(p: P.Blocking, name: str) -> str:
    """The blocking action: what held the worker, who waited, and the remedy."""
    triggers = p.triggers
    stalls = (
        duration(p.stall_min_us)
        if p.stall_min_us == p.stall_max_us
        else f"{duration(p.stall_min_us)} to {duration(p.stall_max_us)}"
    )
    one = len(triggers) == 1
    remedy = REMEDIES[p.remedy].format(
        them="this shape" if one else "these shapes",
        it="it" if one else "any of them",
        n=len(triggers),
        dims=dims_text(p.dims),
        why="every serving-time recompile changed its size"
        if len(p.dims) == 1
        else "a shape served earlier in the window adapted again",
    )
    wait = (
        f"{duration(p.wait_us)} summed"
        if p.wait_us is not None
        else "their arrival is not recorded: the wait is inferred from back-to-back starts "
        "on each worker"
    )
    drives = (
        f"{pct(p.share, 0)} of the slice's requests"
        if p.of_requests
        else f"which drives {pct(p.share, 0)} of the slice's tail"
    )
    return (
        f"Take serving-time adaptation off the queue of {name}: "
        f"{adaptations(p.hows, p.events)} of {shape_list(triggers)} held the worker "
        f"for {stalls} each while {plural(p.blocked, 'request')} of "
        f"{plural(p.victim_shapes, 'shape')} waited behind them ({wait}), {drives}; {remedy}"
    )


def rollback_window(t: RollbackTrigger) -> str:
    """How long a rollback trigger must hold."""
    return f"{t.runs} consecutive nightly runs" if t.runs else "-"


def rollback_text(a: Action, name: str) -> str:
    """When to roll an action's change back, as one sentence."""
    t = a.rollback_trigger
    if t.runs == 0:
        return "not a runtime change: nothing to roll back"
    if t.threshold is None:
        return (
            f"{metric(t.metric)} of {name} is not measured (the requests record no arrival): "
            "record arrivals to bound a rollback"
        )
    on = f" on {t.since}" if t.since else ""
    if t.sla_us is not None and t.threshold >= t.sla_us:
        basis = f"the SLA; +10% over the {duration(t.pre_change)} measured{on} is above it"
    elif t.pre_change is not None:
        basis = f"+10% over the {duration(t.pre_change)} measured{on}, before the change"
    else:
        basis = f"fixed{on}, when it was proposed"
    what = metric(t.metric)
    at = "" if a.shape == SLICE_WIDE else f" at {a.shape}"
    return f"{what} of {name}{at} > {duration(t.threshold)} ({basis}) for {rollback_window(t)}"


def _offline(r: SliceResult) -> list[str]:
    """What a slice without requests does hold: per-op mapping, compiles, a load sweep, the
    server's metrics, MLPerf runs."""
    parts = []
    ops = r.device.operators
    if ops is not None:
        parts.append(
            f"{ops.matched_ops} of {ops.planned_ops} planned ops joined with measured times "
            f"({pct(ops.matched_time_share)} of measured op time)"
        )
    c = r.compiled.compiles
    if c is not None:
        parts.append(
            f"{plural(c.compiles, 'compile')}, {plural(c.recompiles, 'recompile')} over "
            f"{plural(len(c.shapes), 'shape')}, "
            f"{duration_ms(c.compile_ms)} compiling"
        )
    if r.accuracy.gap == AccuracyGap.NO_RUNS:
        parts.append(decisions.accuracy_gap(r.accuracy, r.thresholds.min_samples))
    device = devicetime.summary(r)
    if device is not None:
        parts.append(device)
    w = r.serving.sweep
    if w is not None:
        parts.append(
            f"{plural(w.configs_total, 'model config')} swept at "
            f"{plural(w.points, 'load point')}, best {w.best or DASH}"
        )
    server = r.serving.telemetry
    t = server.total if server else None
    if server is not None and t is not None:
        since = " since the server started" if t.since_start else ""
        parts.append(
            f"{server.server}'s metrics over {plural(server.scrapes, 'scrape')}: "
            f"{t.requests:,.0f} requests{since}, queue share {pct(t.queue_share)}, mean queue "
            f"wait {duration(t.queue_mean_us)}"
        )
    for run in r.serving.loadgen:
        valid = {True: "valid", False: "INVALID", None: "validity not stated"}[run.valid]
        parts.append(
            f"an MLPerf {run.scenario} run ({valid}), p99 latency "
            f"{duration(run.results.get('latency_p99_us'))}"
        )
    return parts or ["nothing to report beyond the data sources"]


def completed(r: SliceResult) -> str:
    """The requests latency is measured over, against all of them when some failed."""
    if r.ok_requests == r.requests:
        return plural(r.requests, "request")
    return f"the {r.ok_requests:,} of {r.requests:,} requests that completed"


def summary(r: SliceResult, sla_state: tuple[str, float | None, float | None, bool | None]) -> str:
    """One sentence: tail latency against the SLA, coverage, cost-model error, and the top
    action (or that none is called for). `sla_state` is the view's (quantile, value, SLA, met)."""
    q, value, sla, met = sla_state
    against = (
        " (no SLA configured)"
        if sla is None
        else f" against an SLA of {duration(sla)} ({'met' if met else 'missed'})"
    )
    unmeasured = decisions.accuracy_gap(r.accuracy, r.thresholds.min_samples)
    mape = (
        f"cost-model MAPE {pct(r.accuracy.mape_weighted)}"
        if r.accuracy.mape_weighted is not None or not unmeasured
        else f"cost-model error not measured: {unmeasured}"
    )
    mapping = (
        f"{pct(r.coverage.covered_traffic_share)} of traffic covered by the compile plan, {mape}"
        if r.coverage.plans
        else "no compile plan names it"
    )
    if r.requests:
        head = f"{r.name}: {q} latency {duration(value)}{against} over {completed(r)}; {mapping}."
        device = devicetime.summary(r) if r.device.roofline else None  # a CPU run: nothing to add
        head += f" On the device, {device}." if device else ""
    else:
        head = f"{r.name}: no per-request records; " + "; ".join(_offline(r)) + "."
    head += tail_sentence(r)
    held = [a for a in (r.history.actions if r.history else ()) if a.held]
    if held:
        head += (
            f" {plural(len(held), 'action')} rolled back earlier "
            f"{'stays' if len(held) == 1 else 'stay'} rolled back: proposed again on the same "
            f"compile plan ({', '.join(a.shape for a in held)})."
        )
    if not r.actions:
        return head + " No action is called for."
    first = r.actions[0]
    lead = "first, a blocker" if first.kind in BLOCKERS else "the biggest"
    count = plural(len(r.actions), "action")
    return head + f" {count}; {lead}: {action_title(first, r.name)}."


def tail_sentence(r: SliceResult) -> str:
    """What drives the slice's tail, when its pooled tail decides a class ('' otherwise); the
    blocking finding names what the requests waited behind."""
    c = r.tail_class
    decided = c is not None and c.cls != BottleneckClass.INSUFFICIENT_EVIDENCE
    if c is None or not decided or c.evidence is None:
        return ""
    what = label(c.cls)
    if r.blocking_drives_tail:
        b = r.blocking
        hows = tuple(sorted({e.how for e in b.material}))
        what += (
            f" ({plural(b.material_blocked, 'request')} behind "
            f"{adaptations(hows, len(b.material))} of {shape_list(b.triggers)})"
        )
    if c.basis == ClassBasis.BLOCKED_SHARE:
        return (
            f" Its tail: latency is not recorded, but {pct(c.evidence.value, 0)} of its requests "
            f"were {what}."
        )
    return f" Its tail: {what} drives {pct(c.evidence.value, 0)} of the excess above p95."


_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]#|~])")
"""ASCII punctuation that makes Markdown (CommonMark, GFM) anywhere in a line: emphasis, code,
links and images (no `(...)` is a link without its `[...]`), headings' closing marks, table
cells, strikethrough. A backslash before each makes it a plain character; HTML's `<` and `&`
become entities instead."""


def md_text(text: str) -> str:
    """Any text as plain Markdown text: HTML's specials as entities (a name holding a tag
    prints as the tag's text, never as HTML), Markdown's punctuation backslash-escaped (no
    emphasis, link, table cell or heading), on one line."""
    text = " ".join(text.split("\n"))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_PUNCTUATION.sub(r"\\\1", text)


def md_code(text: str) -> str:
    """Any text as a Markdown code span: fenced by more backticks than it holds in a row (a
    backtick in a name cannot close it early), on one line, and with `|` escaped so a table
    cell holding it does not split (GFM reads `\\|` inside a code span as `|`)."""
    text = " ".join(text.split("\n")).replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def ticket(a: Action, title: str, rollback: str, r: SliceResult) -> str:
    """One action as Markdown for an issue tracker: title, owner, evidence, rollback trigger
    and validation matrix. Every value is escaped (`md_text`, `md_code`): a name is text in
    the tracker, never markup."""
    files = source_paths(
        r.sources
    )  # below the folder they were ingested from: no build-machine path
    owner = md_text(a.owner or "unassigned")
    h = r.history
    run = next((p.run_id for p in h.runs if p.current), None) if h else None
    state = next((s.state for s in h.actions if s.action_id == a.id), None) if h else None
    night = r.period.night or r.period.spec
    pack = f"evidence/{a.id}.sql"
    lines = [
        f"### {md_text(title)}",
        "",
        f"- Slice: {md_code(r.name)}; shape: {md_code(shape_name(a.shape))}; action "
        f"{md_code(a.id)} ({md_text(label(a.kind))})",
        f"- Night: {md_text(str(night))}; run {md_code(run or 'not recorded')}; state: "
        f"{md_text(label(state) if state else 'new')}",
        f"- Owner: {owner} ({md_text(label(a.owner_role))})",
        f"- Evidence: {md_text(evidence(a.evidence))}",
        f"- Evidence pack: [{pack}]({pack}) (its rows: `evidence/{a.id}.parquet`), beside "
        "the report",
        *(f"  - file {md_code(files.get(sid, sid))}" for sid in a.evidence.sources),
        f"- Rollback trigger: {md_text(rollback)}",
        "",
        "| Validate on shape | Metric | Now | Pass when |",
        "|---|---|---|---|",
        *(
            f"| {md_code(shape_name(x.shape))} | {md_text(metric(x.metric))} | "
            f"{md_text(metric_value(x.baseline, x.metric))} | {md_text(criterion(x))} |"
            for x in a.validation_matrix
        ),
    ]
    return "\n".join(lines) + "\n"


def _observability_title(
    p: P.MissingSide | P.MissingField | P.Consistency, shape: str, name: str
) -> str:
    """What telemetry to export or reconcile, and why."""
    if isinstance(p, P.MissingSide):
        return (
            f"Export the environment record with the {p.side}-side files of {name}: "
            "without it the environment lock cannot be checked"
        )
    if isinstance(p, P.Consistency):
        return (
            f"Reconcile the queue wait of {name}: its per-request records give a mean of "
            f"{duration(p.records_us)}, the server's counters {duration(p.metrics_us)} "
            f"over the same window ({signed_pct(p.difference, 0)}, beyond "
            f"{pct(p.tolerance, 0)}); find which clock, sampling or request set differs "
            "before tuning on either"
        )
    return f"Record {p.field} on the requests of {shape}: its tail cannot be attributed without it"
