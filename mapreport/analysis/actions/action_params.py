"""The figures each kind of action states, typed: one dataclass per kind (or per finding of a
kind), so every place that reads a figure is checked by mypy, and a renamed figure fails
there instead of at run time. `actions` builds them; the report words them."""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass

import msgspec

from mapreport.core.kinds import ActionKind, BlockingRemedy, HeadroomRemedy, RegretRemedy


@dataclass(frozen=True)
class TailShare:
    """A tail driver's action (memory burst): the driver's share of the shape's tail."""

    share: float | None


@dataclass(frozen=True)
class Queueing:
    """Queueing drives the tail: its share and the queue wait's p95 against its p50."""

    share: float | None
    queue_p95_us: float | None
    queue_p50_us: float | None


@dataclass(frozen=True)
class CoreImbalance:
    """A slow core drives the tail: its share, the slowest core and how much slower it is."""

    share: float | None
    core: int | None
    slowdown: float | None


@dataclass(frozen=True)
class Fallback:
    """The generic fallback path drives the tail: how many requests ran it, whether a bucket
    holds the shape, and the adapted mapping's net gain where it is significant."""

    share: float | None
    n_fallback: int
    n: int
    covered: bool
    net_gain_p50: float | None


@dataclass(frozen=True)
class Inaccuracy:
    """The cost model is wrong and adaptation does not recover it."""

    predicted_us: float | None
    measured_us: float | None
    signed_error: float | None


@dataclass(frozen=True)
class Overhead:
    """Adaptation costs more than it gains."""

    cost_per_request_us: float | None
    net_gain_p50: float | None


@dataclass(frozen=True)
class GainDecision:
    """Specialise or close the loop: the prediction's error, the adapted mapping's net gain,
    and (closing the loop) whether a bucket holds the shape."""

    signed_error: float | None
    net_gain_p50: float | None
    covered: bool | None = None


@dataclass(frozen=True)
class Drift:
    """The signed error moved from the plan's first nights with the plan unchanged."""

    plan_id: str | None
    baseline: float
    baseline_nights: int
    first_night: str
    signed_error: float | None
    drift: float


@dataclass(frozen=True)
class Regressed:
    """A shape's p95 rose beyond its bootstrap CI against an earlier night."""

    night: str
    before_us: float
    now_us: float
    change: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Blocking:
    """Requests waited behind serving-time adaptation: what held the worker, for how long,
    who waited, and the remedy."""

    remedy: BlockingRemedy
    share: float | None
    of_requests: bool
    """The share is of the slice's requests (their latency is not recorded), not its tail."""
    blocked: int
    wait_us: float | None
    events: int
    triggers: tuple[str, ...]
    hows: tuple[str, ...]
    stall_min_us: float
    stall_max_us: float
    victim_shapes: int
    dims: tuple[Dim, ...] = ()
    """The input dims whose size changes caused the serving-time compiles (TORCH_TRACE)."""


@dataclass(frozen=True)
class Dim:
    """One dim of one compiled input and the sizes it took."""

    tensor: str
    dim: int
    low: int
    high: int


@dataclass(frozen=True)
class MissingSide:
    """An environment record is missing on one side ("compile", "runtime")."""

    side: str


@dataclass(frozen=True)
class MissingField:
    """A request field the tail attribution needs is not recorded."""

    field: str


@dataclass(frozen=True)
class Consistency:
    """The records and the server's counters disagree on a mean over the same window."""

    consistency: str
    records_us: float
    metrics_us: float
    difference: float
    tolerance: float


@dataclass(frozen=True)
class Mismatch:
    """Environment keys whose values differ: (key, compile-side values, runtime-side values)."""

    mismatches: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]


@dataclass(frozen=True)
class Quality:
    """A precision change without quality evidence."""

    precision: str


@dataclass(frozen=True)
class Headroom:
    """An op x shape far from its roofline: what it is, how far, and how much time that is."""

    op: str
    label: str
    kind: str | None
    bound: str | None
    roofline_pct: float | None
    calls: int
    mean_us: float
    roof_us: float | None
    headroom_us: float | None
    share: float | None
    """Headroom over the trace's device time."""
    remedy: HeadroomRemedy


