"""The one place a slice's analysis is assembled: an ordered list of steps over a small
context, ending in a finished `SliceResult` (history view included).

Each step reads the context and the facts the steps before it found, and adds its own. A new
metric family is one step here plus its module (see docs/architecture.md).
"""

from __future__ import annotations

import json

import msgspec

from mapreport.analysis.actions.actions import Action, Scope
from mapreport.analysis.actions.checklist import (
    ChecklistItem,
    Pitfall,
    PrecisionCheck,
    checklist,
    pitfalls,
    precision_changes,
    quality_records,
)
from mapreport.analysis.actions.compile_actions import recompile_action
from mapreport.analysis.actions.device_actions import device_actions
from mapreport.analysis.actions.observe import profile_next
from mapreport.analysis.actions.planning import plan_actions
from mapreport.analysis.actions.tuning_actions import tonight as tuned_tonight
from mapreport.analysis.actions.tuning_actions import tuning_actions
from mapreport.analysis.base import query
from mapreport.analysis.base.common import (
    Percentiles,
    Regression,
    Review,
    SourceFile,
    Thresholds,
    sla_checks,
)
from mapreport.analysis.base.query import CDF_GRID
from mapreport.analysis.base.slicestats import slice_latency
from mapreport.analysis.device.operators import Operators
from mapreport.analysis.loop.history import (
    History,
    RunKey,
    RunPoint,
    Stored,
    history_view,
    tonight_regressions,
    with_stored_triggers,
)
from mapreport.analysis.loop.targets import Curve
from mapreport.analysis.mapping.consistency import QueueCheck
from mapreport.analysis.mapping.coverage import (
    PlanVersion,
    plan_versions,
)
from mapreport.analysis.mapping.environment import (
    EnvironmentCheck,
    check_environment,
    environments,
    side_formats,
)
from mapreport.analysis.mapping.loadgen import loadgen_runs, sla_from_runs
from mapreport.analysis.mapping.presence import presence
from mapreport.analysis.serving.blocking import Blocking, blocking, load_blocking
from mapreport.analysis.serving.classify import (
    ShapeClass,
    blocked_evidence,
    classify,
    read_blocked_share,
    read_tail,
)
from mapreport.analysis.serving.compiles import varying_dims
from mapreport.analysis.serving.drift import drifts, in_force, op_drifts
from mapreport.analysis.serving.scheduling import Scheduling, queue_profile, scheduling
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.analysis.serving.sla import OverSla, over_sla, sla_driver
from mapreport.analysis.serving.tail import (
    SliceTail,
    TailDrivers,
    TailRatio,
    attribute,
    combine,
    shapes_drivers,
    tail_ratio,
    tail_rows,
)
from mapreport.analysis.steps.context import Context, read_context
from mapreport.analysis.steps.families import (
    CompiledFound,
    DeviceFound,
    PlansFound,
    compiled_found,
    device_found,
    served,
)
from mapreport.analysis.steps.results import SliceResult
from mapreport.analysis.steps.shapes_step import ShapesFound, shapes_step
from mapreport.analysis.steps.status import family_judgements, slice_status
from mapreport.analysis.tuning.ranking import Ranking
from mapreport.core.connection import Connection
from mapreport.core.kinds import BottleneckClass
from mapreport.core.records import replace


class SliceFound(msgspec.Struct, frozen=True):
    """`slice_step`: slice-wide counts, window, latency, files, environment, SLA excess."""

    requests: int
    failed: int
    window: tuple[float | None, float | None]
    latency: Percentiles
    sources: tuple[SourceFile, ...]
    environment: EnvironmentCheck
    over_sla: OverSla | None


class Diagnosis(msgspec.Struct, frozen=True):
    """`diagnosis_step`: the shapes with their tail drivers and class, the memory budgets the
    plan states, the slice's pooled tail and what it decides."""

    shapes: tuple[ShapeMetrics, ...]
    budgets: dict[str, float]
    tail: TailDrivers | None
    tail_class: ShapeClass | None
    ratio: TailRatio | None = None
    """The slice's p99 over its shapes' medians (None: no request)."""
    driver: BottleneckClass | None = None
    """The driver the pooled tail's class rule names, material by p95 or not: the tail
    judgement reads the p99, which can be heavy under a p95 the rule calls immaterial (5% of
    requests waiting 40 ms lift the p99 40x and the p95 not at all)."""


