"""Frozen result types: what analysis hands to rendering and to findings.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Decision = Literal[
    "specialise",
    "static_sufficient",
    "close_the_loop",
    "find_bottleneck",
    "insufficient_evidence",
]
DECISIONS: tuple[Decision, ...] = (
    "specialise",
    "static_sufficient",
    "close_the_loop",
    "find_bottleneck",
    "insufficient_evidence",
)
BottleneckClass = Literal[
    "queueing",
    "core_imbalance",
    "mapping_fallback",
    "memory_burst",
    "mapping_inaccuracy",
    "adaptation_overhead",
    "none",
    "insufficient_evidence",
]
BOTTLENECK_CLASSES: tuple[BottleneckClass, ...] = (
    "queueing",
    "core_imbalance",
    "mapping_fallback",
    "memory_burst",
    "mapping_inaccuracy",
    "adaptation_overhead",
    "none",
    "insufficient_evidence",
)
Driver = Literal["queueing", "mapping_fallback", "memory_burst", "core_imbalance", "residual"]
DRIVERS: tuple[Driver, ...] = (
    "queueing",
    "mapping_fallback",
    "memory_burst",
    "core_imbalance",
    "residual",
)
"""Tail drivers in attribution order: each takes what it can of the excess left by the ones
before it, and the residual is what none explains."""
OwnerRole = Literal[
    "compiler_lead", "runtime_lead", "observability_engineer", "model_serving_architect"
]
OWNER_ROLES: tuple[OwnerRole, ...] = (
    "compiler_lead",
    "runtime_lead",
    "observability_engineer",
    "model_serving_architect",
)
AccuracyState = Literal["accurate", "inaccurate", "uncovered", "not_measured", "no_prediction"]
GainState = Literal["significant", "not_significant", "regression", "not_measured"]


@dataclass(frozen=True)
class Thresholds:
    """The evidence thresholds of METRICS.md, all configurable."""

    tolerance: float = 0.15
    min_samples: int = 10
    min_samples_p95: int = 20
    min_samples_p99: int = 100
    bootstrap_resamples: int = 2000
    seed: int = 20261129
    tail_ratio: float = 1.5


@dataclass(frozen=True)
class Interval:
    """A 95% confidence interval."""

    low: float
    high: float

    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Review:
    """What a slice is reviewed against, from the run configuration."""

    sla_p95_us: float | None = None
    sla_p99_us: float | None = None
    owners: dict[str, str] = field(default_factory=dict)
    signoffs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TailDrivers:
    """The excess of a shape's (or slice's) tail requests split by driver."""

    n: int
    """Requests measured (ok) behind the tail."""
    n_tail: int
    """Requests above the p95 latency."""
    excess_us: float
    """Summed excess (latency - p50 latency) of the tail requests."""
    shares: dict[str, float]
    share_ci: dict[str, Interval]
    material: bool
    """False when p95 <= tail_ratio x p50 and within the SLA: noise, not a bottleneck."""
    p50_us: float | None
    p95_us: float | None
    unmeasured: tuple[str, ...]
    """Drivers that could not be measured (missing telemetry: core, mem_peak_bytes)."""


@dataclass(frozen=True)
class Evidence:
    """What a class or an action rests on, so it can be reproduced."""

    metric: str
    value: float | None
    n: int
    ci: Interval | None
    sources: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class Percentiles:
    """p50/p95/p99 of one measured quantity with its sample count."""

    n: int
    p50: float | None
    p95: float | None
    p99: float | None


@dataclass(frozen=True)
class ShapeMetrics:
    """Everything measured for one input shape of one workload slice."""

    shape: str
    n_total: int
    n: int
    n_failed: int
    traffic_share: float
    covered: bool
    plan_id: str | None
    bucket: str | None
    latency: Percentiles
    queue: Percentiles
    compute: Percentiles
    n_static: int
    n_adapted: int
    n_fallback: int
    predicted_us: float | None
    measured_static_p50_us: float | None
    signed_error: float | None
    ape: float | None
    accuracy: AccuracyState
    baseline_variant: str | None
    baseline_p50_us: float | None
    adapted_p50_us: float | None
    gain_p50: float | None
    gain_p50_ci: Interval | None
    gain_p95: float | None
    gain_p95_ci: Interval | None
    adaptation_events: int
    adaptation_cost_us: float
    adaptation_cost_per_request_us: float | None
    net_gain_p50: float | None
    net_gain_p50_ci: Interval | None
    gain: GainState
    decision: Decision
    decision_reason: str
    insufficient: tuple[str, ...]
    """Statistics shown but below their evidence threshold (METRICS.md evidence rules)."""
    sources: tuple[str, ...]
    signed_error_ci: Interval | None = None
    tail: TailDrivers | None = None
    bottleneck_class: BottleneckClass = "insufficient_evidence"
    class_evidence: Evidence | None = None
    class_reason: str = ""


@dataclass(frozen=True)
class UncoveredShape:
    """A runtime shape that no compile bucket holds."""

    shape: str
    n: int
    traffic_share: float


@dataclass(frozen=True)
class SyntheticBucket:
    """A compiled bucket that no production shape fell in."""

    plan_id: str
    bucket: str
    predicted_us: float | None


@dataclass(frozen=True)
class Coverage:
    """How much production traffic the compile plan covered."""

    covered_traffic_share: float | None
    """None when the slice served no requests."""
    uncovered_shapes: tuple[UncoveredShape, ...]
    synthetic_only_buckets: tuple[SyntheticBucket, ...]
    plans: tuple[str, ...]
    buckets: int


@dataclass(frozen=True)
class Accuracy:
    """Compile-time mapping accuracy across the slice's shapes."""

    mape_weighted: float | None
    within_tolerance_share: float | None
    kendall_tau: float | None
    shapes_measured: int
    measured_traffic_share: float
    tolerance: float


