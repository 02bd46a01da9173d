"""vLLM's and SGLang's `execution_details.json` (reader `capture-details`): every real file of
../shared/realdata read into `graph_capture` against the file; the graph mode it records named
in the report's graph buckets; hostile files (truncated, wrong types, huge, nested) each one
line naming the file and the field, never a traceback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mapreport.analysis import Thresholds, analyze_slice
from mapreport.analysis.device.graphs import buckets_of, recorded_modes
from mapreport.app.cli import main
from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from mapreport.ingest.capture_details import MAX_BYTES, element_lines
from tests.conftest import REALDATA
from tests.test_roofline import graph_trace

DETAILS = sorted(REALDATA.rglob("execution_details.json")) if REALDATA.is_dir() else []
needs_realdata = pytest.mark.skipif(not DETAILS, reason="../shared/realdata is missing")
COLUMNS = "workload, slice, trace_file, batch_size, graph_mode, extra, line"


def _rows(tmp_path: Path, path: Path, **kw: Any) -> list[tuple[Any, ...]]:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, **kw)
    sql = f"SELECT {COLUMNS} FROM graph_capture ORDER BY line"
    return ds.connect().execute(sql).fetchall()


def _ingest(tmp_path: Path, path: Path, *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `mapreport ingest` of one file."""
    r = CliRunner().invoke(main, ["ingest", "--dataset", str(tmp_path / "ds"), *args, str(path)])
    return r.exit_code, r.stdout, r.stderr


@needs_realdata
@pytest.mark.parametrize("path", DETAILS, ids=lambda p: p.parents[1].name)
def test_every_real_file(tmp_path: Path, path: Path) -> None:
    """The row is the record: the trace it names, its batch size and mode; the workload the
    named trace gets when read alone (its name to the first dot)."""
    assert detect(path).name == "capture-details"
    (record,) = json.loads(path.read_text())
    (row,) = _rows(tmp_path, path)
    workload = record["file"].split(".")[0]
    assert row == (workload, "", record["file"], record["batch_size"], record["mode"], None, 2)
    assert row[4] in ("FULL", "PIECEWISE")
    (hinted,) = _rows(tmp_path / "h", path, hints={"workload": "qwen", "slice": "decode"})
    assert hinted[:2] == ("qwen", "decode")


@needs_realdata
def test_a_gzipped_record_with_more_entries_and_unknown_keys(tmp_path: Path) -> None:
    """One row per entry; a key the reader does not map is kept in `extra`."""
    entries = [
        {"file": "/runs/a/cap.0.pt.trace.json.gz", "batch_size": 8, "mode": "FULL"},
        {"file": "cap.0.pt.trace.json.gz", "batch_size": 16, "mode": "PIECEWISE", "rank": 0},
    ]
    path = tmp_path / "execution_details.json.gz"
    path.write_bytes(gzip.compress(json.dumps(entries, indent=2).encode()))
    rows = _rows(tmp_path, path)
    assert [r[:5] for r in rows] == [
        ("cap", "", "cap.0.pt.trace.json.gz", 8, "FULL"),
        ("cap", "", "cap.0.pt.trace.json.gz", 16, "PIECEWISE"),
    ]
    assert (rows[0][5], json.loads(rows[1][5])) == (None, {"rank": 0})
    assert [r[6] for r in rows] == [2, 7]


def test_the_recorded_mode_names_the_bucket(tmp_path: Path) -> None:
    """A served model's trace whose annotations say FULL at 8 and 16, and its harness's
    record that 8 was captured PIECEWISE: the record's mode is the bucket's, in the analysis,
    findings.json and the page; a size with no record keeps its annotation's word."""
    trace = tmp_path / "serve.json"
    graph_trace(trace, [5] * 4 + [12] * 4)
    details = tmp_path / "execution_details.json"
    details.write_text(json.dumps([{"file": "serve.json", "batch_size": 8, "mode": "PIECEWISE"}]))
    ds = Dataset(tmp_path / "ds", create=True)
    for path in (trace, details):
        ingest_file(ds, path)
    r = analyze_slice(ds.connect(), "serve", "", Thresholds())
    assert r.device.graphs is not None
    assert [(b.size, b.mode) for b in r.device.graphs.buckets] == [(8, "PIECEWISE"), (16, "FULL")]
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main, ["report", "--dataset", str(ds.root), "--out", str(out), "--no-pdf"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "serve" / "findings.json").read_text())
    assert [b["mode"] for b in doc["graph_buckets"]] == ["PIECEWISE", "FULL"]
    assert "<td>PIECEWISE</td>" in (out / "serve" / "report.html").read_text()


def test_recorded_modes() -> None:
    """Several records of a size under different modes name them all; no record, no change."""
    modes = recorded_modes([(8, "FULL"), (8, "PIECEWISE"), (16, "FULL")])
    assert modes == {8: "FULL, PIECEWISE", 16: "FULL"}
    captures = {8: ("DECODE", 1.0), 32: ("DECODE", 2.0)}
    g = buckets_of(captures, [], modes=modes)
    assert [(b.size, b.mode) for b in g.buckets] == [(8, "FULL, PIECEWISE"), (32, "DECODE")]


