"""The AIPerf GPU telemetry reader on AIPerf's published DCGM samples: every value against the
file; the environment it states; broken lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

GPU = REALDATA / "serving" / "aiperf" / "qwen_concurrency1_gpu_telemetry_export.jsonl"
pytestmark = pytest.mark.skipif(not GPU.is_file(), reason="../shared/realdata is missing")


def test_every_sample(tmp_path: Path) -> None:
    assert detect(GPU).name == "aiperf-gpu"
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, GPU, hints={"workload": "Qwen3-0.6B"})
    records = [json.loads(line) for line in GPU.read_text().splitlines()]
    expected = sum(len(r["telemetry_data"]) for r in records)
    assert len(records) == 20
    assert res.rows == {"metric_sample": expected, "environment": 2}
    rows = (
        ds.connect()
        .execute("SELECT line, metric, value, scrape_us, labels, workload, type FROM metric_sample")
        .fetchall()
    )
    got = {(r[0], r[1]): r for r in rows}
    for line, rec in enumerate(records, 1):
        for metric, value in rec["telemetry_data"].items():
            row = got[(line, metric)]
            assert row[2] == value
            assert row[3] == rec["timestamp_ns"] / 1000
            labels = json.loads(row[4])
            assert labels["gpu_uuid"] == rec["gpu_uuid"]
            assert labels["hostname"] == rec["hostname"]
    assert {(r[5], r[6]) for r in rows} == {("Qwen3-0.6B", "gauge")}
    env = (
        ds.connect()
        .execute("SELECT side, hardware, host FROM environment ORDER BY host")
        .fetchall()
    )
    assert env == [
        ("runtime", "NVIDIA RTX 6000 Ada Generation", "2e2a9f1c15f9"),
        ("runtime", "NVIDIA RTX 6000 Ada Generation", "7a22ed6f1fd7"),
    ]


def test_broken_lines(tmp_path: Path) -> None:
    lines = GPU.read_text().splitlines()
    bad_time = json.loads(lines[1])
    bad_time["timestamp_ns"] = "now"
    bad_value = json.loads(lines[2])
    bad_value["telemetry_data"]["gpu_utilization"] = "high"
    path = tmp_path / "gpu_telemetry_export.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(bad_time), json.dumps(bad_value)]) + "\n")
    with pytest.raises(InputError) as e:
        ingest_file(Dataset(tmp_path / "a", create=True), path)
    assert (e.value.line, e.value.field) == (2, "timestamp_ns")
    ds = Dataset(tmp_path / "q", create=True)
    res = ingest_file(ds, path, policy="quarantine")
    assert res.rejected == 2
    assert res.rows["metric_sample"] == 15 + 14  # the bad value alone is left out of line 3
