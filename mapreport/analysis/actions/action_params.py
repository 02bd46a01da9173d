"""What an action states, typed: each kind of action (or each finding of a kind) states its
figures in a frozen dataclass deriving from `ActionParams`, declared beside the code that builds
the action (the kinds `actions` builds have theirs here), so every place that reads a figure is
checked by mypy and a renamed figure fails there instead of at run time. A params class names
the kinds that state it and the role owning each (`OWNERS`), and states its impact where its
own figures hold it: a new kind is its enum member, this declaration and its builder, its title
beside the section that shows it (docs/architecture.md, "A new action kind")."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

from mapreport.core.kinds import ActionKind, BlockingRemedy, ImpactUnit, OwnerRole


class Impact(msgspec.Struct, frozen=True):
    """An action's impact in its unit; `share`: a device time as a share of the trace's."""

    unit: ImpactUnit
    value: float | None = None
    share: float | None = None


class ActionParams:
    """The figures an action states: the base of every kind's params. Each subclass is
    registered by its name, which the history stores with its fields (`encode`, `decode`)."""

    OWNERS: ClassVar[Mapping[ActionKind, OwnerRole]] = {}
    """The kinds of action that state these params, and the role that owns each (the class
    keyword `owners`; the blocking action's remedy may name another: `actions.REMEDY_OWNERS`)."""
    REGISTERED: ClassVar[dict[str, type[ActionParams]]] = {}
    """Every params class by its name (the kinds' modules import with `actions`)."""

    def __init_subclass__(cls, owners: Mapping[ActionKind, OwnerRole], **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.OWNERS = owners
        ActionParams.REGISTERED[cls.__name__] = cls

    def impact(self) -> Impact | None:
        """The impact where these figures alone hold it (a device time, a share); None: the
        slice's figures decide it (`steps.impact.action_impact`)."""
        return None


OBSERVED: Mapping[ActionKind, OwnerRole] = {
    ActionKind.OBSERVABILITY: OwnerRole.OBSERVABILITY_ENGINEER
}
"""A missing record or a disagreement between records: the observability engineer's."""


@dataclass(frozen=True)
class TailShare(ActionParams, owners={ActionKind.MEMORY_BURST: OwnerRole.COMPILER_LEAD}):
    """A tail driver's action (memory burst): the driver's share of the shape's tail."""

    share: float | None


@dataclass(frozen=True)
class Queueing(ActionParams, owners={ActionKind.QUEUEING: OwnerRole.MODEL_SERVING_ARCHITECT}):
    """Queueing drives the tail: its share and the queue wait's p95 against its p50."""

    share: float | None
    queue_p95_us: float | None
    queue_p50_us: float | None


@dataclass(frozen=True)
class CoreImbalance(ActionParams, owners={ActionKind.CORE_IMBALANCE: OwnerRole.RUNTIME_LEAD}):
    """A slow core drives the tail: its share, the slowest core and how much slower it is."""

    share: float | None
    core: int | None
    slowdown: float | None


@dataclass(frozen=True)
class Fallback(ActionParams, owners={ActionKind.MAPPING_FALLBACK: OwnerRole.COMPILER_LEAD}):
    """The generic fallback path drives the tail: how many requests ran it, whether a bucket
    holds the shape, and the adapted mapping's net gain where it is significant."""

    share: float | None
    n_fallback: int
    n: int
    covered: bool
    net_gain_p50: float | None


@dataclass(frozen=True)
class Inaccuracy(ActionParams, owners={ActionKind.MAPPING_INACCURACY: OwnerRole.COMPILER_LEAD}):
    """The cost model is wrong and adaptation does not recover it."""

    predicted_us: float | None
    measured_us: float | None
    signed_error: float | None


@dataclass(frozen=True)
class Overhead(ActionParams, owners={ActionKind.ADAPTATION_OVERHEAD: OwnerRole.RUNTIME_LEAD}):
    """Adaptation costs more than it gains."""

    cost_per_request_us: float | None
    net_gain_p50: float | None


@dataclass(frozen=True)
class GainDecision(
    ActionParams,
    owners={
        ActionKind.SPECIALISE: OwnerRole.COMPILER_LEAD,
        ActionKind.CLOSE_THE_LOOP: OwnerRole.COMPILER_LEAD,
    },
):
    """Specialise or close the loop: the prediction's error, the adapted mapping's net gain,
    and (closing the loop) whether a bucket holds the shape."""

    signed_error: float | None
    net_gain_p50: float | None
    covered: bool | None = None


@dataclass(frozen=True)
class Drift(ActionParams, owners={ActionKind.COST_MODEL_DRIFT: OwnerRole.COMPILER_LEAD}):
    """The signed error moved from the plan's first nights with the plan unchanged."""

    plan_id: str | None
    baseline: float
    baseline_nights: int
    first_night: str
    signed_error: float | None
    drift: float


@dataclass(frozen=True)
class Regressed(ActionParams, owners={ActionKind.LATENCY_REGRESSION: OwnerRole.RUNTIME_LEAD}):
    """A shape's p95 rose beyond its bootstrap CI against an earlier night."""

    night: str
    before_us: float
    now_us: float
    change: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Blocking(ActionParams, owners={ActionKind.ADAPTATION_BLOCKING: OwnerRole.RUNTIME_LEAD}):
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


class Dim(msgspec.Struct, frozen=True):
    """One dim of one compiled input and the sizes it took."""

    tensor: str
    dim: int
    low: int
    high: int


@dataclass(frozen=True)
class MissingSide(ActionParams, owners=OBSERVED):
    """An environment record is missing on one side ("compile", "runtime")."""

    side: str


@dataclass(frozen=True)
class MissingField(ActionParams, owners=OBSERVED):
    """A request field the tail attribution needs is not recorded."""

    field: str


@dataclass(frozen=True)
class Consistency(ActionParams, owners=OBSERVED):
    """The records and the server's counters disagree on a mean over the same window."""

    consistency: str
    records_us: float
    metrics_us: float
    difference: float
    tolerance: float


@dataclass(frozen=True)
class Mismatch(ActionParams, owners={ActionKind.ENVIRONMENT_MISMATCH: OwnerRole.RUNTIME_LEAD}):
    """Environment keys whose values differ: (key, compile-side values, runtime-side values)."""

    mismatches: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]


@dataclass(frozen=True)
class Quality(
    ActionParams, owners={ActionKind.PRECISION_WITHOUT_QUALITY: OwnerRole.MODEL_SERVING_ARCHITECT}
):
    """A precision change without quality evidence."""

    precision: str


def kind_params() -> dict[ActionKind, tuple[type[ActionParams], ...]]:
    """The params each kind of action states (a test holds every action to them)."""
    found: dict[ActionKind, tuple[type[ActionParams], ...]] = {}
    for params in ActionParams.REGISTERED.values():
        for kind in params.OWNERS:
            found[kind] = (*found.get(kind, ()), params)
    return found


def owner(kind: ActionKind) -> OwnerRole:
    """The role that owns a kind of action (as the params stating it declare)."""
    return next(p.OWNERS[kind] for p in ActionParams.REGISTERED.values() if kind in p.OWNERS)


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
        kind = ActionParams.REGISTERED[data.pop("type")]
        params: ActionParams = msgspec.convert(data, kind)
    except (ValueError, KeyError, TypeError, AttributeError, msgspec.ValidationError):
        return None
    return params
