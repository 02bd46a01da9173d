"""Does the tuned time hold at runtime? (docs/metrics.md, "Transfer gap"). Per tuning run and
workload whose deployed kernel appears in the slice's per-op runtime rows at the tuned shape:
the time the tuner measured for its pick against the time that kernel took per call when the
model ran, as runtime / tuned with a bootstrap interval that resamples both sides. Reads the
canonical tables `tuning_trial`, `compile_plan` (the kernel each run deploys per workload) and
`op_exec`.

A runtime row is the deployed kernel's when its name is the kernel's, or ends in `::` and the
kernel's (a profiler names an ATen kernel by its namespace: Inductor's `_mkl_linear` runs as
`mkl::_mkl_linear`), and its shape is the tuned shape, or the tuned shape followed only by
scalar arguments (`;()`: a profiler records them, a tuner does not). A workload whose run holds
more than one plan row for its op and shape (one op tuned for two dtypes) is not joined: the
runtime rows' shapes cannot tell the two apart.

The rule (`judge`, docs/metrics.md "Did the compiler choose well?"): a ratio whose whole interval
lies beyond TRANSFER_TOLERANCE either way makes the ranking judgement at risk, since the regret
and the ranking rest on tuning-time measurements that did not predict production.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import msgspec
import numpy as np

from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.base.judgement import SEVERITY, Judgement
from mapreport.analysis.base.stats import CI_LEVEL, seed_for
from mapreport.analysis.tuning.ranking import Ranking, TuningChoice
from mapreport.analysis.tuning.ranking_metrics import FloatArray
from mapreport.core.connection import Connection
from mapreport.core.kinds import FigureUnit, JudgementFamily, Status, StatusReason

TRANSFER_TOLERANCE = 1.25
"""How far runtime / tuned may stray, either way (above 1.25 or below 1 / 1.25 = 0.8), before
the tuning-time measurement is taken not to predict production. It sits well above what the
same kernel's tuned and runtime times differ by on one machine (the real pair: 0.87-1.02, with
a tuning repeat 50% slow among them) and well below the 2.2x a single tuning on a loaded
machine was off by; and at 25% off, the tuning environment differs from production by five
times the regret the ranking calls material (MATERIAL_REGRET, 5%), so an order of configs
measured there need not hold where the model runs."""

_SCALARS = re.compile(r"(?:;\(\))+")
"""What may follow the tuned shape in a runtime row's: scalar arguments only."""

_PLANS = """
    SELECT plan_id, op, shape_bucket, kernel FROM compile_plan
    WHERE workload = $w AND slice = $s AND kernel IS NOT NULL
"""
_NAMES = """
    SELECT DISTINCT name FROM op_exec
    WHERE workload = $w AND slice = $s AND name IS NOT NULL AND dur_us > 0
    ORDER BY name
"""
_TUNED = """
    SELECT costs_us, mean_us FROM tuning_trial
    WHERE workload = $w AND slice = $s AND plan_id = $plan AND task_key = $key
      AND shape = $shape AND coalesce(target, '') = $target AND trial = $trial
      AND config_id = $config AND error IS NULL AND mean_us IS NOT NULL
    ORDER BY mean_us, source_id, line
    LIMIT 1
"""
"""The chosen trial's row: its run may hold two of one trial number and config (two logs of
one name), and the ranking chose the successful one of the least mean, then the first in file
and line order (`ranking.TRIAL_ORDER`)."""
_RUNTIME = """
    SELECT shape, dur_us, source_id FROM op_exec
    WHERE workload = $w AND slice = $s AND name = $name AND dur_us > 0
      AND (shape = $shape OR shape LIKE $shape || ';%')
    ORDER BY source_id, ts_us, line
"""


class TransferGap(msgspec.Struct, frozen=True):
    """One run's deployed kernel for one workload: its tuned time against its runtime."""

    plan_id: str
    task: str
    task_key: str
    shape: str
    kernel: str
    tuned_us: float
    """The mean of the repeats the tuner measured for its pick."""
    tuned_repeats: int
    runtime_us: float
    """The mean time per call of the kernel's runtime rows at the shape."""
    runtime_median_us: float
    calls: int
    ratio: float
    """runtime / tuned: above 1, the kernel ran slower than it was tuned at."""
    ratio_ci: Interval | None
    """Resampling the calls and the tuned repeats (None: one value each side)."""
    sources: tuple[str, ...]
    """The runtime files the calls come from."""
    target: str | None = None
    """The run's target, as the ranking's choice names it (with plan, task key and shape: its
    row in findings.json)."""

    @property
    def beyond(self) -> bool:
        """The whole interval lies beyond TRANSFER_TOLERANCE either way (the rule's figure; no
        interval, one value each side: not beyond, nothing says how far noise reaches)."""
        ci = self.ratio_ci
        return ci is not None and (ci.low > TRANSFER_TOLERANCE or ci.high < 1 / TRANSFER_TOLERANCE)


