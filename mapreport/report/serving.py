"""The serving-side sections' view: the server's metric windows with their labels, the MLPerf
runs' targets beside what each achieved, and what the metrics could not measure."""

from __future__ import annotations

from dataclasses import dataclass

from mapreport.analysis.base.common import within
from mapreport.analysis.mapping.loadgen import LoadgenRun
from mapreport.analysis.mapping.telemetry import MetricWindow
from mapreport.analysis.steps.results import SliceResult
from mapreport.report.filters import clock

UNMEASURED = {
    "requests": "request counts and per-interval figures (only histograms or summaries)",
    "batch_size": "average batch size (the server exports no execution count)",
    "gpu_utilization": "GPU utilisation (no GPU gauge in the scrapes)",
}
"""What a server's metrics may lack, in words."""
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


@dataclass(frozen=True)
class WindowLine:
    """One row of the server-side metrics table."""

    label: str
    m: MetricWindow
    reset: bool
    """Shown muted: a restart inside it (never on the total row, which adds every interval)."""


@dataclass(frozen=True)
class TargetLine:
    """One target of an MLPerf run beside what the run achieved."""

    what: str
    target_us: float
    at: float | None
    achieved_us: float | None
    met: bool | None


@dataclass(frozen=True)
class ServingView:
    """What the token, server-metrics and benchmark-run sections print."""

    windows: tuple[WindowLine, ...]
    unmeasured: str
    client_side: bool
    targets: tuple[tuple[TargetLine, ...], ...]
    results: tuple[tuple[tuple[str, tuple[float | None, ...]], ...], ...]
    quantiles: tuple[str, ...]


def _label(w: MetricWindow) -> str:
    if w.since_start:
        return "since the server started" + (f", to {clock(w.end_us)}" if w.end_us else "")
    if w.start_us is None or w.end_us is None:
        text = "between two scrapes"
    else:
        start, end = clock(w.start_us), clock(w.end_us)
        same_day = start[:10] == end[:10]
        text = f"{start[:-4]} – {end[11:] if same_day else end}"
    return text + (" (after a restart)" if w.reset else "")


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


def serving_view(r: SliceResult) -> ServingView:
    """The serving sections' lines for one slice."""
    t = r.telemetry
    windows: list[WindowLine] = []
    if t is not None:
        windows = [WindowLine(_label(w), w, w.reset) for w in t.windows]
        if t.total is not None and len(t.windows) > 1:
            windows.append(WindowLine("all intervals", t.total, False))
    results = tuple(
        tuple(
            (name, tuple(run.results.get(f"{family}_{q}_us") for q, _ in RUN_QUANTILES))
            for family, name in RUN_ROWS
            if any(f"{family}_{q}_us" in run.results for q, _ in RUN_QUANTILES)
        )
        for run in r.loadgen
    )
    return ServingView(
        windows=tuple(windows),
        unmeasured="; ".join(UNMEASURED[u] for u in (t.unmeasured if t else ())),
        client_side=any(m.queue.n == 0 and m.latency.n > 0 for m in r.shapes) and bool(r.tokens),
        targets=tuple(_targets(run) for run in r.loadgen),
        results=results,
        quantiles=tuple(label for _, label in RUN_QUANTILES),
    )
