"""The TVM reader on Apache TVM's and web-stable-diffusion's real tuning records, and on
records with failed trials, AutoTVM logs and malformed lines written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

TVM = REALDATA / "tvm"
pytestmark = pytest.mark.skipif(not TVM.is_dir(), reason="../shared/realdata is missing")


def _records(path: Path) -> list[object]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip() and x[0] != "#"]


def test_every_record_file_is_read(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    files = sorted(p for p in TVM.rglob("*.json"))
    for path in files:
        assert detect(path).name == "tvm", path
        assert ingest_file(ds, path).rejected == 0
    con = ds.connect()
    got = dict(con.execute("SELECT workload, count(*) FROM compile_plan GROUP BY 1").fetchall())
    # every record of these logs is a distinct workload with a successful measurement
    assert got == {p.name.split(".")[0]: len(_records(p)) for p in files}
    assert got["resnet-18-NHWC-B1-cuda"] == 24
    assert got["database_tuning_record"] == 292


def test_ansor_best_time_shape_and_tuning_cost(tmp_path: Path) -> None:
    path = TVM / "apache-tvm" / "ci_logs" / "resnet-50-NHWC-B1-llvm.json"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path)
    con = ds.connect()
    first = _records(path)[0]
    assert isinstance(first, dict)
    costs = first["r"][0]
    row = con.execute(
        "SELECT op, shape_bucket, predicted_us, kernel, compile_ms FROM compile_plan "
        "ORDER BY line LIMIT 1"
    ).fetchone()
    assert row[0] == "d7b65649a4dd54becea0a52aabbc5af5"
    assert row[1] == "1x1000x1x1000"  # the workload key's integer arguments
    assert row[2] == pytest.approx(sum(costs) / len(costs) * 1e6)
    assert row[3] == "llvm"
    assert row[4] == pytest.approx(first["r"][2] * 1e3)
    total = con.execute("SELECT sum(compile_ms) FROM compile_event").fetchone()[0]
    assert total == pytest.approx(sum(r["r"][2] for r in _records(path)) * 1e3)  # type: ignore[index]


def test_v06_keys_carry_one_tensor_per_argument(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, TVM / "apache-tvm" / "ci_logs" / "resnet-18-NHWC-B1-cuda.json")
    shape = (
        ds.connect()
        .execute(
            "SELECT shape_bucket FROM compile_plan WHERE op = '1097323f3970e5c881ad3a0028ca79cb'"
        )
        .fetchone()[0]
    )
    assert shape == "1x14x14x256;4x4x256x256;1x1x1x256;1x14x14x256"


def test_metaschedule_records(tmp_path: Path) -> None:
    path = TVM / "web-stable-diffusion" / "log_db" / "database_tuning_record.json"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path)
    rows = ds.connect().execute(
        "SELECT op, shape_bucket, predicted_us, kernel FROM compile_plan ORDER BY line LIMIT 2"
    )
    (op, shape, us, kernel), _ = rows.fetchall()
    assert (op, shape, kernel) == ("workload#0", "1x4x64x64;1x4x64x64", "metal")
    assert us == pytest.approx(2.7618662635147519716e-05 * 1e6)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


KEY = json.dumps(json.dumps(["dense", [1, 512], [1000, 512]]))


def _ansor(costs: list[float], err: int, cost_s: float = 1.0) -> str:
    return (
        f'{{"i": [[{KEY}, "cuda -keys=cuda,gpu", [-1, 16, 64]], [[], []]], '
        f'"r": [{json.dumps(costs)}, {err}, {cost_s}, 1700000000], "v": "v0.6"}}'
    )


def test_failed_trials_are_counted_not_used(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "tune.json",
        [
            "# a tuning session",
            _ansor([0.0002], 0),
            _ansor([1e10], 4),  # compile error
            _ansor([0.0001, 0.0001], 0),
            _ansor([1e10], 0),  # a run that timed out is recorded as 1e10 s
        ],
    )
    ds = Dataset(tmp_path / "ds", create=True)
    assert ingest_file(ds, path).rejected == 0
    con = ds.connect()
    us, line = con.execute("SELECT predicted_us, line FROM compile_plan").fetchone()
    assert us == pytest.approx(100.0)
    assert line == 4
    ms, extra = con.execute("SELECT compile_ms, extra FROM compile_event").fetchone()
    assert ms == pytest.approx(4000.0)
    assert json.loads(extra)["failed_trials"] == 2
    assert json.loads(extra)["error_codes"] == {"4": 1, "failed_time": 1}


def test_every_trial_is_a_tuning_trial_row_in_record_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "tune.json",
        [
            _ansor([0.0002], 0),
            _ansor([1e10], 4),
            _ansor([0.0001, 0.0003], 0, 2.5),
            _ansor([1e10], 0),
        ],
    )
    ds = Dataset(tmp_path / "ds", create=True)
    assert ingest_file(ds, path).rows["tuning_trial"] == 4
    rows = (
        ds.connect()
        .execute(
            "SELECT task, shape, trial, costs_us, mean_us, error, tuning_ms, ts_us, line, "
            "predicted_score FROM tuning_trial ORDER BY trial"
        )
        .fetchall()
    )
    assert [r[:3] for r in rows] == [("dense", "1x512;1000x512", n) for n in (1, 2, 3, 4)]
    assert rows[0][3:6] == ([pytest.approx(200.0)], pytest.approx(200.0), None)
    assert rows[1][3:6] == (None, None, "4")
    assert rows[2][3] == [pytest.approx(100.0), pytest.approx(300.0)]
    assert rows[2][4] == pytest.approx(200.0)
    assert rows[2][6:9] == (2500.0, 1.7e15, 3)
    assert rows[3][5] == "failed_time"
    assert all(r[9] is None for r in rows)  # an Ansor log carries no model score


def test_only_failed_trials_give_no_prediction(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.json", [_ansor([1e10], 2), _ansor([1e10], 2)])
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, path)
    assert res.rows == {"compile_event": 1, "tuning_trial": 2}  # each failed trial is a row


def test_autotvm_log(tmp_path: Path) -> None:
    rec = {
        "input": [
            "cuda -keys=cuda,gpu -max_num_threads=1024",
            "conv2d_nchw.cuda",
            [
                ["TENSOR", [1, 3, 224, 224], "float32"],
                ["TENSOR", [64, 3, 7, 7], "float32"],
                [2, 2],
                [3, 3, 3, 3],
                [1, 1],
                "float32",
            ],
            {},
        ],
        "config": {"index": 7, "code_hash": None, "entity": []},
        "result": [[0.000123, 0.000125], 0, 1.5, 1600000000.0],
        "version": 0.2,
        "tvm_version": "0.8.dev0",
    }
    path = _write(tmp_path / "autotvm.log", [json.dumps(rec)])
    assert detect(path).name == "tvm"
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path)
    row = ds.connect().execute("SELECT op, shape_bucket, predicted_us FROM compile_plan").fetchone()
    assert row[0] == "conv2d_nchw.cuda"
    assert row[1] == "1x3x224x224;64x3x7x7"  # strides and padding are not tensors
    assert row[2] == pytest.approx(124.0)


def test_malformed_line_names_line_and_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "tune.json",
        [_ansor([0.0002], 0), '{"i": [[' + KEY + ', "cuda"], []], "r": "oops"}', "{not json"],
    )
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, path)
    assert (e.value.line, e.value.field) == (2, "r")
    res = ingest_file(ds, path, policy="quarantine")
    assert res.rejected == 2
    assert res.rows["compile_plan"] == 1
    lines = ds.connect().execute("SELECT line FROM quarantine ORDER BY line").fetchall()
    assert lines == [(2,), (3,)]


def _meta(secs: list[float], weight: list[int]) -> str:
    args = [["TENSOR", "float32", [1, 14, 14, 32]], ["TENSOR", "float32", weight]]
    return json.dumps([0, [[[], []], secs, {"kind": "llvm"}, args]])


def test_metaschedule_candidates_of_one_workload_stay_one_workload(tmp_path: Path) -> None:
    """MetaSchedule records each candidate's arguments after its layout rewrite (the weight
    tiled per candidate): the trials of one workload index are one workload, at its first
    record's shape, each trial's own arguments in `extra`."""
    db = tmp_path / "conv_run"
    db.mkdir()
    path = _write(
        db / "database_tuning_record.json",
        [
            _meta([1e-4, 1.2e-4], [3, 3, 32, 32]),
            _meta([9e-5], [4, 3, 3, 8, 32]),
            _meta([1e10], [2]),
        ],
    )
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, path)
    assert res.rows == {"tuning_trial": 3, "compile_event": 1, "compile_plan": 1}
    rows = (
        ds.connect()
        .execute("SELECT plan_id, shape, trial, extra FROM tuning_trial ORDER BY trial")
        .fetchall()
    )
    assert {r[:2] for r in rows} == {("conv_run", "1x14x14x32;3x3x32x32")}
    assert [r[2] for r in rows] == [1, 2, 3]
    assert rows[0][3] is None
    assert json.loads(rows[1][3]) == {"args_shape": "1x14x14x32;4x3x3x8x32"}


@pytest.mark.parametrize(
    ("line", "field"),
    [(_ansor([-0.0002], 0), "r"), (_meta([-1e-5], [32, 3, 3, 32]), "run_secs")],
)
def test_a_cost_that_is_not_seconds_is_refused_by_field(
    tmp_path: Path, line: str, field: str
) -> None:
    """TVM marks a failed run with 1e10 s, never with a negative time: that is damage, a
    one-line error naming the line and the field, not a trial. A cost beyond float range
    (1e400) is refused by the JSON decoder, naming the line."""
    path = _write(tmp_path / "tune.json", [_ansor([0.0002], 0), line])
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, path)
    assert (e.value.line, e.value.field) == (2, field)
    assert "finite seconds" in str(e.value)
    huge = _write(tmp_path / "huge.json", [_ansor([0.0002], 0), _ansor([1e300], 0)])
    huge.write_text(huge.read_text().replace("1e+300", "1e400"))
    with pytest.raises(InputError) as e:
        ingest_file(Dataset(tmp_path / "ds2", create=True), huge)
    assert e.value.line == 2
    assert "out of range" in str(e.value)
