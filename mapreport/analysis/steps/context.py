"""What every step of a slice's analysis reads (`slice.analyze`): the slice, its thresholds and
review, and the request statistics read once from the loaded slice (`query.load_slice`): the
per-shape rows, the buckets and placements, the compute samples, the per-core medians and the
slice's totals (`slicestats`)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base import query
from mapreport.analysis.base.common import Review, Thresholds
from mapreport.analysis.base.slicestats import SliceGrains, SliceTotals, slice_grains
from mapreport.analysis.base.stats import Sample, seed_for
from mapreport.analysis.loop.history import RunKey, Stored
from mapreport.analysis.mapping.coverage import BucketRow, Placement, bucket_rows, place
from mapreport.analysis.mapping.loadgen import LoadgenRun
from mapreport.analysis.mapping.presence import EVERY_TABLE, Presence
from mapreport.analysis.serving.adaptation import compute_samples, variant_samples
from mapreport.core.connection import Connection
from mapreport.core.shapes import sort_key


class Context(msgspec.Struct, frozen=True):
    """What every step reads: the slice, its thresholds and review, the per-shape rows and
    buckets from SQL, the compute samples, per-core medians and the stored history."""

    con: Connection
    workload: str
    slice: str
    th: Thresholds
    review: Review
    stored: Stored
    run: RunKey
    rows: list[query.ShapeRow]
    buckets: list[BucketRow]
    placements: dict[str, Placement]
    samples: dict[tuple[str, str], Sample]
    grains: SliceGrains
    runs: tuple[LoadgenRun, ...] = ()
    """The slice's MLPerf runs (read first: one's target may be the SLA)."""
    present: Presence = EVERY_TABLE
    """The tables holding the slice's records (read first: families over the others are
    not asked)."""

    @property
    def cores(self) -> dict[str, list[tuple[int, float]]]:
        """Per shape (in name order): the median compute of its ok requests on each core."""
        return {r.shape: list(r.cores) for r in sorted(self.rows, key=lambda r: r.shape) if r.cores}

    @property
    def totals(self) -> SliceTotals:
        """The slice's totals (of its grains)."""
        return self.grains.totals

    def seed(self, *key: str) -> int:
        """The bootstrap seed of one figure of this slice."""
        return seed_for(self.th.seed, self.workload, self.slice, *key)


def sla_targets(review: Review) -> dict[str, float]:
    """The slice's SLA latency targets by quantile name (those it states), in one order: the
    slice is loaded with them and its shapes read against them."""
    return {q: v for q in ("p95", "p99") if (v := review.sla(q))}


def read_context(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    review: Review,
    stored: Stored,
    run: RunKey,
    runs: tuple[LoadgenRun, ...],
    present: Presence = EVERY_TABLE,
) -> Context:
    """The slice's context: its requests loaded (`query.load_slice`, with its SLA targets;
    the next slice's replaces them), its per-shape rows and buckets from SQL, their
    placements, the compute samples and per-core medians."""
    targets = sla_targets(review)
    query.load_slice(con, workload, slice_, tuple(targets.values()))
    # on a connection that brings any group here, one scan gives the variants' figures and
    # their compute samples; else the samples are read per group after the figures
    both = variant_samples(con)
    variants = None if both is None else both[0]
    rows = sorted(query.shape_rows(con, targets, variants), key=lambda r: sort_key(r.shape))
    buckets = bucket_rows(con, workload, slice_)
    return Context(
        con=con,
        workload=workload,
        slice=slice_,
        th=th,
        review=review,
        stored=stored,
        run=run,
        rows=rows,
        buckets=buckets,
        placements=place(rows, buckets),
        samples=both[1] if both else compute_samples(con, [r for r in rows if r.variants]),
        grains=slice_grains(con),
        runs=runs,
        present=present,
    )
