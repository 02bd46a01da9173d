"""Benchmark runs (MLPerf): each run's scenario and validity, its targets beside what it
achieved, and the slice's SLA against them (mlperf_log_summary.txt or mlperf_log_detail.txt)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import SlaCheck, within
from mapreport.analysis.mapping.loadgen import LoadgenRun
from mapreport.report.sections.unit import Facts, Section

RUN_ROWS = (("latency", "Latency"), ("ttft", "Time to first token"), ("tpot", "Time per token"))
RUN_QUANTILES = (("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"), ("p999", "p99.9"))
TARGETS = (
    ("Latency", "target_latency_us", "latency", "target_latency_percentile"),
    ("Time to first token", "target_ttft_us", "ttft", None),
    ("Time per output token", "target_tpot_us", "tpot", None),
)
"""(what, target field, achieved family, the target's percentile field)."""
TOKEN_TARGET_AT = 0.99
"""MLPerf holds TTFT and TPOT targets at p99 (its LLM rules)."""


class TargetLine(msgspec.Struct, frozen=True):
    """One target of an MLPerf run beside what the run achieved."""

    what: str
    target_us: float
    at: float | None
    achieved_us: float | None
    met: bool | None


class RunLine(msgspec.Struct, frozen=True):
    """One MLPerf run: its targets, and what it achieved per family and quantile."""

    run: LoadgenRun
    targets: tuple[TargetLine, ...]
    results: tuple[tuple[str, tuple[float | None, ...]], ...]


class LoadgenView(msgspec.Struct, frozen=True):
    """The runs, the quantiles their tables head, and the slice's SLA held to them."""

    runs: tuple[RunLine, ...]
    quantiles: tuple[str, ...]
    sla_from: str | None
    """What the SLA was taken from when none is configured ('' when one is)."""
    sla: tuple[SlaCheck, ...]


class Fragment(msgspec.Struct):
    """findings.json `loadgen` (empty without MLPerf runs)."""

    loadgen: tuple[LoadgenRun, ...]


def _targets(run: LoadgenRun) -> tuple[TargetLine, ...]:
    out = []
    for what, field, family, at_field in TARGETS:
        target = getattr(run, field)
        if not target:
            continue
        at = getattr(run, at_field) if at_field else TOKEN_TARGET_AT
        key = f"{family}_p{round(at * 100):d}_us" if at else None
        achieved = run.results.get(key) if key else None
        met = within(achieved, target)
        out.append(TargetLine(what, target, at, achieved, met))
    return tuple(out)


def _results(run: LoadgenRun) -> tuple[tuple[str, tuple[float | None, ...]], ...]:
    return tuple(
        (name, tuple(run.results.get(f"{family}_{q}_us") for q, _ in RUN_QUANTILES))
        for family, name in RUN_ROWS
        if any(f"{family}_{q}_us" in run.results for q, _ in RUN_QUANTILES)
    )


def read(f: Facts) -> tuple[tuple[LoadgenRun, ...], str | None, tuple[SlaCheck, ...]]:
    """The runs, and the slice's SLA with where it came from."""
    r = f.r
    return r.serving.loadgen, r.review.sla_from, r.sla


def view(x: tuple[tuple[LoadgenRun, ...], str | None, tuple[SlaCheck, ...]]) -> LoadgenView:
    """Each run with its targets and achieved quantiles."""
    runs, sla_from, sla = x
    lines = tuple(RunLine(run, _targets(run), _results(run)) for run in runs)
    return LoadgenView(lines, tuple(label for _, label in RUN_QUANTILES), sla_from, sla)


def fragment(v: LoadgenView) -> Fragment:
    """The runs as they are."""
    return Fragment(tuple(line.run for line in v.runs))


SECTION = Section(
    "loadgen",
    "Benchmark runs (MLPerf)",
    read,
    view,
    fragment,
    has=lambda v: bool(v.runs),
    missing="no MLPerf run; its mlperf_log_summary.txt or mlperf_log_detail.txt adds one",
)
