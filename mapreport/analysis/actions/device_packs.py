"""The evidence packs of a profiler trace's device findings (an op x shape's headroom, the
device's idle share, graph padding): their query and their figure recomputed from the pack's
rows by the analysis's own functions (`roofline.headroom_of`, `device_actions.idle_evidence`,
`graphs.buckets_of`), with the same seeds."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mapreport.analysis.actions.device_actions import idle_evidence
from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.packs import (
    PACK_ROWS,
    HeadroomParams,
    NoParams,
    Pack,
    PackKind,
    Recomputed,
    declare,
)
from mapreport.analysis.base.query import inline
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.device.graphs import PACK as GRAPH_PACK
from mapreport.analysis.device.graphs import (
    PADDING_MATERIAL,
    buckets_of,
    captures_of,
    padding_seed,
    steps_of,
)
from mapreport.analysis.device.roofline import CALLS, headroom_of
from mapreport.analysis.device.timeline import COMMUNICATION_KERNELS, WINDOWS, of_rows
from mapreport.analysis.device.timeline import ROWS as TIMELINE_ROWS
from mapreport.core.kinds import Reduction


def _headroom_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    selection = {k: getattr(params, k) for k in ("op", "category", "shape", "types")}
    at = {"w": workload, "s": slice_}
    return inline(CALLS, at | selection | {"concrete": params.concrete})


def _padding_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    return inline(GRAPH_PACK, {"w": workload, "s": slice_})


def _idle_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    return inline(TIMELINE_ROWS, {"w": workload, "s": slice_, "comm": COMMUNICATION_KERNELS})


def _headroom(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    if not rows.num_rows:
        return Recomputed(None, 0, None, 0, files)
    params = p.typed()
    durations = [float(d) for d in rows["dur"].to_pylist()]
    seed = seed_for(th.seed, p.workload, p.slice, *params.seed_key, "headroom")
    value, n, head = headroom_of(durations, params.roof_us, th, seed)
    return Recomputed(value, n, (head.low, head.high), rows.num_rows, files)


def _idle(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    if not rows.num_rows:
        return Recomputed(None, 0, None, 0, files)
    cols = [rows[c].to_pylist() for c in ("dev", "trace", "activity", "ts_us", "end_us")]
    seed = seed_for(th.seed, p.workload, p.slice, "device_idle")
    ev = idle_evidence(of_rows(*cols), th, seed)
    ci = None if ev.ci is None else (ev.ci.low, ev.ci.high)
    return Recomputed(ev.value, ev.n, ci, rows.num_rows, files)


def _padding(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    if not rows.num_rows:
        return Recomputed(None, 0, None, 0, files)
    table = rows.to_pylist()
    captures = captures_of([(x["name"], x["capture_us"]) for x in table if x["kind"] == "capture"])
    steps = steps_of(
        [
            (x["name"], x["source_id"], x["launches"], x["graph_us"], x["eager_us"])
            for x in table
            if x["kind"] == "step"
        ]
    )
    f = buckets_of(captures, steps, th, padding_seed(th, p.workload, p.slice)).finding
    if f is None:
        return Recomputed(None, 0, None, rows.num_rows, files)
    ci = None if f.evidence.ci is None else (f.evidence.ci.low, f.evidence.ci.high)
    return Recomputed(f.evidence.value, f.evidence.n, ci, rows.num_rows, files)


def _headroom_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """`headroom_of`: the calls' mean time above the roof (none below it) times their count.
    n: the calls."""
    select = (
        "SELECT CASE WHEN count(*) > 0 THEN greatest(0, fsum(dur) / count(*) - $roof) * count(*)"
        f" END AS value, count(*) AS n FROM {PACK_ROWS}"
    )
    return inline(select, {"roof": float(params.roof_us)})


def _idle_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """`timeline.of_rows`' idle share: per device of each trace, its span (first start to last
    end) less the union of its rows' intervals (in start order, then line: one after every
    earlier one ended opens a new stretch), summed over the devices' spans. n: the
    bootstrap's windows (WINDOWS per device of each trace)."""
    select = f"""WITH reach AS (
    SELECT trace, dev, ts_us, end_us, line, max(end_us) OVER (PARTITION BY trace, dev
        ORDER BY ts_us, line ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM {PACK_ROWS}
),
stretch AS (
    SELECT *, count(*) FILTER (WHERE before IS NULL OR ts_us > before) OVER (PARTITION BY
        trace, dev ORDER BY ts_us, line ROWS UNBOUNDED PRECEDING) AS k
    FROM reach
),
busy AS (
    SELECT trace, dev, sum(len) AS busy FROM (
        SELECT trace, dev, max(end_us) - min(ts_us) AS len FROM stretch GROUP BY trace, dev, k
    ) GROUP BY trace, dev
),
span AS (SELECT trace, dev, max(end_us) - min(ts_us) AS width FROM {PACK_ROWS} GROUP BY ALL)
SELECT CASE WHEN count(*) > 0 THEN CASE WHEN sum(width) > 0
    THEN sum(width - busy) / sum(width) ELSE 0.0 END END AS value, $windows * count(*) AS n
FROM span JOIN busy USING (trace, dev)"""
    return inline(select, {"windows": WINDOWS})