@dataclass(frozen=True)
class EnvMismatch:
    """A key whose value differs between the compile and the runtime side (or within one)."""

    key: str
    compile: tuple[str, ...]
    runtime: tuple[str, ...]


@dataclass(frozen=True)
class EnvironmentCheck:
    """Environment metadata of both sides of a slice and whether it matches."""

    compile: dict[str, str]
    runtime: dict[str, str]
    mismatches: tuple[EnvMismatch, ...]
    missing_sides: tuple[str, ...]
    compared_keys: tuple[str, ...]

    @property
    def locked(self) -> bool:
        """True when both sides are present and every compared key matches."""
        return not self.mismatches and not self.missing_sides


@dataclass(frozen=True)
class SourceFile:
    """An input file a slice's numbers rest on."""

    source_id: str
    path: str
    format: str
    rows: dict[str, int]
    rejected: int
    rejections: tuple[dict[str, object], ...] = ()
    """The first rejected records (line, field, reason); all of them are in `quarantine`."""


@dataclass(frozen=True)
class ValidationRow:
    """One cell row of a validation matrix: a shape, a metric, what passes."""

    shape: str
    metric: str
    baseline: float | None
    criterion: str


@dataclass(frozen=True)
class RollbackTrigger:
    """When to roll a change back: metric, threshold, window."""

    metric: str
    threshold: float | None
    window: str
    text: str


@dataclass(frozen=True)
class Action:
    """A retuning action: what to change, who owns it, how to undo it, how to validate it."""

    id: str
    title: str
    shape: str
    cls: str
    owner_role: OwnerRole
    owner: str | None
    evidence: Evidence
    rollback_trigger: RollbackTrigger
    validation_matrix: tuple[ValidationRow, ...]
    impact: float
    """Ordering key: traffic share times the size of the effect (0 for slice-wide actions)."""


@dataclass(frozen=True)
class ChecklistItem:
    """One review-checklist item, evaluated from data and configuration."""

    item: str
    passed: bool
    reason: str


@dataclass(frozen=True)
class Pitfall:
    """A known pitfall and whether this slice falls into it."""

    name: str
    present: bool
    detail: str


@dataclass(frozen=True)
class QueueProfile:
    """Queue wait percentiles of one group (a stream) and its CDF points."""

    group: str
    n: int
    p50_us: float | None
    p95_us: float | None
    p99_us: float | None
    cdf_us: tuple[float, ...]
    """Queue wait at the 1st..99th percentile."""


@dataclass(frozen=True)
class BatchImpact:
    """Latency and throughput at one batch size."""

    batch_size: int
    n: int
    latency_p50_us: float | None
    latency_p95_us: float | None
    requests_per_s: float | None
    items_per_s: float | None


@dataclass(frozen=True)
class StreamShare:
    """Served versus arrived requests of one stream."""

    stream: str
    arrived: int
    served: int
    served_ratio: float


@dataclass(frozen=True)
class CoreLoad:
    """Busy time and median compute of one core."""

    core: int
    n: int
    busy_us: float
    compute_p50_us: float | None


@dataclass(frozen=True)
class FusionEffect:
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


@dataclass(frozen=True)
class Scheduling:
    """Scheduling quality of a slice."""

    queue_by_stream: tuple[QueueProfile, ...]
    batch_impact: tuple[BatchImpact, ...]
    cores: tuple[CoreLoad, ...]
    jain_index_cores: float | None
    streams: tuple[StreamShare, ...]
    jain_index_streams: float | None
    fusion: tuple[FusionEffect, ...]
    fusion_note: str


@dataclass(frozen=True)
class RunPoint:
    """One run's headline numbers for the trend."""

    run_id: str
    run_date: str
    requests: int
    latency_p50_us: float | None
    latency_p95_us: float | None
    latency_p99_us: float | None
    covered_traffic_share: float | None
    mape_weighted: float | None
    actions: int
    current: bool


