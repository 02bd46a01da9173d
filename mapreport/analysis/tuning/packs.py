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
from mapreport.analysis.base.packs import (
    PACK_ROWS,
    Pack,
    PackKind,
    Recomputed,
    TuningParams,
    declare,
)
from mapreport.analysis.base.query import inline
from mapreport.analysis.tuning.ranking import (
    TRIAL_COLUMNS,
    TRIAL_ORDER,
    TuningChoice,
    rank,
    trial_of,
)
from mapreport.core.kinds import Reduction

_ROWS = f"""SELECT {TRIAL_COLUMNS}, line
FROM tuning_trial WHERE workload = $w AND slice = $s AND task_key = $key
    AND target IS NOT DISTINCT FROM $target AND shape IS NOT DISTINCT FROM $shape{{run}}
{TRIAL_ORDER}"""
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


_OK = f"""SELECT *, row_number() OVER (ORDER BY plan_id, trial, source_id, line) AS row_at,
    CASE WHEN costs_us IS NULL OR len(costs_us) = 0 THEN [mean_us] ELSE costs_us END AS repeats
FROM {PACK_ROWS} WHERE error IS NULL AND mean_us IS NOT NULL"""
"""The successful trials (`ranking._ok`), each with its measured repeats (its mean alone where
it records none) and its place in (run, trial) order."""


def _regret_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """`ranking.rank`'s regret: the run's pick (its least mean, then first trial) against the
    best measured config of the workload in any run, where a config measured by several
    trials pools their repeats (`_pooled`: their mean; a config of one trial keeps its own
    mean), best by mean, then its first trial's run and trial; none without a pick or below
    two configs. n: the fewer repeats of the two."""
    select = f"""WITH ok AS ({_OK}),
configs AS (
    SELECT config_id, count(*) AS trials, arg_min(plan_id, row_at) AS first_plan,
        arg_min(trial, row_at) AS first_trial, sum(len(repeats)) AS repeats,
        CASE WHEN count(*) = 1 THEN any_value(mean_us)
             ELSE sum(list_sum(repeats)) / sum(len(repeats)) END AS mean
    FROM ok GROUP BY config_id
),
picked AS (
    SELECT c.* FROM configs c JOIN (
        SELECT config_id FROM ok WHERE plan_id = $plan ORDER BY mean_us, trial, row_at LIMIT 1
    ) USING (config_id)
),
best AS (SELECT * FROM configs ORDER BY mean, first_plan, first_trial LIMIT 1)
SELECT CASE WHEN ranked THEN picked.mean / best.mean - 1 END AS value,
    CASE WHEN ranked THEN least(picked.repeats, best.repeats) ELSE 0 END AS n
FROM (SELECT (SELECT count(*) FROM configs) >= 2 AND (SELECT count(*) FROM picked) = 1
    AS ranked) LEFT JOIN picked ON true LEFT JOIN best ON true"""
    return inline(select, {"plan": params.plan_id})


def _pairwise_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """TenSet's pairwise accuracy (`pairwise_accuracy`) over the run's scored successful
    trials in trial order: of the pairs i < j, the share where score i > score j agrees with
    throughput i > throughput j (the best mean over each one's); none below two. n: the
    scored trials."""
    select = f"""WITH ok AS ({_OK}),
scored AS (
    SELECT row_number() OVER (ORDER BY trial, row_at) AS i, score,
        min(mean_us) OVER () / mean_us AS throughput
    FROM ok WHERE plan_id = $plan AND score IS NOT NULL
),
pairs AS (
    SELECT (a.score > b.score) = (a.throughput > b.throughput) AS agree
    FROM scored a JOIN scored b ON a.i < b.i
)
SELECT CASE WHEN n >= 2 THEN (SELECT count(*) FILTER (WHERE agree) FROM pairs)
    / (n * (n - 1) / 2) END AS value, CASE WHEN n >= 2 THEN n ELSE 0 END AS n
FROM (SELECT count(*) AS n FROM scored)"""
    return inline(select, {"plan": params.plan_id})


KINDS = declare(
    {
        Reduction.REGRET: PackKind(_sql, _regret, _regret_figure, TuningParams),
        Reduction.PAIRWISE_ACCURACY: PackKind(_sql, _pairwise, _pairwise_figure, TuningParams),
    }
)
"""The tuning figures' packs: each reduction's query and recompute function."""