def _padding_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """`graphs.padding_finding`'s waste: each replayed step whose annotation names its batch
    placed in the smallest captured size that holds it (its own batch where the trace holds no
    capture), a step's waste its size less its batch times its bucket's device time per padded
    unit; a finding from `PADDING_MATERIAL` of the replays' device time and `min_samples`
    placed steps (and a bootstrap CI clear of zero: mapreport explain). n: the placed steps."""
    select = r"""WITH captured AS (
    SELECT DISTINCT CAST(regexp_extract(name, '^capture_([0-9]+)_[A-Za-z_]+$', 1) AS BIGINT)
        AS size
    FROM pack_rows WHERE kind = 'capture' AND regexp_matches(name, '^capture_[0-9]+_[A-Za-z_]+$')
),
steps AS (
    SELECT * FROM (
        SELECT CAST(coalesce(nullif(regexp_extract(name, '^execute_([0-9]+)_', 1), ''),
            nullif(regexp_extract(name, 'bs=([0-9]+)', 1), '')) AS BIGINT) AS batch,
            launches, graph_us
        FROM pack_rows WHERE kind = 'step'
    ) WHERE batch IS NOT NULL
),
sizes AS (
    SELECT size FROM captured UNION
    SELECT batch FROM steps WHERE launches <> 0 AND NOT EXISTS (SELECT 1 FROM captured)
),
placed AS (
    SELECT s.*, (SELECT min(size) FROM sizes WHERE size >= s.batch) AS size
    FROM steps s WHERE launches <> 0
),
bucket AS (
    SELECT size, fsum(graph_us) / (size * count(*)) AS per_unit
    FROM placed WHERE size IS NOT NULL GROUP BY size
),
waste AS (SELECT (p.size - p.batch) * b.per_unit AS w FROM placed p JOIN bucket b USING (size)),
found AS (
    SELECT count(*) >= $min AND fsum(w) / (SELECT fsum(graph_us) FROM steps) >= $material
        AS finding, fsum(w) AS value, count(*) AS n
    FROM waste
)
SELECT CASE WHEN finding THEN value END AS value, CASE WHEN finding THEN n ELSE 0 END AS n
FROM found""".replace("pack_rows", PACK_ROWS)
    return inline(select, {"min": th.min_samples, "material": PADDING_MATERIAL})


KINDS = declare(
    {
        Reduction.HEADROOM: PackKind(_headroom_sql, _headroom, _headroom_figure, HeadroomParams),
        Reduction.DEVICE_IDLE: PackKind(_idle_sql, _idle, _idle_figure, NoParams),
        Reduction.GRAPH_PADDING: PackKind(_padding_sql, _padding, _padding_figure, NoParams),
    }
)
"""The device findings' packs: each reduction's query and recompute function."""
