"""What the analysis makes of serving-side telemetry: client-side request timing (AIPerf), the
/metrics time series, MLPerf runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mapreport.analysis import Review, Thresholds, analyze_slice
from mapreport.analysis.actions.action_params import Consistency, MissingField
from mapreport.core.kinds import ActionKind
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file
from tests.pack_sql import check_pack_sql

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
    asked = sorted(a.params.field for a in r.actions if isinstance(a.params, MissingField))
    assert asked == ["compute_start_us", "core", "mem_peak_bytes", "queue_start_us"]
    obs = [a for a in r.actions if a.kind == ActionKind.OBSERVABILITY]
    assert len({a.id for a in obs}) == len(obs) == 5  # four fields, the runtime environment


def triton_scrapes(path: Path, scrapes: list[dict[str, float]], t0_s: int = 1_764_468_000) -> Path:
    """A series of Triton /metrics scrapes, 10 s apart, each after a time mark."""
    out = []
    for i, c in enumerate(scrapes):
        out.append(f"# {t0_s + 10 * i}")
        for name in (
            "nv_inference_request_success",
            "nv_inference_count",
            "nv_inference_exec_count",
            "nv_inference_request_duration_us",
            "nv_inference_queue_duration_us",
            "nv_inference_compute_infer_duration_us",
        ):
            out += [f"# TYPE {name} counter", f'{name}{{model="resnet",version="1"}} {c[name]}']
        out += ["# TYPE nv_gpu_utilization gauge"]
        out += [f'nv_gpu_utilization{{gpu_uuid="GPU-{g}"}} {c["gpu"]}' for g in "ab"]
    path.write_text("\n".join(out) + "\n")
    return path


def _counters(n: float, queue_us: float, request_us: float, batch: float, gpu: float) -> Any:
    return {
        "nv_inference_request_success": n,
        "nv_inference_count": n * batch,
        "nv_inference_exec_count": n,
        "nv_inference_request_duration_us": request_us,
        "nv_inference_queue_duration_us": queue_us,
        "nv_inference_compute_infer_duration_us": request_us - queue_us,
        "gpu": gpu,
    }


def test_triton_counters_per_interval_and_a_reset(tmp_path: Path) -> None:
    path = triton_scrapes(
        tmp_path / "metrics.prom",
        [
            _counters(100, 1_000, 10_000, 2, 0.5),
            _counters(300, 5_000, 30_000, 2, 0.7),  # +200 requests, 4 ms queue of 20 ms
            _counters(50, 2_000, 6_000, 4, 0.9),  # went down: the server restarted
        ],
    )
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path)
    t = _analyze(ds, "resnet").serving.telemetry
    assert t is not None
    assert (t.server, t.scrapes, t.resets) == ("Triton", 3, 1)
    first, second = t.windows
    assert (first.requests, first.since_start, first.reset) == (200, False, False)
    assert first.queue_share == 4_000 / 20_000
    assert first.queue_mean_us == 20.0
    assert first.batch_mean == 2.0
    assert first.throughput_per_s == 20.0  # 200 requests in 10 s
    assert first.gpu_utilization == 0.7  # the end scrape's gauge, mean of both GPUs
    assert second.reset
    assert second.requests == 50  # counted from the restart
    assert second.batch_mean == 4.0
    total = t.total
    assert total is not None
    assert total.requests == 250
    assert total.queue_mean_us == (4_000 + 2_000) / 250


def test_real_triton_scrape_since_start(tmp_path: Path) -> None:
    from tests.conftest import REALDATA

    scrape = REALDATA / "serving" / "prometheus" / "triton_metrics.txt"
    if not scrape.is_file():
        pytest.skip("../shared/realdata is missing")
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, scrape)
    t = _analyze(ds, "densenet_onnx").serving.telemetry
    assert t is not None
    assert t.total is not None
    assert t.total.since_start
    assert t.total.requests == 3
    assert t.total.queue_mean_us == 145 / 3  # nv_inference_queue_duration_us / success
    assert t.total.compute_mean_us == (626 + 1_326_831 + 61) / 3
    assert t.total.batch_mean == 1.0
    assert t.total.gpu_utilization == 0.0
    assert {q.quantile for q in t.quantiles if q.what == "queue"} == {0.5, 0.9, 0.95, 0.99, 0.999}
    assert not any(q.approximate for q in t.quantiles)


def test_bucket_quantile_is_prometheus_interpolation() -> None:
    from mapreport.analysis.mapping.telemetry import bucket_quantile

    buckets = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (None, 40.0)]
    assert bucket_quantile(buckets, 0.5) == (0.1 + 0.4 * (20 - 10) / 20, 0.1, 0.5)
    assert bucket_quantile(buckets, 0.25) == (0.1, 0.0, 0.1)  # rank 10: the top of bucket 1
    beyond = [(0.1, 1.0), (None, 10.0)]
    assert bucket_quantile(beyond, 0.99) == (0.1, 0.1, None)  # in +Inf: its lower bound
    assert bucket_quantile([(None, 0.0)], 0.5) == (None, None, None)


def _native_requests(path: Path, n: int, queue_us: float, t0_s: int = 1_764_468_000) -> Path:
    lines = []
    for i in range(n):
        arrival = (t0_s + 0.5 + i * (18 / n)) * 1e6
        lines.append(
            json.dumps(
                {
                    "record": "request",
                    "workload": "resnet",
                    "request_id": f"q{i}",
                    "shape": {"batch": 1},
                    "arrival_us": arrival,
                    "queue_start_us": arrival,
                    "compute_start_us": arrival + queue_us,
                    "compute_end_us": arrival + queue_us + 80,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_records_and_counters_disagree_on_queue_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scrapes = [_counters(0, 0, 0, 1, 0.5), _counters(200, 4_000, 20_000, 1, 0.5)]
    scrapes.append(_counters(400, 8_000, 40_000, 1, 0.5))  # 20 us of queue per request
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, triton_scrapes(tmp_path / "metrics.prom", scrapes))
    ingest_file(ds, _native_requests(tmp_path / "agree.runtime.jsonl", 100, 21.0))
    r = _analyze(ds, "resnet")
    assert r.serving.queue_check is not None
    assert r.serving.queue_check.records_n == 100
    assert r.serving.queue_check.difference == (21 - 20) / 20
    assert not r.serving.queue_check.disagrees
    assert not [a for a in r.actions if isinstance(a.params, Consistency)]
    ds2 = Dataset(tmp_path / "ds2", create=True)
    ingest_file(ds2, triton_scrapes(tmp_path / "metrics.prom", scrapes))
    ingest_file(ds2, _native_requests(tmp_path / "far.runtime.jsonl", 100, 30.0))
    r = _analyze(ds2, "resnet")
    assert r.serving.queue_check is not None
    assert r.serving.queue_check.disagrees
    (action,) = [a for a in r.actions if isinstance(a.params, Consistency)]
    assert action.kind == ActionKind.OBSERVABILITY
    assert action.params.difference == 0.5
    # its evidence pack reruns: the records and the counters give the same disagreement
    from mapreport.run.evidence import PACKS, explain, write_packs

    write_packs(ds2.connect("resnet"), r, tmp_path / "packs", ds2.root / PACKS)
    lines, ok = explain(ds2.root, action.id)
    assert ok, lines
    assert "reproduced" in lines[2]
    # and its .sql, run in plain DuckDB, prints the same disagreement from the same rows
    done = {check_pack_sql(sql, {}, monkeypatch) for sql in (tmp_path / "packs").glob("*.sql")}
    assert "queue_check" in done


def _mlperf_summary(path: Path, target_ns: int, percentile: str) -> Path:
    path.write_text(
        "================================================\nMLPerf Results Summary\n"
        "================================================\nSUT name : PySUT\n"
        "Scenario : Server\nMode     : PerformanceOnly\nResult is : VALID\n"
        "99.00 percentile latency (ns)   : 90000\n"
        f"target_latency (ns): {target_ns}\ntarget_latency_percentile : {percentile}\n"
    )
    return path


def test_mlperf_target_fills_a_missing_sla(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, _native_requests(tmp_path / "r.runtime.jsonl", 100, 10.0))
    ingest_file(
        ds,
        _mlperf_summary(tmp_path / "mlperf_log_summary.txt", 100_000, "0.99"),
        hints={"workload": "resnet"},
    )
    r = _analyze(ds, "resnet")
    assert r.review.sla_p99_us == 100.0
    assert r.review.sla_from == "MLPerf Server run's target latency (p99)"
    (run,) = r.serving.loadgen
    assert run.valid is True
    assert run.results["latency_p99_us"] == 90.0
    configured = _analyze(ds, "resnet", Review(sla_p99_us=500.0))
    assert configured.review.sla_p99_us == 500.0  # the configuration wins
    assert configured.review.sla_from is None


def test_token_timing_per_shape(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(
        ds, aiperf_export(tmp_path / "a.jsonl", [100.0] * 50, isl=100), hints={"workload": "chat"}
    )
    ingest_file(
        ds, aiperf_export(tmp_path / "b.jsonl", [300.0] * 50, isl=3000), hints={"workload": "chat"}
    )
    tokens = {t.shape: t for t in _analyze(ds, "chat").serving.tokens}
    assert set(tokens) == {"isl=128,osl=256", "isl=4096,osl=256"}
    assert tokens["isl=128,osl=256"].ttft.p50 == 10_000.0  # 100 ms / 10, in us
    assert tokens["isl=4096,osl=256"].itl.p95 == 1_500.0
    assert tokens["isl=4096,osl=256"].input_tokens_p50 == 3000


def test_an_sla_taken_from_mlperf_is_said(tmp_path: Path) -> None:
    from mapreport.report import write_slice_report
    from mapreport.report.export import SvgExporter

    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, _native_requests(tmp_path / "r.runtime.jsonl", 100, 10.0))
    summary = _mlperf_summary(tmp_path / "mlperf_log_summary.txt", 100_000, "0.99")
    ingest_file(ds, summary, hints={"workload": "resnet"})
    r = _analyze(ds, "resnet")
    write_slice_report(r, tmp_path / "out", SvgExporter(), pdf=False)
    html = (tmp_path / "out" / "report.html").read_text()
    scope = html[
        html.index('<section id="scope"') : html.index(
            "</section>", html.index('<section id="scope"')
        )
    ]
    assert "no SLA configured: the MLPerf Server run&#39;s target latency (p99)" in scope
    runs = html[html.index('<section id="loadgen"') :]
    assert "VALID" in runs[: runs.index("</section>")]
    doc = json.loads((tmp_path / "out" / "findings.json").read_text())
    assert doc["scope"]["sla_from"] == "MLPerf Server run's target latency (p99)"
    assert doc["loadgen"][0]["results"]["latency_p99_us"] == 90.0


def test_replicas_scraped_into_their_own_files_are_not_mixed(tmp_path: Path) -> None:
    """Two servers' scrape series of one model: each its own series (their counters never
    subtracted from each other), the total adding both."""
    ds = Dataset(tmp_path / "ds", create=True)
    a = [_counters(1_000, 0, 0, 1, 0.5), _counters(1_100, 1_000, 10_000, 1, 0.5)]
    b = [_counters(50, 0, 0, 1, 0.5), _counters(250, 4_000, 40_000, 1, 0.5)]
    ingest_file(ds, triton_scrapes(tmp_path / "replica-a.prom", a))
    ingest_file(ds, triton_scrapes(tmp_path / "replica-b.prom", b))
    t = _analyze(ds, "resnet").serving.telemetry
    assert t is not None
    assert t.resets == 0
    assert sorted(w.requests for w in t.windows) == [100, 200]
    assert t.total is not None
    assert t.total.requests == 300
    assert t.total.queue_mean_us == 5_000 / 300


def test_a_metrics_only_slice_says_what_it_holds(tmp_path: Path) -> None:
    from mapreport.report import prose
    from mapreport.report.verdict import headline

    ds = Dataset(tmp_path / "ds", create=True)
    scrapes = [_counters(0, 0, 0, 2, 0.5), _counters(200, 4_000, 20_000, 2, 0.7)]
    ingest_file(ds, triton_scrapes(tmp_path / "metrics.prom", scrapes))
    r = _analyze(ds, "resnet")
    text = prose.summary(r, headline(r))
    assert text.startswith("resnet: no per-request records; Triton's metrics over 2 scrapes: ")
    assert "200 requests, queue share 20.0%, mean queue wait 20 µs" in text


def test_a_served_slice_is_asked_for_no_compile_side_environment(tmp_path: Path) -> None:
    """No compile plan or compile log names qwen-chat-like slices: the environment lock asks
    only for the runtime side's record (before: a blocker for a compile-side file that cannot
    exist)."""
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, aiperf_export(tmp_path / "a.jsonl", [100.0] * 30), hints={"workload": "chat"})
    r = _analyze(ds, "chat")
    assert r.environment.sides == ("runtime",)
    assert r.environment.missing_sides == ("runtime",)
    asked = [a.missing_side for a in r.actions if a.missing_side]
    assert asked == ["runtime"]


def test_a_served_llm_states_its_output_token_rate(tmp_path: Path) -> None:
    """Issue 35: a served LLM's page 1 shows tokens/s beside TTFT and ITL: the ok requests'
    output tokens over the time from the first arrival to the last completion, checked
    against AIPerf's own export of the same run."""
    from mapreport.report import packet, view
    from tests.conftest import REALDATA

    aiperf = REALDATA / "serving" / "aiperf"
    if not aiperf.is_dir():
        pytest.skip("../shared/realdata is missing")
    records = [
        json.loads(line)
        for line in (aiperf / "qwen_concurrency1_profile_export.jsonl").read_text().splitlines()
    ]
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, aiperf / "qwen_concurrency1_profile_export.jsonl", hints={"workload": "qwen"})
    r = analyze_slice(ds.connect(), "qwen", "", Thresholds())
    rate = r.serving.token_rate
    assert rate is not None
    assert rate.requests == len(records)
    assert rate.tokens_per_s == pytest.approx(rate.output_tokens / rate.window_s)
    # AIPerf's own aggregate of the run, over its benchmark window: 50.08 tokens/s
    own = json.loads((aiperf / "qwen_concurrency1_profile_export_aiperf.json").read_text())
    assert rate.tokens_per_s == pytest.approx(own["output_token_throughput"]["avg"], rel=0.05)
    cards = dict(packet.build(view.build(r)).cards)
    assert cards["Output tokens/s"] == f"{rate.tokens_per_s:,.0f}"
    assert "TTFT p95" in " ".join(cards)
