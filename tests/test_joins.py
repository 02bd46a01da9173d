"""The two joins a team needs across readers: a compile plan's ops against a profiler's per-op
times (per-op accuracy), and TORCH_TRACE compiles per shape against the profiler's compiled
regions (compile cost charged against runtime), end to end through the CLI report."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from mapreport.analysis import Review, Thresholds, analyze_slice
from mapreport.analysis.device.operators import OpRow
from mapreport.analysis.mapping.coverage import PlanVersion
from mapreport.analysis.serving.drift import op_drifts
from mapreport.app.cli import main
from mapreport.core.records import replace
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file
from mapreport.run.config import default_config
from mapreport.run.reporting import report
from tests.conftest import REALDATA

RANK1 = REALDATA / "tlparse" / "inputs" / "multi_rank_logs" / "dedicated_log_torch_trace_rank_1.log"
PLAN = {  # op -> (kernel, predicted us)
    "gemm": ("gemm_k1", 100.0),
    "softmax": ("softmax_k1", 20.0),
    "layernorm": ("ln_k1", 10.0),
    "never_run": ("nr_k1", 5.0),
}
MEASURED = {  # kernel -> durations (us)
    "gemm_k1": [118.0 + i for i in range(12)],
    "softmax_k1": [19.0 + 0.5 * i for i in range(12)],
    "ln_k1": [14.0, 15.0, 16.0],  # three runs: too few for an error
    "memcpy_HtoD": [40.0] * 12,  # a runtime op no plan names
}
REGIONS = {"0/0": [900.0] * 4, "0/3": [30.0, 32.0], "0/7": [25.0] * 10}


def _plan_file(path: Path) -> Path:
    lines = [
        {
            "workload": "toy",
            "plan_id": "p1",
            "shape_bucket": {"batch": [1, 8]},
            "op": op,
            "kernel": kernel,
            "predicted_us": us,
        }
        for op, (kernel, us) in PLAN.items()
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _trace_file(path: Path) -> Path:
    events: list[dict[str, object]] = []
    ts = 1000.0
    for i, (name, durs) in enumerate(MEASURED.items()):
        for j, d in enumerate(durs):
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": ts,
                    "dur": d,
                    "args": {"device": 0, "stream": 7, "correlation": 1000 * i + j},
                }
            )
            ts += d + 5
    for cid, durs in REGIONS.items():
        for d in durs:
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"Torch-Compiled Region: {cid}",
                    "pid": 1,
                    "tid": 1,
                    "ts": ts,
                    "dur": d,
                    "args": {},
                }
            )
            ts += d + 5
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


@pytest.fixture
def joined(tmp_path: Path) -> Dataset:
    if not RANK1.is_file():
        pytest.skip("../shared/realdata is missing (tlparse's multi-rank rank_1 log)")
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, _plan_file(tmp_path / "plan.jsonl"))
    ingest_file(ds, _trace_file(tmp_path / "trace.json"), hints={"workload": "toy"})
    ingest_file(ds, RANK1, hints={"workload": "toy"})
    return ds


def test_per_op_accuracy(joined: Dataset) -> None:
    r = analyze_slice(joined.connect(), "toy", "", Thresholds(), Review())
    ops = r.device.operators
    assert ops is not None
    assert (ops.planned_ops, ops.matched_ops, ops.unmeasured_count) == (4, 3, 1)
    assert ops.unmeasured == ("p1: never_run",)
    assert [u[0] for u in ops.unmapped] == ["memcpy_HtoD"]
    by_op = {o.op: o for o in ops.rows}
    gemm = statistics.median(MEASURED["gemm_k1"])
    soft = statistics.median(MEASURED["softmax_k1"])
    assert by_op["gemm"].measured_p50_us == pytest.approx(gemm)
    assert by_op["gemm"].signed_error == pytest.approx((100.0 - gemm) / gemm)
    assert by_op["softmax"].signed_error == pytest.approx((20.0 - soft) / soft)
    assert by_op["layernorm"].runs == 3
    assert by_op["layernorm"].signed_error is None
    mape = (abs(100 - gemm) + abs(20 - soft)) / (gemm + soft)  # time-weighted: sum |e|*m / sum m
    assert ops.mape_time_weighted == pytest.approx(mape)
    assert ops.top_error[0].op == "gemm"
    kernel_time = sum(sum(v) for v in MEASURED.values())
    assert ops.matched_time_share == pytest.approx(1 - sum(MEASURED["memcpy_HtoD"]) / kernel_time)


def test_compile_cost_per_shape_against_runtime(joined: Dataset) -> None:
    con = joined.connect()
    r = analyze_slice(con, "toy", "", Thresholds(), Review())
    c = r.compiled.compiles
    assert c is not None
    assert (c.compiles, c.recompiles, c.shapes_recompiled) == (15, 14, 14)
    assert c.runtime_joined
    by_shape = {s.shape: s for s in c.shapes}
    ms = dict(con.execute("SELECT shape, compile_ms FROM compile_event").fetchall())
    first = by_shape["2x2"]  # compile 0/0: the first compile, no recompile reason
    assert first.recompiles == 0
    assert first.runtime_calls == 4
    assert first.runtime_ms == pytest.approx(3.6)
    assert first.compile_share == pytest.approx(ms["2x2"] / (ms["2x2"] + 3.6))
    assert by_shape["5x5"].runtime_calls == 2  # compile 0/3
    assert by_shape["9x9"].runtime_calls == 10  # compile 0/7
    assert by_shape["3x3"].runtime_calls == 0
    assert by_shape["3x3"].compile_share is None
    assert by_shape["3x3"].reasons == (
        "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
    )


def test_report_shows_both_joins(joined: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main, ["report", "--dataset", str(joined.root), "--out", str(out), "--no-pdf"]
    )
    assert res.exit_code == 0, res.output
    html = (out / "toy" / "report.html").read_text()
    assert "Per-operator mapping" in html
    assert "Compile cost per shape" in html
    assert "memcpy_HtoD" in html
    assert "size mismatch at index 0" in html
    doc = json.loads((out / "toy" / "findings.json").read_text())
    assert doc["operators"]["matched_ops"] == 3
    assert doc["compiles"]["compiles"] == 15


@pytest.mark.slow
def test_per_op_errors_are_recorded_and_compared_across_nights(
    joined: Dataset, tmp_path: Path
) -> None:
    """Each night keeps every planned op's signed error (history_op); the next night compares
    each op with its plan's first nights (the same data: no drift, two ops compared)."""
    config = default_config()
    for night in ("2026-11-29", "2026-11-30"):
        report(joined.root, tmp_path / night, config, pdf=False, record=True, run_date=night)
    stored = joined.history("history_op", "toy", "")
    assert sorted((r["run_date"], r["op"]) for r in stored) == [
        ("2026-11-29", "gemm"),
        ("2026-11-29", "softmax"),
        ("2026-11-30", "gemm"),
        ("2026-11-30", "softmax"),
    ]
    doc = json.loads((tmp_path / "2026-11-30" / "toy" / "findings.json").read_text())
    drift = {d["op"]: d for d in doc["op_drift"]}
    assert set(drift) == {"gemm", "softmax"}
    assert drift["gemm"]["drift"] == pytest.approx(0.0)
    assert not drift["gemm"]["drifting"]
    html = (tmp_path / "2026-11-30" / "toy" / "report.html").read_text()
    assert "2 planned ops compared with its plan's first nights" in html


def test_a_per_op_drift_needs_the_move_and_enough_executions() -> None:
    """An op whose signed error moved by more than the tolerance from its plan's first nights
    drifts, when it ran at least min_samples times tonight and on those nights."""
    th = Thresholds()
    plans = [PlanVersion("p1", "v1", "plan.jsonl", None, "night", True, True, 1)]
    row = OpRow("p1", "gemm", None, None, 1, 50, 120.0, 100.0, -0.17, 0.17, None)
    stored = [
        {
            "plan_id": "p1",
            "op": "gemm",
            "plan_version": "v1",
            "signed_error": 0.05,
            "runs": 50,
            "run_date": "2026-11-29",
        },
    ]
    (d,) = op_drifts([row], plans, stored, "2026-11-30", th)
    assert d.drifting
    assert d.drift == pytest.approx(-0.22)
    thin = replace(row, runs=3)
    (t,) = op_drifts([thin], plans, stored, "2026-11-30", th)
    assert not t.drifting
    other = op_drifts([row], [replace(plans[0], source_id="v2")], stored, "2026-11-30", th)
    assert other[0].baseline is None