def transfer_gaps(
    con: Connection, workload: str, slice_: str, ranking: Ranking | None, th: Thresholds
) -> tuple[TransferGap, ...]:
    """The transfer gap of every run's pick whose kernel ran at its shape (pure over the
    tables; empty without a ranking or runtime rows of a deployed kernel)."""
    if ranking is None:
        return ()
    args = {"w": workload, "s": slice_}
    kernels: dict[tuple[str, str, str], list[str]] = {}
    for plan_id, op, shape, kernel in con.execute(_PLANS, args).fetchall():
        kernels.setdefault((plan_id, op, shape), []).append(kernel)
    ran: dict[str, list[str]] = {}  # a kernel's name -> the runtime names it runs under
    for (name,) in con.execute(_NAMES, args).fetchall():
        ran.setdefault(name.rsplit("::", 1)[-1], []).append(name)
    out = []
    for c in ranking.choices:
        if c.chosen_trial is None or c.shape is None:
            continue
        plans = kernels.get((c.plan_id, c.task, c.shape), [])
        if len(plans) != 1 or plans[0] not in ran:
            continue  # no deployed kernel, one that never ran, or two the shapes cannot split
        gap = _gap(con, args, c, (c.shape, c.chosen_trial), plans[0], ran[plans[0]], th)
        if gap is not None:
            out.append(gap)
    return tuple(out)


def _gap(
    con: Connection,
    args: dict[str, str],
    c: TuningChoice,
    at: tuple[str, int],
    kernel: str,
    names: list[str],
    th: Thresholds,
) -> TransferGap | None:
    """The gap of run `c`'s pick (`at`: its shape and trial) as `kernel` ran under `names`."""
    shape, trial = at
    tuned_row = con.execute(
        _TUNED,
        {
            **args,
            "plan": c.plan_id,
            "key": c.task_key,
            "shape": shape,
            "target": c.target or "",
            "trial": trial,
            "config": c.chosen_config,
        },
    ).fetchone()
    if tuned_row is None or tuned_row[1] is None:
        return None
    tuned = np.asarray(tuned_row[0] or [tuned_row[1]], dtype=np.float64)
    calls = [
        (dur, source)
        for name in names
        for ran, dur, source in con.execute(
            _RUNTIME, {**args, "name": name, "shape": shape}
        ).fetchall()
        if ran == shape or _SCALARS.fullmatch(ran[len(shape) :])
    ]
    if not calls:
        return None
    runtime = np.asarray([d for d, _ in calls], dtype=np.float64)
    seed = seed_for(th.seed, "transfer", c.plan_id, c.task_key, str(c.target), shape)
    return TransferGap(
        plan_id=c.plan_id,
        task=c.task,
        task_key=c.task_key,
        shape=shape,
        kernel=kernel,
        tuned_us=float(tuned.mean()),
        tuned_repeats=len(tuned),
        runtime_us=float(runtime.mean()),
        runtime_median_us=float(np.median(runtime)),
        calls=len(runtime),
        ratio=float(runtime.mean() / tuned.mean()),
        ratio_ci=_ratio_ci(runtime, tuned, th.bootstrap_resamples, seed),
        sources=tuple(sorted({s for _, s in calls})),
        target=c.target,
    )


def _ratio_ci(runtime: FloatArray, tuned: FloatArray, resamples: int, seed: int) -> Interval | None:
    """Resample the calls and the tuned repeats: the runtime mean over the tuned mean."""
    if len(runtime) < 2 and len(tuned) < 2:
        return None
    rng = np.random.default_rng(seed)
    top = runtime[rng.integers(0, len(runtime), size=(resamples, len(runtime)))].mean(axis=1)
    bottom = tuned[rng.integers(0, len(tuned), size=(resamples, len(tuned)))].mean(axis=1)
    tail = (1 - CI_LEVEL) / 2
    ratios = top / bottom
    return Interval(float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail)))


def judge(ranking: Judgement | None, gaps: Sequence[TransferGap]) -> Judgement | None:
    """The ranking judgement with its transfer gaps (docs/metrics.md, "Judgements"): at risk,
    for the reason `transfer_gap`, when a deployed kernel's runtime / tuned interval lies wholly
    beyond TRANSFER_TOLERANCE and the regret alone judged it healthy or could not judge it; a
    failing or at-risk regret keeps its own reason (the more direct evidence), and gaps within
    the tolerance leave the judgement as it is."""
    off = [g for g in gaps if g.beyond]
    if ranking is None or not off or SEVERITY[ranking.state] <= SEVERITY[Status.AT_RISK]:
        return ranking
    g = max(off, key=lambda g: (_distance(g), g.plan_id, g.shape))
    assert g.ratio_ci is not None  # beyond: it has an interval
    at = f" at {g.shape}" if g.shape else ""
    return Judgement(
        JudgementFamily.RANKING,
        Status.AT_RISK,
        StatusReason.TRANSFER_GAP,
        g.ratio,
        FigureUnit.RATIO,
        TRANSFER_TOLERANCE,
        g.calls,
        (g.ratio_ci.low, g.ratio_ci.high),
        f"{g.kernel} for {g.task}{at} ({g.plan_id})",
    )


def _distance(g: TransferGap) -> float:
    """How far the interval's nearer end lies from 1, in log terms (0.5x as far as 2x)."""
    assert g.ratio_ci is not None
    return min(abs(math.log(g.ratio_ci.low)), abs(math.log(g.ratio_ci.high)))
