"""What an MLPerf loadgen run states, declared once for its two logs: each `loadgen_run` column,
the label the summary (`mlperf_log_summary.txt`) prints it under and the key the detail log
(`mlperf_log_detail.txt`, `:::MLLOG {json}` lines) records it with, and its unit.

The workload of a run is `--workload`, else the benchmark folder of the submission layout
(`.../<benchmark>/<scenario>/performance/run_1/mlperf_log_summary.txt`), else the file's name
before `mlperf_log_summary.txt` (`workload_of`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from mapreport.core.errors import InputError

NS_TO_US = 1e-3
LOG_NAMES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")


class RunField(msgspec.Struct, frozen=True):
    """One loadgen_run column and where each log holds it."""

    column: str
    summary: tuple[str, ...]
    """Summary labels (before the colon), the first present wins."""
    detail: tuple[str, ...]
    """Detail-log keys, the first present wins."""
    scale: float = 1.0
    """Multiplies the stated value into the column's unit (ns -> us)."""
    unset_zero: bool = False
    """A stated 0 means "no target" (a Server LLM run's target latency)."""


def _pcts(column: str, summary: str, detail: str) -> tuple[RunField, ...]:
    """p50 ... p99.9 of one latency, as the summary and detail name them."""
    return tuple(
        RunField(f"{column}_{q}_us", (summary.format(p=p),), (detail.format(p=p),), NS_TO_US)
        for q, p in (
            ("p50", "50.00"),
            ("p90", "90.00"),
            ("p95", "95.00"),
            ("p99", "99.00"),
            ("p999", "99.90"),
        )
    )


FIELDS: tuple[RunField, ...] = (
    RunField("target_qps", ("target_qps",), ("effective_target_qps",)),
    RunField(
        "target_latency_us",
        ("target_latency (ns)",),
        ("effective_target_latency_ns",),
        NS_TO_US,
        unset_zero=True,
    ),
    RunField(
        "target_latency_percentile",
        ("target_latency_percentile",),
        ("effective_target_latency_percentile",),
    ),
    RunField(
        "target_ttft_us", ("ttft_latency (ns)",), ("requested_server_ttft_latency",), NS_TO_US
    ),
    RunField(
        "target_tpot_us", ("tpot_latency (ns)",), ("requested_server_tpot_latency",), NS_TO_US
    ),
    RunField(
        "samples_per_s",
        ("Completed samples per second", "Samples per second", "QPS w/o loadgen overhead"),
        (
            "result_completed_samples_per_sec",
            "result_samples_per_second",
            "result_qps_without_loadgen_overhead",
        ),
    ),
    RunField(
        "tokens_per_s",
        ("Completed tokens per second", "Tokens per second", "TPS w/o loadgen overhead"),
        ("result_completed_tokens_per_second", "result_tokens_per_second"),
    ),
    RunField("latency_mean_us", ("Mean latency (ns)",), ("result_mean_latency_ns",), NS_TO_US),
    *_pcts("latency", "{p} percentile latency (ns)", "result_{p}_percentile_latency_ns"),
    *_pcts(
        "ttft",
        "{p} percentile first token latency (ns)",
        "result_first_token_{p}_percentile_latency_ns",
    ),
    *_pcts(
        "tpot",
        "{p} percentile time to output token (ns)",
        "result_time_per_output_token_{p}_percentile_ns",
    ),
)
"""Every numeric loadgen_run column."""
TEXT = {"scenario": ("Scenario", "effective_scenario"), "mode": ("Mode", "effective_test_mode")}
"""Text columns: (summary label, detail key)."""
VALIDITY = ("Result is", "result_validity")
"""Where each log states VALID / INVALID."""
Log = Literal["summary", "detail"]


def run_fields(
    path: Path, found: Mapping[str, tuple[int, Any]], log: Log
) -> tuple[dict[str, Any], set[str]]:
    """The loadgen_run columns one log states (`found`: label or key -> (line, value)), and the
    labels or keys they used; a value that is no number is an error naming its line."""
    side = 0 if log == "summary" else 1
    row: dict[str, Any] = {}
    used: set[str] = set()
    for column, names in TEXT.items():
        entry = found.get(names[side])
        row[column] = None if entry is None or entry[1] is None else str(entry[1])
        used.add(names[side])
    for f in FIELDS:
        name = next((x for x in (f.summary if side == 0 else f.detail) if x in found), None)
        if name is None:
            row[f.column] = None
            continue
        used.add(name)
        line, stated = found[name]
        value = number(stated)
        if value is None:
            raise InputError(path, line, name, f"expected a number, got {stated!r}"[:160])
        row[f.column] = None if f.unset_zero and value == 0 else value * f.scale
    validity = found.get(VALIDITY[side], (0, None))[1]
    used.add(VALIDITY[side])
    row["valid"] = {"VALID": True, "INVALID": False}.get(str(validity or "").upper())
    return row, used


def number(value: Any) -> float | None:
    """A stated number (a JSON number or the summary's text), None when it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def workload_of(path: Path, hints: dict[str, str]) -> str:
    """`--workload`; else the benchmark folder of the submission layout; else the file's name
    without `mlperf_log_summary.txt` / `mlperf_log_detail.txt` (`gb200_llama3.1-405b_...`);
    else its folder's name."""
    if hints.get("workload"):
        return hints["workload"]
    parts = path.resolve().parts
    if len(parts) >= 5 and parts[-3] == "performance":
        return parts[-5]
    name = path.name
    for suffix in LOG_NAMES:
        name = name.removesuffix(suffix)
    return name.rstrip("_-.") or path.resolve().parent.name
