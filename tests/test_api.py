"""The Python API (docs/api.md): the page's own example runs, block after block, on the demo
dataset and a real profiler trace; its values are the report's; bad input is one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from mapreport.analysis import SliceResult
from mapreport.core.errors import DatasetError, MapreportError, UsageError
from mapreport.core.kinds import ActionKind, JudgementFamily
from mapreport.run import api as mr
from mapreport.run.api_findings import Action, Judgement
from mapreport.run.ingesting import ingest
from tests.conftest import REALDATA

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
KINETO = REALDATA / "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.fixture(scope="module")
def trace_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real PyTorch profiler trace ingested alone."""
    if not KINETO.is_file():
        pytest.skip("../shared/realdata is not beside the repo")
    ds = tmp_path_factory.mktemp("trace") / "ds"
    ingest(ds, [KINETO])
    return ds


@pytest.mark.slow
def test_the_pages_example_runs(
    demo_dataset: Path, trace_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every `python` block of docs/api.md, in order, in one namespace (as a notebook runs
    them), the dataset paths pointed at the test's datasets."""
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 7
    code = "\n".join(blocks)
    code = code.replace('DATASET = "demo/dataset"', f"DATASET = {str(demo_dataset)!r}")
    code = code.replace('TRACE_DATASET = "trace-ds"', f"TRACE_DATASET = {str(trace_dataset)!r}")
    ns: dict[str, object] = {}
    exec(compile(code, str(DOC), "exec"), ns)  # the page's own example
    out = capsys.readouterr().out
    assert isinstance(ns["requests"], pd.DataFrame)
    assert isinstance(ns["plans"], pa.Table)
    assert isinstance(ns["result"], SliceResult)
    per_shape = ns["per_shape"]
    assert isinstance(per_shape, pd.DataFrame)
    assert len(per_shape) == len(ns["result"].shapes)
    ops = ns["ops"]
    assert isinstance(ops, pd.DataFrame)
    assert len(ops) > 0
    assert "no table 'requests'" in out
    assert isinstance(ns["rows"], dict)
    back, compared = ns["back"], ns["c"]
    assert isinstance(back, mr.CompareFile)
    assert isinstance(compared, mr.Compared)
    assert back.verdict in compared.verdict  # the Compared verdict leads with the ship line
    assert [s.shape for s in back.shapes] == [s.shape for s in compared.comparison.shapes]
    assert [s.verdict for s in back.shapes] == [s.verdict for s in compared.comparison.shapes]


def test_tables_are_the_windows_committed_rows(demo_dataset: Path) -> None:
    ds = mr.open_dataset(demo_dataset)
    every = ds.table("request")
    assert len(every) == ds.sql("SELECT count(*) AS n FROM request")["n"][0]
    names = {str(s) for s in ds.slices()}
    assert {"bert-base", "resnet50-int8/prod"} <= names
    one = ds.table("request", "resnet50-int8/prod")
    assert set(one["slice"]) == {"prod"}
    assert len(one) == (every["workload"] == "resnet50-int8").sum()
    assert ds.arrow("request", "bert-base").num_rows == (every["workload"] == "bert-base").sum()
    # a night the demo does not hold has no rows, as a report of that night reads
    empty = mr.open_dataset(demo_dataset, date="2020-01-01")
    assert len(empty.table("request")) == 0


def test_a_jupyter_kernel_without_ipywidgets(
    demo_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a Jupyter kernel without ipywidgets DuckDB's Python client starts each connection with
    its progress bar off and refuses any SET of it, even to false (found running docs/api.md in a
    real kernel: open_dataset(...).slices() raised). Such a connection, as DuckDB makes it there:
    the API's, and so the command line's, open."""
    import duckdb

    real = duckdb.connect

    class InAKernel:
        def __init__(self) -> None:
            self.con = real()
            self.con.execute("SET enable_progress_bar = false")

        def execute(self, query: str, *args: object) -> object:
            if re.match(r"\s*SET\s+enable_progress_bar", query, re.I):
                raise duckdb.InvalidInputException(
                    "Invalid Input Error: Could not change the progress bar setting because: "
                    "'required package 'ipywidgets' is missing, which is needed to render "
                    "progress bars in Jupyter'"
                )
            return self.con.execute(query, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self.con, name)

    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: InAKernel())
    ds = mr.open_dataset(demo_dataset)
    assert "bert-base" in [str(s) for s in ds.slices()]
    assert len(ds.table("request", "bert-base")) > 0


def test_analysis_and_findings_are_the_reports(
    demo_dataset: Path, demo_results: dict[str, SliceResult]
) -> None:
    ds = mr.open_dataset(demo_dataset)
    r = ds.analyze("bert-base")
    assert r.shapes == demo_results["bert-base"].shapes
    f = ds.findings("bert-base")
    assert f.name == "bert-base"
    assert all(isinstance(j, Judgement) for j in f.judgements)
    assert all(isinstance(a, Action) for a in f.actions)
    assert {a.kind for a in f.actions} == {a.kind for a in r.actions}
    assert {j.family for j in f.judgements} <= set(JudgementFamily)
    tables = f.tables()
    assert set(tables) == set(mr.REPORT_TABLES)
    assert list(tables["per_shape"]["shape"]) == [x["shape"] for x in f.doc["shapes"]]
    assert len(tables["actions"]) == len(f.actions)


def test_findings_read_back_typed(demo_html: Path) -> None:
    path = demo_html / "bert-base" / "findings.json"
    f = mr.read_findings(path)
    doc = json.loads(path.read_text())
    assert (f.workload, f.slice, f.summary) == (doc["workload"], doc["slice"], doc["summary"])
    assert f.status is not None
    assert f.status.value == doc["status"]
    assert [a.id for a in f.actions] == [a["id"] for a in doc["actions"]]
    assert [a.kind for a in f.actions] == [ActionKind(a["class"]) for a in doc["actions"]]
    assert [j.deciding for j in f.judgements] == [j["deciding"] for j in doc["judgements"]]
    assert mr.read_findings(path.parent) == f


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda ds: mr.open_dataset(ds / "nowhere"), DatasetError, "no such dataset folder"),
        (lambda ds: mr.open_dataset(ds.parent), DatasetError, "is not a mapreport dataset"),
        (lambda ds: mr.open_dataset(ds).table("requests"), UsageError, "no table 'requests'"),
        (lambda ds: mr.open_dataset(ds).table("request", "gpt"), UsageError, "no slice 'gpt'"),
        (lambda ds: mr.open_dataset(ds).analyze("gpt/x"), UsageError, "no slice 'gpt/x'"),
        (lambda ds: mr.open_dataset(ds, date="28-11-2026"), UsageError, "is not a date"),
        (lambda ds: mr.open_dataset(ds, window="5x"), UsageError, "window '5x'"),
        (lambda ds: mr.open_dataset(ds, since="noon"), UsageError, "not an ISO time"),
        (lambda ds: mr.read_findings(ds), DatasetError, "no such findings file"),
    ],
)
def test_bad_input_is_one_line(
    demo_dataset: Path, call: object, error: type[MapreportError], text: str
) -> None:
    with pytest.raises(error) as e:
        call(demo_dataset)  # type: ignore[operator]
    assert text in str(e.value)
    assert "\n" not in str(e.value)


@pytest.fixture(scope="module")
def compared(demo_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's bert-base against itself, as `mapreport compare --out` writes it."""
    out = tmp_path_factory.mktemp("compare") / "bert-base"
    mr.compare(demo_dataset, demo_dataset, a_slice="bert-base", out=out, b_slice="bert-base")
    return out


def _keys(value: object, at: str = "") -> set[str]:
    """Every key path of a JSON value (`shapes[].quantiles[].ci`)."""
    if isinstance(value, dict):
        return {k for key, v in value.items() for k in {f"{at}.{key}"} | _keys(v, f"{at}.{key}")}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v, f"{at}[]")}
    return set()


