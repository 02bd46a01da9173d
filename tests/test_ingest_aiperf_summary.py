"""The AIPerf aggregate reader on AIPerf's published exports (both layouts): the load point's
values against the files; broken exports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

AIPERF = REALDATA / "serving" / "aiperf"
OLD = AIPERF / "run1_profile_export_aiperf.json"
NEW = AIPERF / "qwen_concurrency1_profile_export_aiperf.json"
pytestmark = pytest.mark.skipif(not AIPERF.is_dir(), reason="../shared/realdata is missing")
COLUMNS = (
    "workload, model, config, concurrency, throughput_per_s, latency_avg_us, latency_p50_us, "
    "latency_p90_us, latency_p95_us, latency_p99_us, gpu_utilization, extra"
)


def _row(tmp_path: Path, path: Path) -> tuple[object, ...]:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path)
    rows = ds.connect().execute(f"SELECT {COLUMNS} FROM load_sweep").fetchall()
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize("path", [OLD, NEW])
def test_load_point(tmp_path: Path, path: Path) -> None:
    assert detect(path).name == "aiperf-summary"
    doc = json.loads(path.read_text())
    stats = doc.get("records") or doc
    lat = stats["request_latency"]
    row = _row(tmp_path, path)
    assert row[1] == doc["input_config"]["endpoint"]["model_names"][0]
    assert row[3] == doc["input_config"]["loadgen"]["concurrency"]
    assert row[5:10] == tuple(
        pytest.approx(lat[s] * 1e3) for s in ("avg", "p50", "p90", "p95", "p99")
    )
    extra = json.loads(str(row[11]))
    assert extra["cli_command"] == doc["input_config"]["cli_command"]
    if path == OLD:
        assert row[4] == pytest.approx(stats["request_throughput"]["avg"])
        assert extra["error_summary"][0]["count"] == 11
        assert row[10] is None
    else:
        assert row[2] == "Qwen_Qwen3-0.6B-openai-chat-concurrency1"
        assert row[4] == pytest.approx(0.2504302580624667)
        assert extra["statistics"]["time_to_first_token"]["p99"] == pytest.approx(
            34.344268879999994
        )
        assert 0 < float(row[10]) < 1  # type: ignore[arg-type]


def test_broken_exports(tmp_path: Path) -> None:
    doc = json.loads(NEW.read_text())
    doc["request_latency"]["unit"] = "furlongs"
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as e:
        _row(tmp_path / "a", path)
    assert e.value.field == "request_latency.unit"
    del doc["request_latency"]
    path.write_text(json.dumps({"request_throughput": doc["request_throughput"], **doc}))
    with pytest.raises(InputError) as e:
        _row(tmp_path / "b", path)
    assert "no request latency" in str(e.value)