@dataclass(frozen=True)
class ActionState:
    """Where one action stands after this run."""

    action_id: str
    cls: str
    shape: str
    title: str
    owner_role: str
    state: str
    """new, open, verified (its target moved as expected), rolled_back (its trigger fired on
    two consecutive runs), dropped (the finding is gone but the target did not move)."""
    first_run_id: str
    first_run_date: str
    runs_seen: int
    target_metric: str | None
    target_baseline: float | None
    target_now: float | None
    rollback_metric: str | None
    rollback_threshold: float | None
    rollback_now: float | None


@dataclass(frozen=True)
class Regression:
    """A shape's p95 latency change against an earlier run, with its bootstrap CI."""

    shape: str
    against_run_id: str
    against_run_date: str
    before_us: float
    now_us: float
    change: float
    ci: Interval
    kind: str
    """regression, improvement (CI excludes zero) or no_change."""


@dataclass(frozen=True)
class History:
    """The history view of one slice, this run included."""

    runs: tuple[RunPoint, ...]
    actions: tuple[ActionState, ...]
    regressions: tuple[Regression, ...]
    compared_to: str | None
    note: str


@dataclass(frozen=True)
class OpRow:
    """One planned op joined with its measured per-op time."""

    plan_id: str
    op: str
    kernel: str | None
    precision: str | None
    fused_ops: int
    """Ops the plan fused into this one (`A + B + C` is 3)."""
    runs: int
    """Profiled executions behind the median."""
    measured_p50_us: float
    predicted_us: float | None
    signed_error: float | None
    ape: float | None
    time_share: float | None
    """Share of the slice's measured per-op time."""


@dataclass(frozen=True)
class Operators:
    """The per-op join of a compile plan with a runtime profile (METRICS.md, per operator)."""

    plans: tuple[str, ...]
    planned_ops: int
    measured_ops: int
    matched_ops: int
    matched_time_share: float | None
    """Share of measured per-op time spent in ops the plan names."""
    predicted_ops: int
    mape_time_weighted: float | None
    top_error: tuple[OpRow, ...]
    precision_time_share: dict[str, float]
    fused_time_share: float | None
    reformat_time_share: float | None
    """Share spent in layout/precision conversions the mapping inserted (TensorRT reformats)."""
    layer_sum_vs_compute: dict[str, tuple[float, float]]
    """Per plan: (sum of per-op medians, median end-to-end compute of its requests)."""
    unmapped: tuple[tuple[str, float, float], ...]
    """Runtime ops no plan names: (name, median us, time share), largest first."""
    unmapped_count: int
    unmeasured: tuple[str, ...]
    unmeasured_count: int
    rows: tuple[OpRow, ...]
    rows_total: int


@dataclass(frozen=True)
class CompileCost:
    """What compiling for one shape cost, and what its compiled code then ran."""

    shape: str | None
    compiles: int
    recompiles: int
    compile_ms: float | None
    cache_hits: int
    cache_misses: int
    reasons: tuple[str, ...]
    frames: tuple[str, ...]
    runtime_calls: int
    runtime_ms: float | None
    compile_share: float | None
    """compile / (compile + runtime of the compiled region)."""
    saving_per_request_us: float | None
    break_even_requests: float | None


@dataclass(frozen=True)
class Compiles:
    """Compile cost per shape of one slice."""

    shapes: tuple[CompileCost, ...]
    compiles: int
    recompiles: int
    compile_ms: float
    shapes_recompiled: int
    runtime_joined: bool


@dataclass(frozen=True)
class SweepPoint:
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


@dataclass(frozen=True)
class SweepConfig:
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


@dataclass(frozen=True)
class LoadSweep:
    """Batch policy across configs, from a measured config x load sweep."""

    configs: tuple[SweepConfig, ...]
    configs_total: int
    points: int
    best: str | None
    sla_p99_us: float | None
    dynamic_batching_gain: float | None
    """Best throughput with dynamic batching over the best without, minus one."""
    curves: tuple[SweepPoint, ...]


@dataclass(frozen=True)
class SliceResult:
    """The analysis of one workload slice: the input of every renderer."""

    workload: str
    slice: str
    thresholds: Thresholds
    requests: int
    failed: int
    window_start_us: float | None
    window_end_us: float | None
    latency: Percentiles
    shapes: tuple[ShapeMetrics, ...]
    coverage: Coverage
    accuracy: Accuracy
    environment: EnvironmentCheck
    sources: tuple[SourceFile, ...]
    decisions: dict[str, int] = field(default_factory=dict)
    review: Review = field(default_factory=Review)
    tail: TailDrivers | None = None
    scheduling: Scheduling | None = None
    actions: tuple[Action, ...] = ()
    checklist: tuple[ChecklistItem, ...] = ()
    pitfalls: tuple[Pitfall, ...] = ()
    summary: str = ""
    latency_quantiles: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Per shape: latency at 0%, 1%, ..., 100% (kept in the history for later comparisons)."""
    history: History | None = None
    operators: Operators | None = None
    compiles: Compiles | None = None
    sweep: LoadSweep | None = None

    @property
    def name(self) -> str:
        """`workload` or `workload/slice`."""
        return f"{self.workload}/{self.slice}" if self.slice else self.workload
