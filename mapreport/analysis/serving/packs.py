"""The packs of the serving figures (docs/evidence.md): a driver's share of the tail, the net
gain of adaptation, a prediction's APE and drift (the shape's compute samples), the share of
requests blocked behind adaptation, the queue check against a server's counters, and the
records (environment and files) a finding names. Each query selects the slice's rows by the
analysis's own text (`query.slice_definitions`, `blocking.blocking_definitions`,
`tail.tail_sql`), every value a literal written in one pass (`query.inline`); each figure is
recomputed by the analysis's own functions, with the same seeds: nothing is computed a second
way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from mapreport.analysis.base.common import SLICE_WIDE, Thresholds
from mapreport.analysis.base.packs import (
    PACK_ROWS,
    NoParams,
    Pack,
    PackKind,
    QueueParams,
    Recomputed,
    SampleParams,
    SourceParams,
    TailParams,
    declare,
)
from mapreport.analysis.base.query import (
    BLOCKED_TABLE,
    SAMPLES,
    SLICE_TABLE,
    SqlValue,
    as_ctes,
    inline,
    literal,
    slice_definitions,
)
from mapreport.analysis.base.stats import (
    Sample,
    SortedArray,
    bootstrap_relative_error,
    quantile,
    seed_for,
    wilson_interval,
)
from mapreport.analysis.mapping.accuracy import shape_accuracy
from mapreport.analysis.mapping.consistency import difference
from mapreport.analysis.mapping.environment import check_environment
from mapreport.analysis.mapping.telemetry import (
    POINT_ROWS,
    points_of,
    series_of,
    vocabulary_named,
    windows,
)
from mapreport.analysis.serving.adaptation import shape_gain
from mapreport.analysis.serving.blocking import blocking_definitions
from mapreport.analysis.serving.tail import (
    DRIVERS,
    PART_COLUMNS,
    attribute,
    group_tails,
    pooled,
    resample,
    tail_sql,
)
from mapreport.core.kinds import Reduction
from mapreport.core.schema import ENVIRONMENT_COMPARED


def slice_tables(workload: str, slice_: str) -> str:
    """The slice's objects as CTEs of the text the analysis creates them from."""
    return as_ctes(
        [
            *slice_definitions(workload, slice_),
            *blocking_definitions(workload, slice_),
        ]
    )


def tail_rows_sql(workload: str, slice_: str, budgets: dict[str, float], live: bool = False) -> str:
    """Every shape's tail rows: each tail pack's rows are these rows of its shapes. `live`: over
    the slice's temporary objects as the analysis left them on the connection (the same
    definitions: `load_slice`, `load_blocking`), not made again as CTEs."""
    select = f"SELECT * FROM ({tail_sql(budgets)})"
    return select if live else f"{slice_tables(workload, slice_)}\n{select}"


SAMPLE_REDUCTIONS = frozenset({Reduction.NET_GAIN, Reduction.APE, Reduction.DRIFT})
"""The packs of one shape's compute samples (and, for the gain, its adaptation events)."""


def sample_rows_sql(workload: str, slice_: str, shapes: Sequence[str], live: bool = False) -> str:
    """The sample rows and adaptation events of `shapes`, in the order of a sample pack's
    query: a sample pack's rows are these rows of its shape (the samples alone but for the
    gain). Only the shapes with a sample pack: the rows are sorted, and on the 1M benchmark
    every shape's samples were 0.53 s of the report's packs. `live`: over the slice's temporary
    objects (`live_sql`)."""
    sql = _samples_sql(workload, slice_, None, events=True, among=shapes)
    return live_sql(sql, workload, slice_) if live else sql


def live_sql(sql: str, workload: str, slice_: str) -> str:
    """A pack's query over the slice's temporary objects as the analysis left them on its
    connection (`load_slice` and `load_blocking` make them of the same definitions), not made
    again as CTEs: the query less its CTEs (a query without them, unchanged)."""
    return sql.removeprefix(f"{slice_tables(workload, slice_)}\n")


def _tail_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    pooled_ = shape == SLICE_WIDE
    select = tail_sql(params.budgets, None if pooled_ else shape)
    where = inline(" WHERE list_contains($shapes, shape)", {"shapes": params.shapes})
    return f"{slice_tables(workload, slice_)}\nSELECT * FROM ({select}){where if pooled_ else ''}"


