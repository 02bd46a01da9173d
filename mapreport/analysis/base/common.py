"""The small value types every metric family shares: thresholds, what a slice is reviewed
against, intervals, percentiles, evidence and the files a number rests on."""

from __future__ import annotations

from typing import Literal, NamedTuple

import msgspec

from mapreport.core.devices import DeviceConfig
from mapreport.core.kinds import OwnerRole, RegressionKind

SLICE_WIDE = "*"
"""The `shape` of an action, class or pack that concerns the whole slice."""

TailQuantile = Literal["p95", "p99"]


class Thresholds(msgspec.Struct, frozen=True):
    """The evidence thresholds of METRICS.md, all configurable."""

    tolerance: float = 0.15
    min_samples: int = 10
    min_samples_p95: int = 20
    min_samples_p99: int = 100
    bootstrap_resamples: int = 2000
    seed: int = 20261129
    tail_ratio: float = 1.5


class QualityGuard(NamedTuple):
    """A precision change's quality guardrail: the first quality record of that precision
    (metric, baseline, value, max_drop), or the precision alone when it has none."""

    precision: str
    metric: str | None = None
    baseline: float | None = None
    value: float | None = None
    max_drop: float | None = None


class Interval(NamedTuple):
    """A 95% confidence interval (a pair: findings.json states it as [low, high])."""

    low: float
    high: float

    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        return self.low > 0 or self.high < 0


class Review(msgspec.Struct, frozen=True):
    """What a slice is reviewed against, from the run configuration: its description, SLA
    targets, the owners and the sign-offs."""

    sla_p95_us: float | None = None
    sla_p99_us: float | None = None
    owners: dict[OwnerRole, str] = msgspec.field(default_factory=dict)
    signoffs: dict[OwnerRole, str] = msgspec.field(default_factory=dict)
    description: str = ""
    sla_from: str | None = None
    """Where the SLA came from when the configuration sets none (an MLPerf run's target)."""
    device: DeviceConfig | None = None
    """The configuration's `[device]`: the roofline's limits where the trace's device is not
    in the declared table, or figures that replace the table's."""

    def sla(self, q: TailQuantile) -> float | None:
        """The SLA target of one tail quantile (None when none is configured)."""
        return self.sla_p99_us if q == "p99" else self.sla_p95_us


class Percentiles(msgspec.Struct, frozen=True):
    """p50/p95/p99 of one measured quantity with its sample count."""

    n: int
    p50: float | None
    p95: float | None
    p99: float | None

    def tail(self, min_p99: int) -> tuple[TailQuantile, float | None]:
        """The tail quantile these samples are evidence for, with its value: p99 from
        `min_p99` samples, else p95."""
        return ("p99", self.p99) if self.n >= min_p99 else ("p95", self.p95)


def within(value: float | None, target: float | None) -> bool | None:
    """The one comparison of a measured value with its target (an SLA, a load generator's
    goal): True when it is at most the target; None when either is unknown or no target is
    set (a target of 0 is none)."""
    if not target or value is None:
        return None
    return value <= target


class SlaCheck(msgspec.Struct, frozen=True):
    """One SLA quantile of a slice judged once: its target, its value, whether the samples
    are evidence for that quantile (p99 needs `min_samples_p99`), and whether it is met."""

    quantile: TailQuantile
    target_us: float | None
    value_us: float | None
    evidence: bool
    """The slice has the samples to state this quantile (METRICS.md's evidence rule)."""
    met: bool | None
    """Within its target (None: no target, or no value)."""

    @property
    def judged(self) -> bool | None:
        """Met or missed as a judgement the slice stands by: None without a target, a value
        or the evidence (a p99 of 40 requests misses nothing)."""
        return self.met if self.evidence else None

    @property
    def excess(self) -> float | None:
        """How far the value is above (positive) or below its target, as a share of it."""
        if not self.target_us or self.value_us is None:
            return None
        return self.value_us / self.target_us - 1

    @property
    def headroom(self) -> float | None:
        """How far the value is below its target, as a share of it: positive with room to
        spare, negative when missed (the one sign every rendering of headroom uses)."""
        excess = self.excess
        return None if excess is None else -excess


def sla_checks(latency: Percentiles, review: Review, th: Thresholds) -> tuple[SlaCheck, ...]:
    """p95 and p99 of a slice against their configured targets, each judged once here."""
    quantiles: tuple[tuple[TailQuantile, float | None, float | None, bool], ...] = (
        ("p95", latency.p95, review.sla_p95_us, True),
        ("p99", latency.p99, review.sla_p99_us, latency.n >= th.min_samples_p99),
    )
    return tuple(
        SlaCheck(q, target or None, value, evident, within(value, target))
        for q, value, target, evident in quantiles
    )


class Evidence(msgspec.Struct, frozen=True):
    """What a class or an action rests on, so it can be reproduced."""

    metric: str
    value: float | None
    n: int
    """Requests (or op calls) of what the action names: its own shape's, never pooled."""
    ci: Interval | None
    sources: tuple[str, ...]
    pooled_n: int = 0
    """Requests of other shapes the figure pools (a gain compared with the other path on
    comparable shapes); 0 when the figure is the shape's own."""


class SourceFile(msgspec.Struct, frozen=True):
    """An input file a slice's numbers rest on."""

    source_id: str
    path: str
    format: str
    rows: dict[str, int]
    rejected: int
    rejections: tuple[dict[str, object], ...] = ()
    """The first rejected records (line, field, reason); all of them are in `quarantine`."""


class Regression(msgspec.Struct, frozen=True):
    """A shape's p95 latency change against an earlier run, with its bootstrap CI."""

    shape: str
    against_run_id: str
    against_run_date: str
    before_us: float
    now_us: float
    change: float
    ci: Interval
    kind: RegressionKind
    reference_quantiles: tuple[float, ...] = ()
    """The reference night's 101 latency quantiles (what the change is resampled from)."""
    reference_n: int = 0
