"""The slice view every family queries: one slice's requests with their derived columns and
primary plan (`load_slice`), the per-shape rows, the slice-wide counts, and query helpers.

Each family runs its own SQL over this view in its own module. The SQL is plain (GROUP BY,
FILTER, quantile_cont) so a distributed engine could run it too; what comes back to Python is
one row per shape, per variant or per bucket. `quantile_cont` interpolates linearly between
order statistics, as numpy's default does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import msgspec

from mapreport.analysis.base.common import Percentiles
from mapreport.core.connection import Connection, holds_slices

SqlValue: TypeAlias = "str | int | float | bool | Sequence[SqlValue] | None"
"""A value a query binds as a parameter, or `inline` writes as a literal."""

QS = "[0.5, 0.95, 0.99]"
GRID = "[" + ", ".join(f"{i / 100:.2f}" for i in range(101)) + "]"
"""Latency quantiles kept per shape: 0%, 1%, ..., 100%; p50/p95/p99 are entries 50/95/99."""
CDF_GRID = (*(i / 100 for i in range(1, 100)), 0.995, 0.999)
"""The quantiles a queue-wait profile keeps: every percentile, then two deeper into the tail
(p50, p95 and p99 are entries 49, 94 and 98)."""
CDF_POINTS = "[" + ", ".join(f"{q:g}" for q in CDF_GRID) + "]"
LAT_P50, LAT_P95 = 51, 96
"""SQL's (1-based) positions of p50 and p95 in a `GRID` list."""
QUEUE_P50 = 50
"""SQL's position of p50 in a `CDF_POINTS` list."""

SLICE_TABLE = "slice_request"
"""One slice's requests while `analyze_slice` runs (`load_slice`): a temporary view, or a
table on a connection that `holds_slices`."""

HELD_TABLE = f"{SLICE_TABLE}_held"
"""The slice's requests that held their worker while adapting or ran after an adapting request
of their busy period (`blocking.load_blocking`): with their period, ready time and the
adapting requests before them, from which BLOCKED_TABLE credits each wait."""
BLOCKED_TABLE = f"{SLICE_TABLE}_blocked"
"""The slice's adapting requests and the requests blocked behind them (`blocking.load_blocking`),
with `source_id` and `line`: the tail attribution joins it."""

REQUESTS = f"SELECT * FROM {SLICE_TABLE}"
"""The slice's requests with latency, queue wait, compute and variant (`load_slice`)."""

PLANS_TABLE = f"{SLICE_TABLE}_primary"
"""Per shape of the loaded slice: its primary plan, the named plan that served most of its
requests (ties: the smallest id), whose prediction the shape is measured against; and its
requests per named plan."""

SHAPE_STATS = f"{SLICE_TABLE}_shapes"
"""Per shape of the loaded slice, once: counts, the latency grid, the queue profile, compute,
memory and token-timing quantiles of ok requests, the sources, the plans and the per-core
compute medians (`shape_rows` reads it, the tail joins it)."""
CORE_STATS = f"{SLICE_TABLE}_cores"
"""Per shape and core of the loaded slice, once: the median compute of ok requests."""
_OK = "FILTER (WHERE status = 'ok')"
_TIMED = "FILTER (WHERE status = 'ok' AND (ttft_us IS NOT NULL OR itl_us IS NOT NULL))"
_SHAPE_AGGREGATES = (
    ("n_total", "count(*)"),
    ("n", f"count(*) {_OK}"),
    ("lat", f"quantile_cont(latency_us, {GRID}) {_OK}"),
    ("que", f"quantile_cont(queue_us, {CDF_POINTS}) {_OK}"),
    ("n_que", f"count(queue_us) {_OK}"),
    ("com", f"quantile_cont(compute_us, {QS}) {_OK}"),
    ("n_com", f"count(compute_us) {_OK}"),
    ("sources", "list(DISTINCT source_id ORDER BY source_id)"),
    ("n_core", f"count(core) {_OK}"),
    ("n_ran_plan", "count(*) FILTER (WHERE status = 'ok' AND ran_plan)"),
    ("n_mem", f"count(mem_peak_bytes) {_OK}"),
    ("m50", f"quantile_cont(mem_peak_bytes, 0.5) {_OK}"),
    ("n_ttft", f"count(ttft_us) {_OK}"),
    ("ttft", f"quantile_cont(ttft_us, {QS}) {_OK}"),
    ("n_itl", f"count(itl_us) {_OK}"),
    ("itl", f"quantile_cont(itl_us, {QS}) {_OK}"),
    ("isl50", f"quantile_cont(input_tokens, 0.5) {_TIMED}"),
    ("osl50", f"quantile_cont(output_tokens, 0.5) {_TIMED}"),
)
"""The per-shape aggregates of the slice's requests, by column name."""


