"""The pack of a regression across nights: a shape's p95 change against its reference night,
tonight's latencies selected from the slice and the reference night's quantiles from the
spec, recomputed by the history's own function (`history.p95_change`) with the same seed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.packs import Pack, PackKind, Recomputed, Reduction
from mapreport.analysis.base.query import SLICE_TABLE, inline
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.loop.history import p95_change
from mapreport.analysis.serving.packs import slice_tables


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


KINDS = {Reduction.REGRESSION: PackKind(_regression_sql, _regression)}
"""The loop's packs: each reduction's query and recompute function."""
