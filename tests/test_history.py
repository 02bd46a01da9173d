"""Closed loop across nights: actions move through new, open, rollback due, verified and rolled
back, and regressions against the reference night are found with their evidence
(tests/test_loop.py holds the state machine's cases on small synthetic histories)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from mapreport.core.records import replace
from mapreport.dataset.store import Dataset
from mapreport.demo import synth
from mapreport.run.config import default_config, load_config
from mapreport.run.ingesting import ingest
from mapreport.run.nightly import run
from mapreport.run.reporting import report
from tests.conftest import DEMO_NIGHT, copy_sample, write_config

BERT = next(w for w in synth.WORKLOADS if w.workload == "bert-base")


def night(folder: Path, **changes: dict[str, float]) -> list[Path]:
    """The bert demo inputs with some shapes' planted causes changed (by canonical shape)."""
    shapes = tuple(replace(s, **changes.get(synth.shape_key(s.dims), {})) for s in BERT.shapes)
    return synth.generate(folder, workloads=[replace(BERT, shapes=shapes)])


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


@pytest.mark.slow
def test_actions_move_across_nights(tmp_path: Path) -> None:
    one = run_night(tmp_path, "2026-11-27")
    assert one["history"]["note"].startswith("first recorded run")
    assert set(states(one).values()) == {"new"}
    assert states(one)[("batch=8,seq=200", "queueing")] == "new"

    # night 2: the queueing bursts are fixed (its target, the queue p95 halved, is met with
    # its CI); the slow core gets slower: its rollback trigger is exceeded, rollback due
    fixed = {"batch=8,seq=200": {"queue_burst": 0.0}, "batch=4,seq=384": {"slow_core": 2.6}}
    two = run_night(tmp_path, "2026-11-28", **fixed)
    s2 = states(two)
    assert s2[("batch=8,seq=200", "queueing")] == "verified"
    assert s2[("batch=4,seq=384", "core_imbalance")] == "rollback_due"
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


@pytest.mark.slow
def test_report_without_recording_leaves_history_alone(tmp_path: Path) -> None:
    run_night(tmp_path, "2026-11-27")
    report(tmp_path / "ds", tmp_path / "out", default_config(), pdf=False, run_date="2026-11-28")
    assert len(Dataset(tmp_path / "ds").history("history_run", "bert-base", "")) == 1


@pytest.mark.slow
def test_rerun_redoes_only_what_changed(tmp_path: Path, sample_dir: Path) -> None:
    """The nightly job run again after one source file changed: only that file is ingested
    again and only its workload's slice is analysed and rendered again. The second run reads
    files in two processes: how files are read is not part of a report's inputs. Without
    PDFs: what is redone is decided before any page is written (47.5 s with them in the whole
    suite, 6.8 s without, alone)."""
    src = copy_sample(sample_dir, tmp_path / "src")
    config = load_config(write_config(tmp_path, src))
    first = run(config, night=DEMO_NIGHT, pdf=False).outcomes
    assert not any(o.unchanged or o.error for o in first)
    findings = config.out / "resnet50-int8" / "prod" / "findings.json"
    before = json.loads(findings.read_text())["scope"]["requests"]
    runtime = src / "resnet50-int8.runtime.jsonl"
    lines = runtime.read_text().splitlines()
    late = json.loads(lines[-1])
    late["request_id"] = "late-arrival"
    runtime.write_text("\n".join([*lines, json.dumps(late)]) + "\n")
    done = run(config, night=DEMO_NIGHT, jobs=2, pdf=False)
    ingested, again = done.ingested, done.outcomes
    assert sorted(r.status for r in ingested).count("ingested") == 1
    redone = {o.name for o in again if not o.unchanged}
    assert redone == {"resnet50-int8/prod"}
    assert json.loads(findings.read_text())["scope"]["requests"] == before + 1
    # a new night (another run date, over everything) redoes every slice
    night = run(config, night=date(2026, 11, 29), window="all", pdf=False).outcomes
    assert not any(o.unchanged for o in night)


