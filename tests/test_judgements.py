"""Judgements: each family's rule says failing or at risk on the cases it must, stays healthy on
clean controls, and never calls healthy what it did not check; the status is the worst of them
(docs/metrics.md, "Judgements"). Real files: the H100 bert-small trace (92% device idle) fails,
the compile log with a failed compile fails, a slice with no SLA is not judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REALDATA

from mapreport.analysis.actions.checklist import PrecisionCheck, judge_quality, quality_records
from mapreport.analysis.actions.device_actions import judge_idle
from mapreport.analysis.base.common import Percentiles, SlaCheck, Thresholds
from mapreport.analysis.base.judgement import Judgement, worst
from mapreport.analysis.device import graphs
from mapreport.analysis.device.timeline import Timeline
from mapreport.analysis.mapping import environment
from mapreport.analysis.mapping.environment import EnvironmentCheck, EnvMismatch
from mapreport.analysis.serving import compiles
from mapreport.analysis.serving.compiles import CompileCost, Compiles
from mapreport.analysis.steps.status import judge_latency, slice_status
from mapreport.app.cli import main
from mapreport.core.kinds import DeviceActivity, JudgementFamily, Status, StatusReason

TH = Thresholds()


def _latency(n: int, p95: float, p99: float) -> Percentiles:
    return Percentiles(n, p95 / 2, p95, p99)


def _sla(p95: float, target: float | None, evidence: bool = True) -> SlaCheck:
    met = None if target is None else p95 <= target
    return SlaCheck("p95", target, p95, evidence, met)


@pytest.mark.parametrize(
    ("check", "n", "state", "reason"),
    [
        (_sla(2_000_000.0, None), 500, Status.NOT_JUDGED, StatusReason.NO_SLA),
        (_sla(2_000.0, 1_000.0), 500, Status.FAILING, StatusReason.SLA_MISSED),
        (_sla(950.0, 1_000.0), 500, Status.AT_RISK, StatusReason.LITTLE_HEADROOM),
        (_sla(500.0, 1_000.0), 500, Status.HEALTHY, StatusReason.WITHIN_SLA),
        (
            _sla(5_000.0, 1_000.0, evidence=False),
            5,
            Status.NOT_JUDGED,
            StatusReason.TOO_FEW_SAMPLES,
        ),
    ],
)
def test_latency_is_judged_only_against_a_target_it_has_evidence_for(
    check: SlaCheck, n: int, state: Status, reason: StatusReason
) -> None:
    """No SLA: not judged, never healthy (a p95 of 2 s once was); missed, close, met; a missed
    target on too few samples is not a judgement."""
    judged = judge_latency((check,), _latency(n, check.value_us or 0.0, 0.0))
    assert (judged.state, judged.reason) == (state, reason)
    if reason is StatusReason.NO_SLA:
        assert judged.figure == 2_000_000.0  # the tail is stated beside "no SLA set"


def _timeline(idle: float, kernels: int = 500) -> Timeline:
    windows = tuple((idle * 100.0, 100.0) for _ in range(20))
    shares = {DeviceActivity.IDLE: idle, DeviceActivity.COMPUTE: 1 - idle}
    return Timeline(1, 2000.0, shares, 0.0, kernels, 4.0, windows)


@pytest.mark.parametrize(
    ("idle", "state"),
    [(0.921, Status.FAILING), (0.4, Status.AT_RISK), (0.05, Status.HEALTHY)],
)
def test_device_idle(idle: float, state: Status) -> None:
    """92% idle fails; 40% (where the idle action stands) is at risk; 5% is healthy."""
    judged = judge_idle(_timeline(idle), TH, "w", "")
    assert judged is not None
    assert judged.state is state
    assert judged.figure == pytest.approx(idle)


def _compiles(failed: int = 0, refused: int = 0, recompiles: int = 0, breaks: int = 0) -> Compiles:
    row = CompileCost(
        "batch=8",
        1 + recompiles,
        recompiles,
        100.0,
        0,
        1,
        (),
        ("forward",),
        0,
        None,
        None,
        None,
        None,
        refused,
        failed,
    )
    graph_breaks = tuple(
        compiles.GraphBreak(f"model.py:{i}", None, None, None, 1) for i in range(breaks)
    )
    return Compiles(
        (row,), 1 + recompiles, recompiles, 100.0, 1, False, refused, failed, graph_breaks
    )


@pytest.mark.parametrize(
    ("c", "state", "reason"),
    [
        (_compiles(failed=1), Status.FAILING, StatusReason.COMPILE_FAILED),
        (_compiles(refused=1), Status.AT_RISK, StatusReason.RECOMPILE_LIMIT),
        (_compiles(recompiles=14), Status.AT_RISK, StatusReason.MANY_RECOMPILES),
        (_compiles(recompiles=2), Status.HEALTHY, StatusReason.COMPILED),
        # ahead-of-time records (TVM): no frame to recompile, not "the most: 0"
        (_compiles(), Status.HEALTHY, StatusReason.ALL_COMPILED),
    ],
)
def test_compiles(c: Compiles, state: Status, reason: StatusReason) -> None:
    """A failed compile fails (it once showed as "0 compiles"); the recompile limit or 14
    recompiles of one frame are at risk; two recompiles are healthy."""
    judged = compiles.judge(c)
    assert judged is not None
    assert (judged.state, judged.reason) == (state, reason)


def test_graph_breaks_and_graphs_and_environment() -> None:
    """A graph break is at risk, none healthy; a locked environment is healthy, a differing key
    at risk, one side not judged; graphs without replays are absent."""
    broke = compiles.judge_breaks(_compiles(breaks=2))
    whole = compiles.judge_breaks(_compiles())
    assert broke is not None
    assert broke.state is Status.AT_RISK
    assert whole is not None
    assert whole.state is Status.HEALTHY
    locked = EnvironmentCheck({"driver": "1"}, {"driver": "1"}, (), (), ("driver",))
    differs = EnvironmentCheck(
        {"driver": "1"}, {"driver": "2"}, (EnvMismatch("driver", ("1",), ("2",)),), (), ("driver",)
    )
    one_side = EnvironmentCheck({"driver": "1"}, {}, (), ("runtime",), ())
    assert [environment.judge(e).state for e in (locked, differs, one_side)] == [  # type: ignore[union-attr]
        Status.HEALTHY,
        Status.AT_RISK,
        Status.NOT_JUDGED,
    ]
    assert graphs.judge(None) is None


def test_quality() -> None:
    """A quality drop beyond its bound fails, a change without a record is at risk, a held
    one healthy, no change absent."""
    assert judge_quality(PrecisionCheck(failing=("int8",))).state is Status.FAILING  # type: ignore[union-attr]
    assert judge_quality(PrecisionCheck(missing=("fp8",))).state is Status.AT_RISK  # type: ignore[union-attr]
    assert judge_quality(PrecisionCheck(passing=("bf16",))).state is Status.HEALTHY  # type: ignore[union-attr]
    assert judge_quality(PrecisionCheck()) is None


def test_a_precisions_guard_is_the_slices_own_record_whatever_the_scan_order() -> None:
    """The quality record a validation matrix names for a precision: the slice's own before
    one for every slice, then the first by file and line, in whatever order the rows lie."""
    import duckdb

    rows = [
        ("w", "", "int8", "top1", 76.1, 75.0, 1.0, "generic", 1),
        ("w", "prod", "int8", "top5", 92.9, 92.5, 0.5, "b-prod", 2),
        ("w", "prod", "int8", "top1", 76.1, 75.9, 0.5, "a-prod", 7),
        ("w", "other", "int8", "top1", 70.0, 60.0, 0.1, "other", 1),
    ]
    picked = set()
    for order in (rows, rows[::-1]):
        con = duckdb.connect()
        con.execute(
            "CREATE TABLE quality (workload VARCHAR, slice VARCHAR, precision VARCHAR, "
            "metric VARCHAR, baseline DOUBLE, value DOUBLE, max_drop DOUBLE, source_id VARCHAR, "
            "line BIGINT)"
        )
        con.executemany("INSERT INTO quality VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", order)
        found = quality_records(con, "w", "prod")  # type: ignore[arg-type]
        assert [r["source_id"] for r in found] == ["a-prod", "b-prod", "generic"]
        picked.add(found[0]["metric"])
    assert picked == {"top1"}


def test_a_size_captured_under_two_modes_is_one_size_whatever_the_row_order() -> None:
    """vLLM's FULL_AND_PIECEWISE captures each size twice: both modes named, both captures
    costed, in either order of the rows (the last row's alone was kept)."""
    rows = [("capture_8_FULL", 900.0), ("capture_8_PIECEWISE", 400.0), ("capture_16_FULL", 1.5)]
    want = {8: ("FULL, PIECEWISE", 1300.0), 16: ("FULL", 1.5)}
    assert graphs.captures_of(rows) == graphs.captures_of(rows[::-1]) == want


def test_a_compiled_region_without_a_core_is_counted_once() -> None:
    """A region's time is kept under its process's key and under its id alone; without a core
    the two keys are one, and its calls and time count once (`8144607` added them twice)."""
    rows = [("", "0/0", 3, 10.0), ("7", "0/0", 2, 5.0), ("", "1/0", 1, 0.5)]
    assert compiles._region_runtime(rows) == {
        ":0/0": (5, 15.0),
        "7:0/0": (2, 5.0),
        ":1/0": (1, 0.5),
    }


def test_the_status_is_the_worst_and_never_healthy_on_what_it_did_not_check() -> None:
    """Failing beats at risk beats healthy; with requests and no SLA, healthy families do not
    make the slice healthy (not judged, deciding: the latency); without requests they do."""
    healthy_env = Judgement(
        JudgementFamily.ENVIRONMENT, Status.HEALTHY, StatusReason.ENVIRONMENT_LOCKED
    )
    idle = Judgement(JudgementFamily.DEVICE, Status.FAILING, StatusReason.DEVICE_IDLE)
    risky = Judgement(JudgementFamily.GRAPH_BREAKS, Status.AT_RISK, StatusReason.GRAPH_BREAKS)
    assert worst([healthy_env, risky, idle]) is idle
    no_sla = (_sla(2_000_000.0, None),)
    st = slice_status(no_sla, _latency(500, 2e6, 3e6), None, [healthy_env])
    assert st.status is Status.NOT_JUDGED
    assert st.reason is StatusReason.NO_SLA
    st = slice_status(no_sla, _latency(500, 2e6, 3e6), None, [healthy_env, risky])
    assert st.status is Status.AT_RISK
    assert st.deciding is risky
    trace_only = slice_status((), Percentiles(0, None, None, None), None, [healthy_env])
    assert trace_only.status is Status.HEALTHY
    nothing = slice_status((), Percentiles(0, None, None, None), None, [])
    assert nothing.status is Status.NOT_JUDGED
    met = (_sla(500.0, 1_000.0),)
    st = slice_status(met, _latency(500, 500.0, 600.0), None, [healthy_env])
    assert st.status is Status.HEALTHY  # the clean control stays healthy


def _report(tmp_path: Path, *inputs: Path) -> dict[str, object]:
    ds, out = tmp_path / "ds", tmp_path / "out"
    res = CliRunner().invoke(main, ["ingest", "--dataset", str(ds), "-q", *map(str, inputs)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        main, ["report", "--dataset", str(ds), "--out", str(out), "--no-pdf", "-q"]
    )
    assert res.exit_code == 0, res.output
    (found,) = sorted(out.rglob("findings.json"))
    return json.loads(found.read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_real_trace_of_a_mostly_idle_device_fails(tmp_path: Path) -> None:
    """The H100 bert-small trace: 309 us of device time in a 3.9 ms span, 92% idle: failing,
    decided by the device family (it was healthy: no request records)."""
    doc = _report(
        tmp_path, REALDATA / "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
    )
    assert doc["status"] == "failing"
    judged = {j["family"]: j for j in doc["judgements"]}  # type: ignore[attr-defined]
    assert judged["device"]["state"] == "failing"
    assert judged["device"]["deciding"] is True
    assert judged["device"]["figure"] > 0.9
    assert judged["sla"]["state"] == "not_judged"
    assert "Device idle" in str(doc["status_reason"])


@pytest.mark.slow
@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_real_compile_log_with_a_failed_compile_fails(tmp_path: Path) -> None:
    """tlparse's comp_failure.log (BackendCompilerFailed): failing, decided by compiles."""
    doc = _report(tmp_path, REALDATA / "tlparse/inputs/comp_failure.log")
    judged = {j["family"]: j for j in doc["judgements"]}  # type: ignore[attr-defined]
    assert judged["compiles"]["state"] == "failing"
    assert judged["compiles"]["reason"] == "compile_failed"
    assert doc["status"] == "failing"


def test_formats_compiled_in_process_hold_no_environment_record() -> None:
    """A JIT compiler's log (`COMPILED_IN_PROCESS`) is exempt from the environment record
    because its reader can write none; a side any other reader can record is still asked."""
    from mapreport.core.schema import COMPILED_IN_PROCESS
    from mapreport.ingest import READERS

    for name in COMPILED_IN_PROCESS:
        assert "environment" not in READERS[name].tables, name


@pytest.mark.slow
@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_a_torch_compile_log_is_asked_for_no_environment_record(tmp_path: Path) -> None:
    """A TORCH_TRACE log records no environment (a torch.compile run compiles and runs in one
    process): no blocker asks for one, the environment is not applicable, not failing."""
    doc = _report(tmp_path, REALDATA / "tlparse/inputs/comp_failure.log")
    judged = {j["family"]: j for j in doc["judgements"]}  # type: ignore[attr-defined]
    assert judged["environment"]["reason"] == "environment_not_recorded"
    assert judged["environment"]["state"] == "not_judged"
    kinds = [a["evidence"]["metric"] for a in doc["actions"]]  # type: ignore[attr-defined]
    assert not [k for k in kinds if k.startswith("environment.")], kinds


def test_a_frame_recompiled_past_the_limit_gets_one_owned_action() -> None:
    """A frame that recompiled 14 times on a varying size: one action for the compiler lead,
    naming the dim to mark dynamic; on another guard, the guard to hold constant; a frame
    under the limit (the clean control) gets none."""
    from mapreport.analysis.actions.actions import Scope
    from mapreport.analysis.actions.compile_actions import Recompiled, recompile_action
    from mapreport.analysis.base.common import Review
    from mapreport.analysis.serving.blocking import Blocking
    from mapreport.analysis.serving.compiles import RecompiledFrame, VaryingDim
    from mapreport.analysis.steps.status import judge_latency
    from mapreport.core.kinds import ActionKind, OwnerRole
    from mapreport.report.prose import action_title

    latency = Percentiles(0, None, None, None)
    scope = Scope("w", "", TH, Review(), (), None, latency, Blocking(()), None)
    sized = RecompiledFrame(
        "kernel", 14, 0, 15, ("size mismatch at index 0",), (VaryingDim("x", 0, 2, 16, 14),)
    )
    action = recompile_action(scope, [sized], ("src",))
    assert action is not None
    assert (action.kind, action.owner_role) == (ActionKind.DYNAMIC_SHAPES, OwnerRole.COMPILER_LEAD)
    assert isinstance(action.params, Recompiled)
    assert "mark those dims dynamic" in action_title(action, "w")
    assert "x dim 0 (2 to 16)" in action_title(action, "w")
    guarded = RecompiledFrame("fwd", 9, 1, 11, ("___check_type_id(L['mode'])",), ())
    other = recompile_action(scope, [guarded], ())
    assert other is not None
    assert "___check_type_id" in action_title(other, "w")
    assert "refused at the limit" in action_title(other, "w")
    calm = RecompiledFrame("fwd", 3, 0, 4, ("size mismatch",), ())
    assert recompile_action(scope, [calm], ()) is None
    assert judge_latency((), latency).state is Status.NOT_JUDGED


@pytest.mark.slow
@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_real_compile_log_of_a_frame_recompiled_per_shape(tmp_path: Path) -> None:
    """tlparse's multi-rank rank_1 log compiles one frame 15 times for shapes [2,2]..[16,16]:
    the compiles judgement is at risk and one action says which dim to mark dynamic."""
    doc = _report(
        tmp_path, REALDATA / "tlparse/inputs/multi_rank_logs/dedicated_log_torch_trace_rank_1.log"
    )
    judged = {j["family"]: j for j in doc["judgements"]}  # type: ignore[attr-defined]
    assert judged["compiles"]["state"] == "at_risk"
    assert judged["compiles"]["reason"] == "many_recompiles"
    (action,) = [a for a in doc["actions"] if a["class"] == "dynamic_shapes"]  # type: ignore[attr-defined]
    assert action["owner_role"] == "compiler_lead"
    assert "dim 0 (2 to 16)" in action["title"]


def test_idle_advice_for_graph_replays_names_eager_steps_only_where_some_ran() -> None:
    """Steps that replay captured graphs: the idle advice is the host's work between replays;
    capturing more batch sizes is advised only when steps ran outside every captured size
    (the SGLang decode trace has none: before, it was told to capture sizes that "still run
    eagerly")."""
    from mapreport.analysis.actions.device_actions import Idle
    from mapreport.report.prose import idle_title

    replaying = Idle(0.979, 473_750.0, 555, 5.25, True, True, 0)
    title = idle_title(replaying, "sglang")
    assert "already replay captured graphs" in title
    assert "eagerly" not in title
    assert "capture the step" not in title
    some_eager = Idle(0.6, 473_750.0, 555, 5.25, True, True, 3)
    assert idle_title(some_eager, "vllm").endswith(
        "capture the batch sizes of the 3 steps that still ran eagerly"
    )