class Reviewed(msgspec.Struct, frozen=True):
    """`review_step`: precision changes, actions, the checklist and the pitfalls."""

    precision: PrecisionCheck
    actions: tuple[Action, ...]
    checklist: tuple[ChecklistItem, ...]
    pitfalls: tuple[Pitfall, ...]


def slice_step(ctx: Context, shapes: tuple[ShapeMetrics, ...]) -> SliceFound:
    """Slice-wide counts, window and latency against the SLA; the files behind them and their
    environment."""
    overall = slice_latency(ctx.totals)
    latency: Percentiles = overall["latency"]
    source_ids = sorted(
        {s for m in shapes for s in m.sources} | {s for b in ctx.buckets for s in b.sources}
    )
    profiles = query.profile_sources(ctx.workload, ctx.slice, ctx.present.tables)
    sources = tuple(
        SourceFile(
            x["source_id"],
            x["path"],
            x["format"],
            json.loads(x["rows"]),
            int(x["rejected"]),
            tuple(json.loads(x["rejections"])),
        )
        for x in query.source_files(ctx.con, source_ids, profiles)
    )
    rows = environments(ctx.con, source_ids, ctx.workload, profiles)
    return SliceFound(
        requests=overall["requests"],
        failed=overall["failed"],
        window=overall["window"],
        latency=latency,
        sources=sources,
        environment=check_environment(
            rows, ctx.present.sides(ctx.totals.requests > 0), side_formats(sources)
        ),
        over_sla=over_sla(ctx.rows, latency, ctx.review, ctx.th),
    )


def blocking_step(ctx: Context) -> Blocking:
    """The requests blocked behind adapting ones on their worker (the tail splits their queue
    wait from load queueing). A slice without requests (a trace's, a compile log's) has none
    to hold a worker or wait: its marks are not made (20 ms of a compile log's report), and
    nothing reads them, since every reader of them is of a shape's requests."""
    varying = (
        varying_dims(ctx.con, ctx.workload, ctx.slice) if ctx.present.has("compile_event") else ()
    )
    if not ctx.totals.requests:
        return Blocking((), varying=varying)
    load_blocking(ctx.con, ctx.workload, ctx.slice)
    return replace(blocking(ctx.con), varying=varying)


def diagnosis_step(
    ctx: Context, found: tuple[ShapeMetrics, ...], sl: SliceFound, blocked: Blocking
) -> Diagnosis:
    """Tail drivers and the bottleneck class of every shape, and the slice's pooled tail."""
    budgets = {
        m.shape: pl.bucket.mem_budget_bytes
        for m in found
        if (pl := ctx.placements[m.shape]).bucket is not None and pl.bucket.mem_budget_bytes
    }
    tails = tail_rows(ctx.con, budgets, ctx.rows)
    # every shape's tail resampled first (on threads, `shapes_drivers`), then pooled in order
    named = [m.shape for m in found if m.shape in tails]
    work = [(tails[s], attribute(tails[s].raw), ctx.seed(s, "tail")) for s in named]
    resampled_tails = dict(zip(named, shapes_drivers(work, ctx.th, ctx.review), strict=True))
    evaluated = SliceTail()  # the resampled tails of the shapes with tail evidence
    shapes = []
    for m in found:
        drivers = None
        got = resampled_tails.get(m.shape)
        if got is not None:
            drivers, resampled = got
            evaluated.add(resampled, drivers.unmeasured)
        measured = m.latency.p50 is not None or not m.n
        c = classify(m.n_static, m.accuracy, m.gain, drivers, m.sources, ctx.th, measured)
        shapes.append(replace(m, tail=drivers, diagnosis=c))
    lat = sl.latency
    args = (lat.p50, lat.p95, lat.p99, lat.n, ctx.th, ctx.review)
    tail = combine(evaluated, *args, unblocked_p50=blocked.unblocked_p50_us)
    sources = tuple(s.source_id for s in sl.sources)
    tail_class = None
    if tail is not None and tail.material:
        tail_class = read_tail(tail, sources)
    elif lat.p50 is None and lat.n:  # no arrivals recorded: the blocked requests' share
        tail_class = read_blocked_share(blocked.blocked, lat.n, sources)
    ratio = tail_ratio(ctx.con, ctx.th, ctx.seed("tail_ratio")) if lat.n else None
    read = tail_class if tail_class is not None or tail is None else read_tail(tail, sources)
    driver = read.cls if read is not None else None
    return Diagnosis(tuple(shapes), budgets, tail, tail_class, ratio, driver)


