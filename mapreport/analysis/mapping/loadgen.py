"""MLPerf loadgen runs of a slice (table `loadgen_run`): the scenario, the targets each run
was held to and what it achieved, and whether loadgen judged it valid. A run's summary and
detail log are one run: the detail log's row is kept (it has the loadgen version and date).
A run's latency target fills the slice's SLA when the configuration sets none."""

from __future__ import annotations

from typing import Any

import msgspec

from mapreport.analysis.base.common import Review
from mapreport.analysis.base.query import records
from mapreport.core.connection import Connection
from mapreport.core.records import field_names, replace

RESULTS = (
    "latency_p50_us",
    "latency_p90_us",
    "latency_p95_us",
    "latency_p99_us",
    "latency_p999_us",
    "ttft_p50_us",
    "ttft_p90_us",
    "ttft_p95_us",
    "ttft_p99_us",
    "ttft_p999_us",
    "tpot_p50_us",
    "tpot_p90_us",
    "tpot_p95_us",
    "tpot_p99_us",
    "tpot_p999_us",
)
"""The achieved percentiles a run states (us), in the report's order."""


class LoadgenRun(msgspec.Struct, frozen=True):
    """One MLPerf run: scenario, validity, targets, throughput and achieved percentiles."""

    scenario: str
    mode: str | None
    valid: bool | None
    loadgen_version: str | None
    run_at: str | None
    errors: int | None
    target_qps: float | None
    target_latency_us: float | None
    target_latency_percentile: float | None
    target_ttft_us: float | None
    target_tpot_us: float | None
    samples_per_s: float | None
    tokens_per_s: float | None
    results: dict[str, float]
    """Achieved percentiles by RESULTS name (those the run states)."""
    source_id: str


def loadgen_runs(con: Connection, workload: str, slice_: str) -> tuple[LoadgenRun, ...]:
    """The slice's runs, one per run (a summary and a detail log of the same results are one:
    the detail log's is kept)."""
    rows = records(
        con.execute(
            """SELECT * FROM loadgen_run WHERE workload = $w AND slice = $s
            ORDER BY loadgen_version IS NULL, run_at, source_id""",
            {"w": workload, "s": slice_},
        )
    )
    out: dict[tuple[object, ...], LoadgenRun] = {}
    for r in rows:
        key = (r["scenario"], r["mode"], r["latency_p99_us"], r["latency_p50_us"])
        if key in out:
            continue
        stated: dict[str, Any] = {n: r[n] for n in field_names(LoadgenRun) if n in r}
        results = {k: float(r[k]) for k in RESULTS if r.get(k) is not None}
        out[key] = LoadgenRun(**stated, results=results)
    return tuple(out.values())


SLA_QUANTILES = {0.95: "p95", 0.99: "p99"}
"""The target percentiles a slice's SLA has a slot for."""


def sla_from_runs(review: Review, runs: tuple[LoadgenRun, ...]) -> Review:
    """The review with an MLPerf run's latency target as its SLA, when the configuration sets
    none and a run's target is at p95 or p99 (a p90 target has no SLA slot: not used)."""
    if review.sla_p95_us is not None or review.sla_p99_us is not None:
        return review
    for run in runs:
        q = SLA_QUANTILES.get(round(run.target_latency_percentile or 0.0, 4))
        if q is None or not run.target_latency_us:
            continue
        how = f"MLPerf {run.scenario} run's target latency ({q})"
        if q == "p99":
            return replace(review, sla_p99_us=run.target_latency_us, sla_from=how)
        return replace(review, sla_p95_us=run.target_latency_us, sla_from=how)
    return review
