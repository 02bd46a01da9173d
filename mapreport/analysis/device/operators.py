"""Per-operator mapping: the compile plan's ops (layers, kernels, fused groups) joined by name
with the per-op times a runtime profile measured (METRICS.md, "per operator").

Where the plan states a per-op prediction the op gets the same signed error and APE as a shape;
where it states none (TensorRT exports the mapping, not a cost), the join still answers what a
reviewer of a mapping asks: which layers took the time, with which tactic and precision, how much
of the measured time the plan accounts for, and which runtime ops the plan never mentioned.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import msgspec

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.query import REQUESTS
from mapreport.core.connection import Connection
from mapreport.core.kinds import PredictionGap


class OpRow(msgspec.Struct, frozen=True):
    """One planned op joined with its measured per-op time."""

    plan_id: str
    op: str
    kernel: str | None
    precision: str | None
    fused_ops: int
    """Ops the plan fused into this one (`A + B + C` is 3)."""
    runs: int
    """Profiled executions behind the median."""
    measured_p50_us: float
    predicted_us: float | None
    signed_error: float | None
    ape: float | None
    time_share: float | None
    """Share of the slice's measured per-op time."""


class Operators(msgspec.Struct, frozen=True):
    """The per-op join of a compile plan with a runtime profile (METRICS.md, per operator)."""

    plans: tuple[str, ...]
    planned_ops: int
    measured_ops: int
    matched_ops: int
    matched_time_share: float | None
    """Share of measured per-op time spent in ops the plan names."""
    predicted_ops: int
    mape_time_weighted: float | None
    top_error: tuple[OpRow, ...]
    precision_time_share: dict[str, float]
    fused_time_share: float | None
    reformat_time_share: float | None
    """Share spent in layout/precision conversions the mapping inserted (TensorRT reformats)."""
    layer_sum_vs_compute: dict[str, tuple[float, float]]
    """Per plan: (sum of per-op medians, median end-to-end compute of its requests)."""
    unmapped: tuple[tuple[str, float, float], ...]
    """Runtime ops no plan names: (name, median us, time share), largest first."""
    unmapped_count: int
    unmeasured: tuple[str, ...]
    unmeasured_count: int
    rows: tuple[OpRow, ...]
    rows_total: int
    prediction_gap: PredictionGap | None = None
    """Why no op has a prediction (None: some have): a plan that states none, or a compiler
    (torch.compile's Inductor) that logged none."""

    @property
    def matched_time_low(self) -> bool:
        """The plan misses ops that matter: the ops it names hold under MATCHED_TIME_LOW of
        the measured op time."""
        share = self.matched_time_share
        return share is not None and share < MATCHED_TIME_LOW

    @property
    def reformat_high(self) -> bool:
        """Layout and precision conversions take over REFORMAT_HIGH of the op time."""
        return self.reformat_time_share is not None and self.reformat_time_share > REFORMAT_HIGH


MATCHED_TIME_LOW = 0.9
"""Below this share of measured op time the plan misses ops that matter."""
REFORMAT_HIGH = 0.05
"""Above this share of op time, layout/precision conversions are worth a look."""
TOP_OPS = 40
TOP_UNMAPPED = 10

_PLAN = """
    -- an op the plan lists in several buckets: the same pick on every run (any_value's was
    -- the engine's of the day)
    SELECT plan_id, op, min(kernel) AS kernel, min(precision) AS precision,
        min(fusion_group) AS fusion_group,
        -- a per-op time measured across shapes cannot be held against one bucket's prediction
        CASE WHEN count(DISTINCT shape_bucket) = 1 THEN favg(predicted_us) END AS predicted_us,
        min(prediction_source) AS source
    FROM compile_plan WHERE workload = $w AND slice = $s AND op <> '__total__'
    GROUP BY plan_id, op ORDER BY plan_id, op
"""
_MEASURED = """
    SELECT plan_id, name, category, count(*) AS n,
        sum(coalesce(TRY_CAST(json_extract(extra, '$.runs') AS BIGINT), 1)) AS runs,
        median(dur_us) AS p50, fsum(dur_us) AS total
    FROM op_exec WHERE workload = $w AND slice = $s
    -- ordered: the shares' total adds them in one order, whatever the engine's threads
    GROUP BY plan_id, name, category ORDER BY plan_id NULLS FIRST, name, category NULLS FIRST
"""


def _join(
    universe: list[tuple[Any, ...]],
    lookup: Callable[[str], list[tuple[Any, ...]]],
    total: float,
    th: Thresholds,
) -> tuple[list[OpRow], list[tuple[str, float, float]], set[tuple[str, str]]]:
    """Each measured op joined with the planned ops it stands for: the joined rows, the
    measured ops no plan names (name, p50, share) and the planned ops that were measured."""
    rows: list[OpRow] = []
    unmapped: list[tuple[str, float, float]] = []
    seen: set[tuple[str, str]] = set()
    for plan_id, name, _cat, _n, runs, p50, tot in universe:
        hits = [h for h in lookup(str(name)) if plan_id is None or h[0] == plan_id]
        share = float(tot) / total if total > 0 else None
        if not hits:
            unmapped.append((str(name), float(p50), share or 0.0))
            continue
        if share is not None:
            share /= len(hits)  # one measured op standing for several planned ones is split
        for pid, op, kernel, precision, fusion, predicted, _src in hits:
            seen.add((str(pid), str(op)))
            err = None
            if predicted is not None and p50 and int(runs) >= th.min_samples:
                err = (float(predicted) - float(p50)) / float(p50)
            rows.append(
                OpRow(
                    plan_id=str(pid),
                    op=str(op),
                    kernel=kernel,
                    precision=precision,
                    fused_ops=len(str(fusion).split(" + ")) if fusion else 1,
                    runs=int(runs),
                    measured_p50_us=float(p50),
                    predicted_us=None if predicted is None else float(predicted),
                    signed_error=err,
                    ape=None if err is None else abs(err),
                    time_share=share,
                )
            )
    return rows, unmapped, seen


