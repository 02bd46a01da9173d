"""compare.json's objects (docs/compare.md), one frozen msgspec Struct each, declared once:
`compare_doc.document` writes the document as them and `run/api_compare.read_compare` reads
it back into them. Each Struct's fields are in the order compare.json writes its keys;
categories are `core/kinds.py`'s enums. A key an earlier 1.x did not write yet has a default
(None, or empty), so that its files still read."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
import numpy as np

from mapreport.analysis.comparing.compare_stats import LatencyBasis
from mapreport.core.kinds import (
    CompareVerdict,
    Decision,
    ShipReason,
    TimeBasis,
    TimeCategory,
    TuningEdge,
)

Pair = tuple[float, float]
"""A confidence interval: [low, high]."""


class CompareSide(msgspec.Struct, frozen=True, kw_only=True):
    """One side of the comparison (`a`, `b`)."""

    label: str
    dataset: str
    workload: str
    slice: str
    requests: int
    calls: int = 0
    basis: LatencyBasis = LatencyBasis.END_TO_END


class PartQuantiles(msgspec.Struct, frozen=True, kw_only=True):
    """A side's p50, p95 and p99 of one part of the latency (`shapes[].latency_a`, ...)."""

    p50_us: float | None = None
    p95_us: float | None = None
    p99_us: float | None = None


class QuantileTest(msgspec.Struct, frozen=True, kw_only=True):
    """One quantile of one shape tested (`shapes[].quantiles[]`)."""

    quantile: str
    a_us: float
    b_us: float
    ratio: float
    ci: Pair
    p_value: float
    verdict: CompareVerdict
    blocks: tuple[int, int] | None = None
    queue_us: float | None = None
    compute_us: float | None = None
    queue_share: float | None = None
    vs_shift: float | None = None
    ci_vs_shift: Pair | None = None
    evidence: str | None = None


class ShapeCompared(msgspec.Struct, frozen=True, kw_only=True):
    """One shape both sides have (`shapes[]`)."""

    shape: str
    n_a: int
    n_b: int
    p50_a_us: float | None
    p50_b_us: float | None
    p95_a_us: float | None
    p95_b_us: float | None
    ratio_p50: float | None
    ratio_p95: float | None
    ci_p95: Pair | None
    p_value: float | None
    verdict: CompareVerdict
    traffic_a: float
    traffic_b: float
    mean_a_us: float | None = None
    mean_b_us: float | None = None
    contribution_us: float | None = None
    evidence: str | None = None
    quantiles: tuple[QuantileTest, ...] = ()
    latency_a: PartQuantiles | None = None
    queue_a: PartQuantiles | None = None
    compute_a: PartQuantiles | None = None
    latency_b: PartQuantiles | None = None
    queue_b: PartQuantiles | None = None
    compute_b: PartQuantiles | None = None


class TailQuantile(msgspec.Struct, frozen=True, kw_only=True):
    """One quantile of the slice, every shape pooled (`tail[]`)."""

    quantile: str
    n_a: int
    n_b: int
    a_us: float
    b_us: float
    ratio: float
    ci: Pair
    moved: bool
    blocks: tuple[int, int] | None = None
    evidence: str | None = None


class OpCompared(msgspec.Struct, frozen=True, kw_only=True):
    """One op x shape both traces ran (`ops[]`)."""

    op: str
    shape: str
    dtype: str | None
    count_a: int
    count_b: int
    mean_us_a: float
    mean_us_b: float
    ratio: float
    ci: Pair | None
    p_value: float | None
    verdict: CompareVerdict
    share: float | None = None
    category: TimeCategory = TimeCategory.OTHER
    delta_us: float | None = None
    contribution: float | None = None
    shape_recorded: bool | None = None
    evidence: str | None = None


class OpOneSide(msgspec.Struct, frozen=True, kw_only=True):
    """One op x shape only one trace ran (`ops_only_a[]`, `ops_only_b[]`)."""

    op: str
    shape: str
    dtype: str | None
    count: int
    total_us: float
    share: float
    category: TimeCategory = TimeCategory.OTHER
    contribution: float | None = None
    shape_recorded: bool | None = None


