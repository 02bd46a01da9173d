"""Closed loop across nights: actions move through new, open, verified and rolled back, and
regressions against the previous run are found with their evidence."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from mapreport import synth
from mapreport.config import default_config
from mapreport.pipeline import ingest, report
from mapreport.store import Dataset

BERT = next(w for w in synth.WORKLOADS if w.workload == "bert-base")


def night(folder: Path, **changes: dict[str, float]) -> list[Path]:
    """The bert demo inputs with some shapes' planted causes changed (by canonical shape)."""
    shapes = tuple(
        dataclasses.replace(s, **changes.get(synth.shape_key(s.dims), {})) for s in BERT.shapes
    )
    return synth.generate(folder, workloads=[dataclasses.replace(BERT, shapes=shapes)])


def run_night(tmp: Path, date: str, **changes: dict[str, float]) -> dict[str, Any]:
    inputs = tmp / "inputs"
    files = night(inputs, **changes)
    ingest(tmp / "ds", files)
    outcomes = report(
        tmp / "ds", tmp / "out", default_config(), pdf=False, record=True, run_date=date
    )
    assert all(o.error is None for o in outcomes)
    doc: dict[str, Any] = json.loads((tmp / "out" / "bert-base" / "findings.json").read_text())
    return doc


def states(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(a["shape"], a["cls"]): a["state"] for a in doc["history"]["actions"]}


def test_actions_move_across_nights(tmp_path: Path) -> None:
    one = run_night(tmp_path, "2026-11-27")
    assert one["history"]["note"].startswith("first recorded run")
    assert set(states(one).values()) == {"new"}
    assert states(one)[("batch=8,seq=200", "queueing")] == "new"

    # night 2: the queueing bursts are fixed; the slow core gets slower
    fixed = {"batch=8,seq=200": {"queue_burst": 0.0}, "batch=4,seq=384": {"slow_core": 2.6}}
    two = run_night(tmp_path, "2026-11-28", **fixed)
    s2 = states(two)
    assert s2[("batch=8,seq=200", "queueing")] == "verified"
    assert s2[("batch=4,seq=384", "core_imbalance")] == "open"
    assert s2[("batch=4,seq=96", "specialise")] == "open"
    regress = {g["shape"]: g for g in two["history"]["regressions"]}
    assert regress["batch=4,seq=384"]["kind"] == "regression"
    assert regress["batch=4,seq=384"]["ci"][0] > 0
    assert regress["batch=8,seq=200"]["kind"] == "improvement"
    assert regress["batch=4,seq=96"]["kind"] == "no_change"
    assert [r["current"] for r in two["history"]["runs"]] == [False, True]

    # night 3: the slow core stays slow, so its rollback trigger has held two nights running
    three = run_night(tmp_path, "2026-11-29", **fixed)
    s3 = states(three)
    assert s3[("batch=4,seq=384", "core_imbalance")] == "rolled_back"
    assert ("batch=8,seq=200", "queueing") not in s3  # verified once, then done
    assert len(three["history"]["runs"]) == 3

    # re-running a night replaces it instead of adding a fourth
    again = run_night(tmp_path, "2026-11-29", **fixed)
    assert len(again["history"]["runs"]) == 3
    assert len(Dataset(tmp_path / "ds").history("history_run", "bert-base", "")) == 3


def test_report_without_recording_leaves_history_alone(tmp_path: Path) -> None:
    run_night(tmp_path, "2026-11-27")
    report(tmp_path / "ds", tmp_path / "out", default_config(), pdf=False, run_date="2026-11-28")
    assert len(Dataset(tmp_path / "ds").history("history_run", "bert-base", "")) == 1
