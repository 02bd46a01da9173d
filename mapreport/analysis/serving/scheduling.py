"""Scheduling quality: queue wait per stream, batch-policy impact, core and stream fairness,
and the effect of operator fusion where fused and unfused plans both ran."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec
import numpy as np

from mapreport.analysis.base.query import REQUESTS
from mapreport.analysis.base.slicestats import BatchRow, SliceGrains
from mapreport.analysis.base.stats import jain_index
from mapreport.analysis.mapping.coverage import BucketRow
from mapreport.core.connection import Connection
from mapreport.core.kinds import FusionGap


class QueueProfile(msgspec.Struct, frozen=True):
    """Queue wait percentiles of one group (a stream) and its CDF points."""

    group: str
    n: int
    p50_us: float | None
    p95_us: float | None
    p99_us: float | None
    cdf_us: tuple[float, ...]
    """Queue wait at each quantile of CDF_GRID."""


class BatchImpact(msgspec.Struct, frozen=True):
    """Latency and throughput at one batch size."""

    batch_size: int
    n: int
    latency_p50_us: float | None
    latency_p95_us: float | None
    requests_per_s: float | None
    items_per_s: float | None


class StreamShare(msgspec.Struct, frozen=True):
    """Served versus arrived requests of one stream."""

    stream: str
    arrived: int
    served: int
    served_ratio: float


class CoreLoad(msgspec.Struct, frozen=True):
    """Busy time and median compute of one core."""

    core: int
    n: int
    busy_us: float
    compute_p50_us: float | None


class CoreCompute(NamedTuple):
    """One shape's median compute on one core, against the median over its cores."""

    core: int
    compute_p50_us: float
    vs_median: float
    """compute_p50_us over the median of the shape's per-core medians, minus one."""


def per_core(medians: Sequence[tuple[int, float]]) -> tuple[CoreCompute, ...]:
    """A shape's (core, median compute) pairs, each against the median core."""
    if not medians:
        return ()
    mid = float(np.median([p50 for _, p50 in medians]))
    return tuple(CoreCompute(c, p50, p50 / mid - 1 if mid else 0.0) for c, p50 in medians)


class FusionEffect(msgspec.Struct, frozen=True):
    """A fused group measured against an unfused plan of the same bucket, when both ran."""

    plan_fused: str
    plan_unfused: str
    bucket: str
    fusion_group: str
    launches_saved: int
    p95_fused_us: float | None
    p95_unfused_us: float | None
    p95_change: float | None
    mem_p50_fused_bytes: float | None
    mem_p50_unfused_bytes: float | None
    n_fused: int
    n_unfused: int


JAIN_IMBALANCE = 0.8
"""Jain's index below which the per-core load is called imbalanced."""


class Scheduling(msgspec.Struct, frozen=True):
    """Scheduling quality of a slice."""

    queue_by_stream: tuple[QueueProfile, ...]
    queue_by_shape: tuple[QueueProfile, ...]
    """The same per shape: a burst of queueing on one shape hides in its stream's profile."""
    batch_impact: tuple[BatchImpact, ...]
    cores: tuple[CoreLoad, ...]
    jain_index_cores: float | None
    streams: tuple[StreamShare, ...]
    jain_index_streams: float | None
    fusion: tuple[FusionEffect, ...]
    fusion_gap: FusionGap | None
    """Why no fusion effect is measured (None when one is)."""
    fused_buckets: int
    """Compiled buckets whose plan entries fuse ops."""
    shape_cores: dict[str, tuple[CoreCompute, ...]]
    """Per shape: the median compute of its ok requests on each core. The slice-wide
    index weighs every shape's busy time and can read 1.000 while one shape runs slower on
    one core: a core-placement action rests on these."""

    @property
    def imbalanced(self) -> bool:
        """The per-core load is imbalanced: Jain's index below JAIN_IMBALANCE."""
        return self.jain_index_cores is not None and self.jain_index_cores < JAIN_IMBALANCE

    @property
    def measured(self) -> bool:
        """Anything to show: queue waits, batch sizes, cores, streams or fused buckets (a
        client-side export has none of them)."""
        return bool(
            self.queue_by_stream
            or self.queue_by_shape
            or self.batch_impact
            or self.cores
            or len(self.streams) > 1  # one stream, the slice's unnamed one, compares nothing
            or self.fusion
        )


def queue_profile(group: str, n: int, cdf: Sequence[float]) -> QueueProfile:
    """A queue-wait profile from its quantiles at CDF_GRID (p50/p95/p99 are points of it)."""
    return QueueProfile(
        group, n, float(cdf[49]), float(cdf[94]), float(cdf[98]), tuple(float(v) for v in cdf)
    )