class CategoryCompared(msgspec.Struct, frozen=True, kw_only=True):
    """One op category of the whole device time (`whole.categories[]`)."""

    category: TimeCategory
    a_us: float
    b_us: float
    calls_a: int
    calls_b: int
    ratio: float | None
    contribution: float | None


class Whole(msgspec.Struct, frozen=True, kw_only=True):
    """The traces' whole time, per side (`whole`)."""

    basis_a: TimeBasis
    basis_b: TimeBasis
    devices_a: tuple[str, ...]
    devices_b: tuple[str, ...]
    a_us: float
    b_us: float
    calls_a: int
    calls_b: int
    ratio: float
    ci: Pair
    moved: bool
    categories: tuple[CategoryCompared, ...] = ()


class Ship(msgspec.Struct, frozen=True, kw_only=True):
    """Whether B is safe to ship against the SLA (`ship`)."""

    safe: bool | None
    reason: ShipReason
    quantile: str | None
    target_us: float | None
    text: str


class RunQuantile(msgspec.Struct, frozen=True, kw_only=True):
    """One quantile across the runs of each side (`runs.quantiles[]`)."""

    quantile: str
    runs_a: int
    runs_b: int
    ratio: float | None
    ci: Pair | None
    moved: bool


class RunOp(msgspec.Struct, frozen=True, kw_only=True):
    """One op x shape across the trace files of each side (`runs.ops[]`)."""

    op: str
    shape: str
    runs_a: int
    runs_b: int
    ratio: float
    ci: Pair
    moved: bool


class Runs(msgspec.Struct, frozen=True, kw_only=True):
    """The run-level comparison (`runs`)."""

    runs_a: int
    runs_b: int
    quantiles: tuple[RunQuantile, ...] = ()
    traces_a: int = 0
    traces_b: int = 0
    ops: tuple[RunOp, ...] = ()


class Figure(msgspec.Struct, frozen=True, kw_only=True):
    """One mapping figure of each side and its change (`mapping.coverage`, ...)."""

    a: float | None
    b: float | None
    change: float | None


class MappingShape(msgspec.Struct, frozen=True, kw_only=True):
    """One shape of both sides' mapping (`mapping.shapes[]`)."""

    shape: str
    signed_error_a: float | None
    signed_error_b: float | None
    change: float | None
    change_ci: Pair | None
    net_gain_a: float | None
    net_gain_b: float | None
    fallback_a: int
    fallback_b: int
    decision_a: Decision
    decision_b: Decision


class MappingCompared(msgspec.Struct, frozen=True, kw_only=True):
    """Both sides' compile-time mapping (`mapping`)."""

    coverage: Figure
    mape_weighted: Figure
    within_tolerance_share: Figure
    kendall_tau: Figure
    adaptation_events: Figure | None = None
    fallback_requests: Figure | None = None
    shapes: tuple[MappingShape, ...] = ()


class TuningSide(msgspec.Struct, frozen=True, kw_only=True):
    """One side's run of a workload both tuned (`tuning.workloads[].a`, `.b`)."""

    plan_id: str
    candidates: int
    chosen_us: float | None
    regret: float | None
    """Against the best measured on either side."""
    pairwise_accuracy: float | None
    regret_ci: Pair | None
    pairwise_ci: Pair | None
    kendall_tau: float | None
    scored: int


class TuningWorkload(msgspec.Struct, frozen=True, kw_only=True):
    """One workload both sides tuned (`tuning.workloads[]`)."""

    task: str
    target: str | None
    shape: str | None
    best_us: float | None
    chosen_ratio: float | None
    chosen_ci: Pair | None
    chose: TuningEdge
    pairwise_change: float | None
    pairwise_change_ci: Pair | None
    ranks: TuningEdge
    a: TuningSide
    b: TuningSide


class PooledAccuracy(msgspec.Struct, frozen=True, kw_only=True):
    """A side's pairwise accuracy over the workloads both scored (`tuning.pairwise_a`, `_b`)."""

    value: float
    ci: Pair | None


