"""The tuning-ranking figures on real records: the MetaSchedule runs made on this machine
(tests/corpus/tvm_tuned, README there) equal a computation straight from their raw JSON to
1e-9, and the shipped TVM logs of ../shared/realdata, one trial per workload, rank nothing."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from scipy.stats import kendalltau

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.tuning.ranking import TOP_K, Ranking, tuning_ranking
from mapreport.app.cli import main
from mapreport.core.errors import InputError
from mapreport.core.kinds import Unranked
from mapreport.dataset.store import Dataset
from mapreport.engine.engines import DuckDBEngine
from mapreport.ingest import ingest_file
from tests.conftest import REALDATA

TUNED = Path(__file__).resolve().parent / "corpus" / "tvm_tuned"
SCHEMA = Path(__file__).resolve().parents[1] / "mapreport" / "report" / "findings.schema.json"
RUNS = sorted(p.parent.name for p in TUNED.glob("*/database_tuning_record.json*"))
TH = Thresholds()


def _lines(path: Path) -> list[Any]:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [json.loads(x) for x in data.decode().splitlines() if x.strip()]


def _raw(run: str) -> dict[str, Any]:
    """One run straight from its files: per trial (mean us or None, score)."""
    folder = TUNED / run
    records = _lines(next(folder.glob("database_tuning_record.json*")))
    scores = {(r[0], r[1]): r[2] for r in _lines(next(folder.glob("database_cost_model.json*")))}
    trials = []
    for n, (index, body) in enumerate(records, 1):
        secs = body[1] or []
        ok = bool(secs) and max(secs) < 1e9
        trials.append((sum(secs) / len(secs) * 1e6 if ok else None, scores[(index, n)]))
    # the workload's shape is its first record's (["TENSOR", dtype, dims] arguments)
    shape = ";".join("x".join(map(str, a[2])) for a in records[0][1][3])
    return {"trials": trials, "shape": shape}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    ds = Dataset(tmp_path_factory.mktemp("tuned") / "ds", create=True)
    for run in RUNS:
        path = next((TUNED / run).glob("database_tuning_record.json*"))
        assert ingest_file(ds, path, hints={"workload": "tvm-cpu"}).rejected == 0
    return ds


@pytest.fixture(scope="module")
def ranking(dataset: Dataset) -> Ranking:
    found = tuning_ranking(dataset.connect(), "tvm-cpu", "", TH)
    assert found is not None
    return found


def test_findings_json_carries_a_ranking_row_per_run(
    dataset: Dataset, ranking: Ranking, tmp_path: Path
) -> None:
    import jsonschema

    out = tmp_path / "out"
    args = ["report", "--dataset", str(dataset.root), "--out", str(out), "--no-pdf"]
    res = CliRunner().invoke(main, [*args, "--slice", "tvm-cpu"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "tvm-cpu" / "findings.json").read_text())
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    rows = {r["plan_id"]: r for r in doc["ranking"]}
    assert set(rows) == set(RUNS)
    for c in ranking.choices:
        r = rows[c.plan_id]
        assert (r["regret"], r["candidates"], r["trials_to_5pct"]) == (
            c.regret,
            c.candidates,
            c.trials_to_5pct,
        )
        assert r["regret_ci"] == (list(c.regret_ci) if c.regret_ci else None)
        assert r["pairwise_accuracy"] == (c.prediction.pairwise_accuracy if c.prediction else None)


def test_the_records_made_here_are_there() -> None:
    assert len(RUNS) >= 4, RUNS


def _top(values: list[float], k: int) -> list[int]:
    return sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]


@pytest.mark.parametrize("run", RUNS)
def test_figures_equal_a_computation_from_the_raw_records(ranking: Ranking, run: str) -> None:
    raw = {r: _raw(r) for r in RUNS}
    mine = raw[run]
    same = [r for r in RUNS if raw[r]["shape"] == mine["shape"]]
    ok = [(m, s, i + 1) for i, (m, s) in enumerate(mine["trials"]) if m is not None]
    (c,) = [c for c in ranking.choices if c.plan_id == run]
    if not ok:  # every build of the run failed: nothing chosen, nothing ranked
        assert (c.unranked, c.chosen_us, c.regret, c.prediction) == (
            Unranked.NO_SUCCESS,
            None,
            None,
            None,
        )
        assert c.errors == c.trials == len(mine["trials"])
        return
    best = min(m for r in same for m, _ in raw[r]["trials"] if m is not None)
    chosen = min(m for m, _, _ in ok)
    assert c.shape == mine["shape"]
    assert c.task_key.startswith("shash:")  # the runs of one module are compared by its hash
    assert (c.trials, c.candidates) == (len(mine["trials"]), len(ok))
    assert c.best_us == pytest.approx(best, rel=1e-9, abs=0)
    assert c.chosen_us == pytest.approx(chosen, rel=1e-9, abs=0)
    assert c.regret == pytest.approx(chosen / best - 1, abs=1e-9)
    for within, got in ((0.05, c.trials_to_5pct), (0.01, c.trials_to_1pct)):
        assert got == min(n for m, _, n in ok if m <= chosen * (1 + within))
    p = c.prediction
    assert p is not None
    times = [m for m, _, _ in ok]
    scores = [s for _, s, _ in ok]
    thr = [min(times) / t for t in times]
    n = len(ok)
    agree = sum(
        (scores[i] > scores[j]) == (thr[i] > thr[j]) for i in range(n) for j in range(i + 1, n)
    )
    assert p.pairwise_accuracy == pytest.approx(agree / (n * (n - 1) / 2), abs=1e-9)
    assert p.kendall_tau == pytest.approx(kendalltau(scores, thr).statistic, abs=1e-9)
    k = min(TOP_K, n)
    picked = min(times[i] for i in _top(scores, k))
    assert p.topk_score == pytest.approx(min(times) / picked, abs=1e-9)
    assert p.topk_slowdown == pytest.approx((picked - min(times)) / min(times), abs=1e-9)
    hit = set(_top(scores, k)) & set(_top(thr, k))
    assert p.topk_recall == pytest.approx(len(hit) / k, abs=1e-9)


def test_the_intervals_hold_their_figures(ranking: Ranking) -> None:
    for c in ranking.choices:
        if c.unranked is not None:
            continue
        assert c.regret_ci is not None
        assert c.regret is not None
        assert c.regret_ci.low <= c.regret <= c.regret_ci.high or c.regret == 0.0
        assert c.material == (c.regret_ci.low > 0 and c.regret >= 0.05)


@pytest.mark.parametrize(
    ("side", "text", "error"),
    [
        (
            "database_cost_model.json",
            '[0, 1, 0.5, "xgb"]\n[0, 2, "high", "xgb"]\n',
            "database_cost_model.json:2: field 'score': unexpected value 'high'",
        ),
        (
            "database_workload.json",
            '[17, "eyJ9"]\n[{"a": 1}]\n',
            "database_workload.json:2: field 'shash': must be [structural_hash, module]",
        ),
    ],
    ids=["cost-model", "workload"],
)
def test_a_bad_side_file_line_names_its_file_line_and_field(
    side: str, text: str, error: str, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    src = next((TUNED / RUNS[0]).glob("database_tuning_record.json*"))
    (run / src.name).write_bytes(src.read_bytes())
    (run / side).write_text(text)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, run / src.name)
    assert e.value.message().endswith(error)


def test_a_side_file_line_past_the_limit_is_refused_unread(tmp_path: Path) -> None:
    """The score and workload files beside a database are read line by line under the
    readers' line limit: a longer line is a one-line error, not held in memory."""
    from mapreport.ingest.records import MAX_LINE_BYTES

    run = tmp_path / "run"
    run.mkdir()
    src = next((TUNED / RUNS[0]).glob("database_tuning_record.json*"))
    (run / src.name).write_bytes(src.read_bytes())
    (run / "database_cost_model.json").write_bytes(b"[" + b" " * (MAX_LINE_BYTES + 10) + b"]\n")
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, run / src.name)
    assert e.value.message().endswith(
        f"database_cost_model.json:1: line longer than {MAX_LINE_BYTES:,} bytes"
    )