def scheduling_step(ctx: Context, shapes: tuple[ShapeMetrics, ...]) -> Scheduling | None:
    """Queue wait, batch impact, core and stream fairness, fusion effect."""
    bucket_of = {m.shape: m.bucket for m in shapes if m.bucket is not None}
    queues = [queue_profile(r.shape, r.n_queue, r.queue_quantiles) for r in ctx.rows if r.n_queue]
    return scheduling(ctx.con, ctx.grains, ctx.buckets, bucket_of, ctx.cores, queues)


def compiled_step(ctx: Context, shapes: tuple[ShapeMetrics, ...]) -> CompiledFound:
    """The compiles, weighed against each shape's adaptation saving, and the tuning records."""
    savings = {m.shape: v for m in shapes if (v := m.gain.saving_p50_us) is not None}
    return compiled_found(ctx.con, ctx.workload, ctx.slice, ctx.th, savings, ctx.present)


def _slowest_cores(
    sched: Scheduling | None, shapes: tuple[ShapeMetrics, ...]
) -> dict[str, tuple[int, float]]:
    """Per shape: the core with the slowest median compute and how much slower it is than
    the median core."""
    per_shape = sched.shape_cores if sched else {}
    out = {}
    for m in shapes:
        cores = per_shape.get(m.shape, ())
        if len(cores) > 1 and m.compute.p50:
            slowest = max(cores, key=lambda c: c.compute_p50_us)
            out[m.shape] = (slowest.core, slowest.vs_median)
    return out


def plans_step(ctx: Context, shapes: tuple[ShapeMetrics, ...], ops: Operators | None) -> PlansFound:
    """Each shape's (and each planned op's) signed error across the nights of its plan
    version in force."""
    plans = tuple(plan_versions(ctx.con, ctx.workload, ctx.slice))
    rows = ops.rows if ops else ()
    return PlansFound(
        plans,
        drifts(shapes, plans, ctx.stored.shapes, ctx.run.run_date, ctx.th),
        op_drifts(rows, plans, ctx.stored.ops, ctx.run.run_date, ctx.th),
    )


def review_step(
    ctx: Context,
    found: ShapesFound,
    sl: SliceFound,
    diag: Diagnosis,
    blocked: Blocking,
    sched: Scheduling | None,
    drifted: PlansFound,
    check: QueueCheck | None,
    moved: tuple[Regression, ...] = (),
    found_in: tuple[DeviceFound, CompiledFound] = (DeviceFound(), CompiledFound()),
) -> Reviewed:
    """Actions, the checklist and the pitfalls."""
    precisions = [p for b in ctx.buckets for p in b.precisions]
    quality = (
        quality_records(ctx.con, ctx.workload, ctx.slice) if ctx.present.has("quality") else []
    )
    precision = precision_changes(precisions, quality, ctx.review.description)
    scope = Scope(
        ctx.workload,
        ctx.slice,
        ctx.th,
        ctx.review,
        diag.shapes,
        precision.guard,
        sl.latency,
        blocked,
        diag.tail_class,
        drifted.drifts,
        sla_driver(sl.over_sla, sl.latency, ctx.th),
        moved,
    )
    sources = tuple(s.source_id for s in sl.sources)
    slowest = _slowest_cores(sched, diag.shapes)
    dev, compiled = found_in
    device = device_actions(scope, dev.roofline, dev.timeline, sources, dev.graphs)
    if compiled.compiles is not None:
        frames = compiled.compiles.frames
        device += [a for a in (recompile_action(scope, frames, sources),) if a is not None]
    device += tuning_actions(scope, compiled.ranking)
    actions = plan_actions(
        scope, sl.environment, precision.missing, slowest, sources, check, device
    )
    return Reviewed(
        precision,
        actions,
        checklist(ctx.review, sl.environment, actions, ctx.th, sl.latency.n),
        pitfalls(found.coverage, actions, list(diag.shapes), precision),
    )


