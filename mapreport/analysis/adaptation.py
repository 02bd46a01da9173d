"""Runtime adaptation gain: adapted versus baseline compute, its bootstrap CI, its cost."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mapreport.analysis.results import GainState, Interval, Thresholds
from mapreport.analysis.stats import FloatArray, bootstrap_ratio_gain, seed_for


@dataclass(frozen=True)
class ShapeGain:
    """The adaptation figures of one shape."""

    baseline_variant: str | None
    baseline_p50_us: float | None
    adapted_p50_us: float | None
    gain_p50: float | None
    gain_p50_ci: Interval | None
    gain_p95: float | None
    gain_p95_ci: Interval | None
    cost_per_request_us: float | None
    net_gain_p50: float | None
    net_gain_p50_ci: Interval | None
    state: GainState
    reason: str


def shape_gain(
    key: tuple[str, str, str],
    covered: bool,
    samples: dict[str, FloatArray],
    cost_us: float,
    th: Thresholds,
) -> ShapeGain:
    """Gain on p50 and p95 of adapted over the baseline (static when covered, else fallback).

    `samples` maps a plan variant to the shape's ok compute times. The adaptation cost is
    spread over the adapted requests and charged against the p50 gain (net gain). A gain that
    cannot be measured is None with a reason, never zero.
    """
    base_variant = "static" if covered else "fallback"
    adapted = samples.get("adapted")
    base = samples.get(base_variant)
    na = 0 if adapted is None else len(adapted)
    nb = 0 if base is None else len(base)
    none = ShapeGain(
        base_variant if nb else None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        "not_measured",
        "",
    )
    if na == 0:
        return _with(none, "no adapted requests")
    if nb == 0:
        return _with(none, f"no {base_variant} requests to compare with")
    assert adapted is not None
    assert base is not None
    if na < th.min_samples or nb < th.min_samples:
        return _with(
            none, f"too few samples: {na} adapted, {nb} {base_variant} (need {th.min_samples})"
        )
    seed = seed_for(th.seed, *key)
    cost_per = cost_us / na
    g50, lo50, hi50 = bootstrap_ratio_gain(adapted, base, 0.5, th.bootstrap_resamples, seed)
    net, nlo, nhi = bootstrap_ratio_gain(
        adapted, base, 0.5, th.bootstrap_resamples, seed, offset=cost_per
    )
    g95 = ci95 = None
    if min(na, nb) >= th.min_samples_p95:
        g95, lo95, hi95 = bootstrap_ratio_gain(
            adapted, base, 0.95, th.bootstrap_resamples, seed + 1
        )
        ci95 = Interval(lo95, hi95)
    state: GainState = "significant" if nlo > 0 else "regression" if nhi < 0 else "not_significant"
    reason = f"net p50 gain {net:+.1%} (95% CI {nlo:+.1%} to {nhi:+.1%}), n={na} vs {nb}"
    return ShapeGain(
        baseline_variant=base_variant,
        baseline_p50_us=float(_median(base)),
        adapted_p50_us=float(_median(adapted)),
        gain_p50=g50,
        gain_p50_ci=Interval(lo50, hi50),
        gain_p95=g95,
        gain_p95_ci=ci95,
        cost_per_request_us=cost_per,
        net_gain_p50=net,
        net_gain_p50_ci=Interval(nlo, nhi),
        state=state,
        reason=reason,
    )


def _median(x: FloatArray) -> float:
    return float(np.quantile(x, 0.5))


def _with(g: ShapeGain, reason: str) -> ShapeGain:
    return replace(g, reason=f"gain not measured: {reason}")
