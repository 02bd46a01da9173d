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
from mapreport.run.api_compared import COMPARE_TABLES
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
    assert out.startswith(f"mapreport: no findings.json or compare.json in {tmp_path}")
    assert len(out.strip().splitlines()) == 1
    (tmp_path / "findings.json").write_text("[]")
    code, out = _export(str(tmp_path / "findings.json"), "--out", str(tmp_path / "x"))
    assert code == 5
    assert "findings schema_version 'missing'" in out
    assert len(out.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_comparison_exports_its_tables(demo_dataset: Path, tmp_path: Path) -> None:
    """A `mapreport compare` OUT (the demo's bert-base against itself): each table of
    compare.json as CSV, Parquet and a sheet, rows in compare.json's order."""
    cmp = tmp_path / "bert-a-a"
    args = ["--a-slice", "bert-base", "--b-slice", "bert-base"]
    args += ["--out", str(cmp), "--no-pdf", "--quiet"]
    r = CliRunner().invoke(main, ["compare", str(demo_dataset), str(demo_dataset), *args])
    assert r.exit_code == 0, r.output
    code, out = _export(str(cmp), "--out", str(tmp_path / "x"))
    assert (code, out.splitlines()) == (
        0,
        [f"export    compare bert-a-a -> {tmp_path}/x/bert-a-a/"],
    )
    doc = json.loads((cmp / "compare.json").read_text())
    folder = tmp_path / "x" / "bert-a-a"
    shapes = pq.read_table(folder / "shapes.parquet")
    assert shapes.column("shape").to_pylist() == [s["shape"] for s in doc["shapes"]]
    assert "quantiles" not in shapes.column_names
    for key in ("n_a", "ratio_p95", "ci_p95", "verdict", "contribution_us", "latency_b.p95_us"):
        first = doc["shapes"][0]
        want = first[key] if "." not in key else first[key.split(".")[0]][key.split(".")[1]]
        assert shapes.column(key)[0].as_py() == want, key
    tests = pd.read_parquet(folder / "shape_tests.parquet")
    assert len(tests) == sum(len(s["quantiles"]) for s in doc["shapes"]) > 0
    assert list(tests.columns[:2]) == ["shape", "quantile"]
    assert pq.read_table(folder / "tail.parquet").column("ratio").to_pylist() == [
        t["ratio"] for t in doc["tail"]
    ]
    mapping = pq.read_table(folder / "mapping_shapes.parquet")
    assert mapping.column("decision_b").to_pylist() == [
        m["decision_b"] for m in doc["mapping"]["shapes"]
    ]
    meta = shapes.schema.metadata or {}
    assert meta[b"mapreport.compare_schema_version"].decode() == doc["schema_version"]
    assert meta[b"mapreport.a_workload"] == b"bert-base"
    wb = load_workbook(folder / WORKBOOK, read_only=True)
    assert wb.sheetnames == list(COMPARE_TABLES)
    rows = list(wb["shapes"].iter_rows(values_only=True))
    assert len(rows) - 1 == len(doc["shapes"])


def _compare_doc(folder: Path, **parts: object) -> Path:
    """A compare.json of op x shapes, the way `mapreport compare` writes two traces'."""
    doc: dict[str, object] = {
        "schema_version": "1.5",
        "a": {"label": "h100", "workload": "bert", "slice": ""},
        "b": {"label": "mi300", "workload": "bert", "slice": ""},
        "whole": {"categories": [{"category": "gemm", "a_us": 10.0, "b_us": 12.5}]},
        "mapping": None,
        "shapes": [],
        "only_a": ["batch=1"],
        "only_b": ["batch=2", "batch=4"],
        "ops": [{"op": "aten::mm", "shape": "8x8;8x8", "ratio": 1.25, "ci": [1.1, 1.4]}],
        "ops_only_a": [{"op": "aten::bmm", "shape": "2x8x8", "count": 3, "total_us": 9.0}],
        "ops_only_b": [{"op": "aten::add", "shape": "8", "count": 1, "total_us": 0.5}],
    } | parts
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "compare.json").write_text(json.dumps(doc))
    return folder


def test_a_comparisons_one_side_rows_name_their_side(tmp_path: Path) -> None:
    cmp = _compare_doc(tmp_path / "h100-mi300")
    code, out = _export(str(cmp / "compare.json"), "--out", str(tmp_path / "x"))
    assert code == 0, out
    folder = tmp_path / "x" / "h100-mi300"
    one = pd.read_csv(folder / "shapes_one_side.csv")
    assert one.values.tolist() == [["a", "batch=1"], ["b", "batch=2"], ["b", "batch=4"]]
    ops = pq.read_table(folder / "ops_one_side.parquet").to_pylist()
    assert [(o["side"], o["op"], o["total_us"]) for o in ops] == [
        ("a", "aten::bmm", 9.0),
        ("b", "aten::add", 0.5),
    ]
    assert pq.read_table(folder / "ops.parquet").column("ci").to_pylist() == [[1.1, 1.4]]
    assert pd.read_csv(folder / "ops.csv")["ci"].tolist() == ["[1.1, 1.4]"]
    assert pq.read_table(folder / "categories.parquet").column("b_us").to_pylist() == [12.5]
    assert pq.read_table(folder / "mapping_shapes.parquet").num_rows == 0


@pytest.mark.parametrize(
    ("parts", "said"),
    [
        (
            {"schema_version": "2.0"},
            "compare schema_version '2.0': this mapreport reads 1.x (write it again with "
            "`mapreport compare`)",
        ),
        ({"ops": {"op": "x"}}, "field 'ops': expected a list, got {'op': 'x'}"),
        ({"ops_only_b": [1]}, "field 'ops_only_b[0]': expected an object, got 1"),
        (
            {"shapes": [{"shape": "s", "quantiles": ["p50"]}]},
            "field 'shapes[0].quantiles[0]': expected an object, got 'p50'",
        ),
        ({"only_a": [1]}, "field 'only_a': expected a list of shape names"),
    ],
)
def test_a_bad_compare_json_is_one_line_naming_its_field(
    tmp_path: Path, parts: dict[str, object], said: str
) -> None:
    cmp = _compare_doc(tmp_path / "c", **parts)
    code, out = _export(str(cmp), "--out", str(tmp_path / "x"))
    assert (code, out.splitlines()) == (5, [f"mapreport: {cmp / 'compare.json'}: {said}"])
    assert not (tmp_path / "x").exists()


def test_a_comparison_and_a_report_bound_for_one_folder_are_refused(
    demo_html: Path, tmp_path: Path
) -> None:
    cmp = _compare_doc(tmp_path / "bert-base")
    code, out = _export(str(demo_html / "bert-base"), str(cmp), "--out", str(tmp_path / "x"))
    assert code == 2
    assert out.splitlines() == [
        f"mapreport: bert-base and compare bert-base would both be exported to "
        f"{tmp_path / 'x' / 'bert-base'}: export them with separate --out folders"
    ]
    assert not (tmp_path / "x").exists()
