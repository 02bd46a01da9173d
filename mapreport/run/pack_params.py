"""What an evidence pack's figure is reduced by, and the parameters each reduction's query and
figure are built from (a pack spec's `reduction` and `params`): data, never code."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mapreport.core.kinds import Driver


class Reduction(StrEnum):
    """How a pack's figure follows from its rows."""

    TAIL_SHARE = "tail_share"
    """A driver's share of the tail excess (`attribute`, `shares`, `resample`, `pooled`)."""
    NET_GAIN = "net_gain"
    """The net p50 gain of adaptation (`shape_gain`)."""
    APE = "ape"
    """The prediction's APE, with the signed error's CI (`shape_accuracy`)."""
    DRIFT = "drift"
    """Tonight's signed error minus the plan's first nights' (`shape_accuracy`, the same
    bootstrap, the baseline from the history)."""
    BLOCKED_SHARE = "blocked_share"
    """Requests blocked behind adaptation over ok requests (Wilson interval)."""
    ENVIRONMENT = "environment"
    """Keys whose values differ between the environment records (`check_environment`)."""
    QUEUE_CHECK = "queue_check"
    """The records' mean queue wait against the server counters' over one window
    (`telemetry.queue_check`)."""
    REGRESSION = "regression"
    """A shape's p95 change against a reference night (`p95_change`, the reference night's
    quantiles in the spec, tonight's from the rows)."""
    HEADROOM = "headroom"
    """An op x shape's time above its roofline bound over its calls, the CI by bootstrapping
    the calls' mean (`roofline.headroom_of`)."""
    DEVICE_IDLE = "device_idle"
    """The share of the devices' span idle (`timeline.of_rows`)."""
    GRAPH_PADDING = "graph_padding"
    """The padding waste of graph replays (`graphs.buckets_of`)."""
    RECORDS = "records"
    """No figure: the records (files) whose content or absence the finding states."""


@dataclass(frozen=True)
class TailParams:
    """A tail share's pack: the driver, the shapes pooled (each shape's tail is resampled
    with the seed of its own tail, `tail.pooled`) and the memory budgets the plan states (the
    tail query's literals)."""

    driver: Driver
    shapes: list[str]
    budgets: dict[str, float]


@dataclass(frozen=True)
class SampleParams:
    """A compute-sample pack: whether the shape is covered (gain), its prediction (APE,
    drift) and the drift's baseline."""

    covered: bool | None = None
    predicted_us: float | None = None
    baseline: float | None = None


@dataclass(frozen=True)
class QueueParams:
    """A queue check's pack: the server whose counters are compared, and the window."""

    server: str
    start_us: float
    end_us: float


@dataclass(frozen=True)
class SourceParams:
    """A pack of records: the files (source ids) the finding names."""

    sources: list[str]


@dataclass(frozen=True)
class RegressionParams:
    """A regression's pack: the reference night's latency quantiles and request count."""

    reference: list[float]
    n_ref: int


@dataclass(frozen=True)
class HeadroomParams:
    """A headroom's pack: the op x shape's selection, its roofline bound per call, and the
    bootstrap's seed key."""

    op: str
    category: str
    shape: str
    types: str
    concrete: str
    roof_us: float
    seed_key: list[str]


@dataclass(frozen=True)
class Recomputed:
    """A pack's figure, n and CI recomputed from its rows."""

    figure: float | None
    n: int
    ci: tuple[float, float] | None
    rows: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class NoParams:
    """A pack whose query needs only its slice."""


PARAMS: dict[Reduction, type] = {
    Reduction.TAIL_SHARE: TailParams,
    Reduction.NET_GAIN: SampleParams,
    Reduction.APE: SampleParams,
    Reduction.DRIFT: SampleParams,
    Reduction.BLOCKED_SHARE: NoParams,
    Reduction.ENVIRONMENT: SourceParams,
    Reduction.QUEUE_CHECK: QueueParams,
    Reduction.REGRESSION: RegressionParams,
    Reduction.HEADROOM: HeadroomParams,
    Reduction.DEVICE_IDLE: NoParams,
    Reduction.GRAPH_PADDING: NoParams,
    Reduction.RECORDS: SourceParams,
}
"""The parameters each reduction's query and figure are built from (a spec's `params`)."""
