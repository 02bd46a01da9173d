"""The report's sections, in order: each names its partial template and the charts it shows.

A section registered here appears in the HTML, the PDF (with a bookmark and a table-of-
contents entry) and is checked by the completeness tests; one without its data is not printed
empty but named, with the input that would add it, in the one "Not measured" section."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mapreport.analysis.steps.results import SliceResult


@dataclass(frozen=True)
class Section:
    """One report section."""

    id: str
    title: str
    template: str
    charts: tuple[str, ...] = ()
    needs_requests: bool = False
    """Not measured when the slice has no request telemetry (a compile log, a layer profile
    or a load sweep alone)."""
    needs_plan: bool = False
    """Not measured when no compile plan names the slice (served traffic alone: nothing to
    compare the runtime with)."""
    needs: str = ""
    """The result field (operators, roofline, compiles, sweep, telemetry, tokens, loadgen) that
    is None or empty when there is nothing to show."""
    optional: bool = False
    """Shown only when `needs` holds something, and never listed as not measured: its absence
    is good news, not a gap (failures and restarts)."""


SECTIONS: tuple[Section, ...] = (
    Section("summary", "Executive summary", "sections/summary.html.j2"),
    Section("scope", "Scope and SLA targets", "sections/scope.html.j2"),
    Section("environment", "Environment lock", "sections/environment.html.j2"),
    Section("coverage", "Shape coverage", "sections/coverage.html.j2", needs_requests=True),
    Section(
        "accuracy",
        "Compile-time mapping accuracy",
        "sections/accuracy.html.j2",
        ("predicted_vs_measured",),
        needs_requests=True,
        needs_plan=True,
    ),
    Section(
        "adaptation",
        "Runtime adaptation gain",
        "sections/adaptation.html.j2",
        ("accuracy_vs_gain",),
        needs_requests=True,
        needs_plan=True,
    ),
    Section(
        "operators",
        "Per-operator mapping",
        "sections/operators.html.j2",
        ("op_times",),
        needs="operators",
    ),
    Section(
        "roofline", "Device time per op and shape", "sections/roofline.html.j2", needs="roofline"
    ),
    Section("timeline", "Device timeline", "sections/timeline.html.j2", needs="timeline"),
    Section("graphs", "CUDA and HIP graph buckets", "sections/graphs.html.j2", needs="graphs"),
    Section("compiles", "Compile cost per shape", "sections/compiles.html.j2", needs="compiles"),
    Section(
        "failures",
        "Failures and restarts",
        "sections/failures.html.j2",
        needs="failures_or_restarts",
        optional=True,
    ),
    Section(
        "decisions",
        "Accuracy versus gain: decision per shape",
        "sections/decisions.html.j2",
        needs_requests=True,
        needs_plan=True,
    ),
    Section("tail", "Tail-latency drivers", "sections/tail.html.j2", ("tail_drivers",), True),
    Section("blocking", "Blocking behind adaptation", "sections/blocking.html.j2", (), True),
    Section("classes", "Bottleneck class per shape", "sections/classes.html.j2", (), True),
    Section(
        "scheduling",
        "Scheduling quality",
        "sections/scheduling.html.j2",
        ("queue_ccdf",),
        True,
        needs="scheduling_measured",
    ),
    Section("tokens", "Token latency per shape", "sections/tokens.html.j2", needs="tokens"),
    Section("serving", "Server-side metrics", "sections/serving.html.j2", needs="telemetry"),
    Section(
        "batch_policy",
        "Batch policy across configs",
        "sections/batch_policy.html.j2",
        ("sweep_curves",),
        needs="sweep",
    ),
    Section("loadgen", "Benchmark runs (MLPerf)", "sections/loadgen.html.j2", needs="loadgen"),
    Section("actions", "Retuning actions", "sections/actions.html.j2"),
    Section("profile_next", "What to profile next", "sections/profile_next.html.j2", (), True),
    Section(
        "history",
        "Closed loop across nights",
        "sections/history.html.j2",
        ("trend", "error_trend"),
    ),
    Section("checklist", "Review checklist", "sections/checklist.html.j2"),
    Section(
        "shapes",
        "Per-shape latency",
        "sections/shapes.html.j2",
        ("latency_percentiles",),
        needs_requests=True,
    ),
    Section("not_measured", "Not measured", "sections/not_measured.html.j2"),
    Section("data", "Data sources", "sections/data.html.j2"),
    Section("method", "Method and evidence rules", "sections/method.html.j2"),
    Section("glossary", "Glossary", "sections/glossary.html.j2"),
)


def not_measured(s: Section, r: SliceResult, formats: str) -> str:
    """Why a section has nothing to show for this slice and which input would add it."""
    if s.needs_requests and not r.requests:
        return (
            f"no per-request records (this slice holds {formats} data only); a native request "
            "log, a PyTorch profiler trace with request annotations, Triton trace files or "
            "Triton's OpenTelemetry spans add it (an AIPerf export adds client-side latency)"
        )
    if s.needs_plan and not r.coverage.plans:
        return (
            "no compile plan names this slice, so there is no prediction to hold the runtime "
            "against; a native compile profile, TensorRT layer info, TORCH_TRACE or TVM tuning "
            "records add one"
        )
    if s.needs == "operators":
        has = (
            "a compile plan but no per-op runtime timings"
            if r.coverage.plans
            else "no per-op compile plan"
        )
        return (
            f"this slice has {has}; a compile plan that names ops (native op lines, TensorRT "
            "--exportLayerInfo, TORCH_TRACE inductor_runtime_and_tensor_meta) and a runtime "
            "profile of the same ops (a profiler trace, TensorRT --exportProfile) add it"
        )
    if s.needs == "graphs":
        return (
            "no graph capture or replay in the traces; a profiler trace of a server that "
            'captures CUDA or HIP graphs (vLLM, SGLang, torch.compile mode="reduce-overhead") '
            "adds it, with its capture trace for the captured sizes"
        )
    if s.needs in ("roofline", "timeline"):
        return (
            "no device time; a PyTorch profiler trace with CUDA or HIP activities adds it "
            "(record_shapes on gives each op its input shapes, FLOPs and bytes)"
        )
    if s.needs == "compiles":
        return "no compile events; TORCH_TRACE logs or TVM tuning records add them"
    if s.needs == "sweep":
        return (
            "no load sweep; perf_analyzer -f CSVs or AIPerf aggregate exports at several loads "
            "add one (so do Triton Model Analyzer checkpoints, a tool its authors deprecated; "
            "the request-level batch impact is under “Scheduling quality”)"
        )
    if s.needs == "telemetry":
        return (
            "no server metrics for this model; scrapes of the server's /metrics (Triton, vLLM; "
            "several with their times give per-interval figures) or OTLP metrics add them"
        )
    if s.needs == "scheduling_measured":
        return (
            "the requests state no queue wait, batch size, core or stream (client-side timing); "
            "server-side records (a native request log, Triton traces or OpenTelemetry spans) "
            "add them"
        )
    if s.needs == "tokens":
        return "no token timing; an AIPerf profile export adds time to first token and ITL"
    if s.needs == "loadgen":
        return "no MLPerf run; its mlperf_log_summary.txt or mlperf_log_detail.txt adds one"
    return ""
