"""The one place a slice's analysis is assembled: an ordered list of steps over a small
context, ending in a finished `SliceResult` (history view included).

Each step reads the context and the facts the steps before it found, and adds its own. A new
metric family is one step here plus its module (see docs/architecture.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from mapreport.analysis import query
from mapreport.analysis.accuracy import Accuracy, ShapeAccuracy, shape_accuracy, summarise
from mapreport.analysis.actions import Action, Scope
from mapreport.analysis.adaptation import (
    ComparablePaths,
    OtherPath,
    adaptation_costs,
    gain_reads,
    other_paths,
    shape_gain,
)
from mapreport.analysis.blocking import Blocking, blocking, load_blocking
from mapreport.analysis.checklist import (
    ChecklistItem,
    Pitfall,
    PrecisionCheck,
    checklist,
    pitfalls,
    precision_changes,
    quality_records,
)
from mapreport.analysis.classify import ShapeClass, classify, read_blocked_share, read_tail
from mapreport.analysis.common import (
    Interval,
    Percentiles,
    Regression,
    Review,
    SourceFile,
    Thresholds,
    sla_checks,
)
from mapreport.analysis.compiles import fallback_causes, varying_dims
from mapreport.analysis.consistency import QueueCheck
from mapreport.analysis.context import Context, read_context
from mapreport.analysis.coverage import (
    Coverage,
    Placement,
    PlanVersion,
    coverage,
    plan_versions,
)
from mapreport.analysis.decision import borrows, decide
from mapreport.analysis.device_actions import device_actions
from mapreport.analysis.drift import OpDrift, ShapeDrift, drifts, in_force, op_drifts
from mapreport.analysis.environment import (
    EnvironmentCheck,
    check_environment,
    environments,
    side_formats,
)
from mapreport.analysis.history import (
    History,
    RunKey,
    RunPoint,
    Stored,
    history_view,
    tonight_regressions,
    with_stored_triggers,
)
from mapreport.analysis.loadgen import loadgen_runs, sla_from_runs
from mapreport.analysis.observe import profile_next
from mapreport.analysis.offline import Offline, offline, served
from mapreport.analysis.operators import Operators
from mapreport.analysis.planning import plan_actions
from mapreport.analysis.presence import presence
from mapreport.analysis.query import CDF_GRID, ShapeRow
from mapreport.analysis.results import SliceResult
from mapreport.analysis.scheduling import Scheduling, queue_profile, scheduling
from mapreport.analysis.shape import ShapeMetrics
from mapreport.analysis.sla import OverSla, over_sla, sla_driver
from mapreport.analysis.slicestats import slice_latency
from mapreport.analysis.stats import Sample, bootstrap_relative_error, relative_error_ranks
from mapreport.analysis.status import SliceParts, family_judgements, slice_status
from mapreport.analysis.tail import (
    SliceTail,
    TailDrivers,
    attribute,
    combine,
    tail_drivers,
    tail_rows,
)
from mapreport.analysis.targets import Curve
from mapreport.core.connection import Connection, sample_limit
from mapreport.core.kinds import BottleneckClass, ClassBasis, PredictionGap


@dataclass(frozen=True)
class ShapesFound:
    """`shapes_step`: every shape's figures and decision, the coverage and the accuracy."""

    shapes: tuple[ShapeMetrics, ...]
    coverage: Coverage
    accuracy: Accuracy


@dataclass(frozen=True)
class SliceFound:
    """`slice_step`: slice-wide counts, window, latency, files, environment, SLA excess."""

    requests: int
    failed: int
    window: tuple[float | None, float | None]
    latency: Percentiles
    sources: tuple[SourceFile, ...]
    environment: EnvironmentCheck
    over_sla: OverSla | None


@dataclass(frozen=True)
class Diagnosis:
    """`diagnosis_step`: the shapes with their tail drivers and class, the memory budgets the
    plan states, the slice's pooled tail and what it decides."""

    shapes: tuple[ShapeMetrics, ...]
    budgets: dict[str, float]
    tail: TailDrivers | None
    tail_class: ShapeClass | None


