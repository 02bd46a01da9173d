"""The executive summary sentence of a slice: its primary metric and its biggest fix."""

from __future__ import annotations

from mapreport.analysis.results import SliceResult
from mapreport.units import duration, pct


def summary(r: SliceResult) -> str:
    """One sentence: tail latency against the SLA, coverage, cost-model error, and the top
    action (or that none is called for)."""
    lat = r.latency
    use_p99 = lat.n >= r.thresholds.min_samples_p99
    q, value = ("p99", lat.p99) if use_p99 else ("p95", lat.p95)
    sla = r.review.sla_p99_us if use_p99 else r.review.sla_p95_us
    if sla is None:
        against = " (no SLA configured)"
    else:
        met = "met" if value is not None and value <= sla else "missed"
        against = f" against an SLA of {duration(sla)} ({met})"
    if r.requests:
        head = (
            f"{r.name}: {q} latency {duration(value)}{against} over {lat.n:,} requests; "
            f"{pct(r.coverage.covered_traffic_share)} of traffic covered by the compile plan, "
            f"cost-model MAPE {pct(r.accuracy.mape_weighted)}."
        )
    else:
        head = f"{r.name}: no request telemetry; " + "; ".join(_offline(r)) + "."
    if not r.actions:
        return head + " No action is called for."
    top = r.actions[0]
    return head + f" {len(r.actions)} action(s); the biggest: {top.title}."


def _offline(r: SliceResult) -> list[str]:
    """What a slice without requests does hold: per-op mapping, compiles, a load sweep."""
    parts = []
    ops = r.operators
    if ops is not None:
        parts.append(
            f"{ops.matched_ops} of {ops.planned_ops} planned ops joined with measured times "
            f"({pct(ops.matched_time_share)} of measured op time)"
        )
    c = r.compiles
    if c is not None:
        parts.append(
            f"{c.compiles} compile(s), {c.recompiles} recompile(s) over {len(c.shapes)} shape(s), "
            f"{duration(c.compile_ms * 1e3)} compiling"
        )
    w = r.sweep
    if w is not None:
        parts.append(
            f"{w.configs_total} model config(s) swept at {w.points} load point(s), best "
            f"{w.best or '–'}"
        )
    return parts or ["nothing to report beyond the data sources"]
