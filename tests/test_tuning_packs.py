"""The evidence packs of a tuning regret (docs/evidence.md): the action's pack reproduces its
regret, and its second pack its run's pairwise accuracy, through the command line (report, then
explain) on the real MetaSchedule matmul run cut to its first 16 trials beside the whole run;
a changed trial in the dataset makes either not reproduced."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from mapreport.analysis.actions.actions import action_id
from mapreport.analysis.actions.tuning_actions import PAIRWISE_PACK
from mapreport.app.cli import main
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file
from tests.pack_sql import check_pack_sql, stated_evidence
from tests.test_tuning_actions import TUNED, _dataset, _first


def _report(tmp_path: Path) -> tuple[Path, dict[str, Any], Path]:
    """The whole matmul run (a copy: a test may change it) and its first 16 trials, reported."""
    whole = tmp_path / "matmul_128_xgb"
    shutil.copytree(TUNED / "matmul_128_xgb", whole)
    cut = _first(tmp_path, "matmul_128_xgb", 16)
    ds = _dataset(tmp_path, [next(whole.glob("database_tuning_record.json*")), cut], "tvm")
    out = tmp_path / "out"
    args = ["report", "--dataset", str(ds.root), "--out", str(out), "--no-pdf", "--slice", "tvm"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "tvm" / "findings.json").read_text())
    (action,) = [a for a in doc["actions"] if a["class"] == "tuning_regret"]
    return ds.root, action, out / "tvm"


def _explain(ds: Path, pid: str) -> tuple[int, list[str]]:
    res = CliRunner().invoke(main, ["explain", pid, "--dataset", str(ds)])
    return res.exit_code, res.output.splitlines()


@pytest.mark.slow
def test_explain_reproduces_a_regret_and_its_pairwise_accuracy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The action's pack is its regret (197.3 us chosen against 127.8 us: 54%, 3 repeats);
    its pairwise pack the cut run's xgb scores over its 12 candidates; both reproduced exactly
    from the dataset, their rows the trials with their files and lines, and the findings'
    ranking row names both packs. Each `.sql` run in plain DuckDB prints its figure."""
    ds, action, out = _report(tmp_path)
    pid = action["id"]
    pairwise = action_id("tvm", "", action["shape"], PAIRWISE_PACK)
    spec = json.loads((out / "evidence" / f"{pid}.json").read_text())
    assert (spec["reduction"], spec["metric"], spec["n"]) == ("regret", "regret", 3)
    assert abs(spec["figure"] - 0.54) < 0.01
    code, lines = _explain(ds, pid)
    assert code == 0, lines
    assert lines[2] == "reproduced exactly"
    assert "regret of the chosen config" in lines[1]
    rows = pq.read_table(out / "evidence" / f"{pid}.parquet")
    assert rows.num_rows == 96 + 16  # the workload's trials in both runs: the best is the other's
    assert {"source_id", "line", "costs_us", "score"} <= set(rows.column_names)
    spec = json.loads((out / "evidence" / f"{pairwise}.json").read_text())
    assert (spec["reduction"], spec["n"]) == ("pairwise_accuracy", 12)
    code, lines = _explain(ds, pairwise)
    assert code == 0, lines
    assert lines[2] == "reproduced exactly"
    assert pq.read_table(out / "evidence" / f"{pairwise}.parquet").num_rows == 16
    doc = json.loads((out / "findings.json").read_text())
    (row,) = [x for x in doc["ranking"] if x["plan_id"] == "matmul_128_xgb_first16"]
    assert (row["regret_pack"], row["pairwise_pack"]) == (pid, pairwise)
    assert all(x["regret_pack"] is None for x in doc["ranking"] if x is not row)
    done = {check_pack_sql(sql, stated_evidence(doc), monkeypatch) for sql in out.glob("**/*.sql")}
    assert {"regret", "pairwise_accuracy"} <= done


def _remeasured(ds: Path, record: Path, slower: dict[int, float]) -> None:
    """The record file measured again with trial n (its n-th line) `slower[n]` times slower,
    ingested again at its path (the dataset replaces the earlier version)."""
    packed = record.suffix == ".gz"
    text = (gzip.decompress(record.read_bytes()) if packed else record.read_bytes()).decode()
    lines = text.splitlines(True)
    for n, factor in slower.items():
        workload, (trace, secs, target, args) = json.loads(lines[n - 1])
        lines[n - 1] = json.dumps([workload, [trace, [s * factor for s in secs], target, args]])
        lines[n - 1] += "\n"
    data = "".join(lines).encode()
    record.write_bytes(gzip.compress(data) if packed else data)
    assert ingest_file(Dataset(ds), record, hints={"workload": "tvm"}).rejected == 0


@pytest.mark.slow
def test_a_trial_measured_again_is_not_reproduced(tmp_path: Path) -> None:
    """The whole run's best trial (94) measured again twice as slow: the regret is no longer
    the report's, while the cut run's pairwise accuracy (its own trials) still is; the cut run's
    pick measured again ten times as slow changes the model's labels: not reproduced either."""
    ds, action, out = _report(tmp_path)
    pid = action["id"]
    pairwise = action_id("tvm", "", action["shape"], PAIRWISE_PACK)
    _remeasured(ds, tmp_path / "matmul_128_xgb" / "database_tuning_record.json.gz", {94: 2.0})
    code, lines = _explain(ds, pid)
    assert code == 5, lines
    assert lines[2].startswith("NOT reproduced")
    assert _explain(ds, pairwise)[0] == 0
    spec = json.loads((ds / "evidence" / f"{pid}.json").read_text())
    chosen = spec["params"]["plan_id"]
    assert chosen == "matmul_128_xgb_first16"
    ranking = json.loads((out / "findings.json").read_text())["ranking"]
    (trial,) = [x["chosen_trial"] for x in ranking if x["plan_id"] == chosen]
    _remeasured(ds, tmp_path / chosen / "database_tuning_record.json", {trial: 10.0})
    code, lines = _explain(ds, pairwise)
    assert code == 5, lines
    assert lines[2].startswith("NOT reproduced")
