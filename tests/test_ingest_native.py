"""Native readers: detection, field mapping, invalid input, quarantine, idempotent re-ingest."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file

REQ = {
    "workload": "w",
    "request_id": "r1",
    "shape": {"batch": 4, "seq": 96},
    "arrival_us": 100.0,
    "compute_start_us": 150.0,
    "compute_end_us": 400.0,
}
PLAN = {
    "workload": "w",
    "plan_id": "p",
    "shape_bucket": {"batch": [1, 8], "seq": [65, 128]},
    "op": "__total__",
    "predicted_us": 250.0,
}
QUAL = {"workload": "w", "precision": "int8", "metric": "top1", "baseline": 0.76, "value": 0.75}


def jsonl(path: Path, *records: Any) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


@pytest.fixture
def ds(tmp_path: Path) -> Dataset:
    return Dataset(tmp_path / "ds", create=True)


def rows(ds: Dataset, table: str) -> list[dict[str, Any]]:
    con = ds.connect()
    cur = con.execute(f"SELECT * FROM {table} ORDER BY line")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def test_runtime_jsonl_maps_fields_and_keeps_unknown(ds: Dataset, tmp_path: Path) -> None:
    env = {"environment": {"compiler": "xla", "hardware": "npu-v5", "rack": "r7"}}
    event = {
        "event": "retune",
        "workload": "w",
        "ts_us": 120.0,
        "dur_us": 30.0,
        "shape": {"seq": 96, "batch": 4},
    }
    f = jsonl(tmp_path / "t.jsonl", env, {**REQ, "tenant": "acme"}, event)
    res = ingest_file(ds, f)
    assert res.format == "native-runtime"
    assert res.rows == {"environment": 1, "request": 1, "adaptation_event": 1}
    (req,) = rows(ds, "request")
    assert req["shape"] == "batch=4,seq=96"
    assert req["queue_start_us"] == 100.0  # defaults to arrival
    assert req["status"] == "ok"
    assert req["slice"] == ""
    assert json.loads(req["extra"]) == {"tenant": "acme"}
    assert req["line"] == 2
    assert req["source_id"] == res.source_id
    (ev,) = rows(ds, "adaptation_event")
    assert ev["shape"] == "batch=4,seq=96"
    assert ev["dur_us"] == 30.0
    (e,) = rows(ds, "environment")
    assert e["side"] == "runtime"
    assert e["hardware"] == "npu-v5"
    assert json.loads(e["extra"]) == {"rack": "r7"}


def test_compile_profile_and_quality(ds: Dataset, tmp_path: Path) -> None:
    assert ingest_file(ds, jsonl(tmp_path / "c.jsonl", PLAN)).format == "native-compile"
    assert ingest_file(ds, jsonl(tmp_path / "q.jsonl", QUAL)).format == "native-quality"
    (plan,) = rows(ds, "compile_plan")
    assert plan["shape_bucket"] == "batch=1-8,seq=65-128"
    (q,) = rows(ds, "quality")
    assert q["precision"] == "int8"
    assert q["value"] == 0.75


def test_gzip_csv_and_parquet_containers(ds: Dataset, tmp_path: Path) -> None:
    gz = tmp_path / "t.jsonl.gz"
    gz.write_bytes(gzip.compress((json.dumps(REQ) + "\n").encode()))
    csv = tmp_path / "t.csv"
    csv.write_text(
        "workload,request_id,shape,arrival_us,compute_start_us,compute_end_us,core,plan_variant\n"
        'w,r2,"batch=4,seq=96",1,2,5,3,adapted\n'
    )
    parquet = tmp_path / "t.parquet"
    pq.write_table(
        pa.Table.from_pylist([{**REQ, "request_id": "r3", "shape": "batch=2,seq=8"}]), parquet
    )
    for f in (gz, csv, parquet):
        assert detect(f).name == "native-runtime"
        ingest_file(ds, f)
    got = {r["request_id"]: r for r in rows(ds, "request")}
    assert set(got) == {"r1", "r2", "r3"}
    assert got["r2"]["core"] == 3
    assert got["r2"]["plan_variant"] == "adapted"
    assert got["r3"]["shape"] == "batch=2,seq=8"


BAD: list[tuple[str, Any, int, str | None, str]] = [
    (
        "missing required",
        {k: v for k, v in REQ.items() if k != "arrival_us"},
        1,
        "arrival_us",
        "required",
    ),
    ("wrong type", {**REQ, "arrival_us": "soon"}, 1, "arrival_us", "expected a number"),
    ("bool as number", {**REQ, "core": True}, 1, "core", "expected a number"),
    ("reversed compute", {**REQ, "compute_end_us": 10.0}, 1, "compute_end_us", "before"),
    ("start before arrival", {**REQ, "compute_start_us": 50.0}, 1, "compute_start_us", "before"),
    ("queue after start", {**REQ, "queue_start_us": 160.0}, 1, "queue_start_us", "after"),
    ("unknown variant", {**REQ, "plan_variant": "turbo"}, 1, "plan_variant", "one of"),
    ("negative dim", {**REQ, "shape": {"batch": -4}}, 1, "shape", "non-negative"),
    ("fractional dim", {**REQ, "shape": {"batch": 2.5}}, 1, "shape", "integer"),
    ("huge number", {**REQ, "arrival_us": 1e400}, 1, None, "invalid JSON"),
    (
        "NaN literal",
        '{"workload": "w", "request_id": "x", "arrival_us": NaN}',
        1,
        None,
        "invalid JSON",
    ),
    ("not an object", "[1, 2, 3]", 1, None, "not a JSON object"),
    ("negative batch", {**REQ, "batch_size": 0}, 1, "batch_size", ">= 1"),
]


@pytest.mark.parametrize(("case", "bad", "line", "field", "reason"), BAD, ids=[b[0] for b in BAD])
def test_invalid_records_name_file_line_field(
    ds: Dataset, tmp_path: Path, case: str, bad: Any, line: int, field: str | None, reason: str
) -> None:
    f = jsonl(tmp_path / "bad.jsonl", REQ, bad)
    with pytest.raises(InputError) as err:
        ingest_file(ds, f)
    e = err.value
    assert e.path == str(f.resolve())
    assert e.line == line + 1
    assert e.field == field
    assert reason in e.reason
    assert str(f.resolve()) in str(e)
    assert f":{line + 1}:" in str(e)
    assert rows(ds, "request") == []  # nothing of an aborted file is written
    assert not list((ds.root / ".staging").glob("*/**/*.parquet"))


def test_bad_event_kind(ds: Dataset, tmp_path: Path) -> None:
    f = jsonl(tmp_path / "e.jsonl", REQ, {"event": "reboot", "workload": "w", "ts_us": 1.0})
    with pytest.raises(InputError, match="field 'event'"):
        ingest_file(ds, f)


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.jsonl", b"", "empty"),
        ("empty.jsonl.gz", gzip.compress(b"", mtime=0), "empty"),
        # two bytes of a gzip header: a stream cut short, not an empty one
        ("zero.jsonl.gz", b"\x1f\x8b", "truncated or corrupt gzip"),
        ("garbage.bin", bytes(range(256)) * 4, "not recognised"),
        ("other.json", b'{"hello": "world"}\n', "not recognised"),
    ],
)
def test_unreadable_files(
    ds: Dataset, tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    f = tmp_path / name
    f.write_bytes(content)
    with pytest.raises(InputError, match=reason):
        ingest_file(ds, f)


@pytest.mark.parametrize("keep", [0.5, 0.02])
def test_truncated_gzip_reports_line(ds: Dataset, tmp_path: Path, keep: float) -> None:
    """A gzip cut short says so, also when the cut comes before 64 KiB of decompressed data
    (before: the sniffer's read failed whole and the file was called empty)."""
    data = gzip.compress(
        "".join(json.dumps({**REQ, "request_id": f"r{i}"}) + "\n" for i in range(2000)).encode()
    )
    f = tmp_path / "cut.jsonl.gz"
    f.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(InputError, match="truncated or corrupt gzip"):
        ingest_file(ds, f)


def test_csv_row_with_missing_cell(ds: Dataset, tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text(
        "workload,request_id,shape,arrival_us,compute_start_us,compute_end_us\n"
        "w,r1,batch=1,1,2,3\nw,r2,batch=1,1,2\n"
    )
    with pytest.raises(InputError) as err:
        ingest_file(ds, f)
    assert err.value.line == 3
    assert "cells" in err.value.reason


def test_quarantine_keeps_good_rows_and_counts_bad(ds: Dataset, tmp_path: Path) -> None:
    f = jsonl(
        tmp_path / "mixed.jsonl",
        REQ,
        {**REQ, "request_id": "r2", "arrival_us": "x"},
        "{not json",
        {**REQ, "request_id": "r3"},
    )
    res = ingest_file(ds, f, policy="quarantine")
    assert res.rows["request"] == 2
    assert res.rejected == 2
    q = rows(ds, "quarantine")
    assert [(r["line"], r["field"]) for r in q] == [(2, "arrival_us"), (3, None)]
    (entry,) = ds.log()
    assert entry.rejected == 2
    assert entry.rejections[0]["field"] == "arrival_us"


def test_reingest_is_idempotent_and_changed_file_replaces(ds: Dataset, tmp_path: Path) -> None:
    f = jsonl(tmp_path / "t.jsonl", REQ)
    first = ingest_file(ds, f)
    again = ingest_file(ds, f)
    assert again.status == "unchanged"
    assert again.source_id == first.source_id
    assert len(rows(ds, "request")) == 1
    jsonl(f, REQ, {**REQ, "request_id": "r2"})
    changed = ingest_file(ds, f)
    assert changed.status == "ingested"
    assert changed.source_id != first.source_id
    assert sorted(r["request_id"] for r in rows(ds, "request")) == ["r1", "r2"]
    assert [e.source_id for e in ds.live().values()] == [changed.source_id]
    assert not list(ds.root.rglob(f"{first.source_id}-*.parquet"))


def test_uncommitted_files_are_invisible_and_recovered(ds: Dataset, tmp_path: Path) -> None:
    ingest_file(ds, jsonl(tmp_path / "t.jsonl", REQ))
    # what a run killed between moving data files and writing its log record leaves behind
    src = next((ds.root / "request" / "workload=w").rglob("*.parquet"))
    orphan = src.parent / "deadbeefdeadbeefdead-00001.parquet"
    orphan.write_bytes(src.read_bytes())
    (ds.root / ".staging" / "x.1").mkdir(parents=True)
    assert len(rows(ds, "request")) == 1
    assert ds.recover() == 1
    assert not orphan.exists()
    assert not (ds.root / ".staging").exists()


def test_unchanged_file_is_not_hashed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mapreport.ingest as ingest_mod

    src = _one_request(tmp_path / "w.runtime.jsonl")
    ds = Dataset(tmp_path / "ds", create=True)
    assert ingest_file(ds, src).status == "ingested"

    def no_hash(path: Path) -> str:
        raise AssertionError("an unchanged file was hashed again")

    monkeypatch.setattr(ingest_mod, "file_sha256", no_hash)
    monkeypatch.setattr(ingest_mod.Digest, "start", no_hash)
    assert ingest_file(ds, src).status == "unchanged"
    monkeypatch.undo()
    os.utime(src, ns=(1, 1))  # same content, another modification time: hashed, still the same
    assert ingest_file(ds, src).status == "unchanged"


def test_new_content_is_hashed_while_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose size no dataset file has cannot be one the dataset holds: it is hashed on
    a thread while it is read (never beforehand), and its rows carry that hash's source id."""
    import hashlib

    import mapreport.ingest as ingest_mod

    def not_first(path: Path) -> str:
        raise AssertionError("hashed before it was read")

    monkeypatch.setattr(ingest_mod, "file_sha256", not_first)
    src = _one_request(tmp_path / "w.runtime.jsonl")
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, src)
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    assert (res.status, res.source_id) == ("ingested", sha[:20])
    assert [e.sha256 for e in ds.log()] == [sha]
    assert [r["source_id"] for r in rows(ds, "request")] == [sha[:20]]


def test_a_file_of_a_known_size_is_hashed_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy of an ingested file under another name has that file's size: its hash comes
    first and finds it, so it is never read; a file of another size is read."""
    from mapreport.ingest import native

    src = _one_request(tmp_path / "w.runtime.jsonl")
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, src)
    copy = tmp_path / "copy.runtime.jsonl"
    copy.write_bytes(src.read_bytes())
    assert ds.may_hold(copy.stat().st_size)
    assert not ds.may_hold(copy.stat().st_size + 1)

    def never(*args: Any) -> None:
        raise AssertionError("a known content was read again")

    for reader in native.NATIVE_READERS:
        monkeypatch.setattr(type(reader), "read", never)
    assert ingest_file(ds, copy).status == "unchanged"


def test_a_cancelled_hash_stops_its_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Digest.cancel` (a file that failed) ends the hashing thread at its next block, and
    the hash is then an error, never a wrong value."""
    import threading

    from mapreport.ingest import digest

    monkeypatch.setattr(digest, "BLOCK", 16)  # ~650,000 blocks: it cannot end on its own first
    src = tmp_path / "big.jsonl"
    src.write_bytes(b"x" * (10 << 20))
    before = threading.active_count()
    d = digest.Digest.start(src)
    d.cancel()
    assert threading.active_count() == before
    with pytest.raises(OSError, match="cancelled"):
        _ = d.sha256


def test_a_failed_file_leaves_no_hashing_behind(tmp_path: Path) -> None:
    """A file that fails at its first line (abort): no hashing thread is left running and
    nothing is logged or staged."""
    import threading

    src = tmp_path / "w.runtime.jsonl"
    src.write_bytes(b"{not json\n" + b"\n" * (8 << 20))
    ds = Dataset(tmp_path / "ds", create=True)
    before = threading.active_count()
    with pytest.raises(InputError):
        ingest_file(ds, src, fmt="native-runtime")
    assert threading.active_count() == before
    assert ds.log() == []
    assert not list((ds.root / ".staging").glob("*/*"))


def test_a_retired_record_without_a_size_hashes_every_file_first(tmp_path: Path) -> None:
    """Retired files are found by their hash; a record from before sizes were kept could be
    any size, so then every file is hashed before it is read."""
    src = _one_request(tmp_path / "w.runtime.jsonl")
    ds = Dataset(tmp_path / "ds", create=True)
    size = src.stat().st_size
    assert not ds.may_hold(size)
    (ds.root / "retired").mkdir()
    (ds.root / "retired" / "a.json").write_text(json.dumps({"size_bytes": size + 5}))
    assert not Dataset(ds.root).may_hold(size)
    assert Dataset(ds.root).may_hold(size + 5)
    (ds.root / "retired" / "b.json").write_text(json.dumps({"path": "x", "sha256": "0" * 64}))
    assert Dataset(ds.root).may_hold(size)


def test_dataset_written_before_a_column_was_added(tmp_path: Path) -> None:
    """An ingest_log written before `mtime_ns` existed still reads (the column is null)."""
    src = _one_request(tmp_path / "w.runtime.jsonl")
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, src)
    for f in (tmp_path / "ds" / "ingest_log").glob("*.parquet"):
        pq.write_table(pq.read_table(f).drop_columns(["mtime_ns"]), f)
    con = Dataset(tmp_path / "ds").connect()
    assert con.execute("SELECT count(*), max(mtime_ns) FROM ingest_log").fetchone() == (1, None)
    assert con.execute("SELECT count(*) FROM request").fetchone() == (1,)