def shape_stats(over: Sequence[float] = ()) -> str:
    """The SELECT of the per-shape table: the aggregates of one scan, with each shape's ok
    requests above each latency target of `over` (the slice's SLA, in microseconds) counted in
    it (`over_0`, ...), joined with the shape's plans and its per-core compute medians."""
    aggregates = [
        *_SHAPE_AGGREGATES,
        *(
            (f"over_{i}", f"count(*) FILTER (WHERE status = 'ok' AND latency_us > {float(v)!r})")
            for i, v in enumerate(over)
        ),
    ]
    columns = ",\n            ".join(f"{sql} AS {name}" for name, sql in aggregates)
    return f"""SELECT g.*, p.plan, p.plan_ids, p.plan_counts, c.cores, c.core_c50s
        FROM (SELECT shape, {columns} FROM {SLICE_TABLE} GROUP BY shape) g
        LEFT JOIN {PLANS_TABLE} p USING (shape)
        LEFT JOIN (
            SELECT shape, list(core ORDER BY core) AS cores,
                list(c50_core ORDER BY core) AS core_c50s
            FROM {CORE_STATS} GROUP BY shape
        ) c USING (shape)"""


_CORE_STATS = f"""SELECT shape, core, quantile_cont(compute_us, 0.5) AS c50_core
        FROM {SLICE_TABLE} WHERE status = 'ok' AND core IS NOT NULL GROUP BY shape, core"""

SAMPLES = (
    f"SELECT * FROM {SLICE_TABLE} WHERE on_primary AND status = 'ok' AND compute_us IS NOT NULL"
)
"""The ok requests that ran their shape's primary plan (or named no plan) and measure their
compute (a client-side record does not: `queue_known`): the compute samples
of every variant statistic (static, adapted, fallback compare like with like), gain and error
CI, and of their evidence packs."""


def records(cur: Any) -> list[dict[str, Any]]:
    """The rows of an executed query (`Connection.execute`'s result) as dicts keyed by column
    name."""
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def comment(text: str) -> str:
    """`text` as one line of a SQL comment, `-- ` and its end included: every control
    character (a newline above all) becomes a space, so no name in it can end the comment and
    run as a statement."""
    return "-- " + "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text) + "\n"


def literal(text: str) -> str:
    """A SQL string literal (DuckDB's and Spark's standard strings: a quote is doubled, a
    backslash is an ordinary character)."""
    return "'" + text.replace("'", "''") + "'"


def value_literal(value: SqlValue) -> str:
    """A SQL literal of a bound parameter's value: text, a finite number, a boolean, NULL or
    a list of them."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return repr(value)
    return "[" + ", ".join(value_literal(v) for v in value) + "]"


_TOKEN = re.compile(r"'(?:[^']|'')*'|\$([A-Za-z_][A-Za-z0-9_]*)")
"""A quoted string of the template (kept as it is) or a `$name` parameter."""


def inline(sql: str, params: Mapping[str, SqlValue]) -> str:
    """The self-contained text of a query with `$name` parameters: each parameter of the
    template replaced by its value's literal in one pass over the template, so a value is
    never scanned again (a name holding `$s` stays text) and a `$` inside the template's own
    quoted strings is left alone. What it returns runs as the bound query runs."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        return m.group(0) if name is None else value_literal(params[name])

    return _TOKEN.sub(one, sql)