def operators(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    compute_p50_by_plan: dict[str, float],
) -> Operators | None:
    """The per-op join of one slice, or None when it has no per-op plan or no per-op times.

    A runtime op joins a planned op of the same name (or whose kernel has that name), of the
    same plan when the profile names its plan (trtexec, torch.compile's regions), else of any
    plan of the slice. The measured universe is the profile rows of the slice's plans, or, for
    profiles that name no plan, the categories in which at least one name matched (so a
    profiler trace's CPU ops do not dilute its kernels' shares).
    """
    p = {"w": workload, "s": slice_}
    plan = con.execute(_PLAN, p).fetchall()
    measured = con.execute(_MEASURED, p).fetchall()
    if not plan or not measured:
        return None
    plans = sorted({str(r[0]) for r in plan})
    planned: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    by_kernel: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for r in plan:
        planned[str(r[1])].append(r)
        if r[2]:
            by_kernel[str(r[2])].append(r)

    def lookup(name: str) -> list[tuple[Any, ...]]:
        """Planned ops a runtime name stands for: the op itself, else the op whose kernel it
        is (profilers record kernel names)."""
        return planned.get(name) or by_kernel.get(name) or []

    matched_categories = {r[2] for r in measured if lookup(str(r[1]))}
    # a profile that attributes ops to the graphs that ran them (torch.compile's regions):
    # an op outside every graph ran eagerly, outside the plan, and is not held against it
    attributed = any(r[0] is not None and r[0] in plans for r in measured)
    universe = [
        r
        for r in measured
        if (r[0] is not None and r[0] in plans)
        or (r[0] is None and not attributed and r[2] in matched_categories)
    ]
    total = math.fsum(float(r[6]) for r in universe)
    rows, unmapped, seen = _join(universe, lookup, total, th)
    rows.sort(key=lambda r: (-(r.time_share or 0.0), r.op))
    matched_time = math.fsum(float(r[6]) for r in universe if lookup(str(r[1])))
    with_error = [r for r in rows if r.ape is not None]
    err_weight = math.fsum(r.measured_p50_us for r in with_error)
    by_precision: dict[str, float] = defaultdict(float)
    fused = reformat = 0.0
    per_plan_sum: dict[str, float] = defaultdict(float)
    for o in rows:
        by_precision[o.precision or "unknown"] += o.time_share or 0.0
        if o.fused_ops > 1:
            fused += o.time_share or 0.0
        if o.kernel == "Reformat" or o.op.startswith("Reformatting "):
            reformat += o.time_share or 0.0
        per_plan_sum[o.plan_id] += o.measured_p50_us
    overhead = {
        pid: (s, compute_p50_by_plan[pid])
        for pid, s in per_plan_sum.items()
        if compute_p50_by_plan.get(pid)
    }
    unmeasured = sorted({(str(r[0]), str(r[1])) for r in plan} - seen)
    return Operators(
        plans=tuple(plans),
        planned_ops=len({(str(r[0]), str(r[1])) for r in plan}),
        measured_ops=len(universe),
        matched_ops=len(seen),
        matched_time_share=matched_time / total if total > 0 else None,
        predicted_ops=sum(1 for r in rows if r.predicted_us is not None),
        mape_time_weighted=(
            math.fsum(r.ape * r.measured_p50_us for r in with_error if r.ape is not None)
            / err_weight
            if err_weight > 0
            else None
        ),
        top_error=tuple(
            sorted(
                with_error,
                key=lambda r: -abs((r.predicted_us or 0.0) - r.measured_p50_us),
            )[:5]
        ),
        precision_time_share=dict(sorted(by_precision.items(), key=lambda kv: -kv[1])),
        fused_time_share=fused if rows else None,
        reformat_time_share=reformat if rows else None,
        layer_sum_vs_compute=overhead,
        unmapped=tuple(sorted(unmapped, key=lambda u: -u[2])[:TOP_UNMAPPED]),
        unmapped_count=len(unmapped),
        unmeasured=tuple(f"{pid}: {op}" for pid, op in unmeasured[:TOP_UNMAPPED]),
        unmeasured_count=len(unmeasured),
        rows=tuple(rows[:TOP_OPS]),
        rows_total=len(rows),
        prediction_gap=None
        if any(r.predicted_us is not None for r in rows)
        else PredictionGap.COMPILER_LOGGED_NONE
        if _compiled_graphs(con, workload, plans)
        else PredictionGap.PLAN_STATES_NONE,
    )


def _compiled_graphs(con: Connection, workload: str, plans: list[str]) -> bool:
    """Some of the plans are compiled graphs whose compiles are logged (their estimates are
    their compiler's to log)."""
    (n,) = con.execute(
        "SELECT count(*) FROM compile_event WHERE workload = $w AND list_contains($plans, plan_id)",
        {"w": workload, "plans": plans},
    ).fetchone() or (0,)
    return bool(n)


def plan_compute_p50(con: Connection) -> dict[str, float]:
    """Median compute time of each plan's ok requests (the end-to-end side of per-op sums)."""
    rows = con.execute(
        f"""
        SELECT plan_id, median(compute_us) FROM ({REQUESTS})
        WHERE status = 'ok' AND plan_id IS NOT NULL GROUP BY plan_id
        """
    ).fetchall()
    return {str(p): float(v) for p, v in rows if v is not None}
