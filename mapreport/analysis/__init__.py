"""Analysis: pure functions from the canonical tables (through DuckDB) to frozen results.

`analyze_slice` runs every metric family of METRICS.md for one workload slice; the
diagnosis families (tail drivers, scheduling, classes, actions, checklist) plug in here.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import duckdb
import numpy as np

from mapreport.analysis import query
from mapreport.analysis.accuracy import shape_accuracy, summarise
from mapreport.analysis.actions import shape_actions, slice_actions
from mapreport.analysis.adaptation import shape_gain
from mapreport.analysis.checklist import checklist, pitfalls, precision_changes
from mapreport.analysis.classify import classify
from mapreport.analysis.compiles import compiles
from mapreport.analysis.coverage import coverage, place
from mapreport.analysis.decision import decide
from mapreport.analysis.environment import check_environment
from mapreport.analysis.operators import operators
from mapreport.analysis.results import (
    Interval,
    Review,
    ShapeMetrics,
    SliceResult,
    SourceFile,
    Thresholds,
)
from mapreport.analysis.scheduling import scheduling
from mapreport.analysis.stats import bootstrap_relative_error, seed_for
from mapreport.analysis.summary import summary
from mapreport.analysis.sweep import load_sweep
from mapreport.analysis.tail import attribute, combine, tail_drivers
from mapreport.shapes import sort_key

__all__ = ["Review", "SliceResult", "Thresholds", "analyze_slice", "list_slices"]


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
    con: duckdb.DuckDBPyConnection,
    workload: str,
    slice_: str,
    th: Thresholds,
    review: Review | None = None,
) -> SliceResult:
    """Every metric of METRICS.md for one slice: coverage, accuracy, adaptation gain and the
    decision per shape, then the diagnosis (tail drivers, scheduling, classes, actions,
    checklist). The slice's requests are one view over its Parquet files while it runs, with the
    primary plans computed once (`query.load_slice`)."""
    query.load_slice(con, workload, slice_)
    try:
        return _analyze(con, workload, slice_, th, review or Review())
    finally:
        query.drop_slice(con)


def _analyze(
    con: duckdb.DuckDBPyConnection, workload: str, slice_: str, th: Thresholds, review: Review
) -> SliceResult:
    rows = sorted(query.shape_rows(con), key=lambda r: sort_key(r.shape))
    buckets = query.bucket_rows(con, workload, slice_)
    placements = place(rows, buckets)
    cov = coverage(rows, buckets, placements)
    costs = query.adaptation_costs(con, workload, slice_)
    sampled = [r.shape for r in rows if "adapted" in r.variants or "static" in r.variants]
    samples = query.compute_samples(con, sampled)
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
        static_x = samples.get((r.shape, "static"))
        err_ci = None
        if acc.signed_error is not None and acc.predicted_us is not None and static_x is not None:
            err_ci = Interval(
                *bootstrap_relative_error(
                    static_x,
                    acc.predicted_us,
                    th.bootstrap_resamples,
                    seed_for(th.seed, workload, slice_, r.shape, "error"),
                )
            )
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
                signed_error_ci=err_ci,
            )
        )
    source_ids = sorted(
        {s for m in shapes for s in m.sources}
        | {s for b in buckets for s in b.sources}
        | set(query.profile_sources(con, workload, slice_))
    )
    files = query.source_files(con, source_ids)
    overall = query.slice_latency(con)
    # -- diagnosis: tail drivers and the class of each shape ------------------------------
    budgets = {
        m.shape: pl.bucket.mem_budget_bytes
        for m in shapes
        if (pl := placements[m.shape]).bucket is not None and pl.bucket.mem_budget_bytes
    }
    cores = query.core_medians(con)
    tails = query.tail_rows(con, budgets, rows, cores)
    classified = []
    evaluated = []  # attributed tail parts of every shape with tail evidence
    for m in shapes:
        t = tails.get(m.shape)
        drivers = None
        if t is not None:
            parts = attribute(t.raw)
            seed = seed_for(th.seed, workload, slice_, m.shape, "tail")
            drivers = tail_drivers(t, parts, th, review, seed)
            if drivers is not None:
                evaluated.append((parts, drivers.unmeasured))
        cls, ev, why = classify(replace(m, tail=drivers), drivers, th)
        classified.append(
            replace(m, tail=drivers, bottleneck_class=cls, class_evidence=ev, class_reason=why)
        )
    shapes = classified
    lat = overall["latency"]
    slice_tail = combine(
        evaluated,
        lat.p50,
        lat.p95,
        lat.p99,
        lat.n,
        th,
        review,
        seed_for(th.seed, workload, slice_, "tail"),
    )
    env = check_environment(query.environments(con, source_ids))
    base = SliceResult(
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
        environment=env,
        sources=tuple(
            SourceFile(
                f["source_id"],
                f["path"],
                f["format"],
                json.loads(f["rows"]),
                int(f["rejected"]),
                tuple(json.loads(f["rejections"])),
            )
            for f in files
        ),
        decisions=dict(Counter(m.decision for m in shapes)),
        review=review,
        tail=slice_tail,
        scheduling=scheduling(
            con,
            buckets,
            {m.shape: m.bucket for m in shapes if m.bucket is not None},
        ),
    )
    # -- actions, checklist, pitfalls, summary -------------------------------------------
    precisions = [b.precision for b in buckets if b.precision]
    ok_q, missing_q, failing_q = precision_changes(
        precisions, query.quality_records(con, workload, slice_)
    )
    # the precision change whose quality guardrail the validation matrices carry
    changed_all = missing_q + failing_q + ok_q
    changed = changed_all[0] if changed_all else None
    actions = []
    for m in shapes:
        slowest = None
        per_core = cores.get(m.shape, [])
        if len(per_core) > 1 and m.compute.p50:
            core, p50 = max(per_core, key=lambda c: c[1])
            slowest = (core, p50 / float(np.median([c[1] for c in per_core])) - 1)
        actions += shape_actions(base, m, changed, slowest)
    unmeasured = [
        (m.shape, {"core_imbalance": "core", "memory_burst": "mem_peak_bytes"}[u])
        for m in shapes
        if m.tail is not None and m.tail.material and m.bottleneck_class == "insufficient_evidence"
        for u in m.tail.unmeasured
    ]
    actions += slice_actions(base, env, missing_q, unmeasured)
    actions.sort(key=lambda a: (-a.impact, a.shape, a.cls))
    result = replace(
        base,
        actions=tuple(actions),
        checklist=tuple(checklist(base, actions)),
        pitfalls=tuple(pitfalls(base, actions, shapes, missing_q, failing_q)),
        latency_quantiles={r.shape: r.latency_quantiles for r in rows if r.latency_quantiles},
        operators=operators(con, workload, slice_, th, query.plan_compute_p50(con)),
        compiles=compiles(
            con,
            workload,
            slice_,
            {
                m.shape: m.baseline_p50_us - m.adapted_p50_us
                for m in shapes
                if m.gain == "significant" and m.baseline_p50_us and m.adapted_p50_us
            },
        ),
        sweep=load_sweep(con, workload, slice_, review),
    )
    return replace(result, summary=summary(result))