def slice_definitions(
    workload: str, slice_: str, over: Sequence[float] = (), held: bool = False
) -> list[tuple[str, str, str]]:
    """(kind, name, SELECT) of the slice's objects, in dependency order: each shape's plans
    and primary plan, the requests with their derived columns and the per-core and per-shape
    statistics (with the counts above the SLA targets `over`); the requests a table when
    `held`, else a view. `load_slice` creates them; an evidence pack's SQL defines them as
    CTEs of the same text."""
    w, s = literal(workload), literal(slice_)
    named = "FILTER (WHERE plan_id IS NOT NULL)"
    return [
        (
            "TABLE",
            PLANS_TABLE,
            f"""SELECT shape, first(plan_id ORDER BY c DESC, plan_id) {named} AS plan,
            list(plan_id ORDER BY plan_id) {named} AS plan_ids,
            list(c ORDER BY plan_id) {named} AS plan_counts
        FROM (
            SELECT shape, plan_id, count(*) AS c FROM request
            WHERE workload = {w} AND slice = {s} GROUP BY shape, plan_id
        ) GROUP BY shape""",
        ),
        (
            "TABLE" if held else "VIEW",
            SLICE_TABLE,
            f"""SELECT r.shape, r.status, r.plan_id, coalesce(r.plan_variant, 'static') AS variant,
            (r.plan_variant = 'static' AND r.plan_id IS NOT NULL) AS ran_plan,
            r.stream, r.core, r.batch_size, r.mem_peak_bytes, r.source_id, r.line,
            r.ttft_us, r.itl_us, r.input_tokens, r.output_tokens,
            r.arrival_us, r.compute_end_us, r.arrival_known IS NOT FALSE AS arrival_known,
            CASE WHEN r.arrival_known IS NOT FALSE THEN r.compute_end_us - r.arrival_us END
                AS latency_us,
            CASE WHEN r.arrival_known IS NOT FALSE AND r.queue_known IS NOT FALSE
                THEN r.compute_start_us - r.queue_start_us END AS queue_us,
            CASE WHEN r.queue_known IS NOT FALSE THEN r.compute_end_us - r.compute_start_us END
                AS compute_us,
            (r.plan_id IS NULL OR pp.plan IS NULL OR r.plan_id = pp.plan) AS on_primary
        FROM request r LEFT JOIN {PLANS_TABLE} pp USING (shape)
        WHERE r.workload = {w} AND r.slice = {s}""",
        ),
        ("TABLE", CORE_STATS, _CORE_STATS),
        ("TABLE", SHAPE_STATS, shape_stats(over)),
    ]


def load_slice(con: Connection, workload: str, slice_: str, over: Sequence[float] = ()) -> None:
    """Define the slice's requests (a temporary view over the Parquet files, with the derived
    columns) and count its requests per (shape, plan) once, from which each shape's primary
    plan comes, so no query re-derives them. The view streams from Parquet: memory does not
    grow with the slice (a connection that `holds_slices` makes it a table). `over`: the SLA's
    latency targets, whose excess `shape_rows` reads.
    The next slice's load replaces them (no statement is spent dropping them)."""
    create(con, slice_definitions(workload, slice_, over, holds_slices(con)))


def create(con: Connection, definitions: list[tuple[str, str, str]]) -> None:
    """Definitions (kind, name, SELECT) as temporary objects of `con`, in their order, each
    replacing the one of its name (the previous slice's)."""
    for kind, name, select in definitions:
        con.execute(f"CREATE OR REPLACE TEMP {kind} {name} AS {select}")


def as_ctes(definitions: list[tuple[str, str, str]]) -> str:
    """Definitions as the CTEs of one self-contained query: `WITH a AS (...), b AS (...)`."""
    return "WITH " + ",\n".join(f"{name} AS ({select})" for _, name, select in definitions)


def pct_of(n: int, q: list[float] | None) -> Percentiles:
    """p50/p95/p99 from a `quantile_cont(x, QS)` list (None: no samples)."""
    if not q:
        return Percentiles(n, None, None, None)
    return Percentiles(n, float(q[0]), float(q[1]), float(q[2]))