def _samples_sql(
    workload: str,
    slice_: str,
    shape: str | None,
    events: bool,
    among: Sequence[str] | None = None,
) -> str:
    """The shape's (every shape's of `among`: None) ok compute samples on its primary plan
    (and its adaptation events)."""
    if shape is None and among is not None:
        only, also = " WHERE list_contains($among, shape)", " AND list_contains($among, shape)"
    else:
        only = "" if shape is None else " WHERE shape = $shape"
        also = "" if shape is None else " AND shape = $shape"
    sql = (
        f"SELECT 'sample' AS kind, shape, variant AS what, compute_us AS value, source_id, line "
        f"FROM ({SAMPLES}){only}"
    )
    if events:
        sql += (
            " UNION ALL SELECT 'event', shape, event, coalesce(dur_us, 0), source_id, line "
            "FROM adaptation_event WHERE workload = $w AND slice = $s" + also
        )
    select = f"SELECT * FROM ({sql}) ORDER BY kind, what, value, source_id, line"
    bound: dict[str, SqlValue] = {"w": workload, "s": slice_, "shape": shape}
    if among is not None:
        bound["among"] = list(among)
    return f"{slice_tables(workload, slice_)}\n" + inline(select, bound)


def _queue_check_sql(workload: str, slice_: str, q: QueueParams) -> str:
    """The records inside the check's window and the server's counters per scrape."""
    metrics = sorted({m for m, _ in vocabulary_named(q.server).series()})
    select = (
        "SELECT 'record' AS kind, source_id, NULL::INTEGER AS scrape, "
        "arrival_us AS scrape_us, NULL AS metric, NULL AS sample, NULL AS type, queue_us AS value"
        f" FROM {SLICE_TABLE} WHERE status = 'ok' AND queue_us IS NOT NULL"
        " AND arrival_us > $start AND arrival_us <= $end"
        "\nUNION ALL\nSELECT 'scrape' AS kind, * FROM ("
        f"{POINT_ROWS}) ORDER BY kind, source_id, scrape, scrape_us, metric, sample, type, value"
    )
    bound: dict[str, SqlValue] = {
        "w": workload,
        "s": slice_,
        "metrics": metrics,
        "start": float(q.start_us),
        "end": float(q.end_us),
    }
    return f"{slice_tables(workload, slice_)}\n" + inline(select, bound)


def _samples_pack_sql(
    reduction: Reduction, workload: str, slice_: str, shape: str, params: Any
) -> str:
    return _samples_sql(workload, slice_, shape, events=reduction == Reduction.NET_GAIN)


def _blocked_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    return (
        f"{slice_tables(workload, slice_)}\nSELECT b.*, (SELECT count(*) FROM {SLICE_TABLE} "
        f"WHERE status = 'ok') AS ok FROM {BLOCKED_TABLE} b WHERE blocked_by IS NOT NULL "
        "ORDER BY source_id, line"
    )


def _queue_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    return _queue_check_sql(workload, slice_, params)


def _environment_sql(
    reduction: Reduction, workload: str, slice_: str, shape: str, params: Any
) -> str:
    return inline(
        "SELECT * FROM environment WHERE list_contains($ids, source_id) ORDER BY source_id, line",
        {"ids": params.sources},
    )


def _records_sql(reduction: Reduction, workload: str, slice_: str, shape: str, params: Any) -> str:
    return inline(
        "SELECT source_id, path, format, rows, rejected FROM ingest_log "
        "WHERE list_contains($ids, source_id) ORDER BY path",
        {"ids": params.sources},
    )


