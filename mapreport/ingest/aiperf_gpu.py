"""AIPerf's GPU telemetry export (`gpu_telemetry_export.jsonl`): one DCGM sample per line and
GPU (`timestamp_ns`, `gpu_uuid`, `gpu_index`, `gpu_model_name`, `hostname`, `dcgm_url`, ...,
`telemetry_data{metric: value}`), into `metric_sample` (one gauge row per metric; the sample's
identity fields are its labels; each line is one scrape) and `environment` (one runtime-side
row per host and GPU model: hardware = the GPU model). The samples are server-wide: workload
"" unless `--workload` names the workload they ran for (its environment then joins that
workload's reports). Units are AIPerf's (UNITS).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.records import accepted, iter_jsonl
from mapreport.ingest.spec import as_float

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

LABELS = ("gpu_uuid", "gpu_index", "gpu_model_name", "hostname", "pci_bus_id", "device", "dcgm_url")
"""The sample's identity fields, kept as its labels."""
UNITS = {
    "gpu_power_usage": "W",
    "power_management_limit": "W",
    "energy_consumption": "MJ",
    "gpu_utilization": "%",
    "memory_copy_utilization": "%",
    "gpu_memory_used": "GB",
    "gpu_memory_free": "GB",
    "gpu_memory_total": "GB",
    "sm_clock_frequency": "MHz",
    "memory_clock_frequency": "MHz",
    "gpu_temperature": "C",
    "memory_temperature": "C",
    "power_violation": "us",
    "thermal_violation": "us",
    "xid_errors": "count",
}
"""AIPerf's telemetry metrics and their units (AIPerf's aggregate export states them)."""
_MARK = re.compile(rb'\s*\{\s*"timestamp_ns"\s*:\s*\d+\s*,[^\n]*"telemetry_data"')


class AiperfGpuReader:
    """AIPerf GPU telemetry (DCGM samples) as time series and the runtime environment."""

    name = "aiperf-gpu"
    summary = (
        "AIPerf gpu_telemetry_export.jsonl: DCGM samples per GPU (utilisation, power, memory, "
        "clocks) as time series, the GPU model as the runtime environment"
    )
    tables = ("metric_sample", "environment")
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON line starting with `timestamp_ns` and holding `telemetry_data`."""
        return _MARK.match(head.data) is not None

    def read(self, path: Path, sink: Sink) -> None:
        """One gauge row per metric per sample line; one environment row per host and GPU."""
        hosts: dict[tuple[str, str], tuple[int, int]] = {}
        workload = sink.hints.get("workload", "")
        for line, rec in accepted(iter_jsonl(path), sink):
            problem = _problem(rec)
            if problem is not None:
                sink.reject(line, problem[0], problem[1], json_text(rec) or "")
                continue
            ts = rec["timestamp_ns"]
            labels = {k: rec[k] for k in LABELS if rec.get(k) is not None}
            text = msgspec.json.encode(labels, order="sorted").decode() if labels else None
            for metric, value in sorted(rec["telemetry_data"].items()):
                v = as_float(value)
                if value is not None and (v is None or not math.isfinite(v)):
                    sink.reject(line, f"telemetry_data.{metric}", f"not a number: {value!r}", rec)
                    continue
                sink.add(
                    "metric_sample",
                    line,
                    {
                        "workload": workload,
                        "slice": sink.hints.get("slice", ""),
                        "scrape": line - 1,
                        "scrape_us": ts / 1000,
                        "metric": metric,
                        "sample": metric,
                        "type": "gauge",
                        "labels": text,
                        "value": v,
                        "extra": json_text({"unit": UNITS.get(metric)}),
                    },
                )
            key = (str(rec.get("hostname") or ""), str(rec.get("gpu_model_name") or ""))
            first = hosts.get(key)
            hosts[key] = (first[0], first[1]) if first else (line, ts)
        for (host, model), (line, ts) in sorted(hosts.items(), key=lambda kv: kv[1]):
            sink.add(
                "environment",
                line,
                {
                    "side": "runtime",
                    "hardware": model or None,
                    "host": host or None,
                    "captured_at": datetime.fromtimestamp(ts / 1e9, UTC).isoformat(),
                    "workload": workload or None,
                },
            )


def _problem(rec: Any) -> tuple[str | None, str] | None:
    """(field, reason) of a record that cannot be read, else None."""
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    ts = rec.get("timestamp_ns")
    if isinstance(ts, bool) or not isinstance(ts, int) or not 0 < ts < 2**63:
        return "timestamp_ns", f"expected nanoseconds since the epoch, got {ts!r}"[:120]
    if not isinstance(rec.get("telemetry_data"), dict):
        return "telemetry_data", "must be an object of metric values"
    return None