UNMEASURED = Percentiles(0, None, None, None)
"""The percentiles of a quantity no request states."""


class ShapeRow(msgspec.Struct, frozen=True):
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
    queue_quantiles: tuple[float, ...]
    """Queue wait of ok requests at each quantile of CDF_GRID (empty without one)."""
    n_queue: int
    """ok requests that report their queue wait (behind `queue_quantiles`)."""
    n_compute: int
    """ok requests that report their compute (0: timed by the client end to end only)."""
    n_core: int
    """ok requests that name their core (0: core imbalance cannot be measured)."""
    n_mem: int
    """ok requests that report their peak memory."""
    n_ran_plan: int = 0
    """ok requests whose source states they ran a named plan as built before serving
    (`plan_variant = static` given, not defaulted): a torch.compile graph compiled in warm-up."""
    mem_p50: float | None = None
    """Median peak memory of ok requests (bytes; None when none reports it)."""
    over: dict[str, int] = msgspec.field(default_factory=dict)
    """ok requests above each configured SLA target, by quantile ("p95", "p99")."""
    cores: tuple[tuple[int, float], ...] = ()
    """(core, median compute) of its ok requests on each core, by core."""
    ttft: Percentiles = UNMEASURED
    """Time to first token of its ok requests that state it."""
    itl: Percentiles = UNMEASURED
    """Inter-token latency of its ok requests that state it."""
    input_tokens_p50: float | None = None
    output_tokens_p50: float | None = None
    """Median input and output tokens of its ok requests with token timing."""


