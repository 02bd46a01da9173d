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


def test_findings_of_another_schema_are_refused(tmp_path: Path) -> None:
    (tmp_path / "findings.json").write_text(json.dumps({"schema_version": "1.9"}))
    with pytest.raises(DatasetError, match=r"findings schema_version '1\.9'"):
        mr.read_findings(tmp_path)
    (tmp_path / "findings.json").write_text("{")
    with pytest.raises(DatasetError, match="cannot read findings"):
        mr.read_findings(tmp_path)