@dataclass(frozen=True)
class Drifts:
    """`drift_step`: the plan versions in force and the signed errors' drift across nights."""

    plans: tuple[PlanVersion, ...]
    drifts: tuple[ShapeDrift, ...]
    op_drifts: tuple[OpDrift, ...]


@dataclass(frozen=True)
class Reviewed:
    """`review_step`: precision changes, actions, the checklist and the pitfalls."""

    precision: PrecisionCheck
    actions: tuple[Action, ...]
    checklist: tuple[ChecklistItem, ...]
    pitfalls: tuple[Pitfall, ...]


UNREAD = ShapeClass(BottleneckClass.INSUFFICIENT_EVIDENCE, ClassBasis.TOO_FEW_REQUESTS)
"""A shape's class before `diagnosis_step` reads its tail."""


def _error_sample(ctx: Context, shape: str, acc: ShapeAccuracy) -> Sample | None:
    """The static sample a shape's error interval resamples (None: it has none)."""
    static = ctx.samples.get((shape, "static"))
    if acc.signed_error is None or acc.predicted_us is None or static is None:
        return None
    return static


def _error_ci(ctx: Context, shape: str, acc: ShapeAccuracy) -> Interval | None:
    static = _error_sample(ctx, shape, acc)
    if static is None or acc.predicted_us is None:
        return None
    resamples = ctx.th.bootstrap_resamples
    seed = ctx.seed(shape, "error")
    return Interval(*bootstrap_relative_error(static, acc.predicted_us, resamples, seed))


class _Shape(NamedTuple):
    """What a shape's figures are computed from, read before any is (`shapes_step`)."""

    row: ShapeRow
    placement: Placement
    accuracy: ShapeAccuracy
    samples: dict[str, Sample]
    other: dict[str, OtherPath] | None


def _shape_inputs(
    ctx: Context, r: ShapeRow, samples: dict[str, Sample], pools: ComparablePaths
) -> _Shape:
    """A shape's placement, accuracy (its interval not yet drawn), samples (by variant) and,
    where it ran one path only, the other path on comparable shapes (from `pools`)."""
    pl = ctx.placements[r.shape]
    covered = pl.bucket is not None
    n_static, static_p50, _ = r.variants.get("static", (0, None, None))
    predicted = pl.bucket.predicted_us if pl.bucket else None
    gap = pl.bucket.prediction_gap if pl.bucket else PredictionGap.PLAN_STATES_NONE
    acc = shape_accuracy(covered, predicted, n_static, static_p50, ctx.th, gap)
    # pooling comparable shapes costs a pass over their samples: only where one path ran
    own = [len(samples[v]) if v in samples else 0 for v in ("adapted", "fallback")]
    one_path = not covered and min(own) < ctx.th.min_samples
    other = None
    if one_path:
        # and only the path the gain can compare with: the other one of a path with the
        # samples the evidence rules ask for (`adaptation._compared`); pooling a path no
        # comparison reads made a slice of thousands of one-path shapes quadratic
        usable = [
            p for p, n in (("fallback", own[0]), ("adapted", own[1])) if n >= ctx.th.min_samples
        ]
        other = other_paths(r.shape, pools, usable)
    return _Shape(r, pl, acc, samples, other)


def _by_shape(samples: dict[tuple[str, str], Sample]) -> dict[str, dict[str, Sample]]:
    """The compute samples by shape, then variant (in the order `samples` holds them)."""
    out: dict[str, dict[str, Sample]] = {}
    for (shape, variant), x in samples.items():
        out.setdefault(shape, {})[variant] = x
    return out