def _record(**changes: Any) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"file": "bs_32_rank0.json.gz", "batch_size": 32, "mode": "FULL"}
    entry.update(changes)
    return [{k: v for k, v in entry.items() if v is not ...}]


HOSTILE = {
    "batch as text": (_record(batch_size="32"), "batch_size", "expected a number, got '32'"),
    "batch as bool": (_record(batch_size=True), "batch_size", "expected a number, got True"),
    "batch fraction": (_record(batch_size=3.5), "batch_size", "expected an integer, got 3.5"),
    "batch zero": (_record(batch_size=0), "batch_size", "must be >= 1, got 0"),
    "batch huge": (_record(batch_size=10**30), "batch_size", "integer out of range"),
    "batch over int32": (_record(batch_size=2**31), "batch_size", "must be <= 2147483647"),
    "batch inf": (
        '[{"file": "a", "batch_size": 1e999, "mode": "FULL"}]',
        "batch_size",  # refused while decoding the document: named by its path
        "Number out of range (record 1)",
    ),
    "mode missing": (_record(mode=...), "mode", "required field is missing"),
    "mode nested": (_record(mode={"a": [1, {"b": 2}]}), "mode", "expected a string, got {'a'"),
    "mode words": (_record(mode="FULL; rm -rf /"), "mode", "expected a graph mode name"),
    "mode long": (_record(mode="F" * 10_000), "mode", "expected a graph mode name"),
    "file list": (_record(file=["a", "b"]), "file", "expected a string, got ['a', 'b']"),
    "file empty": (_record(file=""), "file", "expected a file name, got ''"),
    "file dots": (_record(file="runs/.."), "file", "expected a file name"),
    "file control": (_record(file="a\x1b[2Jb.json"), "file", "expected a file name"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_bad_record_is_one_line_naming_its_field(tmp_path: Path, case: str) -> None:
    doc, field, reason = HOSTILE[case]
    path = tmp_path / "execution_details.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    with pytest.raises(InputError) as e:
        _rows(tmp_path, path)
    assert (e.value.field, e.value.line) == (field, None if isinstance(doc, str) else 2)
    assert reason in e.value.reason
    code, out, err = _ingest(tmp_path / "cli", path)
    assert (code, out) == (3, "")
    assert err.count("\n") == 1
    assert err.startswith(f"mapreport: {path.resolve()}")
    assert f"field '{field}': " in err
    assert "Traceback" not in err


def test_quarantine_keeps_the_good_records(tmp_path: Path) -> None:
    good = {"file": "a.json", "batch_size": 8, "mode": "FULL"}
    path = tmp_path / "execution_details.json"
    path.write_text(json.dumps([good, {**good, "batch_size": "x"}, "not a record"], indent=2))
    assert element_lines(path.read_bytes()) == [2, 7, 12]
    code, _, err = _ingest(tmp_path, path, "--on-error", "quarantine")
    assert code == 0, err
    ds = Dataset(tmp_path / "ds")
    con = ds.connect()
    assert con.execute("SELECT batch_size FROM graph_capture").fetchall() == [(8,)]
    rejected = con.execute("SELECT line, field FROM quarantine ORDER BY line").fetchall()
    assert rejected == [(7, "batch_size"), (12, None)]


def test_element_lines() -> None:
    """Where each element starts, nested objects, strings holding brackets and all."""
    raw = b'[{"a": {"b": [1,\n 2]}, "s": "[,{"},\n\n  "x", 3\n, {}]'
    assert element_lines(raw) == [1, 4, 4, 5]
    assert element_lines(b"[]") == []


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'[\n  {\n    "file": "a.json",\n    "batch_size": 32,\n    "mode": "FU', "truncated"),
        (b'[{"file": "a", "batch_size": 1, "mode": "FULL", "x": ' + b"[" * 50_000, "nested"),
        (b'[{"file": "a", "batch_size": 1, "mode": "FULL"}' + b" " * MAX_BYTES + b"]", "larger"),
        (b'[{"file": "a", "batch_size": 1, "mode": "FULL"}]\n{"x": 1}', "trailing"),
    ],
    ids=["truncated", "nested", "huge", "two documents"],
)
def test_a_broken_file_is_one_line(tmp_path: Path, body: bytes, reason: str) -> None:
    path = tmp_path / "execution_details.json"
    path.write_bytes(body)
    assert detect(path).name == "capture-details"
    code, out, err = _ingest(tmp_path, path)
    assert (code, out) == (3, "")
    assert err.count("\n") == 1
    assert err.startswith(f"mapreport: {path.resolve()}")
    assert reason in err
    assert "Traceback" not in err


def test_what_is_not_a_record_file_is_not_sniffed(tmp_path: Path) -> None:
    """An object, an array of other objects, an empty array: not this format."""
    for i, body in enumerate(
        ['{"file": "a", "batch_size": 1, "mode": "FULL"}', '[{"id": 1, "mode": "x"}]', "[]"]
    ):
        path = tmp_path / f"{i}" / "execution_details.json"
        path.parent.mkdir()
        path.write_text(body)
        with pytest.raises(InputError, match="format not recognised"):
            detect(path)
