"""The pack of a regression across nights: a shape's p95 change against its reference night,
tonight's latencies selected from the slice and the reference night's quantiles from the
spec, recomputed by the history's own function (`history.p95_change`) with the same seed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.packs import (
    PACK_ROWS,
    Pack,
    PackKind,
    Recomputed,
    RegressionParams,
    declare,
)
from mapreport.analysis.base.query import SLICE_TABLE, inline
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.loop.history import p95_change
from mapreport.analysis.serving.packs import slice_tables
from mapreport.core.kinds import Reduction


def _regression_sql(
    reduction: Reduction, workload: str, slice_: str, shape: str, params: Any
) -> str:
    select = inline(
        f"SELECT latency_us AS value, source_id, line FROM {SLICE_TABLE} "
        "WHERE shape = $shape AND status = 'ok' ORDER BY value, source_id, line",
        {"shape": shape},
    )
    return f"{slice_tables(workload, slice_)}\n{select}"


def _regression(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    params = p.typed()
    lat = [v for v in rows["value"].to_pylist() if v is not None]
    if not lat:
        return Recomputed(None, rows.num_rows, None, rows.num_rows, files)
    now = np.quantile(np.array(lat), np.linspace(0, 1, 101)).tolist()
    seed = seed_for(th.seed, p.workload, p.slice, p.shape, "history")
    change, ci = p95_change(
        params.reference, params.n_ref, now, rows.num_rows, th.bootstrap_resamples, seed
    )
    return Recomputed(change, rows.num_rows, (ci.low, ci.high), rows.num_rows, files)


def _regression_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """`p95_change`'s point: tonight's p95 (numpy's linear quantile, `quantile_cont`) over the
    reference night's, read off its stored quantile function as `quantile_of` reads it
    (linear between its evenly spaced points), minus 1. n: tonight's requests."""
    at = "$q * (len(ref) - 1)"
    below = f"ref[floor({at})::BIGINT + 1]"
    above = f"ref[least(floor({at})::BIGINT + 2, len(ref))]"
    between = f"{below} + ({at} - floor({at})) * ({above} - {below})"
    reference = f"(SELECT {between} FROM (SELECT $ref AS ref))"
    select = (
        f"SELECT quantile_cont(value, $q) / {reference} - 1 AS value, count(*) AS n "
        f"FROM {PACK_ROWS}"
    )
    return inline(select, {"q": 0.95, "ref": [float(v) for v in params.reference]})


KINDS = declare(
    {
        Reduction.REGRESSION: PackKind(
            _regression_sql, _regression, _regression_figure, RegressionParams
        )
    }
)
"""The loop's packs: each reduction's query and recompute function."""
