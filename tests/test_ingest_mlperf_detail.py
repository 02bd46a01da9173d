"""The MLPerf detail-log reader on four published submissions' logs: every value against the
log's own :::MLLOG records, and the summary of the same run agreeing; broken lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

MLPERF = REALDATA / "serving" / "mlperf"
DETAILS = sorted(MLPERF.glob("*_mlperf_log_detail.txt"))
pytestmark = pytest.mark.skipif(not MLPERF.is_dir(), reason="../shared/realdata is missing")


def _logged(path: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for line in path.read_text().splitlines():
        if line.startswith(":::MLLOG "):
            rec = json.loads(line[9:])
            out.setdefault(rec["key"], rec["value"])
    return out


def _runs(tmp_path: Path, *paths: Path) -> list[dict[str, object]]:
    ds = Dataset(tmp_path / "ds", create=True)
    for p in paths:
        ingest_file(ds, p)
    cur = ds.connect().execute("SELECT * FROM loadgen_run ORDER BY run_at NULLS LAST")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


@pytest.mark.parametrize("path", DETAILS, ids=lambda p: p.name.split("_mlperf")[0])
def test_detail_and_its_summary(tmp_path: Path, path: Path) -> None:
    assert detect(path).name == "mlperf-detail"
    logged = _logged(path)
    summary = path.with_name(path.name.replace("_detail", "_summary"))
    detail, from_summary = _runs(tmp_path, path, summary)
    assert detail["scenario"] == logged["effective_scenario"]
    assert detail["loadgen_version"] == logged["loadgen_version"]
    assert detail["run_at"] == logged["test_datetime"]
    assert detail["valid"] is (logged["result_validity"] == "VALID")
    assert detail["errors"] == logged["num_errors"]
    assert detail["latency_p99_us"] == pytest.approx(
        float(logged["result_99.00_percentile_latency_ns"]) / 1e3  # type: ignore[arg-type]
    )
    assert detail["workload"] == from_summary["workload"]  # one slice for both logs of a run
    for column in ("scenario", "valid", "latency_p50_us", "latency_p99_us", "ttft_p99_us"):
        assert detail[column] == pytest.approx(from_summary[column]), column


def test_broken_lines(tmp_path: Path) -> None:
    src = DETAILS[0].read_text().splitlines()
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_text("\n".join([src[0], ":::MLLOG {broken", *src[1:]]) + "\n")
    with pytest.raises(InputError) as e:
        _runs(tmp_path / "a", path)
    assert e.value.line == 2
    ds = Dataset(tmp_path / "q", create=True)
    res = ingest_file(ds, path, policy="quarantine")
    assert (res.rows["loadgen_run"], res.rejected) == (1, 1)
    no_scenario = [ln for ln in src if '"effective_scenario"' not in ln]
    path.write_text("\n".join(no_scenario) + "\n")
    with pytest.raises(InputError) as e:
        _runs(tmp_path / "b", path)
    assert e.value.field == "effective_scenario"
