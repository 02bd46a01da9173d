"""Why a shape got its decision: the words of its accuracy and gain, and of what kept either
from being measured. Facts from the analysis (`ShapeMetrics`), read once; nothing computed."""

from __future__ import annotations

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.mapping.accuracy import Accuracy
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.analysis.steps.decision import borrows
from mapreport.core.kinds import (
    AccuracyGap,
    AccuracyState,
    FallbackCause,
    GainBasis,
    GainGap,
    GainState,
    PredictionGap,
)
from mapreport.report.filters import duration, plural

GAIN_GAPS: dict[GainGap, str] = {
    GainGap.NO_ADAPTED: "no adapted requests",
    GainGap.NO_BASELINE: "no {variant} requests to compare with",
    GainGap.TOO_FEW: "too few samples: {na} adapted, {nb} {variant} (need {need})",
    GainGap.NO_OTHER_PATH: "it ran {ran} only, and no shape of comparable size (elements within "
    "2x, on both sides of it) ran {other} to compare with",
}

PATHS = (
    "the fallback path (eager, under torch.compile)",
    "a compiled mapping",
    "an adapted mapping (compiled while serving)",
)
"""The path an uncovered shape ran, and the other one, as the gain's words name them."""


def _paths(m: ShapeMetrics) -> tuple[str, str]:
    """(the path it ran, the other path) of a shape that ran one path only: its own requests
    say which (the gain's counts may hold the comparable shapes' pooled ones)."""
    fallback, compiled, adapted = PATHS
    return (fallback, compiled) if m.n_adapted == 0 else (adapted, fallback)


def gain_reason(m: ShapeMetrics, th: Thresholds) -> str:
    """Why a shape's gain is what it is (or why it is not measured)."""
    g = m.gain
    variant = "static" if m.covered else "fallback"
    if g.gap is not None:
        ran, other = _paths(m)
        gap = GAIN_GAPS[g.gap].format(
            variant=variant,
            na=g.n_adapted,
            nb=g.n_baseline,
            need=th.min_samples,
            ran=ran,
            other=other,
        )
        return f"gain not measured: {gap}"
    assert g.net_gain_p50 is not None
    assert g.net_gain_p50_ci is not None
    ci = g.net_gain_p50_ci
    said = (
        f"net p50 gain {g.net_gain_p50:+.1%} (95% CI {ci.low:+.1%} to {ci.high:+.1%}), "
        f"n={g.n_adapted} vs {g.n_baseline}"
    )
    if g.caused_wait_us:
        said += (
            f", net of its adaptation time and of the {duration(g.caused_wait_us)} of queue "
            "wait it held other requests in"
        )
    if g.basis != GainBasis.COMPARABLE_SHAPES:
        return said
    # one path ran this shape: say which path was borrowed, and from which shapes
    ran, other = _paths(m)
    return (
        f"{said}; it ran {ran} only, so {other} is measured on shapes of comparable "
        f"size ({', '.join(g.compared_shapes)}), per element"
    )


PREDICTION_GAPS: dict[PredictionGap, str] = {
    PredictionGap.PLAN_STATES_NONE: "the compile plan states no whole-model cost for this "
    "bucket (no __total__ and no per-op predictions): the per-operator section compares its "
    "mapping with measured times instead",
    PredictionGap.PLAN_NOT_EXPORTED: "no compile plan was exported for the plan that ran this "
    "shape, so there is no prediction to check (for torch.compile: Inductor logs its per-op "
    "estimates into TORCH_TRACE with torch._inductor.config.log_tlparse = True)",
    PredictionGap.COMPILER_LOGGED_NONE: "Inductor logged no runtime estimate for the graph "
    "that ran this shape (it logs them with torch._inductor.config.log_tlparse = True into "
    "TORCH_TRACE, and writes 0 ns, no estimate, for ops it cannot estimate, as on CPU): "
    "its mapping accuracy cannot be measured",
}
"""Why a covered shape has no prediction."""