class TuningCompared(msgspec.Struct, frozen=True, kw_only=True):
    """The two sides' tuning runs (`tuning`, 1.6; absent where neither holds tuning records)."""

    text: str
    tuned_a: int
    tuned_b: int
    several: tuple[str, ...] = ()
    chose: TuningEdge
    chosen_ratio: float | None
    chosen_ci: Pair | None
    ranks: TuningEdge
    ranked: int
    pairwise_a: PooledAccuracy | None
    pairwise_b: PooledAccuracy | None
    pairwise_change_ci: Pair | None
    workloads: tuple[TuningWorkload, ...] = ()


class Blocks(msgspec.Struct, frozen=True, kw_only=True):
    """One side's block length for the bootstrap (`blocks.a`, `blocks.b`)."""

    n: int
    acf: tuple[float, ...]
    band: float
    length: int


class SideBlocks(msgspec.Struct, frozen=True, kw_only=True):
    """Each side's block choice (`blocks`)."""

    a: Blocks
    b: Blocks


class RunShift(msgspec.Struct, frozen=True, kw_only=True):
    """The run's shift at one quantile: the median of the shapes' ratios (`run_shift[]`)."""

    quantile: str
    ratio: float
    ci: Pair
    shapes: int
    moved: bool


class MeanLatency(msgspec.Struct, frozen=True, kw_only=True):
    """The slice's mean latency per request on each side (`mean_latency`)."""

    a_us: float
    b_us: float
    change_us: float
    one_side_us: float


class Renamed(msgspec.Struct, frozen=True, kw_only=True):
    """One of B's shapes aligned with A's by the numbers in its name (`renamed_b[]`)."""

    b: str
    a: str


class CompareJson(msgspec.Struct, frozen=True, kw_only=True):
    """One compare.json, every part typed, its keys in the order it writes them."""

    schema_version: str
    generator: str
    generated_at: str
    a: CompareSide
    b: CompareSide
    verdict: str
    """The sentences page 1 prints, the whole first."""
    whole: Whole | None = None
    ship: Ship | None = None
    runs: Runs | None = None
    mapping: MappingCompared | None = None
    tuning: TuningCompared | None = None
    """Absent from the file where neither side holds tuning records (1.6)."""
    basis: LatencyBasis = LatencyBasis.END_TO_END
    blocks: SideBlocks | None = None
    blocks_text: str | None = None
    run_shift: tuple[RunShift, ...] = ()
    fdr: float
    tested: int
    tests: int | None = None
    tail: tuple[TailQuantile, ...] = ()
    mean_latency: MeanLatency | None = None
    renamed_b: tuple[Renamed, ...] = ()
    shapes: tuple[ShapeCompared, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    ops: tuple[OpCompared, ...] = ()
    ops_only_a: tuple[OpOneSide, ...] = ()
    ops_only_b: tuple[OpOneSide, ...] = ()


S = TypeVar("S", bound=msgspec.Struct)


def carried(kind: type[S], source: object, **given: Any) -> S:
    """A compare.json object from the analysis value it shows: each of its fields is `given`
    or else `source`'s attribute of the same name (one the source lacks keeps its default)."""
    names = (f.name for f in msgspec.structs.fields(kind))
    values = {n: given[n] if n in given else getattr(source, n) for n in names}
    return kind(**{n: v for n, v in values.items() if n in given or hasattr(source, n)})


def _number(value: Any) -> Any:
    """numpy's scalars as Python's (an analysis figure may still be one)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"compare.json holds no {type(value).__name__}")  # msgspec reports it


def as_json(doc: CompareJson) -> dict[str, Any]:
    """The document as JSON-ready builtins in compare.json's key order, `tuning` left out where
    it is None (1.6: the key is absent without tuning records)."""
    out: dict[str, Any] = msgspec.to_builtins(doc, enc_hook=_number)
    if out["tuning"] is None:
        del out["tuning"]
    return out