def _batches(rows: Sequence[BatchRow], window_s: float | None) -> list[BatchImpact]:
    """Per batch size: latency p50/p95 and the requests and items per second over the slice's
    window (none without one)."""
    return [
        BatchImpact(
            b.batch_size,
            b.n,
            b.latency_p50_us,
            b.latency_p95_us,
            b.n / window_s if window_s else None,
            b.items / window_s if window_s else None,
        )
        for b in rows
    ]


def _fusion(
    con: Connection,
    buckets: Sequence[BucketRow],
    shape_buckets: dict[str, str],
) -> list[FusionEffect]:
    """Per bucket compiled by a plan with fusion groups and by one without: latency p95 and
    memory p50 of the bucket's shapes under each plan as built (static requests), when both
    served requests."""
    by_bucket: dict[str, list[BucketRow]] = {}
    for b in buckets:
        by_bucket.setdefault(b.bucket, []).append(b)
    if not any(
        any(b.fusion_groups for b in rows) and not all(b.fusion_groups for b in rows)
        for rows in by_bucket.values()
    ):
        return []  # no bucket has both a fused and an unfused plan: nothing to compare
    stats = {
        (plan, shape): (int(n), q, m)
        for shape, plan, n, q, m in con.execute(
            f"""
            SELECT shape, plan_id, count(*), quantile_cont(latency_us, 0.95),
                quantile_cont(mem_peak_bytes, 0.5)
            FROM ({REQUESTS})
            WHERE status = 'ok' AND plan_id IS NOT NULL AND variant = 'static' GROUP BY ALL
            """
        ).fetchall()
    }
    out = []
    for bucket, rows in sorted(by_bucket.items()):
        fused = [b for b in rows if b.fusion_groups]
        unfused = [b for b in rows if not b.fusion_groups]
        shapes = [s for s, bk in shape_buckets.items() if bk == bucket]
        for f in fused:
            for u in unfused:
                for shape in shapes:
                    fs, us = stats.get((f.plan_id, shape)), stats.get((u.plan_id, shape))
                    if fs is None or us is None:
                        continue
                    for group, ops in f.fusion_groups:
                        out.append(
                            FusionEffect(
                                plan_fused=f.plan_id,
                                plan_unfused=u.plan_id,
                                bucket=bucket,
                                fusion_group=group,
                                launches_saved=ops - 1,
                                p95_fused_us=fs[1],
                                p95_unfused_us=us[1],
                                p95_change=None if not us[1] else fs[1] / us[1] - 1,
                                mem_p50_fused_bytes=fs[2],
                                mem_p50_unfused_bytes=us[2],
                                n_fused=fs[0],
                                n_unfused=us[0],
                            )
                        )
    return out


def scheduling(
    con: Connection,
    grains: SliceGrains,
    buckets: Sequence[BucketRow],
    shape_buckets: dict[str, str],
    shape_cores: dict[str, list[tuple[int, float]]],
    shape_queues: Sequence[QueueProfile] = (),
) -> Scheduling:
    """Every scheduling-quality figure of the loaded slice (`query.load_slice`): its streams,
    batch sizes and cores from its `grains`, `shape_cores` the per-core compute medians of its
    shapes and `shape_queues` their queue profiles (from `query.shape_rows`' scan); only the
    fusion comparison asks `con`."""
    cores = [CoreLoad(c.core, c.n, c.busy_us, c.compute_p50_us) for c in grains.cores]
    streams = [StreamShare(g.stream, g.n, g.ok, g.ok / g.n) for g in grains.streams if g.n]
    queues = [queue_profile(g.stream, g.n_queue, g.queue) for g in grains.streams if g.n_queue]
    fusion = _fusion(con, buckets, shape_buckets)
    grouped = sum(1 for b in buckets if b.fusion_groups)
    gap = None if fusion else FusionGap.NOT_BOTH_RAN if grouped else FusionGap.NO_GROUPS
    return Scheduling(
        queue_by_stream=tuple(queues),
        queue_by_shape=tuple(shape_queues),
        batch_impact=tuple(_batches(grains.batches, grains.totals.window_s)),
        cores=tuple(cores),
        jain_index_cores=jain_index([c.busy_us for c in cores]),
        streams=tuple(streams),
        jain_index_streams=jain_index([s.served_ratio for s in streams]),
        fusion=tuple(fusion),
        fusion_gap=gap,
        fused_buckets=grouped,
        shape_cores={k: per_core(v) for k, v in shape_cores.items()},
    )
