"""The packs of the tuning figures (docs/evidence.md): a run's regret (its chosen config over
the best measured for its workload in any run, minus 1) and its cost model's pairwise accuracy.
Each query selects the `tuning_trial` rows the figure rests on with the ranking's own columns
and order (`ranking.TRIAL_COLUMNS`, `ranking.TRIAL_ORDER`), every value a literal written in
one pass (`query.inline`); each figure is recomputed by the ranking itself (`ranking.rank`),
with the same seeds: nothing is computed a second way."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.packs import Pack, PackKind, Recomputed, Reduction
from mapreport.analysis.base.query import inline
from mapreport.analysis.tuning.ranking import (
    TRIAL_COLUMNS,
    TRIAL_ORDER,
    TuningChoice,
    rank,
    trial_of,
)

_ROWS = f"""SELECT {TRIAL_COLUMNS}, line
FROM tuning_trial WHERE workload = $w AND slice = $s AND task_key = $key
    AND target IS NOT DISTINCT FROM $target AND shape IS NOT DISTINCT FROM $shape{{run}}
{TRIAL_ORDER}, source_id, line"""
"""The workload's trials (in every run: its best may be another run's; `{run}` narrows them to
one run's), each with its every repeat, score, file and line."""


def _sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    run = " AND plan_id = $plan" if reduction == Reduction.PAIRWISE_ACCURACY else ""
    values = {"w": workload, "s": slice_, "key": params.task_key, "plan": params.plan_id}
    return inline(_ROWS.format(run=run), values | {"target": params.target, "shape": params.shape})


def _choice(p: Pack, rows: pa.Table, th: Thresholds) -> TuningChoice | None:
    """The pack's run as the ranking makes it of the rows (None: the run has no rows)."""
    cols = [rows[c].to_pylist() for c in rows.column_names[:-1]]  # all but `line`
    trials = [trial_of(r) for r in zip(*cols, strict=True)]
    plan = p.typed().plan_id
    return next((c for c in rank(trials, th).choices if c.plan_id == plan), None)


def _regret(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    c = _choice(p, rows, th) if rows.num_rows else None
    if c is None or c.regret is None:
        return Recomputed(None, 0, None, rows.num_rows, files)
    ci = None if c.regret_ci is None else (c.regret_ci.low, c.regret_ci.high)
    return Recomputed(c.regret, c.repeats or 0, ci, rows.num_rows, files)


def _pairwise(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    c = _choice(p, rows, th) if rows.num_rows else None
    x = c.prediction if c is not None else None
    if x is None:
        return Recomputed(None, 0, None, rows.num_rows, files)
    ci = x.pairwise_accuracy_ci
    interval = None if ci is None else (ci.low, ci.high)
    return Recomputed(x.pairwise_accuracy, x.scored, interval, rows.num_rows, files)


KINDS = {
    Reduction.REGRET: PackKind(_sql, _regret),
    Reduction.PAIRWISE_ACCURACY: PackKind(_sql, _pairwise),
}
"""The tuning figures' packs: each reduction's query and recompute function."""