def _read_ahead(ctx: Context, shapes: Sequence[_Shape]) -> None:
    """Ask every sample the shapes' error intervals and gains will resample to read those
    ranks ahead: groups read by rank on the engine are then read in one query for the
    slice, not one per group and figure. Nothing to do where every group is here (a
    connection without a `sample_limit`)."""
    th = ctx.th
    if sample_limit(ctx.con) is None:
        return
    for sh in shapes:
        shape = sh.row.shape
        static = _error_sample(ctx, shape, sh.accuracy)
        if static is not None:
            seed = ctx.seed(shape, "error")
            static.prefetch(relative_error_ranks(len(static), th.bootstrap_resamples, seed))
        key = (ctx.workload, ctx.slice, shape)
        gain_reads(key, sh.placement.bucket is not None, sh.samples, th, sh.other)


def _insufficient(n: int, th: Thresholds) -> tuple[str, ...]:
    out = []
    if n < th.min_samples_p95:
        out += ["latency_p95_us", "queue_p95_us", "compute_p95_us"]
    if n < th.min_samples_p99:
        out += ["latency_p99_us", "queue_p99_us", "compute_p99_us"]
    return tuple(out)


def shapes_step(ctx: Context, blocked: Blocking) -> ShapesFound:
    """Coverage, accuracy, adaptation gain (net of compile time and of the wait it caused
    others, `blocked`) and the decision of every shape."""
    shapes: list[ShapeMetrics] = []
    has = ctx.present.has
    costs = adaptation_costs(ctx.con, ctx.workload, ctx.slice) if has("adaptation_event") else {}
    waits = blocked.caused_waits()
    eager = fallback_causes(ctx.con, ctx.workload, ctx.slice) if has("compile_event") else {}
    total = sum(r.n_total for r in ctx.rows)
    by_shape, pools = _by_shape(ctx.samples), ComparablePaths(ctx.samples)
    read = [_shape_inputs(ctx, r, by_shape.get(r.shape, {}), pools) for r in ctx.rows]
    _read_ahead(ctx, read)
    pairs = []
    for r, pl, acc, samples, other in read:
        covered = pl.bucket is not None
        n_static = r.variants.get("static", (0, None, None))[0]
        acc = replace(acc, signed_error_ci=_error_ci(ctx, r.shape, acc))
        share = r.n_total / total if total else 0.0
        pairs.append((share, acc))
        key = (ctx.workload, ctx.slice, r.shape)
        gain = shape_gain(
            key, covered, samples, costs.get(r.shape, (0, 0.0)), ctx.th, other, waits.get(r.shape)
        )
        sources = set(r.sources) | set(pl.bucket.sources if pl.bucket else ())
        shapes.append(
            ShapeMetrics(
                shape=r.shape,
                n_total=r.n_total,
                n=r.n,
                n_failed=r.n_total - r.n,
                traffic_share=share,
                covered=covered,
                plan_id=pl.plan_id,
                bucket=pl.bucket.bucket if pl.bucket else None,
                latency=r.latency,
                queue=r.queue,
                compute=r.compute,
                n_static=n_static,
                n_adapted=r.variants.get("adapted", (0, None, None))[0],
                n_fallback=r.variants.get("fallback", (0, None, None))[0],
                accuracy=acc,
                gain=gain,
                decision=decide(acc.state, gain.state, borrows(gain, r.n, ctx.th)),
                insufficient=_insufficient(r.n, ctx.th),
                sources=tuple(sorted(sources)),
                tail=None,
                diagnosis=UNREAD,
                fallback_cause=eager.get(r.shape),
            )
        )
    cov = coverage(ctx.rows, ctx.buckets, ctx.placements)
    predicted = sum(1 for b in ctx.buckets if b.predicted_us is not None)
    return ShapesFound(tuple(shapes), cov, summarise(pairs, ctx.th, predicted))


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
    wait from load queueing)."""
    load_blocking(ctx.con, ctx.workload, ctx.slice)
    varying = (
        varying_dims(ctx.con, ctx.workload, ctx.slice) if ctx.present.has("compile_event") else ()
    )
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
    evaluated = SliceTail()  # the resampled tails of the shapes with tail evidence
    shapes = []
    for m in found:
        t = tails.get(m.shape)
        drivers = None
        if t is not None:
            parts = attribute(t.raw)
            got = tail_drivers(t, parts, ctx.th, ctx.review, ctx.seed(m.shape, "tail"))
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
    return Diagnosis(tuple(shapes), budgets, tail, tail_class)


def scheduling_step(ctx: Context, shapes: tuple[ShapeMetrics, ...]) -> Scheduling | None:
    """Queue wait, batch impact, core and stream fairness, fusion effect."""
    bucket_of = {m.shape: m.bucket for m in shapes if m.bucket is not None}
    queues = [queue_profile(r.shape, r.n_queue, r.queue_quantiles) for r in ctx.rows if r.n_queue]
    return scheduling(ctx.con, ctx.grains, ctx.buckets, bucket_of, ctx.cores, queues)


def offline_step(ctx: Context, shapes: tuple[ShapeMetrics, ...]) -> Offline:
    """The families that need no request telemetry (`offline.offline`)."""
    savings = {m.shape: v for m in shapes if (v := m.gain.saving_p50_us) is not None}
    return offline(ctx.con, ctx.workload, ctx.slice, ctx.th, ctx.review, savings, ctx.present)


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


def drift_step(ctx: Context, shapes: tuple[ShapeMetrics, ...], ops: Operators | None) -> Drifts:
    """Each shape's (and each planned op's) signed error across the nights of its plan
    version in force."""
    plans = tuple(plan_versions(ctx.con, ctx.workload, ctx.slice))
    rows = ops.rows if ops else ()
    return Drifts(
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
    drifted: Drifts,
    check: QueueCheck | None,
    moved: tuple[Regression, ...] = (),
    offline: Offline | None = None,
) -> Reviewed:
    """Actions, the checklist and the pitfalls."""
    precisions = [b.precision for b in ctx.buckets if b.precision]
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
    device = (
        device_actions(scope, offline.roofline, offline.timeline, sources, offline.graphs)
        if offline
        else []
    )
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
) -> History | None:
    """Trend, action states and regressions against the stored earlier nights (`plans`: the
    compile plan versions in force tonight)."""
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
    offline = offline_step(ctx, diag.shapes)
    serving = served(con, workload, slice_, th, ctx.totals, ctx.rows, present)
    drifted = drift_step(ctx, diag.shapes, offline.operators)
    # each shape's p95 against the compared night: once, for its actions and the loop
    moved = tuple(
        tonight_regressions(
            diag.shapes, _quantiles(ctx), ctx.stored, ctx.run, ctx.th, (workload, slice_)
        )
    )
    reviewed = review_step(
        ctx, found, sl, diag, blocked, sched, drifted, serving.queue_check, moved, offline
    )
    history = history_step(ctx, found, sl, diag, reviewed.actions, blocked, drifted.plans, moved)
    actions = with_stored_triggers(reviewed.actions, history, ctx.run.run_date)
    checks = sla_checks(sl.latency, review, th)
    return SliceResult(
        workload=workload,
        slice=slice_,
        thresholds=th,
        review=review,
        period=run.window,
        plans=drifted.plans,
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
                SliceParts(
                    diag.shapes,
                    sl.environment,
                    reviewed.precision,
                    offline.compiles,
                    offline.timeline,
                    offline.roofline,
                    offline.graphs,
                ),
                th,
                workload,
                slice_,
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
        operators=offline.operators,
        compiles=offline.compiles,
        sweep=offline.sweep,
        roofline=offline.roofline,
        timeline=offline.timeline,
        graphs=offline.graphs,
        trace_rows=offline.trace_rows,
        blocking=blocked,
        tail_class=diag.tail_class,
        budgets=diag.budgets,
        drifts=drifted.drifts,
        op_drifts=drifted.op_drifts,
        profile_next=profile_next(list(diag.shapes), th),
        telemetry=serving.telemetry,
        queue_check=serving.queue_check,
        tokens=serving.tokens,
        token_rate=serving.token_rate,
        loadgen=runs,
    )
