"""The bottleneck class of a shape, with the evidence that decided it."""

from __future__ import annotations

from typing import cast

from mapreport.analysis.results import (
    DRIVERS,
    BottleneckClass,
    Evidence,
    ShapeMetrics,
    TailDrivers,
    Thresholds,
)

DECIDING_SHARE = 0.4
"""The largest tail driver decides the class only from this share of the excess up."""
TAIL_CLASSES: tuple[BottleneckClass, ...] = (
    "queueing",
    "mapping_fallback",
    "memory_burst",
    "core_imbalance",
)


def classify(
    m: ShapeMetrics, tail: TailDrivers | None, th: Thresholds
) -> tuple[BottleneckClass, Evidence | None, str]:
    """One primary class per shape: the tail first, then mapping accuracy, then adaptation.

    - fewer than `min_samples_p95` requests: insufficient_evidence;
    - a material tail: the largest driver decides when its share is >= 0.4, its CI excludes
      zero and no other driver's CI reaches it (else the tie or the weak evidence is stated and
      the class is insufficient_evidence);
    - an immaterial tail (p95 <= tail_ratio x p50, within SLA) gets no tail class: then an
      inaccurate prediction (APE > tolerance, CI of the error excluding zero) without a
      significant gain is mapping_inaccuracy, and a significant net loss from adaptation is
      adaptation_overhead; otherwise none.
    """
    if tail is None:
        return (
            "insufficient_evidence",
            None,
            (f"n = {m.n} < {th.min_samples_p95}: too few requests to read the tail"),
        )
    if tail.material:
        ranked = sorted(
            ((tail.shares.get(d, 0.0), d) for d in DRIVERS if d != "residual"), reverse=True
        )
        (top_share, top), (second_share, second) = ranked[0], ranked[1]
        ci = tail.share_ci.get(top)
        ev = Evidence(
            f"tail_share.{top}",
            top_share,
            tail.n_tail,
            ci,
            m.sources,
            f"share of the excess of {tail.n_tail} requests above p95",
        )
        if top_share < DECIDING_SHARE or ci is None or not ci.excludes_zero():
            residual = tail.shares.get("residual", 0.0)
            missing = (
                f"; not measurable without telemetry: {', '.join(tail.unmeasured)}"
                if tail.unmeasured
                else ""
            )
            return (
                "insufficient_evidence",
                ev,
                (
                    f"tail is material (p95 {tail.p95_us:.0f} µs vs p50 {tail.p50_us:.0f} µs) "
                    f"but no driver reaches {DECIDING_SHARE:.0%} (largest {top} "
                    f"{top_share:.0%}, residual {residual:.0%}){missing}"
                ),
            )
        second_ci = tail.share_ci.get(second)
        if second_ci is not None and second_share > 0 and second_ci.high >= ci.low:
            return (
                "insufficient_evidence",
                ev,
                (
                    f"tie: {top} {top_share:.0%} and {second} {second_share:.0%} have overlapping "
                    "confidence intervals"
                ),
            )
        cls = cast(BottleneckClass, top)
        return cls, ev, f"{top} drives {top_share:.0%} of the tail excess"
    if (
        m.accuracy == "inaccurate"
        and m.gain != "significant"
        and m.signed_error_ci is not None
        and m.signed_error_ci.excludes_zero()
    ):
        ev = Evidence(
            "ape", m.ape, m.n_static, m.signed_error_ci, m.sources, "CI is of the signed error"
        )
        return (
            "mapping_inaccuracy",
            ev,
            (
                f"prediction off by {m.signed_error:+.0%} of measured, and adaptation does not "
                "make up for it"
            ),
        )
    if m.gain == "regression" and m.net_gain_p50_ci is not None:
        ev = Evidence("net_gain_p50", m.net_gain_p50, m.n_adapted, m.net_gain_p50_ci, m.sources)
        return (
            "adaptation_overhead",
            ev,
            (f"adaptation costs more than it gains: net p50 gain {m.net_gain_p50:+.1%}"),
        )
    return "none", None, "tail immaterial and no mapping or adaptation problem measured"