@dataclass(frozen=True)
class Idle:
    """The device idle for a material share of its span."""

    idle_share: float
    span_us: float
    kernels: int
    median_kernel_us: float | None
    launch_bound: bool
    """Kernels too short to hide their launch: the host cannot keep the device fed."""
    replays_graphs: bool = False
    """The steps already replay CUDA/HIP graphs: the gaps are between them."""
    eager_steps: int = 0
    """Steps of a graph-replaying trace that no captured size held (they ran eagerly)."""


@dataclass(frozen=True)
class Padding:
    """Steps padded up to captured graph sizes: the waste, and the sizes that would cut it."""

    share: float
    waste_us: float
    steps: int
    sizes: tuple[int, ...]
    saved_us: tuple[float, ...]
    capture_us: float | None


@dataclass(frozen=True)
class Recompiled:
    """A compiled frame that recompiled for the shapes it met: how often, against the limit,
    the dims whose sizes changed, and the guards that failed (first of each)."""

    frame: str
    recompiles: int
    refused: int
    """Attempts refused at the recompile limit (those calls ran eagerly)."""
    attempts: int
    limit: int
    dims: tuple[Dim, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Regret:
    """A tuning run whose chosen config is materially slower than the best measured for its
    workload: the two, the regret with its interval, and what the remedy rests on (the budget
    that found the best, the run's cost model's ranking)."""

    task: str
    shape: str | None
    target: str | None
    plan_id: str
    """The run that chose."""
    trials: int
    chosen_us: float
    chosen_trial: int | None
    best_us: float
    best_plan: str | None
    best_trial: int | None
    best_config: str | None
    regret: float
    regret_low: float
    regret_high: float
    repeats: int
    budget: int | None
    """The trials the best run needed to come within 1% of its own best (its whole run when
    it never did): the budget a retune names."""
    cost_model: str | None
    pairwise_accuracy: float | None
    pairwise_low: float | None
    pairwise_high: float | None
    remedy: RegretRemedy


ActionParams = (
    TailShare
    | Queueing
    | CoreImbalance
    | Fallback
    | Inaccuracy
    | Overhead
    | GainDecision
    | Drift
    | Regressed
    | Blocking
    | MissingSide
    | MissingField
    | Consistency
    | Mismatch
    | Quality
    | Headroom
    | Idle
    | Padding
    | Recompiled
    | Regret
)
"""What an action states, by its kind."""

KIND_PARAMS: dict[ActionKind, tuple[type, ...]] = {
    ActionKind.QUEUEING: (Queueing,),
    ActionKind.CORE_IMBALANCE: (CoreImbalance,),
    ActionKind.MAPPING_FALLBACK: (Fallback,),
    ActionKind.MEMORY_BURST: (TailShare,),
    ActionKind.MAPPING_INACCURACY: (Inaccuracy,),
    ActionKind.ADAPTATION_OVERHEAD: (Overhead,),
    ActionKind.SPECIALISE: (GainDecision,),
    ActionKind.CLOSE_THE_LOOP: (GainDecision,),
    ActionKind.COST_MODEL_DRIFT: (Drift,),
    ActionKind.LATENCY_REGRESSION: (Regressed,),
    ActionKind.ADAPTATION_BLOCKING: (Blocking,),
    ActionKind.OBSERVABILITY: (MissingSide, MissingField, Consistency),
    ActionKind.ENVIRONMENT_MISMATCH: (Mismatch,),
    ActionKind.PRECISION_WITHOUT_QUALITY: (Quality,),
    ActionKind.ROOFLINE_HEADROOM: (Headroom,),
    ActionKind.DEVICE_IDLE: (Idle,),
    ActionKind.GRAPH_PADDING: (Padding,),
    ActionKind.DYNAMIC_SHAPES: (Recompiled,),
    ActionKind.TUNING_REGRET: (Regret,),
}
"""The params each kind of action carries (a test holds every action to it)."""

_BY_NAME: dict[str, type] = {t.__name__: t for t in typing.get_args(ActionParams)}


def encode(p: ActionParams) -> str:
    """Params as the history stores them: JSON naming their type (facts, not words)."""
    return json.dumps({"type": type(p).__name__, **msgspec.to_builtins(p)}, sort_keys=True)


def decode(text: str | None) -> ActionParams | None:
    """Params back from the history (None: a night recorded before params were stored, or a
    record that no longer reads as its type)."""
    if not text:
        return None
    try:
        data = json.loads(text)
        kind = _BY_NAME[data.pop("type")]
        params: ActionParams = msgspec.convert(data, kind)
    except (ValueError, KeyError, TypeError, AttributeError, msgspec.ValidationError):
        return None
    return params
