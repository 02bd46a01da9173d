"""The AIPerf per-request reader on AIPerf's published exports (both schemas), with every
request's times checked against the file's own values; sequence-length buckets; broken
records; what the analysis says of client-side timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapreport.analysis import Review, Thresholds, analyze_slice
from mapreport.core.errors import InputError
from mapreport.core.kinds import Driver
from mapreport.core.shapes import sequence_bucket
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

AIPERF = REALDATA / "serving" / "aiperf"
OLD = AIPERF / "run1_profile_export.jsonl"
NEW = AIPERF / "qwen_concurrency1_profile_export.jsonl"
pytestmark = pytest.mark.skipif(not AIPERF.is_dir(), reason="../shared/realdata is missing")
COLUMNS = (
    "request_id, status, shape, arrival_us, compute_end_us, ttft_us, itl_us, input_tokens, "
    "output_tokens, queue_known, queue_start_us, compute_start_us, workload, slice, line"
)


def _read(tmp_path: Path, path: Path, **kw: object) -> dict[str, tuple[object, ...]]:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, **kw)  # type: ignore[arg-type]
    rows = ds.connect().execute(f"SELECT {COLUMNS} FROM request").fetchall()
    return {str(r[0]): r for r in rows}


def test_older_schema_every_request(tmp_path: Path) -> None:
    assert detect(OLD).name == "aiperf"
    got = _read(tmp_path, OLD, hints={"workload": "gpt-oss-20b"})
    records = [json.loads(line) for line in OLD.read_text().splitlines()]
    assert len(got) == len(records) == 100
    statuses = [r[1] for r in got.values()]
    assert statuses.count("ok") == 89
    assert statuses.count("RequestCancellationError") == 11
    for rec in records:
        meta, m = rec["metadata"], rec["metrics"]
        row = got[meta["x_request_id"]]
        assert row[3] == meta["timestamp_ns"] / 1000
        assert row[9] is False
        assert row[3] == row[10] == row[11]  # no queue or compute split
        assert (row[12], row[13]) == ("gpt-oss-20b", "")
        if rec["error"]:
            assert row[1] == rec["error"]["type"]
            assert row[2] == "unknown"
            continue
        assert row[4] == pytest.approx(row[3] + m["request_latency"]["value"] * 1e3)  # type: ignore[operator]
        # the latency agrees with the record's own first and last timestamps
        span = (m["max_response_timestamp"]["value"] - m["min_request_timestamp"]["value"]) / 1e3
        assert row[4] - row[3] == pytest.approx(span, abs=1.0)  # type: ignore[operator]
        assert row[5] == pytest.approx(m["ttft"]["value"] * 1e3)
        assert row[6] == pytest.approx(m["inter_token_latency"]["value"] * 1e3)
        isl, osl = m["input_sequence_length"]["value"], m["output_sequence_length"]["value"]
        assert (row[7], row[8]) == (isl, osl)
        assert row[2] == f"isl={sequence_bucket(isl)},osl={sequence_bucket(osl)}"
    assert {r[2] for r in got.values() if r[1] == "ok"} == {"isl=1024,osl=256"}


def test_newer_schema_every_request(tmp_path: Path) -> None:
    assert detect(NEW).name == "aiperf"
    got = _read(tmp_path, NEW)
    records = [json.loads(line) for line in NEW.read_text().splitlines()]
    assert len(got) == len(records) == 10
    for rec in records:
        meta, m = rec["metadata"], rec["metrics"]
        row = got[meta["x_request_id"]]
        assert row[1] == "ok"
        assert row[3] == meta["request_start_ns"] / 1000
        latency = m["request_latency"]["value"] * 1e3
        assert row[4] - row[3] == pytest.approx(latency, abs=0.5)  # type: ignore[operator]
        # the wall-clock end agrees within 0.1 ms (AIPerf times latency on another clock)
        assert row[4] == pytest.approx(meta["request_end_ns"] / 1e3, abs=100)
        assert row[5] == pytest.approx(m["time_to_first_token"]["value"] * 1e3)
        assert (row[7], row[8]) == (100, 200)
        assert row[12] == "aiperf"  # no --workload: the export's folder
    assert {r[2] for r in got.values()} == {"isl=128,osl=256"}


def test_sequence_bucket_edges(tmp_path: Path) -> None:
    got = _read(tmp_path, OLD, hints={"sequence_buckets": "256,600,1024"})
    assert {r[2] for r in got.values() if r[1] == "ok"} == {"isl=600,osl=256"}
    with pytest.raises(InputError) as e:
        _read(tmp_path / "bad", OLD, hints={"sequence_buckets": "600,256"})
    assert e.value.field == "sequence_buckets"


def _line(**overrides: object) -> str:
    rec = json.loads(NEW.read_text().splitlines()[0])
    for key, value in overrides.items():
        where, _, name = key.partition("__")
        if value is None:
            rec[where].pop(name, None)
        else:
            rec[where][name] = value
    return json.dumps(rec)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"metrics__request_latency": {"value": 1, "unit": "fortnights"}}, "unit"),
        ({"metadata__x_request_id": None}, "metadata.x_request_id"),
        ({"metrics__time_to_first_token": {"value": -3, "unit": "ms"}}, "value"),
        ({"metadata__request_end_ns": 1}, "metadata.request_end_ns"),
        ({"metrics__input_sequence_length": {"value": 1.5, "unit": "tokens"}}, "input_seq"),
        ({"metadata__request_start_ns": None}, "metadata.request_start_ns"),
    ],
)
def test_broken_record(tmp_path: Path, change: dict[str, object], field: str) -> None:
    path = tmp_path / "profile_export.jsonl"
    broken = {"metadata__x_request_id": "broken", **change}
    path.write_text(_line() + "\n" + _line(**broken) + "\n")
    with pytest.raises(InputError) as e:
        _read(tmp_path, path)
    assert e.value.line == 2
    assert field in str(e.value.field)
    ds = Dataset(tmp_path / "q", create=True)
    res = ingest_file(ds, path, policy="quarantine")
    assert (res.rows["request"], res.rejected) == (1, 1)


def test_duplicate_ids_bad_json_and_warmup(tmp_path: Path) -> None:
    path = tmp_path / "profile_export.jsonl"
    warm = json.loads(_line())
    warm["metadata"]["x_request_id"] = "w1"
    warm["metadata"]["benchmark_phase"] = "warmup"
    path.write_text(_line() + "\n{not json\n" + _line() + "\n" + json.dumps(warm) + "\n")
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, path, policy="quarantine")
    assert (res.rows["request"], res.rejected) == (2, 2)
    reasons = ds.connect().execute("SELECT line, reason FROM quarantine ORDER BY line").fetchall()
    assert [r[0] for r in reasons] == [2, 3]
    assert "duplicate" in reasons[1][1]
    slices = ds.connect().execute("SELECT request_id, slice FROM request ORDER BY line").fetchall()
    assert slices[1] == ("w1", "warmup")  # warm-up requests count in a slice of their own


def test_client_side_timing_measures_no_queue_or_compute(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, OLD, hints={"workload": "gpt-oss-20b"})
    r = analyze_slice(ds.connect(), "gpt-oss-20b", "", Thresholds(), Review())
    shape = next(m for m in r.shapes if m.shape == "isl=1024,osl=256")
    assert shape.latency.n == 89
    assert shape.queue.p50 is None
    assert shape.compute.p50 is None
    assert shape.tail is not None
    missing = set(shape.tail.unmeasured)
    assert {Driver.QUEUEING, Driver.BLOCKED_BEHIND_ADAPTATION, Driver.MAPPING_FALLBACK} <= missing
    assert Driver.QUEUEING not in shape.tail.shares  # not measured: no share, not 0%
    assert shape.tail.shares[Driver.RESIDUAL] == 1.0
