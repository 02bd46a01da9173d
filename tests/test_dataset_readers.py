"""The dataset read with default arguments by pandas, pyarrow.dataset, DuckDB and polars (when
installed): the `workload=` folder and the files' own `workload` column agree in type
(docs/dataset.md, "Reading it elsewhere"), and datasets written before still read."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

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


def test_request_reads_with_default_arguments(demo_dataset: Path) -> None:
    expected = open_dataset(demo_dataset).table("request")
    want = (len(expected), set(expected["workload"]))
    for reader, got in _default_reads(demo_dataset / "request").items():
        assert got == want, reader
    f = next((demo_dataset / "request").rglob("*.parquet"))
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
        m.setattr(Dataset, "as_written", staticmethod(lambda _t, data: data))
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


def test_the_docs_two_line_reads_run(demo_dataset: Path, tmp_path: Path) -> None:
    """Each `python` block of docs/dataset.md's "Reading it elsewhere" runs on the demo dataset
    (polars' only where polars is installed)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "dataset.md").read_text()
    section = text.split("## Reading it elsewhere", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert len(blocks) == 5
    if KINETO.is_file():
        ingest(tmp_path / "op", [KINETO])
    for code in blocks:
        if "polars" in code and importlib.util.find_spec("polars") is None:
            continue
        code = code.replace("trace-ds/op_exec", str(tmp_path / "op" / "op_exec"))
        if "op_exec" in code and not KINETO.is_file():
            continue
        ns: dict[str, object] = {}
        exec(code.replace("demo/dataset", str(demo_dataset)), ns)  # the page's own lines
        got = ns.get("df", ns.get("t"))
        assert got is None or len(got) > 0  # type: ignore[arg-type]
