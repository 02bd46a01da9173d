"""Evidence packs, the parts every figure's pack shares: how a pack's figure is reduced from its
rows (`Reduction`), the parameters each reduction's query and figure are built from (a pack
spec's `params`: data, never code), the pack spec itself, and the rule that a recomputed figure
is the stated one. Each family declares its packs' SQL and recompute function beside its
figures (`serving.packs`, `loop.packs`, `actions.device_packs`, `tuning.packs`); `steps.packs`
chooses a pack for each piece of a slice's evidence; `run.evidence` writes, reads and replays
them."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgspec
import pyarrow as pa

from mapreport.analysis.base.common import Thresholds
from mapreport.core.kinds import Driver
from mapreport.core.window import Window


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
    REGRET = "regret"
    """A tuning run's chosen config over the best measured for its workload, minus 1, with the
    bootstrap interval over the candidates' repeats (`ranking.rank`)."""
    PAIRWISE_ACCURACY = "pairwise_accuracy"
    """The share of a tuning run's scored candidate pairs its cost model ranked as measured,
    with the bootstrap interval over candidates (`ranking.rank`)."""
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
class TuningParams:
    """A tuning figure's pack: the run that chose and its workload (task key, target, shape,
    as `ranking.rank` groups them)."""

    plan_id: str
    task_key: str
    target: str | None
    shape: str | None


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
    Reduction.REGRET: TuningParams,
    Reduction.PAIRWISE_ACCURACY: TuningParams,
    Reduction.RECORDS: SourceParams,
}
"""The parameters each reduction's query and figure are built from (a spec's `params`)."""


@dataclass(frozen=True)
class Pack:
    """One class's or action's evidence: how to select its rows and what they must give."""

    id: str
    subject: str
    """`action <kind>` or `class <class>`."""
    workload: str
    slice: str
    shape: str
    metric: str
    reduction: Reduction
    sql: str
    params: dict[str, Any]
    figure: float | None
    n: int
    ci: tuple[float, float] | None
    window: dict[str, Any]
    thresholds: dict[str, Any]

    def spec(self) -> dict[str, Any]:
        """The pack as JSON-ready builtins."""
        return dataclasses.asdict(self)

    def typed(self) -> Any:
        """The pack's parameters as its reduction's dataclass (`PARAMS`)."""
        return msgspec.convert(self.params, PARAMS[self.reduction], strict=True)

    @staticmethod
    def from_spec(data: bytes) -> Pack:
        """A pack back from its spec's JSON, every field and parameter checked for its type
        (msgspec.ValidationError or DecodeError when one is missing, mistyped or unknown)."""
        p = msgspec.json.decode(data, type=Pack, strict=True)
        p.typed()
        msgspec.convert(p.thresholds, Thresholds, strict=True)
        window_of(p)
        return p


def window_of(p: Pack) -> Window:
    """The window a pack's figure was computed over."""
    return msgspec.convert(p.window, Window, strict=True)


MATCH = 1e-12
"""Relative difference up to which a recomputed figure is the stated one (float summation)."""


def close(a: float | None, b: float | None) -> bool:
    """A recomputed figure is the stated one: equal within `MATCH` (both None counts too)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= MATCH * max(abs(a), abs(b), 1e-300)


def reproduced(p: Pack, x: Recomputed) -> bool:
    """The recomputed figure, n and CI are the ones the report stated (to MATCH)."""
    same_ci = (p.ci is None and x.ci is None) or (
        p.ci is not None and x.ci is not None and all(map(close, p.ci, x.ci))
    )
    return close(p.figure, x.figure) and p.n == x.n and same_ci


PACK_ID = re.compile(r"[0-9a-f]{12}")
"""An evidence pack's id: the first 12 hex digits of a SHA-256 (`actions.action_id`)."""


PackSql = Callable[[Reduction, str, str, str, Any], str]
"""A reduction's query: (reduction, workload, slice, shape, params) -> self-contained SQL."""
Recompute = Callable[[Pack, pa.Table, Thresholds, tuple[str, ...]], Recomputed]
"""A reduction's figure from its pack's rows: (pack, rows, thresholds, files) -> Recomputed."""
FigureSql = Callable[[Reduction, Any, Thresholds], str]
"""A reduction's figure in SQL: (reduction, params, thresholds) -> one SELECT over the pack's
rows (`PACK_ROWS`) of one row: `value`, the figure's point value as the recompute function
gives it, and where it has one `n`, every value a literal written in one pass."""

PACK_ROWS = "pack_rows"
"""The view a pack's `.sql` makes of its rows, which its figure's SELECT reads."""


@dataclass(frozen=True)
class PackKind:
    """One reduction's query, recompute function and figure in SQL, declared beside the
    figure it reproduces; `steps.packs.KINDS` gathers every family's."""

    sql: PackSql
    recompute: Recompute
    figure: FigureSql
