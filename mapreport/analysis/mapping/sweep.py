"""Batch policy across model configs: the load sweeps a profiler measured (Triton Model
Analyzer checkpoints, table `load_sweep`) summarised per config, so a reviewer sees what
max batch size, instance count and dynamic batching did to throughput and tail latency."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import Review, within
from mapreport.core.connection import Connection


class SweepPoint(msgspec.Struct, frozen=True):
    """One measured load point of one model config."""

    model: str
    config: str
    max_batch_size: int | None
    instance_count: int | None
    instance_kind: str | None
    dynamic_batching: bool | None
    batch_size: int | None
    concurrency: int | None
    request_rate: float | None
    throughput_per_s: float
    latency_p99_us: float | None
    server_queue_us: float | None
    latency_avg_us: float | None


class SweepConfig(msgspec.Struct, frozen=True):
    """One model config across its load sweep."""

    model: str
    config: str
    max_batch_size: int | None
    instance_count: int | None
    instance_kind: str | None
    dynamic_batching: bool | None
    points: int
    best_throughput_per_s: float
    best_load: str
    best_within_sla: bool | None
    """None when no p99 SLA is configured; False when no load point of the config meets it."""
    p99_at_best_us: float | None
    p99_lowest_load_us: float | None
    queue_share_at_best: float | None


class LoadSweep(msgspec.Struct, frozen=True):
    """Batch policy across configs, from a measured config x load sweep."""

    configs: tuple[SweepConfig, ...]
    configs_total: int
    points: int
    best: str | None
    sla_p99_us: float | None
    dynamic_batching_gain: float | None
    """Best throughput with dynamic batching over the best without, minus one."""
    curves: tuple[SweepPoint, ...]


MAX_CONFIGS = 12
"""Configs listed (best throughput first); findings.json carries the same list."""
CHARTED = 8
"""Configs whose load sweeps the chart draws."""

_POINTS = """
    SELECT model, config, max_batch_size, instance_count, instance_kind, dynamic_batching,
        batch_size, concurrency, request_rate, throughput_per_s, latency_p99_us,
        server_queue_us, latency_avg_us
    FROM load_sweep WHERE workload = $w AND slice = $s
    ORDER BY model, config, max_batch_size, instance_count, instance_kind, dynamic_batching,
        batch_size, concurrency, request_rate, throughput_per_s, latency_p99_us,
        server_queue_us, latency_avg_us
"""
"""Every column in the order: two checkpoints of one model (two Model Analyzer runs) each
number their configs from 0, so one name can hold two configurations (the realdata folder's
resnet50_libtorch and vgg19_libtorch: 39 of 1,160 points tie on the name and the load), and
points that tied on a shorter order came back in the engine's order of the day (the
dynamic-batching gain was None in one run of the same folder and -34% in the next)."""

ConfigKey = tuple[str, str, int | None, int | None, str | None, bool | None]
"""A config: its model and name, and what it is (a name reused for another configuration is
another config)."""


def config_key(p: SweepPoint | SweepConfig) -> ConfigKey:
    """The config a point or a config row is of (`ConfigKey`)."""
    return (
        p.model, p.config, p.max_batch_size, p.instance_count, p.instance_kind, p.dynamic_batching
    )  # fmt: skip


def _order(c: SweepConfig) -> tuple[object, ...]:
    """Best throughput first, then by name and what the config is (None before any value)."""
    return (-c.best_throughput_per_s, *((v is not None, v) for v in config_key(c)))


def _load(p: SweepPoint) -> str:
    parts = [f"batch {p.batch_size}"] if p.batch_size is not None else []
    if p.concurrency is not None:
        parts.append(f"concurrency {p.concurrency}")
    if p.request_rate is not None:
        parts.append(f"{p.request_rate:g} req/s")
    return ", ".join(parts) or "–"


def load_sweep(con: Connection, workload: str, slice_: str, review: Review) -> LoadSweep | None:
    """Per config: best throughput (within the p99 SLA when one is set), p99 at the lowest and
    at the best load, and the queue's share of latency there; None without sweep data."""
    rows = con.execute(_POINTS, {"w": workload, "s": slice_}).fetchall()
    if not rows:
        return None
    points = [SweepPoint(*r) for r in rows]
    by_config: dict[ConfigKey, list[SweepPoint]] = {}
    for p in points:
        by_config.setdefault(config_key(p), []).append(p)
    sla = review.sla_p99_us
    configs = []
    for (model, config, *_), pts in by_config.items():
        eligible = [p for p in pts if within(p.latency_p99_us or 0.0, sla) is not False]
        best = max(eligible or pts, key=lambda p: p.throughput_per_s)
        low = min(pts, key=lambda p: (p.concurrency or 0, p.request_rate or 0.0, p.batch_size or 0))
        first = pts[0]
        configs.append(
            SweepConfig(
                model=model,
                config=config,
                max_batch_size=first.max_batch_size,
                instance_count=first.instance_count,
                instance_kind=first.instance_kind,
                dynamic_batching=first.dynamic_batching,
                points=len(pts),
                best_throughput_per_s=best.throughput_per_s,
                best_load=_load(best),
                best_within_sla=bool(eligible) if sla is not None else None,
                p99_at_best_us=best.latency_p99_us,
                p99_lowest_load_us=low.latency_p99_us,
                queue_share_at_best=(
                    best.server_queue_us / best.latency_avg_us
                    if best.server_queue_us is not None and best.latency_avg_us
                    else None
                ),
            )
        )
    configs.sort(key=_order)
    ok = [c for c in configs if c.best_within_sla is not False]

    def best_of(dynamic: bool) -> float | None:
        vals = [c.best_throughput_per_s for c in ok if c.dynamic_batching is dynamic]
        return max(vals) if vals else None

    with_db, without_db = best_of(True), best_of(False)
    charted = {config_key(c) for c in configs[:CHARTED]}
    return LoadSweep(
        configs=tuple(configs[:MAX_CONFIGS]),
        configs_total=len(configs),
        points=len(points),
        best=ok[0].config if ok else None,
        sla_p99_us=sla,
        dynamic_batching_gain=(with_db / without_db - 1) if with_db and without_db else None,
        curves=tuple(p for p in points if config_key(p) in charted),
    )