def _tail_share(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    params = p.typed()
    tails = group_tails(rows)
    # each shape's tail resampled with its own seed, as the analysis did (`tail.pooled`)
    resampled = [
        resample(
            attribute(tails[s][0]),
            th.bootstrap_resamples,
            seed_for(th.seed, p.workload, p.slice, s, "tail"),
        )
        for s in params.shapes
        if s in tails
    ]
    parts, sh, cis = pooled(resampled)
    ci = cis.get(params.driver)
    interval = None if ci is None else (ci.low, ci.high)
    share = None if sh is None else sh.get(params.driver)
    return Recomputed(share, len(parts), interval, rows.num_rows, files)


def _blocked_share(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    ok = int(rows["ok"][0].as_py()) if rows.num_rows else 0
    blocked = rows.num_rows
    wilson = wilson_interval(blocked, ok) if ok else None
    return Recomputed(blocked / ok if ok else None, ok, wilson, blocked, files)


def _environment(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    check = check_environment(rows.to_pylist())
    return Recomputed(float(len(check.mismatches)), 0, None, rows.num_rows, files)


def _records(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    return Recomputed(None, 0, None, rows.num_rows, files)


def _queue(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    return _queue_check(p.typed(), rows, files)


def _samples(p: Pack, rows: pa.Table, th: Thresholds, files: tuple[str, ...]) -> Recomputed:
    return _from_samples(p, p.typed(), rows, th, files)


def _queue_check(q: QueueParams, rows: pa.Table, files: tuple[str, ...]) -> Recomputed:
    """The records' mean against the counters' total, by the analysis's own functions."""
    vocab = vocabulary_named(q.server)
    recs = [x["value"] for x in rows.to_pylist() if x["kind"] == "record"]
    cols = ("source_id", "scrape", "scrape_us", "metric", "sample", "type", "value")
    scraped = [tuple(x[c] for c in cols) for x in rows.to_pylist() if x["kind"] == "scrape"]
    _, total = windows(series_of(points_of(scraped, vocab)), vocab, {})
    if not recs or total is None or total.queue_mean_us is None:
        return Recomputed(None, len(recs), None, rows.num_rows, files)
    figure = difference(sum(recs) / len(recs), total.queue_mean_us)
    return Recomputed(figure, len(recs), None, rows.num_rows, files)


def _from_samples(
    p: Pack, params: SampleParams, rows: pa.Table, th: Thresholds, files: tuple[str, ...]
) -> Recomputed:
    samples: dict[str, list[float]] = {}
    n_events, cost = 0, 0.0
    for kind, what, value in zip(
        rows["kind"].to_pylist(), rows["what"].to_pylist(), rows["value"].to_pylist(), strict=True
    ):
        if kind == "sample":
            samples.setdefault(what, []).append(value)
        else:
            n_events, cost = n_events + 1, cost + value
    arrays: dict[str, Sample] = {k: SortedArray(v) for k, v in samples.items()}
    if p.reduction == Reduction.NET_GAIN:
        key = (p.workload, p.slice, p.shape)
        g = shape_gain(key, bool(params.covered), arrays, (n_events, cost), th)
        gci = g.net_gain_p50_ci
        return Recomputed(
            g.net_gain_p50,
            g.n_adapted,
            None if gci is None else (gci.low, gci.high),
            rows.num_rows,
            files,
        )
    static = arrays.get("static", SortedArray([]))
    p50 = quantile(static, 0.5) if len(static) else None
    acc = shape_accuracy(True, params.predicted_us, len(static), p50, th)
    ci = None
    if acc.signed_error is not None and acc.predicted_us is not None:
        seed = seed_for(th.seed, p.workload, p.slice, p.shape, "error")
        ci = bootstrap_relative_error(static, acc.predicted_us, th.bootstrap_resamples, seed)
    if p.reduction == Reduction.DRIFT:
        base = params.baseline or 0.0
        moved = None if acc.signed_error is None else acc.signed_error - base
        shifted = None if ci is None else (ci[0] - base, ci[1] - base)
        return Recomputed(moved, len(static), shifted, rows.num_rows, files)
    return Recomputed(acc.ape, len(static), ci, rows.num_rows, files)


def _tail_share_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """`attribute` row by row (each driver takes at most what the drivers before it left of
    the excess, clipped at zero; the residual is the rest), then `shares`: the driver's parts
    over every part, at most 1, none without excess. n: the tail requests."""
    raw = [f"greatest({c}, 0)" for c in PART_COLUMNS[1:]]
    steps = ["greatest(excess, 0) AS left0"]
    for i, column in enumerate(raw, start=1):
        steps += [f"least({column}, left{i - 1}) AS part{i}", f"left{i - 1} - part{i} AS left{i}"]
    parts = [f"part{i}" for i in range(1, len(raw) + 1)] + [f"left{len(raw)}"]
    mine, total = parts[DRIVERS.index(params.driver)], " + ".join(parts)
    attributed = ",\n    ".join(steps)
    return (
        f"SELECT CASE WHEN sum({total}) > 0\n    THEN least(1.0, sum({mine}) / sum({total})) END "
        f"AS value,\n    count(*) AS n\nFROM (SELECT\n    {attributed}\nFROM {PACK_ROWS})"
    )


def _of_variant(aggregate: str, variant: str) -> str:
    """`aggregate` over the pack's samples of one variant (a literal or a `$` parameter)."""
    return f"{aggregate} FILTER (WHERE kind = 'sample' AND what = {variant})"


def _samples_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """The median (numpy's linear quantile, DuckDB's `quantile_cont`) of the shape's samples by
    variant. A net gain (`shape_gain`): 1 - (adapted p50 + its events' time per adapted
    request) / baseline p50 (static when covered, else fallback), both with at least
    `min_samples`; n: the adapted samples. An APE (`shape_accuracy`): |predicted - static
    p50| / static p50, with at least `min_samples` static samples; a drift: the signed error
    less its baseline; n: the static samples."""
    median, count = "quantile_cont(value, 0.5)", "count(*)"
    adapted, static = "'adapted'", "'static'"
    if reduction == Reduction.NET_GAIN:
        select = (
            "SELECT CASE WHEN na >= $min AND nb >= $min THEN 1 - (pa + cost / na) / pb END "
            f"AS value, na AS n FROM (SELECT {_of_variant(median, adapted)} AS pa, "
            f"{_of_variant(count, adapted)} AS na, {_of_variant(median, '$base')} AS pb, "
            f"{_of_variant(count, '$base')} AS nb, "
            f"coalesce(sum(value) FILTER (WHERE kind = 'event'), 0) AS cost FROM {PACK_ROWS})"
        )
        base = "static" if params.covered else "fallback"
        return inline(select, {"base": base, "min": max(th.min_samples, 1)})
    error = "($predicted - p50) / p50"
    error = f"{error} - $baseline" if reduction == Reduction.DRIFT else f"abs({error})"
    select = (
        f"SELECT CASE WHEN ns >= $min AND p50 > 0 AND $predicted IS NOT NULL THEN {error} END "
        f"AS value, ns AS n FROM (SELECT {_of_variant(median, static)} AS p50, "
        f"{_of_variant(count, static)} AS ns FROM {PACK_ROWS})"
    )
    predicted = None if params.predicted_us is None else float(params.predicted_us)
    values: dict[str, SqlValue] = {"min": th.min_samples, "predicted": predicted}
    return inline(select, values | {"baseline": float(params.baseline or 0.0)})


def _blocked_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """The requests blocked behind adaptation over the slice's ok requests; n: the ok
    requests (none without a blocked request)."""
    return (
        "SELECT CASE WHEN count(*) > 0 AND max(ok) > 0 THEN count(*) / max(ok) END AS value, "
        f"CASE WHEN count(*) > 0 THEN max(ok) ELSE 0 END AS n FROM {PACK_ROWS}"
    )


def _environment_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """`check_environment`'s mismatches: the compared keys for which either side states
    several values, or both state one and they differ."""
    values = " UNION ALL ".join(
        f'SELECT side, {literal(k)} AS key, "{k}" AS v FROM {PACK_ROWS}'
        for k in ENVIRONMENT_COMPARED
    )
    per_side = ", ".join(
        f"count(DISTINCT v) FILTER (WHERE side = '{s}') AS n_{s}, "
        f"min(v) FILTER (WHERE side = '{s}') AS v_{s}"
        for s in ("compile", "runtime")
    )
    return (
        "SELECT count(*) FILTER (WHERE n_compile > 1 OR n_runtime > 1 OR (n_compile = 1 "
        "AND n_runtime = 1 AND v_compile <> v_runtime))::DOUBLE AS value "
        f"FROM (SELECT key, {per_side} FROM ({values}) WHERE v IS NOT NULL GROUP BY key)"
    )


def _series_match(series: tuple[str, str]) -> str:
    """The scrape rows of one series (`telemetry._matches`): a family's sample of the suffix, or
    the counter itself (named with or without `_total`)."""
    family, suffix = series
    if suffix:
        return f"metric = {literal(family)} AND sample = {literal(family + suffix)}"
    names = f"{literal(family)}, {literal(family + '_total')}"
    return f"metric = {literal(family)} AND type = 'counter' AND sample IN ({names})"


def _delta(column: str) -> str:
    """A series' increase from the point before (`telemetry._delta`): its value at a
    series' one point, nothing where either point lacks it, the value itself after a reset."""
    return (
        f"CASE WHEN a.{column} IS NULL THEN NULL WHEN m = 1 THEN a.{column} "
        f"WHEN b.{column} IS NULL THEN NULL WHEN a.{column} < b.{column} THEN a.{column} "
        f"ELSE a.{column} - b.{column} END"
    )


def _queue_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """`consistency.difference` of the records' mean queue wait and the counters' (`telemetry
    .windows`' total): each scrape's series summed over the rows that match them, points with
    the request counter, one series of every file's one timed scrape (by time) or one per file
    (by scrape), the increases between consecutive points added (none where one is missing),
    the queue time (in us) over the queued requests. n: the records."""
    v = vocabulary_named(params.server)
    counted = v.counts[1] if v.counts[1] is not None else v.requests
    named = [("req", v.requests), ("nq", counted)]
    named += [(f"q{i}", s) for i, s in enumerate(v.queue_time)]
    values = ", ".join(f"fsum(value) FILTER (WHERE {_series_match(s)}) AS {c}" for c, s in named)
    queued = [f"q{i}" for i in range(len(v.queue_time))]
    absent = " AND ".join(f"{_delta(c)} IS NULL" for c in queued) or "true"
    added = " + ".join(f"coalesce({_delta(c)}, 0)" for c in queued) or "0"
    select = f"""WITH points AS (
    SELECT source_id, scrape, min(scrape_us) AS t, {values}
    FROM {PACK_ROWS} WHERE kind = 'scrape' GROUP BY source_id, scrape
),
kept AS (SELECT *, count(*) OVER (PARTITION BY source_id) AS per_file FROM points
    WHERE req IS NOT NULL),
merged AS (SELECT coalesce(bool_and(t IS NOT NULL) AND max(per_file) = 1, false) AS one FROM kept),
ordered AS (
    SELECT kept.*, CASE WHEN one THEN '' ELSE source_id END AS series, row_number() OVER (
        PARTITION BY CASE WHEN one THEN '' ELSE source_id END
        ORDER BY CASE WHEN one THEN t END, CASE WHEN one THEN source_id END, scrape) AS k
    FROM kept, merged
),
sized AS (SELECT *, count(*) OVER (PARTITION BY series) AS m FROM ordered),
pairs AS (
    SELECT CASE WHEN {absent} THEN NULL ELSE ({added}) * $scale END AS queue_us,
        {_delta("nq")} AS n_queue
    FROM sized a LEFT JOIN ordered b ON b.series = a.series AND b.k = a.k - 1
    WHERE a.m = 1 OR a.k >= 2
),
counters AS (
    SELECT CASE WHEN count(*) = count(queue_us) AND count(*) = count(n_queue)
        AND fsum(n_queue) <> 0 THEN fsum(queue_us) / fsum(n_queue) END AS mean
    FROM pairs
),
records AS (SELECT count(*) AS n, favg(value) AS mean FROM {PACK_ROWS} WHERE kind = 'record')
SELECT CASE WHEN records.n = 0 OR counters.mean IS NULL THEN NULL
    WHEN counters.mean > 0 THEN (records.mean - counters.mean) / counters.mean
    WHEN records.mean > 0 THEN 1.0 ELSE 0.0 END AS value, records.n AS n
FROM records, counters"""
    return inline(select, {"scale": float(v.time_us)})


def _records_figure(reduction: Reduction, params: Any, th: Thresholds) -> str:
    """No figure: the finding is what the records hold or lack."""
    return "SELECT NULL::DOUBLE AS value"


KINDS = declare(
    {
        Reduction.TAIL_SHARE: PackKind(_tail_sql, _tail_share, _tail_share_figure, TailParams),
        Reduction.NET_GAIN: PackKind(_samples_pack_sql, _samples, _samples_figure, SampleParams),
        Reduction.APE: PackKind(_samples_pack_sql, _samples, _samples_figure, SampleParams),
        Reduction.DRIFT: PackKind(_samples_pack_sql, _samples, _samples_figure, SampleParams),
        Reduction.BLOCKED_SHARE: PackKind(_blocked_sql, _blocked_share, _blocked_figure, NoParams),
        Reduction.QUEUE_CHECK: PackKind(_queue_sql, _queue, _queue_figure, QueueParams),
        Reduction.ENVIRONMENT: PackKind(
            _environment_sql, _environment, _environment_figure, SourceParams
        ),
        Reduction.RECORDS: PackKind(_records_sql, _records, _records_figure, SourceParams),
    }
)
"""The serving figures' packs: each reduction's query and recompute function."""
