"""Analysis: pure functions from the canonical tables (through DuckDB) to frozen results.

`analyze_slice` runs every metric family of METRICS.md for one workload slice; the
diagnosis families (tail drivers, scheduling, classes, actions, checklist) plug in here.
"""

from __future__ import annotations

import json
from collections import Counter

import duckdb

from mapreport.analysis import query
from mapreport.analysis.accuracy import shape_accuracy, summarise
from mapreport.analysis.adaptation import shape_gain
from mapreport.analysis.coverage import coverage, place
from mapreport.analysis.decision import decide
from mapreport.analysis.environment import check_environment
from mapreport.analysis.results import ShapeMetrics, SliceResult, SourceFile, Thresholds
from mapreport.shapes import sort_key

__all__ = ["SliceResult", "Thresholds", "analyze_slice", "list_slices"]


def list_slices(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """Every (workload, slice) that served requests."""
    return query.slices(con)


def _insufficient(n: int, th: Thresholds) -> tuple[str, ...]:
    out = []
    if n < th.min_samples_p95:
        out += ["latency_p95_us", "queue_p95_us", "compute_p95_us"]
    if n < th.min_samples_p99:
        out += ["latency_p99_us", "queue_p99_us", "compute_p99_us"]
    return tuple(out)


def analyze_slice(
    con: duckdb.DuckDBPyConnection, workload: str, slice_: str, th: Thresholds
) -> SliceResult:
    """Every metric of METRICS.md up to the accuracy-versus-gain decision, for one slice."""
    rows = sorted(query.shape_rows(con, workload, slice_), key=lambda r: sort_key(r.shape))
    buckets = query.bucket_rows(con, workload, slice_)
    placements = place(rows, buckets)
    cov = coverage(rows, buckets, placements)
    costs = query.adaptation_costs(con, workload, slice_)
    adapted_shapes = [r.shape for r in rows if "adapted" in r.variants]
    samples = query.compute_samples(con, workload, slice_, adapted_shapes)
    total = sum(r.n_total for r in rows)
    shapes = []
    acc_pairs = []
    for r in rows:
        pl = placements[r.shape]
        covered = pl.bucket is not None
        static = r.variants.get("static", (0, None, None))
        acc = shape_accuracy(
            covered, pl.bucket.predicted_us if pl.bucket else None, static[0], static[1], th
        )
        share = r.n_total / total if total else 0.0
        acc_pairs.append((share, acc))
        n_events, cost = costs.get(r.shape, (0, 0.0))
        gain = shape_gain(
            (workload, slice_, r.shape),
            covered,
            {v: x for (s, v), x in samples.items() if s == r.shape},
            cost,
            th,
        )
        decision, reason = decide(acc.state, gain.state, gain.reason)
        sources = tuple(sorted(set(r.sources) | set(pl.bucket.sources if pl.bucket else ())))
        shapes.append(
            ShapeMetrics(
                shape=r.shape,
                n_total=r.n_total,
                n=r.n,
                n_failed=r.n_total - r.n,
                traffic_share=share,
                covered=covered,
                plan_id=pl.plan_id,
                bucket=pl.bucket.bucket if pl.bucket else None,
                latency=r.latency,
                queue=r.queue,
                compute=r.compute,
                n_static=static[0],
                n_adapted=r.variants.get("adapted", (0, None, None))[0],
                n_fallback=r.variants.get("fallback", (0, None, None))[0],
                predicted_us=acc.predicted_us,
                measured_static_p50_us=acc.measured_static_p50_us,
                signed_error=acc.signed_error,
                ape=acc.ape,
                accuracy=acc.state,
                baseline_variant=gain.baseline_variant,
                baseline_p50_us=gain.baseline_p50_us,
                adapted_p50_us=gain.adapted_p50_us,
                gain_p50=gain.gain_p50,
                gain_p50_ci=gain.gain_p50_ci,
                gain_p95=gain.gain_p95,
                gain_p95_ci=gain.gain_p95_ci,
                adaptation_events=n_events,
                adaptation_cost_us=cost,
                adaptation_cost_per_request_us=gain.cost_per_request_us,
                net_gain_p50=gain.net_gain_p50,
                net_gain_p50_ci=gain.net_gain_p50_ci,
                gain=gain.state,
                decision=decision,
                decision_reason=reason,
                insufficient=_insufficient(r.n, th),
                sources=sources,
            )
        )
    source_ids = sorted({s for m in shapes for s in m.sources} | {
        s for b in buckets for s in b.sources
    })
    files = query.source_files(con, source_ids)
    overall = query.slice_latency(con, workload, slice_)
    return SliceResult(
        workload=workload,
        slice=slice_,
        thresholds=th,
        requests=overall["requests"],
        failed=overall["failed"],
        window_start_us=overall["window"][0],
        window_end_us=overall["window"][1],
        latency=overall["latency"],
        shapes=tuple(shapes),
        coverage=cov,
        accuracy=summarise(acc_pairs, th),
        environment=check_environment(query.environments(con, source_ids)),
        sources=tuple(
            SourceFile(f["source_id"], f["path"], f["format"], json.loads(f["rows"]),
                       int(f["rejected"]))
            for f in files
        ),
        decisions=dict(Counter(m.decision for m in shapes)),
    )