@pytest.mark.slow
def test_redrawn_p95_has_the_distribution_of_a_full_resample() -> None:
    """The order-statistic draw of a resample's p95 against drawing all n values and taking
    numpy's p95: the same distribution (mean, spread and tails within Monte Carlo error)."""
    import numpy as np

    from mapreport.analysis.loop.history import _redraw_p95

    q = np.quantile(np.random.default_rng(1).lognormal(7.0, 0.6, 5000), np.linspace(0, 1, 101))
    draws, chunk = 200_000, 20_000
    for n in (1, 2, 21, 57, 400):
        fast = _redraw_p95(q, n, draws, np.random.default_rng(2))
        rng = np.random.default_rng(3)
        full = np.concatenate(
            [
                np.quantile(
                    np.interp(rng.random((chunk, n)), np.linspace(0, 1, 101), q), 0.95, axis=1
                )
                for _ in range(draws // chunk)
            ]
        )
        spread = float(np.std(full))
        assert abs(float(np.mean(fast)) - float(np.mean(full))) < 0.02 * spread + 1e-9, n
        assert abs(float(np.std(fast)) - spread) < 0.02 * spread + 1e-9, n
        for p in (0.025, 0.5, 0.975):
            a, b = np.quantile(fast, p), np.quantile(full, p)
            assert abs(a - b) < 0.03 * spread + 1e-9, (n, p)


@pytest.mark.slow
def test_history_keeps_facts_and_old_nights_keep_their_words(tmp_path: Path) -> None:
    """The history stores an action's kind and typed params, never the report's words; a gone
    action is worded from them (a word changed in the report changes no stored history). A
    night recorded before params were kept (a title, no params column) still reads: its
    stored words are shown."""
    import pyarrow.parquet as pq

    from mapreport.analysis.actions.action_params import Queueing, decode

    run_night(tmp_path, "2026-11-27")
    files = sorted((tmp_path / "ds" / "history" / "history_action").rglob("*.parquet"))
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    assert rows
    assert all(r["title"] is None for r in rows)
    queueing = [r for r in rows if r["class"] == "queueing"]
    assert isinstance(decode(queueing[0]["params"]), Queueing)

    # the first night as an older mapreport wrote it: words, no params
    for f in files:
        t = pq.read_table(f)
        old = t.drop_columns(["params"]).set_column(
            t.schema.get_field_index("title"), "title", pa.array(["kept words"] * t.num_rows)
        )
        pq.write_table(old, f)
    fixed = {"batch=8,seq=200": {"queue_burst": 0.0}}
    two = run_night(tmp_path, "2026-11-28", **fixed)  # the queueing burst is fixed: verified
    (gone,) = [a for a in two["history"]["actions"] if a["cls"] == "queueing"]
    assert (gone["state"], gone["title"]) == ("verified", "kept words")
    tonight = {a["id"]: a["title"] for a in two["actions"]}
    for a in two["history"]["actions"]:
        if a["action_id"] in tonight:
            assert a["title"] == tonight[a["action_id"]]  # today's words for tonight's


def test_a_rolled_back_action_stays_rolled_back_until_its_plan_changes(
    demo_results: dict[str, Any],
) -> None:
    """Issue 35: an action rolled back on night 3 and proposed again on night 4 on the same
    compile plan version stays rolled back (held: not proposed, its trigger not re-based on the
    regressed value); on a new plan version it is a new proposal with its own trigger."""
    from mapreport.analysis.base.common import Thresholds
    from mapreport.analysis.loop.history import with_stored_triggers
    from mapreport.analysis.loop.loop import Night, action_states
    from mapreport.core.kinds import ActionState as State

    r = demo_results["bert-base"]
    a = next(x for x in r.actions if x.rollback_trigger.threshold is not None)
    row = {
        "action_id": a.id,
        "class": a.kind.value,
        "shape": a.shape,
        "title": None,
        "owner_role": a.owner_role.value,
        "first_run_id": "n1",
        "target_metric": None,
        "target_baseline": None,
        "rollback_metric": a.rollback_trigger.metric,
        "rollback_threshold": 1000.0,
        "rollback_pre_change": 909.0,
        "rollback_sla_us": None,
        "params": None,
    }
    prev = [
        {**row, "run_date": "2026-11-01", "state": "new"},
        {**row, "run_date": "2026-11-02", "state": "open"},
        {**row, "run_date": "2026-11-03", "state": "rolled_back"},
    ]
    shapes = [{"run_date": "2026-11-03", "shape": a.shape, "plan_version": "v1"}]
    night = Night({m.shape: m for m in r.shapes}, {}, {}, Thresholds(), ("w", "s"))
    same = action_states([a], night, prev, {a.shape: "v1"}, shapes)
    (st,) = [s for s in same if s.action_id == a.id]
    assert (st.state, st.held, st.rollback_threshold) == (State.ROLLED_BACK, True, 1000.0)
    history = replace(r.history, actions=tuple(same))
    assert with_stored_triggers([a], history, "2026-11-04") == ()
    rebuilt = action_states([a], night, prev, {a.shape: "v2"}, shapes)
    (st,) = [s for s in rebuilt if s.action_id == a.id]
    assert (st.state, st.held) == (State.NEW, False)
    # a new proposal: its trigger is tonight's, not the rolled-back one's
    assert st.rollback_threshold == a.rollback_trigger.threshold
    (kept,) = with_stored_triggers([a], replace(r.history, actions=tuple(rebuilt)), "2026-11-04")
    assert kept.rollback_trigger.since == "2026-11-04"


def test_code_identity_moves_with_an_edit_and_a_touch(tmp_path: Path) -> None:
    """A report made by other code is redone: the code's identity changes with a file's
    content (its size), with its modification time, and with a file added; it stays while
    nothing changes."""
    import os

    from mapreport.run.pipeline import code_identity

    code = tmp_path / "a.py"
    code.write_text("x = 1\n")
    template = tmp_path / "t.html.j2"
    template.write_text("{{ x }}")

    def ident() -> str:
        return code_identity([code, template, tmp_path])  # a folder counts for nothing

    first = ident()
    assert ident() == first
    code.write_text("x = 10\n")
    edited = ident()
    assert edited != first
    st = template.stat()
    os.utime(template, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    touched = ident()
    assert touched != edited
    extra = tmp_path / "b.py"
    extra.write_text("")
    assert code_identity([code, template, extra]) != touched
