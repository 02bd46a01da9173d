"""The SQL side of analysis: grouped aggregates over the canonical tables, run by DuckDB.

The SQL is plain (GROUP BY, FILTER, quantile_cont) so a distributed engine could run it too;
what comes back to Python is one row per shape, per variant or per bucket. `quantile_cont`
interpolates linearly between order statistics, as numpy's default does.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from mapreport.analysis.common import Percentiles
from mapreport.analysis.stats import FloatArray

QS = "[0.5, 0.95, 0.99]"
GRID = "[" + ", ".join(f"{i / 100:.2f}" for i in range(101)) + "]"
"""Latency quantiles kept per shape: 0%, 1%, ..., 100%; p50/p95/p99 are entries 50/95/99."""
_REGISTERED = itertools.count()

SLICE_TABLE = "slice_request"
"""A temporary view of one slice's requests while `analyze_slice` runs (`load_slice`)."""

REQUESTS = f"SELECT * FROM {SLICE_TABLE}"
"""The slice's requests with latency, queue wait, compute and variant (`load_slice`)."""

PRIMARY_PLAN = f"SELECT shape, plan FROM {SLICE_TABLE}_primary"
"""Each shape's primary plan: the named plan that served most of its requests (ties: the
smallest id). The plan's prediction is what the shape is measured against."""

