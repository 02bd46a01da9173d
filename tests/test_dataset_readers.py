"""The dataset read with default arguments by pandas, pyarrow.dataset, DuckDB and polars (when
installed): the `workload=` folder and the files' own `workload` column agree in type
(docs/dataset.md, "Reading it elsewhere"), on `request` and `op_exec` of the dataset `make demo`
writes, and datasets written before still read."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from mapreport.dataset.store import PARTITION_TYPE, Dataset
from mapreport.run.api import open_dataset
from mapreport.run.check import check
from mapreport.run.ingesting import ingest
from tests.conftest import REALDATA
from tests.test_golden import golden_case

KINETO = REALDATA / "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"


def _default_reads(folder: Path) -> dict[str, tuple[int, set[str]]]:
    """Rows and workloads of one table folder, read by each library with default arguments."""
    got = {}
    df = pd.read_parquet(folder)
    got["pandas"] = (len(df), set(df["workload"].astype(str)))
    t = pads.dataset(folder).to_table()
    got["pyarrow.dataset"] = (t.num_rows, set(t.column("workload").to_pylist()))
    rows = duckdb.connect().execute(f"SELECT workload FROM '{folder}/**/*.parquet'").fetchall()
    got["duckdb"] = (len(rows), {r[0] for r in rows})
    if importlib.util.find_spec("polars") is not None:  # not a dependency of mapreport
        pl = importlib.import_module("polars")
        p = pl.read_parquet(folder)
        got["polars"] = (p.height, set(p["workload"].cast(pl.String).to_list()))
    return got


@pytest.fixture(scope="module")
def made_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo/dataset as `make demo` writes it: the nightly job over sample_data/'s three nights
    (the golden demo case's dataset, built once and shared with tests/test_golden.py)."""
    return golden_case("demo", tmp_path_factory).out.parent / "dataset"


@pytest.mark.parametrize("table", ["request", "op_exec"])
def test_the_demo_tables_read_with_default_arguments(made_demo: Path, table: str) -> None:
    expected = open_dataset(made_demo).table(table)
    assert len(expected) > 0
    want = (len(expected), set(expected["workload"]))
    for reader, got in _default_reads(made_demo / table).items():
        assert got == want, reader
    f = next((made_demo / table).rglob("*.parquet"))
    assert pq.read_schema(f).field("workload").type == PARTITION_TYPE


@pytest.mark.skipif(not KINETO.is_file(), reason="../shared/realdata is not beside the repo")
def test_op_exec_reads_with_default_arguments(tmp_path: Path) -> None:
    ingest(tmp_path / "ds", [KINETO])
    expected = open_dataset(tmp_path / "ds").table("op_exec")
    assert len(expected) > 0
    want = (len(expected), set(expected["workload"]))
    for reader, got in _default_reads(tmp_path / "ds" / "op_exec").items():
        assert got == want, reader


def test_a_dataset_written_before_still_reads(
    tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of a mapreport before this change (the column as a string) beside new ones:
    mapreport's views, its check and the API read both."""
    ds = tmp_path / "ds"
    with monkeypatch.context() as m:
        m.setattr(Dataset, "as_written", staticmethod(lambda _t, data, _w=None: data))
        ingest(ds, sorted(sample_dir.glob("bert-base.*")))
    ingest(ds, sorted(sample_dir.glob("resnet50-int8.*")))
    types = {pq.read_schema(f).field("workload").type for f in (ds / "request").rglob("*.parquet")}
    assert types == {pa.string(), PARTITION_TYPE}
    con = Dataset(ds).connect()
    counts = dict(con.execute("SELECT workload, count(*) FROM request GROUP BY 1").fetchall())
    assert set(counts) == {"bert-base", "resnet50-int8"}
    assert min(counts.values()) > 0
    assert check(Dataset(ds)).damage == ()
    api = open_dataset(ds)
    assert len(api.table("request", "bert-base")) == counts["bert-base"]
    assert len(api.table("request", "resnet50-int8/prod")) == counts["resnet50-int8"]
    # pandas reads the files of one kind with default arguments; a folder of old files with
    # the partition folders ignored, as docs/dataset.md says
    old = pd.read_parquet(ds / "request" / "workload=bert-base", partitioning=None)
    assert len(old) == counts["bert-base"]


def test_the_docs_two_line_reads_run(made_demo: Path) -> None:
    """Each `python` block of docs/dataset.md's "Reading it elsewhere" runs on the dataset
    `make demo` writes: each library's two lines read every row of `request` and `op_exec`
    (polars' only where polars is installed), the API's line the first night's requests."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "dataset.md").read_text()
    section = text.split("## Reading it elsewhere", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert len(blocks) == 5
    api = open_dataset(made_demo)
    rows = (len(api.table("request")), len(api.table("op_exec")))
    libraries = []
    for code in blocks:
        if "polars" in code and importlib.util.find_spec("polars") is None:
            continue
        ns: dict[str, Any] = {}
        exec(code.replace("demo/dataset", str(made_demo)), ns)  # the page's own lines
        if "requests" in ns:
            assert len(code.strip().splitlines()) == 2, code
            assert (len(ns["requests"]), len(ns["ops"])) == rows, code
            libraries.append(code.split()[1])
        else:
            assert len(ns["df"]) > 0
    assert libraries[:3] == ["pandas", "pyarrow.dataset", "duckdb"]