def test_compare_json_read_back_typed(compared: Path) -> None:
    """Every key of the file is held by the typed values, categories as their enums, and the
    tables are those `mapreport export` writes of the file."""
    import msgspec

    from mapreport.core.kinds import CompareVerdict
    from mapreport.run.api_compared import compare_tables, read_compared

    doc = json.loads((compared / "compare.json").read_text())
    back = mr.read_compare(compared)
    assert back == mr.read_compare(compared / "compare.json")
    assert _keys(doc) <= _keys(json.loads(msgspec.json.encode(back)))
    assert (back.a.label, back.b.requests) == (doc["a"]["label"], doc["b"]["requests"])
    assert back.a.requests > 0
    assert back.shapes
    assert [s.verdict for s in back.shapes] == [CompareVerdict(s["verdict"]) for s in doc["shapes"]]
    assert [(t.quantile, t.ratio, t.ci) for t in back.tail] == [
        (t["quantile"], t["ratio"], tuple(t["ci"])) for t in doc["tail"]
    ]
    assert back.mean_latency is not None
    assert back.mean_latency.change_us == doc["mean_latency"]["change_us"]
    assert back.blocks is not None
    assert back.blocks.a.length == doc["blocks"]["a"]["length"]
    exported = compare_tables(read_compared(compared))
    for name, frame in back.tables().items():
        assert frame.equals(exported[name].to_pandas()), name


