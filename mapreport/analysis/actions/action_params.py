"""What an action states, typed: each kind of action (or each finding of a kind) states its
figures in a frozen Struct deriving from `ActionParams`, declared beside the code that builds
the action (the kinds `actions` builds have theirs here), so every place that reads a figure is
checked by mypy and a renamed figure fails there instead of at run time. A params class names
the kinds that state it and the role owning each (`OWNERS`), and states its impact where its
own figures hold it: a new kind is its enum member, this declaration and its builder, its title
beside the section that shows it (docs/architecture.md, "A new action kind")."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import msgspec

from mapreport.core.kinds import ActionKind, BlockingRemedy, ImpactUnit, OwnerRole


class Impact(msgspec.Struct, frozen=True):
    """An action's impact in its unit; `share`: a device time as a share of the trace's."""

    unit: ImpactUnit
    value: float | None = None
    share: float | None = None


def owners(roles: Mapping[ActionKind, OwnerRole]) -> Mapping[ActionKind, OwnerRole]:
    """A params class's `OWNERS`: the kinds of action that state it and the role owning each,
    read-only (a class attribute every instance shares)."""
    return MappingProxyType(dict(roles))


class ActionParams(msgspec.Struct, frozen=True):
    """The figures an action states: the base of every kind's params. Each subclass is
    registered by its name, which the history stores with its fields (`encode`, `decode`)."""

    OWNERS: ClassVar[Mapping[ActionKind, OwnerRole]] = {}
    """The kinds of action that state these params, and the role that owns each (each
    subclass sets it; the blocking action's remedy may name another: `actions.REMEDY_OWNERS`)."""
    REGISTERED: ClassVar[dict[str, type[ActionParams]]] = {}
    """Every params class by its name (the kinds' modules import with `actions`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.OWNERS:
            raise TypeError(f"{cls.__name__} names no kind of action it states (OWNERS)")
        ActionParams.REGISTERED[cls.__name__] = cls

    def impact(self) -> Impact | None:
        """The impact where these figures alone hold it (a device time, a share); None: the
        slice's figures decide it (`steps.impact.action_impact`)."""
        return None


OBSERVED = owners({ActionKind.OBSERVABILITY: OwnerRole.OBSERVABILITY_ENGINEER})
"""A missing record or a disagreement between records: the observability engineer's."""


class TailShare(ActionParams, frozen=True):
    """A tail driver's action (memory burst): the driver's share of the shape's tail."""

    OWNERS = owners({ActionKind.MEMORY_BURST: OwnerRole.COMPILER_LEAD})

    share: float | None


class Queueing(ActionParams, frozen=True):
    """Queueing drives the tail: its share and the queue wait's p95 against its p50."""

    OWNERS = owners({ActionKind.QUEUEING: OwnerRole.MODEL_SERVING_ARCHITECT})

    share: float | None
    queue_p95_us: float | None
    queue_p50_us: float | None


class CoreImbalance(ActionParams, frozen=True):
    """A slow core drives the tail: its share, the slowest core and how much slower it is."""

    OWNERS = owners({ActionKind.CORE_IMBALANCE: OwnerRole.RUNTIME_LEAD})

    share: float | None
    core: int | None
    slowdown: float | None


class Fallback(ActionParams, frozen=True):
    """The generic fallback path drives the tail: how many requests ran it, whether a bucket
    holds the shape, and the adapted mapping's net gain where it is significant."""

    OWNERS = owners({ActionKind.MAPPING_FALLBACK: OwnerRole.COMPILER_LEAD})

    share: float | None
    n_fallback: int
    n: int
    covered: bool
    net_gain_p50: float | None


class Inaccuracy(ActionParams, frozen=True):
    """The cost model is wrong and adaptation does not recover it."""

    OWNERS = owners({ActionKind.MAPPING_INACCURACY: OwnerRole.COMPILER_LEAD})

    predicted_us: float | None
    measured_us: float | None
    signed_error: float | None


class Overhead(ActionParams, frozen=True):
    """Adaptation costs more than it gains."""

    OWNERS = owners({ActionKind.ADAPTATION_OVERHEAD: OwnerRole.RUNTIME_LEAD})

    cost_per_request_us: float | None
    net_gain_p50: float | None


class GainDecision(ActionParams, frozen=True):
    """Specialise or close the loop: the prediction's error, the adapted mapping's net gain,
    and (closing the loop) whether a bucket holds the shape."""

    OWNERS = owners(
        {
            ActionKind.SPECIALISE: OwnerRole.COMPILER_LEAD,
            ActionKind.CLOSE_THE_LOOP: OwnerRole.COMPILER_LEAD,
        }
    )

    signed_error: float | None
    net_gain_p50: float | None
    covered: bool | None = None


class Drift(ActionParams, frozen=True):
    """The signed error moved from the plan's first nights with the plan unchanged."""

    OWNERS = owners({ActionKind.COST_MODEL_DRIFT: OwnerRole.COMPILER_LEAD})

    plan_id: str | None
    baseline: float
    baseline_nights: int
    first_night: str
    signed_error: float | None
    drift: float


class Regressed(ActionParams, frozen=True):
    """A shape's p95 rose beyond its bootstrap CI against an earlier night."""

    OWNERS = owners({ActionKind.LATENCY_REGRESSION: OwnerRole.RUNTIME_LEAD})

    night: str
    before_us: float
    now_us: float
    change: float
    ci_low: float
    ci_high: float


class Blocking(ActionParams, frozen=True):
    """Requests waited behind serving-time adaptation: what held the worker, for how long,
    who waited, and the remedy."""

    OWNERS = owners({ActionKind.ADAPTATION_BLOCKING: OwnerRole.RUNTIME_LEAD})

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


class MissingSide(ActionParams, frozen=True):
    """An environment record is missing on one side ("compile", "runtime")."""

    OWNERS = OBSERVED

    side: str


class MissingField(ActionParams, frozen=True):
    """A request field the tail attribution needs is not recorded."""

    OWNERS = OBSERVED

    field: str


class Consistency(ActionParams, frozen=True):
    """The records and the server's counters disagree on a mean over the same window."""

    OWNERS = OBSERVED

    consistency: str
    records_us: float
    metrics_us: float
    difference: float
    tolerance: float


class Mismatch(ActionParams, frozen=True):
    """Environment keys whose values differ: (key, compile-side values, runtime-side values)."""

    OWNERS = owners({ActionKind.ENVIRONMENT_MISMATCH: OwnerRole.RUNTIME_LEAD})

    mismatches: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]


class Quality(ActionParams, frozen=True):
    """A precision change without quality evidence."""

    OWNERS = owners({ActionKind.PRECISION_WITHOUT_QUALITY: OwnerRole.MODEL_SERVING_ARCHITECT})

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