ON_PRIMARY = f"SELECT * FROM {SLICE_TABLE} WHERE on_primary"
"""Requests that ran their shape's primary plan (or named no plan): the variant statistics
(static, adapted, fallback) compare like with like."""


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def load_slice(con: duckdb.DuckDBPyConnection, workload: str, slice_: str) -> None:
    """Define the slice's requests (a temporary view over the Parquet files, with the derived
    columns) and count its requests per (shape, plan) once, from which each shape's primary
    plan comes, so no query re-derives them. The view streams from Parquet: memory does not
    grow with the slice. `drop_slice` removes all three."""
    w, s = _literal(workload), _literal(slice_)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {SLICE_TABLE}_plans AS
        SELECT shape, plan_id, count(*) AS c FROM request
        WHERE workload = {w} AND slice = {s} GROUP BY shape, plan_id
        """
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {SLICE_TABLE}_primary AS
        SELECT shape, first(plan_id ORDER BY c DESC, plan_id) AS plan
        FROM {SLICE_TABLE}_plans WHERE plan_id IS NOT NULL GROUP BY shape
        """
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP VIEW {SLICE_TABLE} AS
        SELECT r.shape, r.status, r.plan_id, coalesce(r.plan_variant, 'static') AS variant,
            r.stream, r.core, r.batch_size, r.mem_peak_bytes, r.source_id, r.line,
            r.arrival_us, r.compute_end_us,
            r.compute_end_us - r.arrival_us AS latency_us,
            r.compute_start_us - r.queue_start_us AS queue_us,
            r.compute_end_us - r.compute_start_us AS compute_us,
            (r.plan_id IS NULL OR pp.plan IS NULL OR r.plan_id = pp.plan) AS on_primary
        FROM request r LEFT JOIN {SLICE_TABLE}_primary pp USING (shape)
        WHERE r.workload = {w} AND r.slice = {s}
        """
    )


def drop_slice(con: duckdb.DuckDBPyConnection) -> None:
    """Remove the slice view and primary plans of `load_slice`."""
    con.execute(f"DROP VIEW IF EXISTS {SLICE_TABLE}")
    con.execute(f"DROP TABLE IF EXISTS {SLICE_TABLE}_primary")
    con.execute(f"DROP TABLE IF EXISTS {SLICE_TABLE}_plans")


def _pct(n: int, q: list[float] | None) -> Percentiles:
    if not q:
        return Percentiles(n, None, None, None)
    return Percentiles(n, float(q[0]), float(q[1]), float(q[2]))


@dataclass(frozen=True)
class ShapeRow:
    """Per-shape aggregates straight from SQL."""

    shape: str
    n_total: int
    n: int
    latency: Percentiles
    queue: Percentiles
    compute: Percentiles
    variants: dict[str, tuple[int, float | None, float | None]]
    """variant -> (n ok, p50 compute, p95 compute) over requests of the primary plan."""
    plans: dict[str | None, int]
    plan: str | None
    """The primary plan."""
    sources: tuple[str, ...]
    latency_quantiles: tuple[float, ...]
    """Latency of ok requests at 0%, 1%, ..., 100% (empty without ok requests)."""
    n_core: int
    """ok requests that name their core (0: core imbalance cannot be measured)."""
    n_mem: int
    """ok requests that report their peak memory."""
    mem_p50: float | None = None
    """Median peak memory of ok requests (bytes; None when none reports it)."""


def slices(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """Every (workload, slice) with requests, compiles, plans, profiled ops or load sweeps."""
    # a record that names no slice (slice '') serves every slice of its workload (generic
    # compile plans), so (w, '') is a slice of its own only with requests or without siblings
    rows = con.execute(
        """
        WITH named AS (
            SELECT workload, slice FROM compile_event UNION SELECT workload, slice FROM compile_plan
            UNION SELECT workload, slice FROM op_exec UNION SELECT workload, slice FROM load_sweep
        ), served AS (SELECT DISTINCT workload, slice FROM request)
        SELECT workload, slice FROM served
        UNION SELECT workload, slice FROM named n
        WHERE slice <> '' OR NOT EXISTS (
            SELECT 1 FROM (SELECT * FROM served UNION SELECT * FROM named) o
            WHERE o.workload = n.workload AND o.slice <> ''
        )
        ORDER BY workload, slice
        """
    ).fetchall()
    return [(str(w), str(s)) for w, s in rows]


def shape_rows(con: duckdb.DuckDBPyConnection) -> list[ShapeRow]:
    """Of the loaded slice (`load_slice`): per-shape counts and percentiles of latency, queue
    wait and compute (ok requests)."""
    main = con.execute(
        f"""
        WITH r AS ({REQUESTS})
        SELECT shape, count(*) AS n_total, count(*) FILTER (WHERE status = 'ok') AS n,
            quantile_cont(latency_us, {GRID}) FILTER (WHERE status = 'ok') AS lat,
            quantile_cont(queue_us, {QS}) FILTER (WHERE status = 'ok') AS que,
            quantile_cont(compute_us, {QS}) FILTER (WHERE status = 'ok') AS com,
            list(DISTINCT source_id ORDER BY source_id) AS sources,
            count(core) FILTER (WHERE status = 'ok') AS n_core,
            count(mem_peak_bytes) FILTER (WHERE status = 'ok') AS n_mem,
            quantile_cont(mem_peak_bytes, 0.5) FILTER (WHERE status = 'ok') AS m50
        FROM r GROUP BY shape ORDER BY shape
        """
    ).fetchall()
    variants: dict[str, dict[str, tuple[int, float | None, float | None]]] = {}
    for shape, variant, n, q in con.execute(
        f"""
        SELECT shape, variant, count(*), quantile_cont(compute_us, [0.5, 0.95])
        FROM ({ON_PRIMARY}) WHERE status = 'ok' GROUP BY shape, variant
        """
    ).fetchall():
        variants.setdefault(shape, {})[variant] = (int(n), float(q[0]), float(q[1]))
    plans: dict[str, dict[str | None, int]] = {}
    for shape, plan, n in con.execute(
        f"SELECT shape, plan_id, c FROM {SLICE_TABLE}_plans"
    ).fetchall():
        plans.setdefault(shape, {})[plan] = int(n)
    primary = dict(con.execute(PRIMARY_PLAN).fetchall())
    return [
        ShapeRow(
            shape=shape,
            n_total=int(n_total),
            n=int(n),
            latency=_pct(int(n), [lat[50], lat[95], lat[99]] if lat else None),
            queue=_pct(int(n), que),
            compute=_pct(int(n), com),
            variants=variants.get(shape, {}),
            plans=plans.get(shape, {}),
            plan=primary.get(shape),
            sources=tuple(sources),
            latency_quantiles=tuple(float(v) for v in lat or ()),
            n_core=int(n_core),
            n_mem=int(n_mem),
            mem_p50=None if m50 is None else float(m50),
        )
        for shape, n_total, n, lat, que, com, sources, n_core, n_mem, m50 in main
    ]


def slice_latency(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Of the loaded slice: slice-wide request counts, time window and latency percentiles
    (ok requests)."""
    n_total, n, lat, t0, t1 = con.execute(
        f"""
        WITH r AS ({REQUESTS})
        SELECT count(*), count(*) FILTER (WHERE status = 'ok'),
            quantile_cont(latency_us, {QS}) FILTER (WHERE status = 'ok'),
            min(arrival_us), max(compute_end_us)
        FROM r
        """
    ).fetchall()[0]
    return {
        "requests": int(n_total),
        "failed": int(n_total) - int(n),
        "latency": _pct(int(n), lat),
        "window": (t0, t1),
    }


