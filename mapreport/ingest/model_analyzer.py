"""Triton Model Analyzer checkpoints (`model-analyzer profile` writes `<checkpoint dir>/N.ckpt`,
one JSON document): per model config (max batch size, instances, dynamic batching) and per
perf_analyzer load point (batch size, concurrency or request rate), the measured latency
percentiles, client and server time split, throughput and GPU use, into `load_sweep`.

Model Analyzer stores times in milliseconds and GPU memory in MB; the table holds microseconds
and bytes. A multi-model run (`"a,b"`) yields one row per model per load point. Defaults:
workload = the model name, slice = empty; `--workload` / `--slice` override them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text, read_document
from mapreport.ingest.spec import as_float

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

RESULTS = "ResultManager.results"
_MS = {
    "perf_latency_avg": "latency_avg_us",
    "perf_latency_p90": "latency_p90_us",
    "perf_latency_p95": "latency_p95_us",
    "perf_latency_p99": "latency_p99_us",
    "perf_client_send_recv": "client_send_recv_us",
    "perf_client_response_wait": "client_response_wait_us",
    "perf_server_queue": "server_queue_us",
    "perf_server_compute_input": "server_compute_input_us",
    "perf_server_compute_infer": "server_compute_infer_us",
    "perf_server_compute_output": "server_compute_output_us",
}
"""Model Analyzer metric tag (milliseconds) -> load_sweep column (microseconds)."""


def _values(pairs: Any) -> dict[str, float]:
    """`[[tag, {"_value": v}], ...]` -> {tag: v} for the numeric values."""
    out: dict[str, float] = {}
    for pair in pairs if isinstance(pairs, list) else []:
        if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], dict):
            v = as_float(pair[1].get("_value"))
            if v is not None:
                out[str(pair[0])] = v
    return out


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.isascii() and v.isdigit():
        return int(v)
    return None


def _config(run_config: Any) -> dict[str, Any]:
    """The model config of one run config (`_model_config_variant.model_config`, or the older
    `_model_config`)."""
    if not isinstance(run_config, dict):
        return {}
    variant = run_config.get("_model_config_variant")
    if isinstance(variant, dict) and isinstance(variant.get("model_config"), dict):
        return dict(variant["model_config"])
    mc = run_config.get("_model_config")
    return dict(mc) if isinstance(mc, dict) else {}


class ModelAnalyzerReader:
    """Triton Model Analyzer checkpoints: the measured config x load sweep."""

    name = "model-analyzer"
    summary = (
        "Triton Model Analyzer checkpoint (.ckpt): latency p90/p95/p99, queue/compute split and "
        "throughput per model config and concurrency"
    )
    tables = ("load_sweep",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = (
        "Model Analyzer is deprecated by its authors (2025): profile with perf_analyzer "
        "(-f CSV, format perf-analyzer) or AIPerf (formats aiperf, aiperf-summary)"
    )

    def sniff(self, head: Head) -> bool:
        """A JSON object whose first key is Model Analyzer's result manager state."""
        text = head.data.lstrip()
        return text.startswith(b"{") and text[1:].lstrip().startswith(b'"' + RESULTS.encode())

    def read(self, path: Path, sink: Sink) -> None:
        """One load_sweep row per model per measured load point."""
        doc, _ = read_document(path)
        results = (doc.get(RESULTS) or {}).get("_results") if isinstance(doc, dict) else None
        if not isinstance(results, dict):
            raise InputError(path, None, RESULTS, "has no _results object")
        for model_key, configs in results.items():
            if not isinstance(configs, dict):
                sink.reject(None, f"{RESULTS}._results.{model_key}", "not an object", configs)
                continue
            for config_key, entry in configs.items():
                where = f"{RESULTS}._results.{model_key}.{config_key}"
                if not (isinstance(entry, list) and len(entry) == 2):
                    sink.reject(None, where, "must be [run config, measurements]", entry)
                    continue
                run_configs = (
                    entry[0].get("_model_run_configs") if isinstance(entry[0], dict) else None
                ) or []
                measurements = entry[1] if isinstance(entry[1], dict) else {}
                for m_key, m in measurements.items():
                    self._measurement(
                        sink, f"{where}[{m_key!r}]", run_configs, m, config_key, m_key
                    )

    @staticmethod
    def _measurement(
        sink: Sink, where: str, run_configs: list[Any], m: Any, config_key: str, m_key: str
    ) -> None:
        per_model = m.get("_model_config_measurements") if isinstance(m, dict) else None
        if not isinstance(per_model, list) or not per_model:
            sink.reject(None, where, "measurement has no _model_config_measurements", m)
            return
        gpu = _values(m.get("_avg_gpu_data"))
        names = config_key.split(",")
        for i, pm in enumerate(per_model):
            if not isinstance(pm, dict):
                sink.reject(None, f"{where}[{i}]", "model measurement is not an object", pm)
                continue
            values = _values(pm.get("_non_gpu_data"))
            if "perf_throughput" not in values or "perf_latency_p99" not in values:
                sink.reject(
                    None, f"{where}[{i}]", "no perf_throughput / perf_latency_p99 measured", pm
                )
                continue
            rc = run_configs[i] if i < len(run_configs) else {}
            mc = _config(rc)
            named = rc.get("_model_name") if isinstance(rc, dict) else None
            model = str(named or mc.get("name") or config_key)
            groups = [g for g in mc.get("instanceGroup") or [] if isinstance(g, dict)]
            params = pm.get("_model_specific_pa_params") or {}
            rate = params.get("request-rate-range")
            mem = gpu.get("gpu_used_memory")
            util = gpu.get("gpu_utilization")
            row = {
                "workload": sink.hints.get("workload") or model,
                "slice": sink.hints.get("slice", ""),
                "model": model,
                "config": names[i] if i < len(names) else config_key,
                "max_batch_size": _int(mc.get("maxBatchSize")),
                "instance_count": sum(_int(g.get("count")) or 1 for g in groups) if groups else 1,
                "instance_kind": groups[0].get("kind") if groups else None,
                "dynamic_batching": "dynamicBatching" in mc,
                "batch_size": _int(params.get("batch-size")),
                "concurrency": _int(params.get("concurrency-range")),
                "request_rate": float(rate) if isinstance(rate, int | float) else None,
                "throughput_per_s": values["perf_throughput"],
                "gpu_used_memory_bytes": int(mem * 1e6) if mem is not None else None,
                "gpu_utilization": util / 100 if util is not None else None,
                "extra": json_text(
                    {
                        "perf_analyzer": m_key,
                        "platform": mc.get("platform") or mc.get("backend"),
                        "dynamic_batching": mc.get("dynamicBatching"),
                        "inputs": [
                            {"name": t.get("name"), "dims": t.get("dims")}
                            for t in mc.get("input") or []
                            if isinstance(t, dict)
                        ]
                        or None,
                    }
                ),
            }
            for tag, column in _MS.items():
                row[column] = values[tag] * 1e3 if tag in values else None
            sink.add("load_sweep", None, row)
