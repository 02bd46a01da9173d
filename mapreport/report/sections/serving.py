"""Server-side metrics: the model server's own counters per interval between scrapes, the
quantiles it exports, and the records' queue wait held against its counters (scrapes of a
server's /metrics, or OTLP metrics)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.mapping.consistency import QueueCheck
from mapreport.analysis.mapping.telemetry import MetricQuantile, MetricWindow, Telemetry
from mapreport.report.filters import clock
from mapreport.report.sections.unit import Facts, Section, shallow

UNMEASURED = {
    "requests": "request counts and per-interval figures (only histograms or summaries)",
    "batch_size": "average batch size (the server exports no execution count)",
    "gpu_utilization": "GPU utilisation (no GPU gauge in the scrapes)",
}
"""What a server's metrics may lack, in words."""


class WindowLine(msgspec.Struct, frozen=True):
    """One row of the server-side metrics table."""

    label: str
    m: MetricWindow
    reset: bool
    """Shown muted: a restart inside it (never on the total row, which adds every interval)."""


class ServingView(msgspec.Struct, frozen=True):
    """The server's metrics, their table's rows, and the records against the counters."""

    t: Telemetry | None
    windows: tuple[WindowLine, ...]
    unmeasured: str
    """What the metrics cannot measure, in words."""
    check: QueueCheck | None


class ServerWindow(msgspec.Struct):
    """One interval of the server's metrics (`MetricWindow`) with its throughput."""

    start_us: float | None
    end_us: float | None
    since_start: bool
    reset: bool
    requests: float
    failures: float | None
    queue_share: float | None
    queue_mean_us: float | None
    compute_mean_us: float | None
    request_mean_us: float | None
    batch_mean: float | None
    gpu_utilization: float | None
    throughput_per_s: float | None


class ServerMetrics(msgspec.Struct):
    """findings.json `telemetry`: the server's metrics (`Telemetry`), each window with its
    throughput."""

    server: str
    scrapes: int
    windows: tuple[ServerWindow, ...]
    total: ServerWindow | None
    quantiles: tuple[MetricQuantile, ...]
    resets: int
    unmeasured: tuple[str, ...]
    sources: tuple[str, ...]


class CountersCheck(msgspec.Struct):
    """findings.json `queue_check`: the records' mean queue wait against the counters'."""

    records_mean_us: float
    records_n: int
    metrics_mean_us: float
    metrics_requests: float
    start_us: float
    end_us: float
    difference: float
    tolerance: float
    disagrees: bool


class Fragment(msgspec.Struct):
    """findings.json `telemetry` and `queue_check` (null without them)."""

    telemetry: ServerMetrics | None
    queue_check: CountersCheck | None


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


def read(f: Facts) -> tuple[Telemetry | None, QueueCheck | None]:
    """The server's metrics and the records' check against them."""
    return f.r.serving.telemetry, f.r.serving.queue_check


def view(x: tuple[Telemetry | None, QueueCheck | None]) -> ServingView:
    """The table's rows: each interval, and all of them when there are several."""
    t, check = x
    windows: list[WindowLine] = []
    if t is not None:
        windows = [WindowLine(_label(w), w, w.reset) for w in t.windows]
        if t.total is not None and len(t.windows) > 1:
            windows.append(WindowLine("all intervals", t.total, False))
    unmeasured = "; ".join(UNMEASURED[u] for u in (t.unmeasured if t else ()))
    return ServingView(t, tuple(windows), unmeasured, check)


def _window(w: MetricWindow) -> ServerWindow:
    return ServerWindow(**shallow(w), throughput_per_s=w.throughput_per_s)


def fragment(v: ServingView) -> Fragment:
    """The metrics with each window's throughput, the check with whether it disagrees."""
    t, c = v.t, v.check
    metrics = None
    if t is not None:
        windows = tuple(map(_window, t.windows))
        total = _window(t.total) if t.total else None
        metrics = ServerMetrics(**shallow(t) | {"windows": windows, "total": total})
    check = None if c is None else CountersCheck(**shallow(c), disagrees=c.disagrees)
    return Fragment(metrics, check)


SECTION = Section(
    "serving",
    "Server-side metrics",
    read,
    view,
    fragment,
    has=lambda v: v.t is not None,
    missing="no server metrics for this model; scrapes of the server's /metrics (Triton, vLLM; "
    "several with their times give per-interval figures) or OTLP metrics add them",
)