def compute_samples(
    con: duckdb.DuckDBPyConnection, shapes: list[str]
) -> dict[tuple[str, str], FloatArray]:
    """Measured compute times of ok requests of the primary plan per (shape, variant), for
    the bootstrap."""
    if not shapes:
        return {}
    # each group sorted by DuckDB into one list; the lists come back as one Arrow buffer and
    # are sliced without a Python float per request
    t = con.sql(
        f"""
        SELECT shape, variant, list(compute_us ORDER BY compute_us) AS v
        FROM ({ON_PRIMARY}) WHERE status = 'ok' AND list_contains($shapes, shape)
        GROUP BY shape, variant
        """,
        params={"shapes": shapes},
    ).to_arrow_table()
    if t is None or t.num_rows == 0:
        return {}
    lists = t["v"].combine_chunks()
    values = np.asarray(lists.values.to_numpy(), np.float64)
    offsets = lists.offsets.to_numpy()
    return {
        (str(shape), str(variant)): values[offsets[i] : offsets[i + 1]]
        for i, (shape, variant) in enumerate(
            zip(t["shape"].to_pylist(), t["variant"].to_pylist(), strict=True)
        )
    }


@dataclass(frozen=True)
class BucketRow:
    """One compiled bucket of one plan with its whole-model prediction."""

    plan_id: str
    bucket: str
    predicted_us: float | None
    from_total: bool
    ops: int
    precision: str | None
    sources: tuple[str, ...]
    mem_budget_bytes: float | None = None
    fusion_groups: tuple[tuple[str, int], ...] = ()
    """(fusion group, ops in it) of the bucket's plan entries."""


def bucket_rows(con: duckdb.DuckDBPyConnection, workload: str, slice_: str) -> list[BucketRow]:
    """Compiled buckets of the slice's plans; a slice-specific entry wins over a generic one.

    The prediction is the `__total__` line, else the sum of the bucket's op predictions (an op
    listed twice counts once, at its largest prediction).
    """
    rows = con.execute(
        """
        WITH scoped AS (
            SELECT *, rank() OVER (PARTITION BY plan_id, shape_bucket
                                   ORDER BY (slice = $s) DESC) AS pick
            FROM compile_plan WHERE workload = $w AND (slice = $s OR slice = '')
        ), ops AS (
            SELECT plan_id, shape_bucket, op, max(predicted_us) AS predicted_us,
                any_value(precision) AS precision, list(DISTINCT source_id) AS sources,
                max(mem_budget_bytes) AS budget, any_value(fusion_group) AS fusion_group
            FROM scoped WHERE pick = 1 GROUP BY plan_id, shape_bucket, op
        )
        SELECT plan_id, shape_bucket,
            max(predicted_us) FILTER (WHERE op = '__total__') AS total,
            sum(predicted_us) FILTER (WHERE op <> '__total__') AS ops_sum,
            count(*) FILTER (WHERE op <> '__total__') AS n_ops,
            any_value(precision) AS precision,
            flatten(list(sources)) AS sources,
            coalesce(max(budget) FILTER (WHERE op = '__total__'), max(budget)) AS budget,
            list(fusion_group) FILTER (WHERE fusion_group IS NOT NULL) AS groups
        FROM ops GROUP BY plan_id, shape_bucket ORDER BY plan_id, shape_bucket
        """,
        {"w": workload, "s": slice_},
    ).fetchall()
    return [
        BucketRow(
            plan_id=plan,
            bucket=bucket,
            predicted_us=float(total)
            if total is not None
            else (float(ops_sum) if ops_sum is not None else None),
            from_total=total is not None,
            ops=int(n_ops),
            precision=precision,
            sources=tuple(sorted(set(sources))),
            mem_budget_bytes=None if budget is None else float(budget),
            fusion_groups=tuple(sorted(Counter(groups or []).items())),
        )
        for plan, bucket, total, ops_sum, n_ops, precision, sources, budget, groups in rows
    ]


