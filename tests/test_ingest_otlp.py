"""The OTLP/JSON reader: the protocol's own example trace and metrics, values checked against
the files; Triton's OpenTelemetry span layout (built from tracer.cc: no real capture is public)
as requests; JSON Lines batches; broken input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

OTLP = REALDATA / "serving" / "otlp"
pytestmark = pytest.mark.skipif(not OTLP.is_dir(), reason="../shared/realdata is missing")
T0 = 1_764_468_000_000_000_000  # 2026-11-30 02:00 UTC, ns


def _ds(tmp_path: Path, path: Path, **kw: Any) -> Dataset:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, **kw)
    return ds


def test_example_trace(tmp_path: Path) -> None:
    path = OTLP / "trace.json"
    assert detect(path).name == "otlp"
    doc = json.loads(path.read_text())
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    ds = _ds(tmp_path, path)
    rows = (
        ds.connect()
        .execute("SELECT workload, name, category, ts_us, dur_us, extra, line FROM op_exec")
        .fetchall()
    )
    assert len(rows) == 1
    workload, name, category, ts, dur, extra, line = rows[0]
    assert (workload, name, category, line) == ("my.service", span["name"], "server", 1)
    assert ts == int(span["startTimeUnixNano"]) / 1e3
    assert dur == (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e3 == 1e6
    kept = json.loads(extra)
    assert kept["trace_id"] == span["traceId"]
    assert kept["parent_span_id"] == span["parentSpanId"]
    assert kept["attributes"] == {"my.span.attr": "some value"}
    assert kept["scope"] == "my.library"


def test_example_metrics(tmp_path: Path) -> None:
    path = OTLP / "metrics.json"
    assert detect(path).name == "otlp"
    ds = _ds(tmp_path, path)
    rows = (
        ds.connect()
        .execute(
            "SELECT metric, sample, type, le, value, labels, scrape_us FROM metric_sample "
            "ORDER BY metric, sample, le NULLS LAST"
        )
        .fetchall()
    )
    by = {(r[0], r[1], r[3]): (r[2], r[4]) for r in rows}
    assert by[("my.counter", "my.counter", None)] == ("delta_counter", 5.0)  # temporality 1
    assert by[("my.gauge", "my.gauge", None)] == ("gauge", 10.0)
    # explicit bounds [1], counts [1, 1]: cumulative 1 at le=1, 2 at +Inf
    assert by[("my.histogram", "my.histogram_bucket", 1.0)] == ("delta_histogram", 1.0)
    assert by[("my.histogram", "my.histogram_bucket", None)] == ("delta_histogram", 2.0)
    assert by[("my.histogram", "my.histogram_count", None)][1] == 2.0
    assert by[("my.histogram", "my.histogram_sum", None)][1] == 2.0
    # scale 0 (base 2), zero count 1, offset 1, counts [0, 2]: (2, 4] holds 0, (4, 8] holds 2
    e = "my.exponential.histogram"
    assert [(r[3], r[4]) for r in rows if r[1] == f"{e}_bucket"] == [
        (0.0, 1.0),
        (4.0, 1.0),
        (8.0, 3.0),
        (None, 3.0),
    ]
    assert {r[6] for r in rows} == {1_544_712_660_300_000.0}
    assert json.loads(rows[0][5])["service.name"] == "my.service"
    assert len(rows) == 12


def _span(name: str, sid: str, parent: str, attrs: dict[str, Any], events: list[str]) -> Any:
    return {
        "traceId": "A" * 32,
        "spanId": sid,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 10_000_000),
        "attributes": [
            {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
            for k, v in attrs.items()
        ],
        "events": [{"name": n, "timeUnixNano": str(T0 + i * 1_000_000)} for i, n in events],
    }


def _triton(trace: int, model: str, base: int) -> list[Any]:
    """Triton's layout: root InferRequest, the model's request span, its compute span."""
    root, req, comp = f"{trace:015x}0", f"{trace:015x}1", f"{trace:015x}2"
    attrs = {"triton.model_name": model, "triton.model_version": 1, "triton.trace_id": trace}
    http = [(base, "HTTP_RECV_START"), (base + 1, "HTTP_SEND_END")]
    request = [(base + 1, "REQUEST_START"), (base + 2, "QUEUE_START"), (base + 7, "REQUEST_END")]
    compute = [(base + 4, "COMPUTE_START"), (base + 5, "COMPUTE_INPUT_END")]
    return [
        _span("InferRequest", root, "", {}, http),
        _span(model, req, root, attrs, request),
        _span("compute", comp, req, {}, [*compute, (base + 6, "COMPUTE_END")]),
    ]


def _batch(spans: list[Any], service: str = "triton-inference-server") -> str:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]})


def test_triton_spans_are_requests(tmp_path: Path) -> None:
    path = tmp_path / "otel-traces.jsonl"
    other = _span("preprocess", "F" * 16, "", {}, [])
    path.write_text(
        _batch(_triton(1, "resnet50", 0) + _triton(2, "resnet50", 10))
        + "\n"
        + _batch([other])
        + "\n"
    )
    assert detect(path).name == "otlp"
    ds = _ds(tmp_path, path)
    rows = (
        ds.connect()
        .execute(
            "SELECT workload, request_id, arrival_us, queue_start_us, compute_start_us, "
            "compute_end_us, plan_id, line FROM request ORDER BY arrival_us"
        )
        .fetchall()
    )
    ms = 1e3  # 1 ms in us
    t0 = T0 / 1000
    first = (t0, t0 + 2 * ms, t0 + 4 * ms, t0 + 6 * ms)
    second = tuple(t + 10 * ms for t in first)
    assert rows == [
        ("resnet50", "0000000000000011", *first, "resnet50:1", 1),
        ("resnet50", "0000000000000021", *second, "resnet50:1", 1),
    ]
    ops = ds.connect().execute("SELECT workload, name, line FROM op_exec").fetchall()
    assert ops == [("triton-inference-server", "preprocess", 2)]  # Triton's own spans are used


def test_ensemble_takes_its_composing_models_compute(tmp_path: Path) -> None:
    ens_attrs = {"triton.model_name": "ens", "triton.model_version": 1, "triton.trace_id": 9}
    ens = _span(
        "ens",
        "E" * 16,
        "",
        ens_attrs,
        [(0, "REQUEST_START"), (1, "QUEUE_START"), (9, "REQUEST_END")],
    )
    child = _triton(10, "resnet50", 2)[1:]
    child[0]["parentSpanId"] = "E" * 16
    path = tmp_path / "ens.jsonl"
    path.write_text(_batch([ens, *child]) + "\n")
    rows = dict(
        _ds(tmp_path, path)
        .connect()
        .execute("SELECT workload, compute_end_us - compute_start_us FROM request")
        .fetchall()
    )
    assert rows == {"ens": 2e3, "resnet50": 2e3}


def test_broken_input(tmp_path: Path) -> None:
    bad_time = _span("x", "1" * 16, "", {}, [])
    bad_time["startTimeUnixNano"] = "soon"
    backwards = _span("y", "2" * 16, "", {}, [])
    backwards["endTimeUnixNano"] = str(T0 - 1)
    path = tmp_path / "bad.jsonl"
    path.write_text(_batch([bad_time, backwards, _span("ok", "3" * 16, "", {}, [])]) + "\n")
    with pytest.raises(InputError) as e:
        _ds(tmp_path / "a", path)
    assert (e.value.line, e.value.field) == (1, "startTimeUnixNano")
    ds = _ds(tmp_path / "q", path, policy="quarantine")
    assert ds.connect().execute("SELECT name FROM op_exec").fetchall() == [("ok",)]
    reasons = [r[0] for r in ds.connect().execute("SELECT reason FROM quarantine").fetchall()]
    assert len(reasons) == 2
    assert "ends before it starts" in reasons[1]
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text(_batch([_span("ok", "3" * 16, "", {}, [])]) + '\n{"resourceSpans": [\n')
    with pytest.raises(InputError) as e:
        _ds(tmp_path / "g", garbled)
    assert e.value.line == 2
    hist = tmp_path / "hist.json"
    point = {
        "timeUnixNano": str(T0),
        "count": "5",
        "bucketCounts": ["1", "1"],
        "explicitBounds": [1],
    }
    metric = {"name": "lat", "histogram": {"aggregationTemporality": 2, "dataPoints": [point]}}
    hist.write_text(json.dumps({"resourceMetrics": [{"scopeMetrics": [{"metrics": [metric]}]}]}))
    with pytest.raises(InputError) as e:
        _ds(tmp_path / "h", hist)
    assert "count 5 but the buckets hold 2" in str(e.value)
