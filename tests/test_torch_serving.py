"""The real torch.compile serving case (benchmarks/torch_serving.py, committed outputs under
tests/golden/torch-serving/input/): its reference figures, computed independently of
mapreport's code (pandas over the server's per-request log), and every export read.

Blocked (as docs/metrics.md defines it for the analysis): the worker's busy periods, a period
starting with a request that arrives when the worker is idle; a request is blocked when an
earlier request of its busy period compiled on the serving path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mapreport.core.records import replace
from mapreport.dataset.store import Dataset
from mapreport.run.config import load_config
from mapreport.run.ingesting import ingest
from mapreport.run.reporting import report

GOLDEN = Path(__file__).parent / "golden"
CASE = GOLDEN / "torch-serving" / "input"


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
    # the profiler's request spans are requests too (the same 400 again: one slice should
    # get one of the two logs, docs/formats.md)
    assert counts == {"request": 800, "event": 4, "compile": 12, "spans": 400}


def _report(config_path: Path, tmp_path: Path) -> dict[str, Any]:
    config = replace(load_config(config_path), dataset=tmp_path / "ds", out=tmp_path / "out")
    ingest(config.dataset, config.source_files(), config.on_error, hints=config.hints)
    (outcome,) = report(config.dataset, config.out, config, pdf=False, record=False)
    assert outcome.error is None
    doc: dict[str, Any] = json.loads((config.out / "torch-serving" / "findings.json").read_text())
    doc["_html"] = (config.out / "torch-serving" / "report.html").read_text()
    return doc


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", ["torch-serving", "torch-serving-traces"], ids=["native log", "profiler + TORCH_TRACE"]
)
def test_the_report_names_the_recompiles_as_the_tail(
    case: str, log: pd.DataFrame, tmp_path: Path
) -> None:
    """From the server's native export, and from the profiler trace and TORCH_TRACE alone: the
    slice's tail is blocking behind the 4 serving-time recompiles (their shapes and stall
    lengths named), the blocked count within 10% of pandas' 68, the victims citing it, and the
    one tuning action says to pre-compile the four shapes in warm-up."""
    doc = _report(GOLDEN / case / "input" / "mapreport.toml", tmp_path)
    compiles = log[log["compiled"]]
    triggers = {
        f"batch={b},seq={s}" for b, s in zip(compiles["batch"], compiles["seq"], strict=True)
    }
    b = doc["blocking"]
    assert doc["tail_class"] == "blocked_behind_adaptation"
    assert b["drives_tail"]
    assert set(b["triggers"]) == triggers
    assert abs(b["blocked"] - int(log["blocked"].sum())) <= 0.1 * int(log["blocked"].sum())
    stalls = sorted((compiles["compute_end_us"] - compiles["compute_start_us"]).tolist())
    named = sorted(e["duration_us"] for e in b["events"] if e["source"] in b["material"])
    assert named == pytest.approx(stalls, rel=0.05)
    (action,) = [a for a in doc["actions"] if a["class"] == "adaptation_blocking"]
    assert b["remedy"] == "precompile_in_warmup"
    assert action["owner_role"] == "model_serving_architect"
    assert "pre-compile these shapes in the server's warm-up" in action["title"]
    assert all(t in action["title"] for t in triggers)
    assert "1.93 s to 2.13 s" in action["title"]
    tuning = [a for a in doc["actions"] if a["class"] not in ("observability",)]
    assert tuning[0]["class"] == "adaptation_blocking"
    assert "blocked behind adaptation" in doc["summary"]
    verdict = doc["_html"].split('class="verdict"', 1)[1].split("</section>", 1)[0]
    assert "Its tail: " in verdict  # page 1 names the tail's cause before the actions
    assert "blocked behind adaptation (68 requests behind 4 recompiles" in verdict
    victims = {v["shape"] for v in b["victims"]} - triggers
    for s in doc["shapes"]:
        if s["shape"] in victims:
            assert "(the slice's blocking finding)" in s["class_reason"], s["shape"]
            assert "no driver reaches" not in s["class_reason"]
