"""`mapreport export`: every table a report shows as CSV, Parquet and one workbook, named and
typed as in findings.json, through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from openpyxl import load_workbook

from mapreport.app.cli import main
from mapreport.run.api_tables import REPORT_TABLES, WORKBOOK
from mapreport.run.ingesting import ingest
from tests.conftest import REALDATA

KINETO = REALDATA / "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"


def _export(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["export", *args])
    return r.exit_code, r.output


def test_every_slice_of_a_run_is_exported(demo_html: Path, tmp_path: Path) -> None:
    code, out = _export(str(demo_html), "--out", str(tmp_path))
    assert code == 0, out
    docs = sorted(demo_html.rglob("findings.json"))
    assert len(out.splitlines()) == len(docs) >= 3
    for f in docs:
        doc = json.loads(f.read_text())
        folder = tmp_path / f.parent.relative_to(demo_html)
        for name in REPORT_TABLES:
            t = pq.read_table(folder / f"{name}.parquet")
            assert len(pd.read_csv(folder / f"{name}.csv")) == t.num_rows if t.num_columns else True
            meta = t.schema.metadata or {}
            assert meta[b"mapreport.workload"].decode() == doc["workload"]
        shapes = pq.read_table(folder / "per_shape.parquet")
        assert shapes.column("shape").to_pylist() == [s["shape"] for s in doc["shapes"]]
        first = doc["shapes"][0]
        for key in ("n", "latency_p95_us", "decision", "covered", "gain_p50_ci"):
            assert shapes.column(key)[0].as_py() == first[key], key
        assert pa.types.is_integer(shapes.schema.field("n").type)
        assert pa.types.is_boolean(shapes.schema.field("covered").type)
        actions = pq.read_table(folder / "actions.parquet")
        assert actions.column("id").to_pylist() == [a["id"] for a in doc["actions"]]
        assert actions.column("class").to_pylist() == [a["class"] for a in doc["actions"]]
        judged = pq.read_table(folder / "judgements.parquet")
        assert judged.column("family").to_pylist() == [j["family"] for j in doc["judgements"]]
        tail = pd.read_parquet(folder / "tail_drivers.parquet")
        pooled = tail[tail["shape"] == "*"].set_index("driver")["share"]
        assert pooled.to_dict() == doc["tail_drivers"]["shares"]


def test_the_workbook_has_a_typed_sheet_per_table(demo_html: Path, tmp_path: Path) -> None:
    code, out = _export(str(demo_html / "bert-base" / "findings.json"), "--out", str(tmp_path))
    assert code == 0, out
    doc = json.loads((demo_html / "bert-base" / "findings.json").read_text())
    wb = load_workbook(tmp_path / "bert-base" / WORKBOOK, read_only=True)
    assert wb.sheetnames == list(REPORT_TABLES)
    rows = list(wb["per_shape"].iter_rows(values_only=True))
    header, first = (
        rows[0],
        dict(zip(rows[0], rows[1], strict=False)),
    )  # read_only trims empty cells
    assert header == tuple(pq.read_schema(tmp_path / "bert-base" / "per_shape.parquet").names)
    assert len(rows) - 1 == len(doc["shapes"])
    assert first["n"] == doc["shapes"][0]["n"]
    assert isinstance(first["n"], int)
    assert isinstance(first["covered"], bool)
    assert json.loads(str(first["gain_p50_ci"])) == doc["shapes"][0]["gain_p50_ci"]


@pytest.mark.skipif(not KINETO.is_file(), reason="../shared/realdata is not beside the repo")
def test_a_profiler_traces_op_x_shape_table(tmp_path: Path) -> None:
    ingest(tmp_path / "ds", [KINETO])
    r = CliRunner().invoke(
        main,
        ["report", "--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "r"), "--no-pdf"],
    )
    assert r.exit_code == 0, r.output
    code, out = _export(str(tmp_path / "r"), "--out", str(tmp_path / "x"))
    assert code == 0, out
    (doc,) = [json.loads(f.read_text()) for f in (tmp_path / "r").rglob("findings.json")]
    (ops,) = list((tmp_path / "x").rglob("op_shape.parquet"))
    t = pq.read_table(ops)
    assert t.num_rows == len(doc["ops"]) > 0
    assert t.column("op").to_pylist() == [o["op"] for o in doc["ops"]]
    assert t.column("total_us").to_pylist() == [o["total_us"] for o in doc["ops"]]


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    code, out = _export(str(tmp_path / "nowhere"), "--out", str(tmp_path / "x"))
    assert (code, out.strip()) == (2, f"mapreport: {tmp_path / 'nowhere'}: no such file or folder")
    code, out = _export(str(tmp_path), "--out", str(tmp_path / "x"))
    assert code == 2
    assert out.startswith(f"mapreport: no findings.json in {tmp_path}")
    assert len(out.strip().splitlines()) == 1
    (tmp_path / "findings.json").write_text("[]")
    code, out = _export(str(tmp_path / "findings.json"), "--out", str(tmp_path / "x"))
    assert code == 5
    assert "findings schema_version 'missing'" in out
    assert len(out.strip().splitlines()) == 1
