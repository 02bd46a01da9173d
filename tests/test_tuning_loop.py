"""The closed loop of a tuning regret (docs/metrics.md, "Closed loop across nights"): on later
nights the action's target (its run's regret within 5%, CI and all) and rollback trigger (its
chosen time 10% above the night it was proposed, two nights running) read the run's figures
from that night's ranking, proposed or not. Real records: the MetaSchedule matmul run cut to
its first 16 trials beside the whole run, analysed night after night with the history each
night records."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from mapreport.analysis import analyze_slice
from mapreport.analysis.base.common import Review
from mapreport.analysis.loop.history import RunKey, Stored
from mapreport.analysis.loop.loop import ActionState
from mapreport.analysis.steps.record import history_rows
from mapreport.analysis.tuning.ranking import MATERIAL_REGRET
from mapreport.core.kinds import ActionKind, Criterion, OwnerRole
from mapreport.core.kinds import ActionState as State
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file
from tests.test_tuning_actions import TH, TUNED, _dataset, _first, _record
from tests.test_tuning_packs import _remeasured

REVIEW = Review(owners={OwnerRole.COMPILER_LEAD: "kai"})
CUT = "matmul_128_xgb_first16"


def _night(ds: Dataset, stored: Stored, date: str) -> tuple[ActionState, Stored]:
    """One night analysed against the stored ones: the regret action's state, and the history
    with tonight's rows added."""
    key = RunKey(f"run-{date}", date)
    r = analyze_slice(ds.connect(), "tvm", "", TH, REVIEW, stored, key)
    assert r.history is not None
    (st,) = [a for a in r.history.actions if a.kind == ActionKind.TUNING_REGRET]
    rows = history_rows(r, key)
    return st, Stored(
        [*stored.runs, *rows["history_run"]],
        [*stored.shapes, *rows["history_shape"]],
        [*stored.actions, *rows["history_action"]],
        [*stored.ops, *rows.get("history_op", [])],
    )


def _first_night(tmp_path: Path) -> tuple[Dataset, Path, Stored]:
    cut = _first(tmp_path, "matmul_128_xgb", 16)
    ds = _dataset(tmp_path, [_record("matmul_128_xgb"), cut], "tvm")
    st, stored = _night(ds, Stored(), "2026-12-01")
    assert st.state == State.NEW
    assert (st.target_metric, st.target_criterion) == ("regret", Criterion.REGRET_WITHIN)
    assert st.rollback_metric == "chosen_us"
    assert st.target_met is False  # 54% [51%, 58%]: the whole CI above 5%
    return ds, cut, stored


def test_a_regret_fixed_on_a_later_night_is_verified(tmp_path: Path) -> None:
    """The cut run tuned on to the whole run's 96 trials (its database file grown at its path,
    ingested again): its pick is the best, regret 0, its CI within 5%: the action is no longer
    proposed and its target is met: verified."""
    ds, cut, stored = _first_night(tmp_path)
    full = TUNED / "matmul_128_xgb"
    cut.write_bytes(gzip.decompress((full / "database_tuning_record.json.gz").read_bytes()))
    scores = gzip.decompress((full / "database_cost_model.json.gz").read_bytes())
    (cut.parent / "database_cost_model.json").write_bytes(scores)
    assert ingest_file(ds, cut, hints={"workload": "tvm"}).rejected == 0
    st, _ = _night(ds, stored, "2026-12-02")
    assert (st.state, st.proposed) == (State.VERIFIED, False)
    assert st.target_now == pytest.approx(0.0, abs=1e-12)
    assert st.target_met is True
    assert st.target_ci is not None
    assert st.target_ci.high <= MATERIAL_REGRET
    assert st.target_bound == (None, MATERIAL_REGRET)


def test_a_regret_still_material_is_not_verified(tmp_path: Path) -> None:
    """The same records on the next night: still proposed (open), its target read tonight and
    missed, CI and all."""
    ds, _, stored = _first_night(tmp_path)
    st, _ = _night(ds, stored, "2026-12-02")
    assert (st.state, st.proposed, st.runs_seen) == (State.OPEN, True, 2)
    assert st.target_now == pytest.approx(197.3 / 127.8 - 1, abs=0.01)
    assert st.target_met is False
    assert st.rollback_now == pytest.approx(st.rollback_pre_change)


@pytest.mark.slow
def test_a_chosen_time_over_its_trigger_two_nights_running_is_rolled_back(
    tmp_path: Path,
) -> None:
    """The cut run's 16 trials measured again 1.5x slower (its pick's time, pooled with the
    whole run's measurements of the same config, 25% above the night it was proposed): over
    the +10% trigger on night 2 (rollback due), and again on night 3 (rolled back); a night at
    the proposed time leaves it open."""
    ds, cut, stored = _first_night(tmp_path)
    st, _ = _night(ds, stored, "2026-12-02")
    assert st.state == State.OPEN
    _remeasured(ds.root, cut, dict.fromkeys(range(1, 17), 1.5))
    st, stored = _night(ds, stored, "2026-12-02")
    assert st.rollback_threshold is not None
    assert st.rollback_now is not None
    assert st.rollback_now > st.rollback_threshold
    assert st.rollback_now == pytest.approx(1.25 * (st.rollback_pre_change or 0.0), rel=1e-9)
    assert st.state == State.ROLLBACK_DUE
    st, _ = _night(ds, stored, "2026-12-03")
    assert st.state == State.ROLLED_BACK


def test_a_run_gone_from_the_records_is_not_judged(tmp_path: Path) -> None:
    """A night whose records no longer hold the action's run: nothing to read its target from,
    so it is not judged (dropped, never verified)."""
    _, _, stored = _first_night(tmp_path)
    other = Dataset(tmp_path / "ds2", create=True)
    assert ingest_file(other, _record("matmul_128_xgb"), hints={"workload": "tvm"}).rejected == 0
    key = RunKey("run-2026-12-02", "2026-12-02")
    r = analyze_slice(other.connect(), "tvm", "", TH, REVIEW, stored, key)
    assert r.history is not None
    (st,) = [a for a in r.history.actions if a.kind == ActionKind.TUNING_REGRET]
    assert (st.state, st.target_met, st.target_now) == (State.DROPPED, None, None)