def history_step(
    ctx: Context,
    found: ShapesFound,
    sl: SliceFound,
    diag: Diagnosis,
    actions: tuple[Action, ...],
    blocked: Blocking,
    plans: tuple[PlanVersion, ...] = (),
    moved: tuple[Regression, ...] | None = None,
    ranking: Ranking | None = None,
) -> History | None:
    """Trend, action states and regressions against the stored earlier nights (`plans`: the
    compile plan versions in force tonight; `ranking`: tonight's tuning runs, what a regret
    action's target and trigger read)."""
    lat = sl.latency
    tonight = RunPoint(
        ctx.run.run_id,
        ctx.run.run_date,
        sl.requests,
        lat.p50,
        lat.p95,
        lat.p99,
        found.coverage.covered_traffic_share,
        found.accuracy.mape_weighted,
        len(actions),
        True,
        ctx.run.revision,
        blocked.blocked,
    )
    quantiles = _quantiles(ctx)
    seed_key = (ctx.workload, ctx.slice)
    versions = {m.shape: in_force(plans, m.plan_id) for m in diag.shapes}
    return history_view(
        tonight,
        list(diag.shapes),
        actions,
        quantiles,
        ctx.stored,
        ctx.run,
        ctx.th,
        seed_key,
        versions,
        moved,
        {
            r.shape: Curve(r.queue_quantiles, CDF_GRID, r.n_queue)
            for r in ctx.rows
            if r.queue_quantiles
        },
        tuned_tonight(ranking),
    )


def _quantiles(ctx: Context) -> dict[str, tuple[float, ...]]:
    return {r.shape: r.latency_quantiles for r in ctx.rows if r.latency_quantiles}


def analyze_slice(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    review: Review | None = None,
    stored: Stored | None = None,
    run: RunKey | None = None,
) -> SliceResult:
    """The finished analysis of one slice; without stored history it is the first night."""
    key = run or RunKey("adhoc", "9999-12-31")
    return analyze(con, workload, slice_, th, review or Review(), stored or Stored(), key)


def analyze(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    review: Review,
    stored: Stored,
    run: RunKey,
) -> SliceResult:
    """Every metric of METRICS.md for one slice, history included. The slice's requests are
    one view over its Parquet files (`query.load_slice`), kept on `con` until the next slice's
    load replaces it."""
    present = presence(con, workload, slice_)
    runs = loadgen_runs(con, workload, slice_) if present.has("loadgen_run") else ()
    review = sla_from_runs(review, runs)
    ctx = read_context(con, workload, slice_, th, review, stored, run, runs, present)
    # the families in order, each given what the ones before it found
    blocked = blocking_step(ctx)
    found = shapes_step(ctx, blocked)
    sl = slice_step(ctx, found.shapes)
    diag = diagnosis_step(ctx, found.shapes, sl, blocked)
    sched = scheduling_step(ctx, diag.shapes)
    device = device_found(ctx.con, workload, slice_, th, review, present)
    compiled = compiled_step(ctx, diag.shapes)
    serving = served(con, workload, slice_, (th, review), ctx.totals, ctx.rows, runs, present)
    plans = plans_step(ctx, diag.shapes, device.operators)
    # each shape's p95 against the compared night: once, for its actions and the loop
    moved = tuple(
        tonight_regressions(
            diag.shapes, _quantiles(ctx), ctx.stored, ctx.run, ctx.th, (workload, slice_)
        )
    )
    reviewed = review_step(
        ctx, found, sl, diag, blocked, sched, plans, serving.queue_check, moved, (device, compiled)
    )
    history = history_step(
        ctx, found, sl, diag, reviewed.actions, blocked, plans.versions, moved, compiled.ranking
    )
    actions = with_stored_triggers(reviewed.actions, history, ctx.run.run_date)
    checks = sla_checks(sl.latency, review, th)
    return SliceResult(
        workload=workload,
        slice=slice_,
        thresholds=th,
        review=review,
        period=run.window,
        requests=sl.requests,
        failed=sl.failed,
        window_start_us=sl.window[0],
        window_end_us=sl.window[1],
        latency=sl.latency,
        sla=checks,
        status=slice_status(
            checks,
            sl.latency,
            history,
            family_judgements(
                diag.shapes,
                sl.environment,
                reviewed.precision,
                (device, compiled),
                (th, workload, slice_),
                (diag.ratio, diag.driver, blocked_evidence(diag.tail_class)),
            ),
        ),
        over_sla=sl.over_sla,
        shapes=diag.shapes,
        coverage=found.coverage,
        accuracy=found.accuracy,
        environment=sl.environment,
        sources=sl.sources,
        tail=diag.tail,
        scheduling=sched,
        precision=reviewed.precision,
        actions=actions,
        checklist=reviewed.checklist,
        pitfalls=reviewed.pitfalls,
        latency_quantiles=_quantiles(ctx),
        history=history,
        blocking=blocked,
        tail_class=diag.tail_class,
        budgets=diag.budgets,
        profile_next=profile_next(list(diag.shapes), th),
        device=device,
        compiled=compiled,
        serving=serving,
        plan=plans,
    )
