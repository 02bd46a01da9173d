"""The MLPerf summary reader on four published submissions' summaries: every target and
percentile against the file's own line; broken summaries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

MLPERF = REALDATA / "serving" / "mlperf"
SUMMARIES = sorted(MLPERF.glob("*_mlperf_log_summary.txt"))
pytestmark = pytest.mark.skipif(not MLPERF.is_dir(), reason="../shared/realdata is missing")
CHECKED = {
    "latency_p99_us": "99.00 percentile latency (ns)",
    "latency_p50_us": "50.00 percentile latency (ns)",
    "latency_mean_us": "Mean latency (ns)",
    "ttft_p99_us": "99.00 percentile first token latency (ns)",
    "tpot_p999_us": "99.90 percentile time to output token (ns)",
    "target_ttft_us": "ttft_latency (ns)",
    "target_tpot_us": "tpot_latency (ns)",
}


def _stated(text: str, label: str) -> float | None:
    m = re.search(rf"^{re.escape(label)}\s*:\s*(\S+)", text, re.M)
    return float(m.group(1)) / 1e3 if m else None


def _run(tmp_path: Path, path: Path) -> dict[str, object]:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path)
    cur = ds.connect().execute("SELECT * FROM loadgen_run")
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert len(rows) == 1
    return dict(zip(names, rows[0], strict=True))


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: p.name.split("_mlperf")[0])
def test_summary(tmp_path: Path, path: Path) -> None:
    assert detect(path).name == "mlperf-summary"
    text = path.read_text()
    run = _run(tmp_path, path)
    scenario = re.search(r"^Scenario\s*:\s*(\S+)", text, re.M).group(1)  # type: ignore[union-attr]
    assert run["scenario"] == scenario
    assert run["valid"] is ("Result is : VALID" in text)
    assert run["mode"] == "PerformanceOnly"
    assert run["errors"] == 0
    assert run["workload"] == path.name.removesuffix("_mlperf_log_summary.txt")
    for column, label in CHECKED.items():
        assert run[column] == pytest.approx(_stated(text, label)), column


def test_server_llm_targets(tmp_path: Path) -> None:
    run = _run(tmp_path, MLPERF / "amd_8xmi300x_llama2-70b-99_server_mlperf_log_summary.txt")
    assert run["target_qps"] == 83.5
    assert run["target_latency_us"] is None  # 0 in the file: the token targets apply
    assert (run["target_ttft_us"], run["target_tpot_us"]) == (2_000_000, 200_000)
    assert run["samples_per_s"] == 81.68
    assert run["tokens_per_s"] == 24593.77


def test_broken_summary(tmp_path: Path) -> None:
    text = (MLPERF / "amd_8xmi325x_sdxl_offline_mlperf_log_summary.txt").read_text()
    bad = tmp_path / "mlperf_log_summary.txt"
    bad.write_text(
        text.replace(
            "99.00 percentile latency (ns)   : 5734881585613",
            "99.00 percentile latency (ns)   : soon",
        )
    )
    with pytest.raises(InputError) as e:
        _run(tmp_path / "a", bad)
    assert e.value.field == "99.00 percentile latency (ns)"
    assert (
        e.value.line
        == text.splitlines().index("99.00 percentile latency (ns)   : 5734881585613") + 1
    )
    bad.write_text(text.replace("Scenario : Offline\n", ""))
    with pytest.raises(InputError) as e:
        _run(tmp_path / "b", bad)
    assert e.value.field == "Scenario"