PREDICTION_GAPS_SHORT: dict[PredictionGap, str] = {
    PredictionGap.PLAN_STATES_NONE: "the compile plan states no cost to check (TensorRT, for "
    "one, exports the chosen tactics, not their estimated cost)",
    PredictionGap.PLAN_NOT_EXPORTED: "the graphs that ran exported no compile plan",
    PredictionGap.COMPILER_LOGGED_NONE: "Inductor logged no runtime estimate (0 ns on CPU; "
    "torch._inductor.config.log_tlparse = True on a GPU run logs them)",
}
"""Why covered shapes have no prediction, in a few words (the slice's, not one shape's)."""


ACCURACY_GAPS: dict[AccuracyGap, str] = {
    AccuracyGap.NO_RUNS: "the compiler predicted {buckets} but no request ran on them: a "
    "profiler trace or request log of the same run adds the measured side",
    AccuracyGap.NO_PREDICTION: "{prediction_gap}",
    AccuracyGap.TOO_FEW_STATIC: "each predicted shape ran the plan as built fewer than "
    "{min_samples} times, too few to measure",
    AccuracyGap.NONE_COVERED: "no request's shape fell in a compiled bucket, so no prediction "
    "applies",
}
"""Why no shape's prediction was checked."""


def accuracy_gap(a: Accuracy, min_samples: int) -> str:
    """Why no shape's prediction was checked, in a few words ('' when one was, or nothing
    could be)."""
    if a.gap is None:
        return ""
    why = a.prediction_gap or PredictionGap.PLAN_STATES_NONE
    return ACCURACY_GAPS[a.gap].format(
        buckets=plural(a.predicted_buckets, "compiled bucket"),
        prediction_gap=PREDICTION_GAPS_SHORT[why],
        min_samples=min_samples,
    )


FALLBACK_CAUSES: dict[FallbackCause, str] = {
    FallbackCause.RECOMPILE_LIMIT: "its worker's compiler had reached its recompile limit, "
    "so every new shape ran eagerly (raise torch._dynamo.config.recompile_limit, or mark the "
    "varying dimension dynamic; compiling it in warm-up counts against the same limit)",
    FallbackCause.COMPILE_FAILED: "its compile failed (see the compile's fail_reason under "
    "“Compile cost per shape”)",
    FallbackCause.UNSTATED: "no compile record of its worker says why (a graph break or a "
    "skipped frame leaves none)",
}
"""Why a shape's requests ran eagerly under torch.compile."""


def fallback_reason(m: ShapeMetrics) -> str:
    """Why the shape's fallback requests ran eagerly ('' when it has none)."""
    if not m.n_fallback or m.fallback_cause is None:
        return ""
    cause = FALLBACK_CAUSES[m.fallback_cause]
    return f"{plural(m.n_fallback, 'request')} ran the fallback path: {cause}"


def decision_reason(m: ShapeMetrics, th: Thresholds) -> str:
    """Why a shape got its decision (or could not get one), and why it ran eagerly."""
    said = _decision_reason(m, th)
    eager = fallback_reason(m)
    return f"{said}; {eager}" if eager else said


def _decision_reason(m: ShapeMetrics, th: Thresholds) -> str:
    acc = m.accuracy.state
    if acc == AccuracyState.NOT_MEASURED:
        return "accuracy not measured: too few static requests"
    if acc == AccuracyState.NO_PREDICTION:
        return PREDICTION_GAPS[m.accuracy.prediction_gap or PredictionGap.PLAN_STATES_NONE]
    reason = gain_reason(m, th)
    if borrows(m.gain, m.n, th):
        return (
            f"{reason}; a figure pooled from other shapes acts on no shape with fewer than "
            f"{th.min_samples_p95} requests of its own (this one has {m.n}): record more of "
            "its requests to decide it"
        )
    if m.gain.state == GainState.NOT_MEASURED or acc == AccuracyState.ACCURATE:
        return reason
    miss = (
        "no compile bucket holds this shape"
        if acc == AccuracyState.UNCOVERED
        else "prediction outside tolerance"
    )
    return f"{miss}; {reason}"
