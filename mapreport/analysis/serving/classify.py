"""The bottleneck class of a shape, with the evidence that decided it."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mapreport.analysis.base.common import Evidence, Interval, Thresholds
from mapreport.analysis.base.stats import wilson_interval
from mapreport.analysis.mapping.accuracy import ShapeAccuracy
from mapreport.analysis.serving.adaptation import ShapeGain
from mapreport.analysis.serving.tail import DRIVERS, TAIL_SHARE, TailDrivers
from mapreport.core.kinds import AccuracyState, BottleneckClass, ClassBasis, Driver, GainState

DECIDING_SHARE = 0.4
"""The largest tail driver decides the class only from this share of the excess up."""


class ShapeClass(msgspec.Struct, frozen=True):
    """One shape's primary class, the rule that decided it and the evidence behind it."""

    cls: BottleneckClass
    basis: ClassBasis
    evidence: Evidence | None = None
    top: Driver | None = None
    """The largest tail driver, when the tail was read."""
    runner_up: Driver | None = None
    """The driver whose CI reaches the largest one's (a tie)."""


def read_tail(tail: TailDrivers, sources: tuple[str, ...]) -> ShapeClass:
    """The class a material tail gives: its largest driver when its share is >= 0.4, its CI
    excludes zero and no other driver's CI reaches it; else insufficient evidence, saying
    which rule held it back. The slice's pooled tail is read by the same rule."""
    ranked = sorted(
        ((tail.shares.get(d, 0.0), d) for d in DRIVERS if d != Driver.RESIDUAL), reverse=True
    )
    (top_share, top), (second_share, second) = ranked[0], ranked[1]
    ci = tail.share_ci.get(top)
    ev = Evidence(f"tail_share.{top}", top_share, tail.n_tail, ci, sources)
    if top_share < DECIDING_SHARE:
        return ShapeClass(
            BottleneckClass.INSUFFICIENT_EVIDENCE, ClassBasis.NO_DRIVER_DECIDES, ev, top
        )
    if ci is None or not ci.excludes_zero():  # large, but on too few tail requests
        return ShapeClass(BottleneckClass.INSUFFICIENT_EVIDENCE, ClassBasis.WEAK_EVIDENCE, ev, top)
    second_ci = tail.share_ci.get(second)
    if second_ci is not None and second_share > 0 and second_ci.high >= ci.low:
        return ShapeClass(BottleneckClass.INSUFFICIENT_EVIDENCE, ClassBasis.TIE, ev, top, second)
    return ShapeClass(BottleneckClass(top.value), ClassBasis.DRIVER_DECIDES, ev, top)


def read_blocked_share(blocked: int, n: int, sources: tuple[str, ...]) -> ShapeClass | None:
    """A slice whose requests record no arrival has no latency tail; blocking behind
    adaptation decides it when the blocked requests' share has a 95% Wilson interval above
    TAIL_SHARE (more requests waited behind adaptation than a p95 tail holds). None without
    blocked requests."""
    if not blocked or not n:
        return None
    ev = Evidence("blocked_share", blocked / n, n, Interval(*wilson_interval(blocked, n)), sources)
    assert ev.ci is not None
    cls = (
        BottleneckClass.BLOCKED_BEHIND_ADAPTATION
        if ev.ci.low > TAIL_SHARE
        else BottleneckClass.INSUFFICIENT_EVIDENCE
    )
    return ShapeClass(cls, ClassBasis.BLOCKED_SHARE, ev, Driver.BLOCKED_BEHIND_ADAPTATION)


def blocked_evidence(c: ShapeClass | None) -> Evidence | None:
    """The blocked share's evidence where it decided the slice's tail (no latency recorded):
    what the tail judgement rests on then (None: it did not decide)."""
    decided = (
        c is not None
        and c.basis is ClassBasis.BLOCKED_SHARE
        and c.cls is BottleneckClass.BLOCKED_BEHIND_ADAPTATION
    )
    return c.evidence if decided and c is not None else None


def classify(
    n_static: int,
    acc: ShapeAccuracy,
    gain: ShapeGain,
    tail: TailDrivers | None,
    sources: Sequence[str],
    th: Thresholds,
    latency_measured: bool = True,
) -> ShapeClass:
    """One primary class per shape: the tail first, then mapping accuracy, then adaptation.

    - no latency (the requests record no arrival) or no tail drivers (fewer than
      `min_samples_p95` requests): insufficient_evidence;
    - a material tail: the largest driver decides when its share is >= 0.4, its CI excludes
      zero and no other driver's CI reaches it (else the tie or the weak evidence is stated and
      the class is insufficient_evidence);
    - an immaterial tail (p95 <= tail_ratio x p50, within SLA) gets no tail class: then an
      inaccurate prediction (APE > tolerance, CI of the error excluding zero) without a
      significant gain is mapping_inaccuracy, and a significant net loss from adaptation is
      adaptation_overhead; otherwise none.
    """
    src = tuple(sources)
    if not latency_measured:
        return ShapeClass(BottleneckClass.INSUFFICIENT_EVIDENCE, ClassBasis.LATENCY_NOT_MEASURED)
    if tail is None:
        return ShapeClass(BottleneckClass.INSUFFICIENT_EVIDENCE, ClassBasis.TOO_FEW_REQUESTS)
    if tail.material:
        return read_tail(tail, src)
    if (
        acc.state == AccuracyState.INACCURATE
        and gain.state != GainState.SIGNIFICANT
        and acc.signed_error_ci is not None
        and acc.signed_error_ci.excludes_zero()
    ):
        ev = Evidence("ape", acc.ape, n_static, acc.signed_error_ci, src)
        return ShapeClass(BottleneckClass.MAPPING_INACCURACY, ClassBasis.PREDICTION_OFF, ev)
    if gain.state == GainState.REGRESSION and gain.net_gain_p50_ci is not None:
        ev = Evidence("net_gain_p50", gain.net_gain_p50, gain.n_adapted, gain.net_gain_p50_ci, src)
        return ShapeClass(BottleneckClass.ADAPTATION_OVERHEAD, ClassBasis.ADAPTATION_COSTS, ev)
    return ShapeClass(BottleneckClass.NONE, ClassBasis.NOTHING_FOUND)
