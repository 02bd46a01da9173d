"""What the analysis makes of serving-side telemetry: client-side request timing (AIPerf), the
/metrics time series, MLPerf runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mapreport.analysis import Review, Thresholds, analyze_slice
from mapreport.ingest import ingest_file
from mapreport.kinds import ActionKind
from mapreport.store import Dataset

T0 = 1_764_468_000_000_000_000  # 2026-11-30 02:00 UTC, ns


def aiperf_export(path: Path, latencies_ms: list[float], isl: int = 500, osl: int = 200) -> Path:
    """A newer-schema AIPerf profile export, one record per latency."""
    lines = []
    for i, ms in enumerate(latencies_ms):
        start = T0 + i * 50_000_000
        lines.append(
            json.dumps(
                {
                    "metadata": {
                        "x_request_id": f"r{i}",
                        "request_start_ns": start,
                        "request_end_ns": start + int(ms * 1e6),
                        "benchmark_phase": "profiling",
                        "was_cancelled": False,
                    },
                    "metrics": {
                        "request_latency": {"value": ms, "unit": "ms"},
                        "time_to_first_token": {"value": ms / 10, "unit": "ms"},
                        "inter_token_latency": {"value": ms / osl, "unit": "ms"},
                        "input_sequence_length": {"value": isl, "unit": "tokens"},
                        "output_sequence_length": {"value": osl, "unit": "tokens"},
                    },
                    "error": None,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _analyze(ds: Dataset, workload: str, review: Review | None = None) -> Any:
    return analyze_slice(ds.connect(), workload, "", Thresholds(), review or Review())


def test_client_side_tail_asks_for_server_side_timing(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    path = aiperf_export(tmp_path / "profile_export.jsonl", [100.0] * 180 + [1000.0] * 20)
    ingest_file(ds, path, hints={"workload": "chat"})
    r = _analyze(ds, "chat")
    (shape,) = r.shapes
    assert shape.tail is not None
    assert shape.tail.material
    asked = sorted(a.params.get("field") for a in r.actions if "field" in a.params)
    assert asked == ["compute_start_us", "core", "mem_peak_bytes", "queue_start_us"]
    obs = [a for a in r.actions if a.kind == ActionKind.OBSERVABILITY]
    assert len({a.id for a in obs}) == len(obs) == 6  # four fields, two environment sides