def slices(con: Connection) -> list[tuple[str, str]]:
    """Every (workload, slice) with requests, compiles, plans, profiled ops, load sweeps,
    loadgen runs or a model's server metrics (a server's own samples, workload "", are no
    slice)."""
    # a record that names no slice (slice '') serves every slice of its workload (generic
    # compile plans), so (w, '') is a slice of its own only with requests or without siblings
    rows = con.execute(
        """
        WITH named AS (
            SELECT workload, slice FROM compile_event UNION SELECT workload, slice FROM compile_plan
            UNION SELECT workload, slice FROM op_exec UNION SELECT workload, slice FROM load_sweep
            UNION SELECT workload, slice FROM loadgen_run
            UNION SELECT workload, slice FROM metric_sample WHERE workload <> ''
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


Variants = dict[str, dict[str, tuple[int, float | None, float | None]]]
"""Per shape and variant: the compute samples' count, p50 and p95 (`variant_stats`)."""
VARIANT_FIGURES = "count(*) AS n, quantile_cont(compute_us, [0.5, 0.95]) AS q"
"""A (shape, variant) group's figures over `SAMPLES` (`variant_stats`, and
`adaptation.variant_samples` with the samples in the same scan)."""


def variants_of(rows: Iterable[tuple[Any, Any, Any, Any]]) -> Variants:
    """`Variants` from rows of (shape, variant, n, [p50, p95])."""
    variants: Variants = {}
    for shape, variant, n, q in rows:
        variants.setdefault(shape, {})[variant] = (int(n), float(q[0]), float(q[1]))
    return variants


def variant_stats(con: Connection) -> Variants:
    """Per shape and variant of the loaded slice: its compute samples' count, p50 and p95."""
    sql = f"SELECT shape, variant, {VARIANT_FIGURES} FROM ({SAMPLES}) GROUP BY shape, variant"
    return variants_of(con.execute(sql).fetchall())


def shape_rows(
    con: Connection, targets: dict[str, float] | None = None, variants: Variants | None = None
) -> list[ShapeRow]:
    """Of the loaded slice (`load_slice`), in one read of its per-shape table: per-shape counts
    and percentiles of latency, queue wait, compute and token timing (ok requests), its plans,
    its per-core compute medians, the ok requests above each SLA target in `targets` (by
    quantile name: the targets, in this order, the slice was loaded with), and each shape's
    `variants` (`variant_stats` when not given)."""
    targets = targets or {}
    main = records(con.execute(f"SELECT * FROM {SHAPE_STATS} ORDER BY shape"))
    if main and sum(k.startswith("over_") for k in main[0]) != len(targets):
        raise ValueError(f"the slice was loaded with other SLA targets than {targets}")
    variants = variants if variants is not None else variant_stats(con)
    return [_shape_row(r, targets, variants.get(r["shape"], {})) for r in main]


def _shape_row(
    r: dict[str, Any],
    targets: dict[str, float],
    variants: dict[str, tuple[int, float | None, float | None]],
) -> ShapeRow:
    """One row of the per-shape table as a `ShapeRow`."""
    n, lat, que = int(r["n"]), r["lat"], r["que"]
    plans: dict[str | None, int] = {
        str(p): int(c) for p, c in zip(r["plan_ids"] or (), r["plan_counts"] or (), strict=True)
    }
    unnamed = int(r["n_total"]) - sum(plans.values())  # requests that name no plan
    if unnamed:
        plans[None] = unnamed
    return ShapeRow(
        shape=r["shape"],
        n_total=int(r["n_total"]),
        n=n,
        latency=pct_of(n, [lat[50], lat[95], lat[99]] if lat else None),
        queue=pct_of(n, [que[49], que[94], que[98]] if que else None),
        compute=pct_of(n, r["com"]),
        variants=variants,
        plans=plans,
        plan=r["plan"],
        sources=tuple(r["sources"]),
        latency_quantiles=tuple(float(v) for v in lat or ()),
        queue_quantiles=tuple(float(v) for v in que or ()),
        n_queue=int(r["n_que"]),
        n_compute=int(r["n_com"]),
        n_core=int(r["n_core"]),
        n_ran_plan=int(r["n_ran_plan"]),
        n_mem=int(r["n_mem"]),
        mem_p50=None if r["m50"] is None else float(r["m50"]),
        over={q: int(r[f"over_{i}"]) for i, q in enumerate(targets)},
        cores=tuple(
            (int(c), float(m)) for c, m in zip(r["cores"] or (), r["core_c50s"] or (), strict=True)
        ),
        ttft=pct_of(int(r["n_ttft"]), r["ttft"]),
        itl=pct_of(int(r["n_itl"]), r["itl"]),
        input_tokens_p50=None if r["isl50"] is None else float(r["isl50"]),
        output_tokens_p50=None if r["osl50"] is None else float(r["osl50"]),
    )


Selection: TypeAlias = "tuple[str, dict[str, SqlValue]]"
"""A subquery of source ids with its bound parameters."""


def source_files(con: Connection, source_ids: list[str], also: Selection) -> list[dict[str, Any]]:
    """ingest_log rows of the given sources and of those `also` selects."""
    sql, params = also
    cur = con.execute(
        f"""SELECT source_id, path, format, rows, rejected, rejections FROM ingest_log
           WHERE list_contains($ids, source_id) OR source_id IN ({sql}) ORDER BY path""",
        {"ids": source_ids, **params},
    )
    return records(cur)


PROFILE_TABLES = ("compile_event", "op_exec", "load_sweep", "metric_sample", "loadgen_run")
"""The tables whose files are behind a slice beside its requests and plans."""


def profile_sources(
    workload: str, slice_: str, tables: Collection[str] = PROFILE_TABLES
) -> Selection:
    """The files behind a slice's compile events, per-op profiles, load sweeps, metric
    scrapes and loadgen runs (of those of `tables`: the others hold none of its rows), and
    those stating its workload's environment: a subquery the reads of the slice's files and
    of their environment each select from (no statement of its own)."""
    parts = [
        f"SELECT source_id FROM {t} WHERE workload = $w AND slice = $s"
        for t in PROFILE_TABLES
        if t in tables
    ]
    params: dict[str, SqlValue] = {"w": workload, "s": slice_} if parts else {"w": workload}
    parts.append("SELECT source_id FROM environment WHERE workload = $w")
    return " UNION ".join(parts), params