def adaptation_costs(
    con: duckdb.DuckDBPyConnection, workload: str, slice_: str
) -> dict[str | None, tuple[int, float]]:
    """Adaptation events per shape (None: events that name no shape): (count, summed dur_us)."""
    rows = con.execute(
        """
        SELECT shape, count(*), coalesce(sum(dur_us), 0)
        FROM adaptation_event WHERE workload = $w AND slice = $s GROUP BY shape
        """,
        {"w": workload, "s": slice_},
    ).fetchall()
    return {shape: (int(n), float(cost)) for shape, n, cost in rows}


def environments(con: duckdb.DuckDBPyConnection, source_ids: list[str]) -> list[dict[str, Any]]:
    """Environment rows of the given source files."""
    cur = con.execute(
        "SELECT * EXCLUDE (line, extra) FROM environment WHERE list_contains($ids, source_id)",
        {"ids": source_ids},
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def source_files(con: duckdb.DuckDBPyConnection, source_ids: list[str]) -> list[dict[str, Any]]:
    """ingest_log rows of the given sources."""
    cur = con.execute(
        """SELECT source_id, path, format, rows, rejected, rejections FROM ingest_log
           WHERE list_contains($ids, source_id) ORDER BY path""",
        {"ids": source_ids},
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


@dataclass(frozen=True)
class TailRows:
    """A shape's tail requests with the raw size of each driver, before attribution."""

    n: int
    p50_us: float | None
    p95_us: float | None
    p99_us: float | None
    n_core: int
    n_mem: int
    raw: FloatArray
    """One row per tail request: excess, queueing, fallback, memory, core (microseconds)."""
    sources: tuple[str, ...]


def tail_rows(
    con: duckdb.DuckDBPyConnection,
    budgets: dict[str, float],
    shapes: Sequence[ShapeRow],
    cores: dict[str, list[tuple[int, float]]],
) -> dict[str, TailRows]:
    """Per shape: the ok requests above its p95 latency and how far each driver pushed them.

    excess = latency - p50(latency); queueing = queue - p50(queue); fallback = compute excess
    of requests that ran `fallback`; memory = compute excess of requests whose peak memory
    exceeds the bucket's budget (1.5 x the shape's p50 memory without one); core = p50 compute
    on the request's core - p50 compute on all cores. Each is clipped at zero here; the
    attribution clips them to the excess. The per-shape percentiles come from `shape_rows`
    and the per-core medians from `core_medians`: only the tail rows are scanned here.
    """
    stats_name = f"_tail_stats_{next(_REGISTERED)}"
    cores_name = f"_tail_cores_{next(_REGISTERED)}"
    with_n = [r for r in shapes if r.n]
    con.register(
        stats_name,
        pa.table(
            {
                "shape": [r.shape for r in with_n],
                "lat50": [r.latency.p50 for r in with_n],
                "lat95": [r.latency.p95 for r in with_n],
                "q50": [r.queue.p50 for r in with_n],
                "c50": [r.compute.p50 for r in with_n],
                "m50": [r.mem_p50 for r in with_n],
                "budget": [budgets.get(r.shape) for r in with_n],
            },
            schema=pa.schema(
                [("shape", pa.string())]
                + [(c, pa.float64()) for c in ("lat50", "lat95", "q50", "c50", "m50", "budget")]
            ),
        ),
    )
    per_core = [(shape, core, p50) for shape, cs in cores.items() for core, p50 in cs]
    con.register(
        cores_name,
        pa.table(
            {
                "shape": [c[0] for c in per_core],
                "core": [c[1] for c in per_core],
                "c50_core": [c[2] for c in per_core],
            },
            schema=pa.schema(
                [("shape", pa.string()), ("core", pa.int32()), ("c50_core", pa.float64())]
            ),
        ),
    )
    try:
        rows = con.execute(
            f"""
            SELECT ok.shape,
                list([
                    ok.latency_us - s.lat50,
                    greatest(ok.queue_us - s.q50, 0),
                    CASE WHEN ok.variant = 'fallback'
                         THEN greatest(ok.compute_us - s.c50, 0) ELSE 0 END,
                    CASE WHEN ok.mem_peak_bytes > coalesce(s.budget, 1.5 * s.m50)
                         THEN greatest(ok.compute_us - s.c50, 0) ELSE 0 END,
                    greatest(coalesce(c.c50_core - s.c50, 0), 0)
                ] ORDER BY ok.latency_us, ok.source_id, ok.line),
                list(DISTINCT ok.source_id ORDER BY ok.source_id)
            FROM ({REQUESTS}) ok JOIN {stats_name} s USING (shape)
            LEFT JOIN {cores_name} c ON c.shape = ok.shape AND c.core = ok.core
            WHERE ok.status = 'ok' AND ok.latency_us > s.lat95
            GROUP BY ok.shape
            """
        ).fetchall()
    finally:
        con.unregister(stats_name)
        con.unregister(cores_name)
    tails = {shape: (np.asarray(parts, dtype=np.float64), src) for shape, parts, src in rows}
    out = {}
    for s in shapes:
        if not s.n:
            continue
        raw, src = tails.get(s.shape, (np.zeros((0, 5)), []))
        out[s.shape] = TailRows(
            n=s.n,
            p50_us=s.latency.p50,
            p95_us=s.latency.p95,
            p99_us=s.latency.p99,
            n_core=s.n_core,
            n_mem=s.n_mem,
            raw=raw.reshape(-1, 5),
            sources=tuple(src),
        )
    return out


def core_medians(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[int, float]]]:
    """Per shape: median compute of ok requests on each core."""
    out: dict[str, list[tuple[int, float]]] = {}
    for shape, core, p50 in con.execute(
        f"""
        SELECT shape, core, quantile_cont(compute_us, 0.5) FROM ({REQUESTS})
        WHERE status = 'ok' AND core IS NOT NULL GROUP BY shape, core ORDER BY shape, core
        """
    ).fetchall():
        out.setdefault(shape, []).append((int(core), float(p50)))
    return out


def quality_records(
    con: duckdb.DuckDBPyConnection, workload: str, slice_: str
) -> list[dict[str, Any]]:
    """Quality evidence of a slice (records without a slice apply to every slice)."""
    cur = con.execute(
        """SELECT precision, metric, baseline, value, max_drop, source_id FROM quality
           WHERE workload = $w AND (slice = $s OR slice = '')""",
        {"w": workload, "s": slice_},
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def plan_compute_p50(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """Median compute time of each plan's ok requests (the end-to-end side of per-op sums)."""
    rows = con.execute(
        f"""
        SELECT plan_id, median(compute_us) FROM ({REQUESTS})
        WHERE status = 'ok' AND plan_id IS NOT NULL GROUP BY plan_id
        """
    ).fetchall()
    return {str(p): float(v) for p, v in rows if v is not None}


def profile_sources(con: duckdb.DuckDBPyConnection, workload: str, slice_: str) -> list[str]:
    """The files behind a slice's compile events, per-op profiles and load sweeps."""
    rows = con.execute(
        """
        SELECT source_id FROM compile_event WHERE workload = $w AND slice = $s
        UNION SELECT source_id FROM op_exec WHERE workload = $w AND slice = $s
        UNION SELECT source_id FROM load_sweep WHERE workload = $w AND slice = $s
        """,
        {"w": workload, "s": slice_},
    ).fetchall()
    return [str(r[0]) for r in rows]
