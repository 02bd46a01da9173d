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
AccuracyState = Literal["accurate", "inaccurate", "uncovered", "not_measured"]
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

    covered_traffic_share: float
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

    @property
    def name(self) -> str:
        """`workload` or `workload/slice`."""
        return f"{self.workload}/{self.slice}" if self.slice else self.workload