def _one_request(path: Path) -> Path:
    """A runtime file holding one valid request."""
    rec = {
        "workload": "w",
        "request_id": "1",
        "shape": {"batch": 1},
        "arrival_us": 1.0,
        "compute_start_us": 2.0,
        "compute_end_us": 3.0,
    }
    path.write_text(json.dumps(rec) + "\n")
    return path


@pytest.mark.slow
def test_parallel_ingest_ends_as_serial(tmp_path: Path, sample_dir: Path) -> None:
    """--jobs 2 reads files in two processes; the dataset ends as a serial ingest leaves it,
    and under abort the files after a bad one are not committed."""
    from mapreport.run.ingesting import ingest

    files = sorted(sample_dir.glob("*.jsonl*")) + sorted(sample_dir.glob("*.csv"))
    serial = ingest(tmp_path / "s", files)
    parallel = ingest(tmp_path / "p", files, jobs=2)
    assert [(r.path, r.status, r.rows, r.source_id) for r in serial] == [
        (r.path, r.status, r.rows, r.source_id) for r in parallel
    ]
    a, b = Dataset(tmp_path / "s").connect(), Dataset(tmp_path / "p").connect()
    q = (
        "SELECT count(*), count(DISTINCT (source_id, line)), min(compute_end_us), "
        "max(compute_end_us), count(DISTINCT source_id) FROM request"
    )
    assert a.execute(q).fetchone() == b.execute(q).fetchone()
    bad = tmp_path / "bad.runtime.jsonl"
    bad.write_text(
        '{"workload": "w", "request_id": "1", "arrival_us": 1, "compute_start_us": 2, '
        '"compute_end_us": 3}\n'
    )
    later = _one_request(tmp_path / "z.runtime.jsonl")
    with pytest.raises(InputError) as e:
        ingest(tmp_path / "a", [files[0], bad, later], jobs=2)
    assert (e.value.path, e.value.field) == (str(bad), "shape")
    committed = {x.path for x in Dataset(tmp_path / "a").live().values()}
    assert committed == {str(files[0].resolve())}
    assert not (tmp_path / "a" / ".staging").exists() or not any(
        (tmp_path / "a" / ".staging").iterdir()
    )
