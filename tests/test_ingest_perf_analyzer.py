"""The perf_analyzer CSV reader on the CSV of perf_analyzer's docs, checked cell by cell
against the file; the verbose and GPU columns; broken rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

CSV = REALDATA / "serving" / "perf_analyzer" / "docs_measurements_metrics_perf.csv"
pytestmark = pytest.mark.skipif(not CSV.is_file(), reason="../shared/realdata is missing")
COLUMNS = (
    "concurrency, throughput_per_s, latency_p50_us, latency_p90_us, latency_p95_us, "
    "latency_p99_us, server_queue_us, server_compute_input_us, server_compute_infer_us, "
    "server_compute_output_us, client_send_recv_us, workload, model, config, extra, line"
)


def _read(tmp_path: Path, path: Path, **kw: object) -> list[tuple[object, ...]]:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, **kw)  # type: ignore[arg-type]
    return ds.connect().execute(f"SELECT {COLUMNS} FROM load_sweep ORDER BY line").fetchall()


def test_docs_csv_cell_by_cell(tmp_path: Path) -> None:
    assert detect(CSV).name == "perf-analyzer"
    rows = _read(tmp_path, CSV)
    with open(CSV, newline="") as fh:
        cells = list(csv.DictReader(fh))
    assert len(rows) == len(cells) == 4
    for r, c in zip(rows, cells, strict=True):
        assert r[0] == int(c["Concurrency"])
        assert r[1] == float(c["Inferences/Second"])
        assert r[2:6] == tuple(float(c[f"p{p} latency"]) for p in (50, 90, 95, 99))
        assert r[6] == float(c["Server Queue"])
        assert r[8] == float(c["Server Compute Infer"])
        assert r[10] == float(c["Client Send"]) + float(c["Client Recv"])
        extra = json.loads(str(r[14]))
        assert extra["Network+Server Send/Recv"] == float(c["Network+Server Send/Recv"])
        assert r[11] == r[12] == r[13] == "docs_measurements_metrics_perf"
    # the file's values: concurrency 3 queues 21.7 ms at 84.2 infer/s
    by_c = {r[0]: r for r in rows}
    assert by_c[3][6] == 21673
    assert by_c[3][1] == 84.2


def test_workload_hint_names_the_model(tmp_path: Path) -> None:
    rows = _read(tmp_path, CSV, hints={"workload": "inception_graphdef"})
    assert {(r[11], r[12]) for r in rows} == {("inception_graphdef", "inception_graphdef")}


def test_verbose_and_gpu_columns(tmp_path: Path) -> None:
    path = tmp_path / "bert_b8.csv"
    path.write_text(
        "Request Rate,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
        "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
        "p50 latency,p90 latency,p95 latency,p99 latency,Avg latency,request/response,"
        "response wait,Avg GPU Utilization,Max GPU Memory Usage\n"
        "100,99.5,10,200,300,20,5000,10,5,6000,7000,7500,8000,6100,40,5900,"
        "GPU-a:0.5;GPU-b:0.7;,GPU-a:1000;GPU-b:3000;\n"
    )
    assert detect(path).name == "perf-analyzer"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path)
    got = (
        ds.connect()
        .execute(
            "SELECT request_rate, concurrency, latency_avg_us, client_send_recv_us, "
            "client_response_wait_us, gpu_utilization, gpu_used_memory_bytes, config "
            "FROM load_sweep"
        )
        .fetchall()
    )
    assert got == [(100.0, None, 6100.0, 40.0, 5900.0, pytest.approx(0.6), 4000, "bert_b8")]


def test_broken_rows(tmp_path: Path) -> None:
    path = tmp_path / "broken.csv"
    lines = CSV.read_text().splitlines()
    path.write_text(
        "\n".join([lines[0], lines[1], lines[2].replace("84.2", "fast"), "7,1\n", lines[3]])
    )
    with pytest.raises(InputError) as e:
        _read(tmp_path / "abort", path)
    assert (e.value.line, e.value.field) == (3, "Inferences/Second")
    ds = Dataset(tmp_path / "q", create=True)
    res = ingest_file(ds, path, policy="quarantine")
    assert res.rows["load_sweep"] == 2
    assert res.rejected == 2
    reasons = ds.connect().execute("SELECT line, reason FROM quarantine ORDER BY line").fetchall()
    assert [r[0] for r in reasons] == [3, 4]
    assert "cells" in reasons[1][1]
    neg = tmp_path / "neg.csv"
    neg.write_text(lines[0] + "\n" + lines[1].replace("225", "-1", 1) + "\n")
    with pytest.raises(InputError) as e:
        _read(tmp_path / "neg", neg)
    assert e.value.field == "Client Send"


def test_average_latency_is_the_breakdowns_sum(tmp_path: Path) -> None:
    """Without a verbose CSV's Avg latency, the average is what perf_analyzer splits it into."""
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, CSV)
    got = ds.connect().execute("SELECT latency_avg_us FROM load_sweep ORDER BY line").fetchall()
    with open(CSV, newline="") as fh:
        cells = list(csv.DictReader(fh))
    parts = (
        "Client Send",
        "Network+Server Send/Recv",
        "Server Queue",
        "Server Compute Input",
        "Server Compute Infer",
        "Server Compute Output",
        "Client Recv",
    )
    assert [g[0] for g in got] == [sum(float(c[p]) for p in parts) for c in cells]
    assert got[0][0] == 14_443  # concurrency 1: 225 + 2148 + 64 + 206 + 11781 + 19 + 0
