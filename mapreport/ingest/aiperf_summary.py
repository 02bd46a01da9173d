"""AIPerf's aggregate export (`profile_export_aiperf.json`; genai-perf's
`profile_export_genai_perf.json` where its layout is the same): one run's statistics (avg,
min, max, p1 ... p99, std per metric) and its `input_config`, in both layouts AIPerf has
written (statistics under `records`, or at the top level), into one `load_sweep` row: the run
is one load point of one model. Model = the endpoint's first model name (`--workload`
overrides the workload); config = the artifact folder (`input_config.output.
artifact_directory`, else the file's folder); concurrency or request rate from
`input_config.loadgen`; throughput = `request_throughput` (else requests over the benchmark's
duration); latency avg / p50 / p90 / p95 / p99 from `request_latency`, in microseconds; GPU
utilisation the mean over the telemetry's GPUs. Time to first token, inter-token latency,
token throughput, the error summary and the command line are kept in `extra`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.aiperf import TIME_US
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text, read_document
from mapreport.ingest.spec import as_float

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

LATENCY = {
    "avg": "latency_avg_us",
    "p50": "latency_p50_us",
    "p90": "latency_p90_us",
    "p95": "latency_p95_us",
    "p99": "latency_p99_us",
}
"""request_latency statistic -> load_sweep column."""
KEPT = (
    "time_to_first_token",
    "ttft",
    "inter_token_latency",
    "time_to_second_token",
    "ttst",
    "output_token_throughput",
    "output_token_throughput_per_user",
    "input_sequence_length",
    "output_sequence_length",
    "request_count",
    "error_request_count",
    "goodput",
    "benchmark_duration",
)
"""Statistics kept in `extra` as exported."""
STATS = ("avg", "p50", "p90", "p95", "p99", "min", "max")
_MARK = re.compile(
    rb'\s*\{\s*"(records|request_throughput|request_latency)"\s*:\s*\{\s*"(unit|tag)"\s*:'
    rb'|\s*\{\s*"records"\s*:\s*\{\s*"[a-z_]+"\s*:\s*\{\s*"(unit|tag)"\s*:'
)


def _stats(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-metric statistics, from either layout."""
    inner = doc.get("records")
    source = inner if isinstance(inner, dict) else doc
    return {k: v for k, v in source.items() if isinstance(v, dict) and "unit" in v}


class AiperfSummaryReader:
    """AIPerf aggregate export: one load point of one model."""

    name = "aiperf-summary"
    summary = (
        "AIPerf profile_export_aiperf.json: one run's latency percentiles, throughput, TTFT "
        "and ITL as a load point"
    )
    tables = ("load_sweep",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON object whose first key is `records` or a request statistic with a `unit`."""
        return _MARK.match(head.data) is not None

    def read(self, path: Path, sink: Sink) -> None:
        """One load_sweep row."""
        doc, _ = read_document(path)
        if not isinstance(doc, dict):
            raise InputError(path, None, None, "an AIPerf aggregate export is a JSON object")
        stats = _stats(doc)
        found = doc.get("input_config")
        config: dict[str, Any] = found if isinstance(found, dict) else {}
        endpoint = config.get("endpoint") or {}
        models = endpoint.get("model_names") or []
        model = str(models[0]) if models else path.resolve().parent.name
        loadgen = config.get("loadgen") or {}
        folder = (config.get("output") or {}).get("artifact_directory")
        latency = stats.get("request_latency")
        if latency is None:
            raise InputError(path, None, "request_latency", "the export has no request latency")
        per_us = TIME_US.get(str(latency.get("unit")))
        if per_us is None:
            raise InputError(
                path, None, "request_latency.unit", f"unknown time unit {latency.get('unit')!r}"
            )
        throughput = as_float((stats.get("request_throughput") or {}).get("avg"))
        row: dict[str, Any] = {
            "workload": sink.hints.get("workload") or model,
            "slice": sink.hints.get("slice", ""),
            "model": model,
            "config": Path(str(folder)).name if folder else path.resolve().parent.name,
            "concurrency": _int(loadgen.get("concurrency")),
            "request_rate": as_float(loadgen.get("request_rate")),
            "throughput_per_s": throughput,
            "gpu_utilization": _gpu_utilization(doc),
        }
        for stat, column in LATENCY.items():
            v = as_float(latency.get(stat))
            row[column] = v * per_us if v is not None else None
        if row["throughput_per_s"] is None:
            count, duration = stats.get("request_count"), stats.get("benchmark_duration")
            n = as_float((count or {}).get("avg"))
            d = as_float((duration or {}).get("avg"))
            scale = TIME_US.get(str((duration or {}).get("unit")))
            if n is not None and d and scale:
                row["throughput_per_s"] = n / (d * scale / 1e6)
        if row["throughput_per_s"] is None:
            raise InputError(path, None, "request_throughput", "the export has no throughput")
        row["extra"] = json_text(
            {
                "statistics": {
                    k: {s: stats[k].get(s) for s in ("unit", *STATS) if stats[k].get(s) is not None}
                    for k in KEPT
                    if k in stats
                },
                "error_summary": doc.get("error_summary") or None,
                "was_cancelled": doc.get("was_cancelled"),
                "start_time": doc.get("start_time"),
                "end_time": doc.get("end_time"),
                "cli_command": config.get("cli_command"),
                "streaming": endpoint.get("streaming"),
            }
        )
        sink.add("load_sweep", None, row)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 else None


def _gpu_utilization(doc: dict[str, Any]) -> float | None:
    """The mean GPU utilisation (a fraction) over the telemetry's GPUs, when it has any."""
    telemetry = doc.get("telemetry_data")
    endpoints = telemetry.get("endpoints") if isinstance(telemetry, dict) else None
    values = []
    for ep in (endpoints or {}).values():
        for gpu in ((ep or {}).get("gpus") or {}).values():
            util = ((gpu or {}).get("metrics") or {}).get("gpu_utilization") or {}
            v = as_float(util.get("avg"))
            if v is not None:
                values.append(v / 100)
    return sum(values) / len(values) if values else None
