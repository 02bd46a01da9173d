"""The per-shape step of a slice's analysis: each shape's placement, accuracy with its error
interval, compute samples and gain, and its decision; the coverage and accuracy summaries
(`shapes_step`). `slice.analyze` runs it after the blocking marks and before the slice-wide
steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from mapreport.analysis.base.common import (
    Interval,
    Thresholds,
)
from mapreport.analysis.base.query import ShapeRow
from mapreport.analysis.base.stats import Sample, bootstrap_relative_error, relative_error_ranks
from mapreport.analysis.mapping.accuracy import Accuracy, ShapeAccuracy, shape_accuracy, summarise
from mapreport.analysis.mapping.coverage import (
    Coverage,
    Placement,
    coverage,
)
from mapreport.analysis.serving.adaptation import (
    ComparablePaths,
    OtherPath,
    adaptation_costs,
    gain_reads,
    other_paths,
    shape_gain,
)
from mapreport.analysis.serving.blocking import Blocking
from mapreport.analysis.serving.classify import ShapeClass
from mapreport.analysis.serving.compiles import fallback_causes
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.analysis.steps.context import Context
from mapreport.analysis.steps.decision import borrows, decide
from mapreport.core.connection import sample_limit
from mapreport.core.kinds import BottleneckClass, ClassBasis, PredictionGap
from mapreport.core.records import replace


class ShapesFound(msgspec.Struct, frozen=True):
    """`shapes_step`: every shape's figures and decision, the coverage and the accuracy."""

    shapes: tuple[ShapeMetrics, ...]
    coverage: Coverage
    accuracy: Accuracy


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