SHIPPED = sorted((REALDATA / "tvm").rglob("*.json")) if (REALDATA / "tvm").is_dir() else []


@pytest.mark.skipif(not SHIPPED, reason="../shared/realdata is missing")
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_logs_of_one_trial_per_workload_rank_nothing(tmp_path: Path, path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, hints={"workload": "shipped"})
    r = tuning_ranking(ds.connect(), "shipped", "", TH)
    assert r is not None
    assert r.one_per_workload
    assert {c.unranked for c in r.choices} == {Unranked.ONE_CANDIDATE}
    assert all(c.regret is None and c.prediction is None for c in r.choices)
    assert all(c.unscored is Unranked.ONE_CANDIDATE for c in r.choices)


def test_two_runs_of_one_name_rank_alike_whatever_the_order(tmp_path: Path) -> None:
    """Two tuning folders of one name in two places are one run that numbers its trials twice
    from 1 (the second a slower copy: every trial ties with its twin on its number): ingested
    in either order and
    read on one DuckDB thread or four, the ranking is the same to the bit. The trials were read
    in an order that left such ties to the engine (issue 53's review of tie-ordered picks)."""
    from mapreport.core.records import as_dict

    run = "matmul_128_xgb"
    for place in ("a", "b"):
        shutil.copytree(TUNED / run, tmp_path / place / run)
    # the second run measured every trial 10% slower: twins tie on their number, not their time
    records = next((tmp_path / "b" / run).glob("database_tuning_record.json*"))
    slower = [
        [i, [body[0], [t * 1.1 for t in body[1] or []], *body[2:]]] for i, body in _lines(records)
    ]
    records.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in slower).encode()))
    found = []
    for order in (("a", "b"), ("b", "a")):
        ds = Dataset(tmp_path / ("ds-" + "".join(order)), create=True)
        for place in order:
            path = next((tmp_path / place / run).glob("database_tuning_record.json*"))
            assert ingest_file(ds, path, hints={"workload": "tvm-cpu"}).rejected == 0
        for threads in (1, 4, 4):
            got = tuning_ranking(DuckDBEngine(threads).connect(ds, None), "tvm-cpu", "", TH)
            assert got is not None
            found.append(json.dumps(as_dict(got), sort_keys=True, default=str))
    (choice,) = json.loads(found[0])["choices"]
    assert choice["plan_id"] == run
    assert len(set(found)) == 1
