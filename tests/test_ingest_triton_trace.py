"""The Triton trace-file reader on the real excerpt of the server's docs/user_guide/trace.md
(../shared/realdata/serving/triton_trace) and on files written from that page: TIMESTAMPS and
TENSORS levels, fragments out of order, ensembles, the old one-object-per-trace layout, and
broken files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mapreport.analysis import Review, Thresholds, analyze_slice
from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

DOCS_EXAMPLE = REALDATA / "serving" / "triton_trace" / "docs_trace_timestamps_example.json"

# the TIMESTAMPS example of trace.md, verbatim values
DOC_STAMPS = [
    ("HTTP_RECV_START", 2356425054587444),
    ("HTTP_RECV_END", 2356425054632308),
    ("REQUEST_START", 2356425054785863),
    ("QUEUE_START", 2356425054791517),
    ("INFER_RESPONSE_COMPLETE", 2356425057587919),
    ("COMPUTE_START", 2356425054887198),
    ("COMPUTE_INPUT_END", 2356425057152908),
    ("COMPUTE_OUTPUT_START", 2356425057497763),
    ("COMPUTE_END", 2356425057540989),
    ("REQUEST_END", 2356425057643164),
    ("HTTP_SEND_START", 2356425057681578),
    ("HTTP_SEND_END", 2356425057712991),
]


def _fragments(tid: int, model: str, shift: int = 0, **meta: object) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"id": tid, "model_name": model, "model_version": 1, **meta}]
    out += [{"id": tid, "timestamps": [{"name": n, "ns": ns + shift}]} for n, ns in DOC_STAMPS]
    return out


def _write(path: Path, frags: list[dict[str, object]]) -> Path:
    # the server writes one fragment per line, as the docs show
    path.write_text("[\n" + ",\n".join(json.dumps(f) for f in frags) + "\n]\n")
    return path


def _requests(ds: Dataset) -> list[tuple[object, ...]]:
    return (
        ds.connect()
        .execute(
            "SELECT workload, request_id, shape, arrival_us, queue_start_us, compute_start_us, "
            "compute_end_us, plan_id, line FROM request ORDER BY workload, request_id"
        )
        .fetchall()
    )


def test_documented_example(tmp_path: Path) -> None:
    path = _write(tmp_path / "trace.json", _fragments(1, "simple"))
    assert detect(path).name == "triton-trace"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path)
    ((workload, rid, shape, arrival, queue, start, end, plan, line),) = _requests(ds)
    stamps = dict(DOC_STAMPS)
    assert (workload, rid, shape, plan, line) == ("simple", "1", "unknown", "simple:1", 2)
    assert arrival == pytest.approx(stamps["HTTP_RECV_START"] / 1e3)
    assert queue == pytest.approx(stamps["QUEUE_START"] / 1e3)
    assert start == pytest.approx(stamps["COMPUTE_START"] / 1e3)
    # trace_summary.py reports this request's compute as (COMPUTE_END - COMPUTE_START)
    assert end - start == pytest.approx((2356425057540989 - 2356425054887198) / 1e3)


def test_fragments_out_of_order_and_tensor_shapes(tmp_path: Path) -> None:
    frags = []
    for tid in range(1, 41):
        frags += _fragments(tid, "simple", shift=tid * 10_000_000)
        batch = 1 + tid % 4
        frags.append(
            {
                "id": tid,
                "activity": "TENSOR_QUEUE_INPUT",
                "tensor": {
                    "name": "INPUT0",
                    "data": "0.1,0.1",
                    "shape": f"{batch},16",
                    "dtype": "FP32",
                },
            }
        )
    random.Random(7).shuffle(frags)
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, _write(tmp_path / "trace.json", frags))
    rows = _requests(ds)
    assert len(rows) == 40
    shapes = {r[2] for r in rows}
    assert shapes == {f"INPUT0_d0={b},INPUT0_d1=16" for b in (1, 2, 3, 4)}
    r = analyze_slice(ds.connect(), "simple", "", Thresholds(), Review())
    assert r.requests == 40
    assert len(r.shapes) == 4
    assert r.shapes[0].compute.p50 == pytest.approx((2356425057540989 - 2356425054887198) / 1e3)


def test_ensemble_compute_spans_its_composing_models(tmp_path: Path) -> None:
    parent = [
        {"id": 10, "model_name": "ensemble", "model_version": 1},
        {"id": 10, "timestamps": [{"name": "REQUEST_START", "ns": 1_000}]},
        {"id": 10, "timestamps": [{"name": "QUEUE_START", "ns": 1_100}]},
        {"id": 10, "timestamps": [{"name": "REQUEST_END", "ns": 9_000}]},
    ]
    a = [
        {"id": 11, "model_name": "pre", "model_version": 1, "parent_id": 10},
        {
            "id": 11,
            "timestamps": [
                {"name": "REQUEST_START", "ns": 1_200},
                {"name": "QUEUE_START", "ns": 1_300},
            ],
        },
        {
            "id": 11,
            "timestamps": [
                {"name": "COMPUTE_START", "ns": 1_500},
                {"name": "COMPUTE_END", "ns": 4_000},
            ],
        },
    ]
    b = [
        {"id": 12, "model_name": "main", "model_version": 1, "parent_id": 10},
        {
            "id": 12,
            "timestamps": [
                {"name": "REQUEST_START", "ns": 4_100},
                {"name": "QUEUE_START", "ns": 4_200},
            ],
        },
        {
            "id": 12,
            "timestamps": [
                {"name": "COMPUTE_START", "ns": 4_500},
                {"name": "COMPUTE_END", "ns": 8_000},
            ],
        },
    ]
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, _write(tmp_path / "trace.json", parent + b + a))
    rows = {r[0]: r for r in _requests(ds)}
    assert set(rows) == {"ensemble", "pre", "main"}
    assert rows["ensemble"][5:7] == (pytest.approx(1.5), pytest.approx(8.0))
    assert rows["main"][3:7] == (
        pytest.approx(4.1),
        pytest.approx(4.2),
        pytest.approx(4.5),
        pytest.approx(8.0),
    )


def test_old_one_object_per_trace_layout(tmp_path: Path) -> None:
    old = [
        {
            "model_name": "simple",
            "model_version": -1,
            "id": 1,
            "timestamps": [
                {"name": "http recv start", "ns": 100},
                {"name": "request handler start", "ns": 200},
                {"name": "queue start", "ns": 300},
                {"name": "compute start", "ns": 400},
                {"name": "compute end", "ns": 900},
                {"name": "request handler end", "ns": 1000},
            ],
        }
    ]
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, _write(tmp_path / "trace.json", old))
    ((_, _, _, arrival, queue, start, end, plan, _),) = _requests(ds)
    assert (arrival, queue, start, end, plan) == (0.1, 0.3, 0.4, 0.9, "simple:-1")


def test_bad_fragments_name_their_line(tmp_path: Path) -> None:
    frags = [*_fragments(1, "simple"), {"id": "two", "timestamps": []}, *_fragments(3, "simple")]
    frags += [
        {"id": 4, "model_name": "simple"},
        {"id": 4, "timestamps": [{"name": "QUEUE_START", "ns": 5}]},
    ]
    path = _write(tmp_path / "trace.json", frags)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, path)
    assert (e.value.line, e.value.field) == (15, "id")
    res = ingest_file(ds, path, policy="quarantine")
    assert res.rows["request"] == 2
    assert res.rejected == 2  # the string id, and trace 4 that never reached compute
    quarantined = ds.connect().execute("SELECT reason FROM quarantine ORDER BY line").fetchall()
    reasons = [r[0] for r in quarantined]
    assert "integer trace id" in reasons[0]
    assert "trace 4 has no COMPUTE_START/COMPUTE_END" in reasons[1]


def test_truncated_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "trace.json", _fragments(1, "simple"))
    path.write_bytes(path.read_bytes()[:-40])
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError, match="invalid JSON"):
        ingest_file(ds, path, fmt="triton-trace")


@pytest.mark.skipif(not DOCS_EXAMPLE.is_file(), reason="../shared/realdata is not beside the repo")
def test_real_docs_excerpt_without_a_model_name(tmp_path: Path) -> None:
    """The excerpt names no model: its request belongs to the named workload, else the file's;
    it was rejected before (`trace 1 names no model`)."""
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, DOCS_EXAMPLE, policy="abort")
    assert (res.rows["request"], res.rejected) == (1, 0)
    ((workload, rid, _, arrival, queue, start, end, plan, line),) = _requests(ds)
    assert (workload, rid, plan, line) == ("docs_trace_timestamps_example", "1", None, 2)
    stamps = dict(DOC_STAMPS)
    assert (arrival, queue) == (stamps["HTTP_RECV_START"] / 1e3, stamps["QUEUE_START"] / 1e3)
    assert (start, end) == (stamps["COMPUTE_START"] / 1e3, stamps["COMPUTE_END"] / 1e3)
    named = Dataset(tmp_path / "named", create=True)
    ingest_file(named, DOCS_EXAMPLE, hints={"workload": "resnet"})
    assert _requests(named)[0][0] == "resnet"
