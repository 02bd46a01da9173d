"""The demo's profiler trace (`demo/kineto.py`): the qwen-chat slice's first engine steps of a
night, consistent with the requests AIPerf exported that night (docs/dataset.md reads its
`op_exec`)."""

from __future__ import annotations

import json
import statistics
from datetime import date
from pathlib import Path

from mapreport.analysis.mapping.environment import check_environment
from mapreport.dataset.store import Dataset
from mapreport.demo import kineto
from mapreport.demo.serving import MODEL, TRACE, generate_serving
from mapreport.run.ingesting import ingest
from tests.conftest import SAMPLE_DATA

NIGHT = date(2026, 11, 28)


def _night(tmp_path: Path) -> tuple[Dataset, list[dict[str, float]]]:
    """One night's qwen-chat files ingested, and its exported requests in arrival order."""
    written = generate_serving(tmp_path / "in", 0, NIGHT)
    assert tmp_path / "in" / MODEL / TRACE in written
    ingest(tmp_path / "ds", written)
    export = (tmp_path / "in" / MODEL / "profile_export.jsonl").read_text().splitlines()
    requests = []
    for line in export:
        doc = json.loads(line)
        metrics = {k: v["value"] for k, v in doc["metrics"].items()}
        requests.append({"start_us": doc["metadata"]["request_start_ns"] / 1e3, **metrics})
    return Dataset(tmp_path / "ds"), requests


def test_the_trace_is_the_nights_first_requests_engine_steps(tmp_path: Path) -> None:
    ds, requests = _night(tmp_path)
    con = ds.connect()
    steps = con.execute(
        """SELECT ts_us, dur_us FROM op_exec WHERE workload = $w AND slice = ''
           AND starts_with(name, 'ProfilerStep#') ORDER BY ts_us""",
        {"w": MODEL},
    ).fetchall()
    assert len(steps) == kineto.PREFILLS + kineto.DECODES
    first = requests[: kineto.PREFILLS]
    # the steps start when the first request leaves the queue (its TTFT less its prefill)
    assert (
        first[0]["start_us"]
        < steps[0][0]
        < first[0]["start_us"] + first[0]["time_to_first_token"] * 1e3
    )
    # each prefill is one request's prompt: the QKV projection's rows are its input length
    gemm_rows = con.execute(
        """SELECT DISTINCT shape FROM op_exec WHERE workload = $w AND name = 'aten::mm'
           AND category = 'cpu_op' AND shape LIKE '%5120x7168%' ORDER BY shape""",
        {"w": MODEL},
    ).fetchall()
    rows = sorted(int(str(s).split("x")[0]) for (s,) in gemm_rows)
    assert rows == sorted([kineto.PREFILLS, *(int(r["input_sequence_length"]) for r in first)])
    for (_, dur), r in zip(steps, first, strict=False):
        assert dur < r["time_to_first_token"] * 1e3  # a prefill within its request's TTFT
    itl = statistics.median(
        r["inter_token_latency"] for r in requests if "inter_token_latency" in r
    )
    for _, dur in steps[kineto.PREFILLS :]:
        assert 0.6 * itl * 1e3 < dur < itl * 1e3  # a decode step under the measured ITL


def test_every_kernel_is_charged_to_the_op_that_launched_it(tmp_path: Path) -> None:
    ds, _ = _night(tmp_path)
    kernels, unlinked, devices = ds.connect().execute(
        """SELECT count(*), count(*) FILTER (WHERE json_extract_string(extra, '$.op') IS NULL),
           count(DISTINCT device) FROM op_exec WHERE workload = $w AND category = 'kernel'""",
        {"w": MODEL},
    ).fetchone() or (0, 0, 0)
    ops_per_step = 1 + 9 * kineto.LAYERS + 2
    assert kernels == (kineto.PREFILLS + kineto.DECODES) * ops_per_step
    assert (unlinked, devices) == (0, 1)


def test_a_trace_beside_a_serving_log_names_no_second_runtime(tmp_path: Path) -> None:
    """A profiler trace records the devices it saw and which profiler saw them, not the
    runtime that served: ingested beside bert-base's runtime log (`npu-rt`), the slice's
    runtime side holds one runtime, and the only key that differs is the hardware (this trace
    was taken on an H200, the log on an NPU). The trace's record had read `pytorch-profiler` as
    a second runtime, an environment mismatch no figure showed."""
    night = SAMPLE_DATA / "nights" / "2026-11-28"
    trace = tmp_path / "bert-base.pt.trace.json.gz"
    trace.write_bytes((night / MODEL / TRACE).read_bytes())
    files = [
        SAMPLE_DATA / "plans" / "bert-base.compile.jsonl",
        night / "bert-base.runtime.jsonl.gz",
    ]
    ingest(tmp_path / "ds", [*files, trace])
    cursor = Dataset(tmp_path / "ds").connect().execute("SELECT * FROM environment")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    profiled = [r for r in rows if json.loads(r["extra"] or "{}").get("profiler")]
    assert [(r["side"], r["runtime"], r["hardware"]) for r in profiled] == [
        ("runtime", None, "NVIDIA H200")
    ]
    check = check_environment(rows)
    assert check.runtime["runtime"] == "npu-rt"
    assert [m.key for m in check.mismatches] == ["hardware"]
