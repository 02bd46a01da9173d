"""The real torch.compile serving case (benchmarks/torch_serving.py, committed outputs under
tests/golden/torch-serving/input/): its reference figures, computed independently of
mapreport's code (pandas over the server's per-request log), and every export read.

Blocked (docs/metrics.md will define it for the analysis): the worker's busy periods, a
period starting with a request that arrives when the worker is idle; a request is blocked when
an earlier request of its busy period compiled on the serving path."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mapreport.pipeline import ingest
from mapreport.store import Dataset

CASE = Path(__file__).parent / "golden" / "torch-serving" / "input"


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    r = pd.read_csv(CASE / "requests.csv.gz").sort_values("compute_start_us")
    r = r.reset_index(drop=True)
    before = r["compute_end_us"].cummax().shift(1)
    r["period"] = (before.isna() | (r["arrival_us"] >= before)).cumsum()
    r["wait_ms"] = (r["compute_start_us"] - r["arrival_us"]) / 1000
    compiled_before = r.groupby("period")["compiled"].transform(
        lambda s: s.astype(int).cumsum().shift(1, fill_value=0) > 0
    )
    r["blocked"] = compiled_before.astype(bool)
    return r


def test_the_reference_figures(log: pd.DataFrame) -> None:
    """What the blocking finding must recover (within 10%) from each input family."""
    compiles = log[log["compiled"]]
    stalls = (compiles["compute_end_us"] - compiles["compute_start_us"]) / 1e6
    assert len(log) == 400
    assert list(zip(compiles["batch"], compiles["seq"], strict=True)) == [
        (8, 32),
        (8, 128),
        (8, 64),
        (8, 256),
    ]
    assert stalls.between(1.9, 2.2).all()
    blocked = log[log["blocked"]]
    assert len(blocked) == 68
    assert blocked.groupby("period").size().tolist() == [14, 36, 18]
    assert blocked.groupby(["batch", "seq"]).ngroups == 10  # victims of every kind
    assert log.loc[~log["blocked"], "wait_ms"].quantile(0.95) < 20  # 12.3 ms
    assert blocked["wait_ms"].quantile(0.95) > 3000  # 3.54 s
    assert log["wait_ms"].quantile(0.95) > 2000  # the slice's queue tail is the stalls


def test_every_export_is_read(tmp_path: Path) -> None:
    files = [
        CASE / "serving.runtime.jsonl.gz",
        CASE / "profiler.json.gz",
        *sorted((CASE / "torch_trace").iterdir()),
    ]
    results = ingest(tmp_path / "ds", files, hints={"workload": "torch-serving"})
    assert [r.format for r in results] == ["native-runtime", "kineto", "torch-trace"]
    con = Dataset(tmp_path / "ds").connect()
    counts = dict(
        con.execute(
            "SELECT 'request', count(*) FROM request UNION ALL "
            "SELECT 'event', count(*) FROM adaptation_event UNION ALL "
            "SELECT 'compile', count(*) FROM compile_event UNION ALL "
            "SELECT 'spans', count(*) FROM op_exec WHERE starts_with(name, 'request r')"
        ).fetchall()
    )
    assert counts == {"request": 400, "event": 4, "compile": 12, "spans": 400}