def test_an_earlier_compare_json_reads_with_defaults(compared: Path, tmp_path: Path) -> None:
    """A 1.x file without the keys later minors added (1.5's means and renamed shapes, 1.4's
    run shift): those are None or empty; a key of a later minor is left out."""
    doc = json.loads((compared / "compare.json").read_text())
    for key in ("mean_latency", "renamed_b", "run_shift", "tail", "runs", "whole"):
        del doc[key]
    for shape in doc["shapes"]:
        del shape["contribution_us"], shape["mean_a_us"]
    doc |= {"schema_version": "1.2", "a_later_key": {"x": [1, 2]}}
    (tmp_path / "compare.json").write_text(json.dumps(doc))
    back = mr.read_compare(tmp_path)
    assert (back.schema_version, back.mean_latency, back.renamed_b, back.tail) == (
        "1.2",
        None,
        (),
        (),
    )
    assert {s.contribution_us for s in back.shapes} == {None}


def _spoilt(doc: dict[str, object], how: str) -> object:
    shape = doc["shapes"][0]  # type: ignore[index]
    if how == "text for a number":
        shape["n_a"] = str(shape["n_a"])
    elif how == "unknown verdict":
        shape["verdict"] = "worse"
    elif how == "an interval of one":
        doc["tail"][0]["ci"] = [1.0]  # type: ignore[index]
    elif how == "a side without its label":
        del doc["a"]["label"]  # type: ignore[attr-defined]
    elif how == "another major":
        doc["schema_version"] = "2.0"
    elif how == "no version":
        del doc["schema_version"]
    elif how == "a list":
        return [doc]
    return doc


SPOILT = {
    "text for a number": "field 'shapes[0].n_a': Expected `int`, got `str`",
    "unknown verdict": "field 'shapes[0].verdict': Invalid enum value 'worse'",
    "an interval of one": "field 'tail[0].ci': Expected `array` of length 2",
    "a side without its label": "field 'a': Object missing required field `label`",
    "another major": "compare schema_version '2.0': this mapreport reads 1.x",
    "no version": "not a compare.json: Object missing required field `schema_version`",
    "a list": "not a compare.json: Expected `object`, got `array`",
}


@pytest.mark.parametrize("how", SPOILT, ids=list(SPOILT))
def test_a_bad_compare_json_is_one_line_naming_the_field(
    compared: Path, tmp_path: Path, how: str
) -> None:
    doc = json.loads((compared / "compare.json").read_text())
    f = tmp_path / "compare.json"
    f.write_text(json.dumps(_spoilt(doc, how)))
    with pytest.raises(DatasetError) as e:
        mr.read_compare(f)
    assert str(e.value).startswith(f"{f}: {SPOILT[how]}")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (
            b'{"schema_version": "1.5", "shapes": [',
            "cannot read compare.json (Input data was trunc",
        ),
        (b'{"schema_version": "1.5", "x": ' + b"[" * 100_000, "(JSON nested too deeply)"),
        (b"\xff\xfe", "cannot read compare.json (JSON is malformed"),
    ],
    ids=["truncated", "nested", "not text"],
)
def test_a_broken_compare_json_is_one_line(tmp_path: Path, body: bytes, text: str) -> None:
    f = tmp_path / "compare.json"
    f.write_bytes(body)
    with pytest.raises(DatasetError, match=re.escape(text)):
        mr.read_compare(f)
    with pytest.raises(DatasetError, match="no such compare file"):
        mr.read_compare(tmp_path / "elsewhere")


def test_findings_of_another_schema_are_refused(tmp_path: Path) -> None:
    (tmp_path / "findings.json").write_text(json.dumps({"schema_version": "1.9"}))
    with pytest.raises(DatasetError, match=r"findings schema_version '1\.9'"):
        mr.read_findings(tmp_path)
    (tmp_path / "findings.json").write_text("{")
    with pytest.raises(DatasetError, match="cannot read findings"):
        mr.read_findings(tmp_path)
