"""perf_analyzer's CSV report (`perf_analyzer -f out.csv`, optionally `--verbose-csv` and
`--collect-metrics`): one row per measured concurrency (or request rate) with throughput, the
client and server time split and the latency percentiles, all in microseconds, into
`load_sweep`, the same config x load view the Model Analyzer reader feeds.

The CSV does not name the model: the workload and model are `--workload` when given, else the
file's name without its suffixes; the config is the file's name (one CSV per model config run),
so runs of several configs of one model compare side by side. Client time split: `send/recv`
or `request/response` (verbose CSV), else Client Send + Client Recv; `response wait` (verbose)
is the client's wait. `Network+Server Send/Recv`, `Client Send`, `Client Recv` and any column
not declared here are kept in `extra`. Without `Avg latency` (verbose CSV), the average latency
is the sum of the breakdown (client send, network + server send/recv, server queue, compute
input, infer and output, client recv), which is how perf_analyzer splits it. GPU columns
(`--collect-metrics`) hold one `<gpu uuid>:<value>;` pair per GPU: utilisation is their mean,
memory used their sum.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.records import accepted, csv_header, iter_csv
from mapreport.ingest.spec import Field, FieldError, convert_value

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

LOAD = (
    Field("Concurrency", "int", column="concurrency", minimum=0),
    Field("Request Rate", "float", column="request_rate", minimum=0),
)
"""The load column: one of these is the CSV's first."""
FIELDS = (
    Field("Inferences/Second", "float", required=True, column="throughput_per_s", minimum=0),
    Field("Avg latency", "float", column="latency_avg_us", minimum=0),
    Field("p50 latency", "float", column="latency_p50_us", minimum=0),
    Field("p90 latency", "float", column="latency_p90_us", minimum=0),
    Field("p95 latency", "float", column="latency_p95_us", minimum=0),
    Field("p99 latency", "float", column="latency_p99_us", minimum=0),
    Field("Server Queue", "float", column="server_queue_us", minimum=0),
    Field("Server Compute Input", "float", column="server_compute_input_us", minimum=0),
    Field("Server Compute Infer", "float", column="server_compute_infer_us", minimum=0),
    Field("Server Compute Output", "float", column="server_compute_output_us", minimum=0),
    Field("response wait", "float", column="client_response_wait_us", minimum=0),
)
"""perf_analyzer column (microseconds) -> load_sweep column."""
SEND_RECV = ("send/recv", "request/response")
"""The verbose CSV's client send/receive time, when it has one."""
SPLIT = (
    Field("Client Send", "float", minimum=0),
    Field("Network+Server Send/Recv", "float", minimum=0),
    Field("Client Recv", "float", minimum=0),
)
"""Kept in `extra`; Client Send + Client Recv is the client's time without a verbose CSV."""
GPU_UTILIZATION = "Avg GPU Utilization"
GPU_MEMORY = "Max GPU Memory Usage"


def _per_gpu(cell: str, column: str) -> list[float]:
    """`GPU-a:0.5;GPU-b:0.7;` -> [0.5, 0.7]."""
    out = []
    for pair in cell.split(";"):
        if not pair.strip():
            continue
        _, _, value = pair.rpartition(":")
        out.append(convert_value(Field(column, "float", minimum=0), value.strip(), text=True))
    return out


def _suffixless(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".csv"):
        name = name.removesuffix(suffix)
    return name


class PerfAnalyzerReader:
    """perf_analyzer `-f` CSV: throughput and latency split per concurrency or request rate."""

    name = "perf-analyzer"
    summary = (
        "perf_analyzer -f CSV: throughput, client/server queue and compute split and p50-p99 "
        "per concurrency or request rate"
    )
    tables = ("load_sweep",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A CSV whose header starts with the load column and `Inferences/Second`."""
        first = head.data.split(b"\n", 1)[0].strip().lstrip(b"\xef\xbb\xbf")
        return any(first.startswith(f.raw.encode() + b",Inferences/Second") for f in LOAD)

    def read(self, path: Path, sink: Sink) -> None:
        """One load_sweep row per CSV row."""
        header = csv_header(path)
        load = next((f for f in LOAD if header and header[0].lstrip("\ufeff") == f.raw), None)
        if load is None:
            raise InputError(path, 1, None, "header must start with Concurrency or Request Rate")
        named = sink.hints.get("workload") or _suffixless(path)
        for line, record in accepted(iter_csv(path), sink):
            record = {k.lstrip("\ufeff"): v for k, v in record.items()}
            try:
                row = self._row(record, load, named, path)
            except FieldError as e:
                sink.reject(line, e.field, e.reason, ",".join(record.values()))
                continue
            row["slice"] = sink.hints.get("slice", "")
            sink.add("load_sweep", line, row)

    @staticmethod
    def _row(record: dict[str, str], load: Field, named: str, path: Path) -> dict[str, Any]:
        row: dict[str, Any] = {"workload": named, "model": named, "config": _suffixless(path)}
        for f in (load, *FIELDS):
            cell = record.get(f.raw, "")
            if f.required and cell == "":
                raise FieldError(f.raw, "required field is missing")
            row[f.target] = convert_value(f, cell, text=True) if cell != "" else None
        split = {
            f.raw: convert_value(f, record[f.raw], text=True) for f in SPLIT if record.get(f.raw)
        }
        verbose = next((record[c] for c in SEND_RECV if record.get(c)), None)
        if verbose is not None:
            row["client_send_recv_us"] = convert_value(
                Field(SEND_RECV[0], "float", minimum=0), verbose, text=True
            )
        elif "Client Send" in split and "Client Recv" in split:
            row["client_send_recv_us"] = split["Client Send"] + split["Client Recv"]
        if row["latency_avg_us"] is None and len(split) == len(SPLIT):
            # perf_analyzer's breakdown columns are averages that add up to the average latency
            parts = [row["server_queue_us"], row["server_compute_input_us"]]
            parts += [row["server_compute_infer_us"], row["server_compute_output_us"]]
            if all(p is not None for p in parts):
                row["latency_avg_us"] = sum(split.values()) + sum(parts)
        if record.get(GPU_UTILIZATION):
            util = _per_gpu(record[GPU_UTILIZATION], GPU_UTILIZATION)
            row["gpu_utilization"] = sum(util) / len(util) if util else None
        if record.get(GPU_MEMORY):
            row["gpu_used_memory_bytes"] = int(sum(_per_gpu(record[GPU_MEMORY], GPU_MEMORY)))
        known = {f.raw for f in (*LOAD, *FIELDS, *SPLIT)} | set(SEND_RECV)
        known |= {GPU_UTILIZATION, GPU_MEMORY}
        rest = {k: v for k, v in record.items() if k not in known and v != ""}
        row["extra"] = json_text({**split, **rest})
        return row
