"""The section "Did the compiler choose well?" (report/sections/ranking.py): per tuned workload
and run, chosen against the best with the regret's interval, the search, the cost model's
ranking or "no prediction recorded", the search chart (its curves thinned to a few hundred
points), and page 1's line only where the tuning choices decide the slice's status. Real
records: the MetaSchedule runs of tests/corpus/tvm_tuned (one cut to its first round) and the
Inductor runs of tests/corpus/inductor_autotune."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from mapreport.analysis import SliceResult, Thresholds, analyze_slice
from mapreport.analysis.tuning.ranking import Trial, rank
from mapreport.core.kinds import JudgementFamily
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file
from mapreport.report import write_slice_report
from mapreport.report.export import SvgExporter
from mapreport.report.sections import assemble
from mapreport.report.sections import ranking as section
from mapreport.report.view import page

CORPUS = Path(__file__).resolve().parent / "corpus"
TUNED = CORPUS / "tvm_tuned"
TH = Thresholds(bootstrap_resamples=500)


def _result(tmp_path: Path, files: list[Path]) -> SliceResult:
    ds = Dataset(tmp_path / "ds", create=True)
    for f in files:
        assert ingest_file(ds, f, hints={"workload": "t"}).rejected == 0
    return analyze_slice(ds.connect(), "t", "", TH)


def _first16(tmp_path: Path) -> Path:
    """The real matmul run's first 16 records (no cost-model scores beside them)."""
    full, cut = TUNED / "matmul_128_xgb", tmp_path / "matmul_128_xgb_first16"
    cut.mkdir()
    records = gzip.decompress((full / "database_tuning_record.json.gz").read_bytes())
    (cut / "database_tuning_record.json").write_bytes(b"".join(records.splitlines(True)[:16]))
    workloads = gzip.decompress((full / "database_workload.json.gz").read_bytes())
    (cut / "database_workload.json").write_bytes(workloads)
    return cut / "database_tuning_record.json"


def _record(run: str) -> Path:
    return next((TUNED / run).glob("database_tuning_record.json*"))


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> SliceResult:
    tmp = tmp_path_factory.mktemp("failing")
    files = [_record("matmul_128_xgb"), _record("conv2d_14x14x32_xgb"), _first16(tmp)]
    return _result(tmp, files)


def test_the_section_lists_the_material_regret_first_with_its_ranking(
    failing: SliceResult,
) -> None:
    v = assemble(failing).view("ranking")
    assert isinstance(v, section.RankingView)
    assert (v.runs, v.workloads, v.trials, v.ranked, v.material) == (3, 2, 160, 3, 1)
    first = v.lines[0]
    assert first.c.plan_id == "matmul_128_xgb_first16"
    assert (first.style, first.best_where) == ("bad", "run matmul_128_xgb, trial 94")
    assert first.standing == "material (whole CI ≥ 5.0%)"
    assert first.no_prediction == section.NO_PREDICTION  # the cut run has no scores beside it
    assert [x.c.plan_id for x in v.lines[1:]] == ["matmul_128_xgb", "conv2d_14x14x32_xgb"]
    assert all(x.c.prediction is not None and x.no_prediction == "" for x in v.lines[1:])
    assert v.predicted == 2


def test_page_one_names_the_tuning_choices_when_they_decide(
    failing: SliceResult, tmp_path: Path
) -> None:
    st = failing.status
    assert st is not None
    assert st.deciding is not None
    assert st.deciding.family is JudgementFamily.RANKING
    vd = page(assemble(failing)).verdict
    assert vd.ranking.startswith("Tuning: 1 of 3 ranked tuning choices is materially slower")
    assert "197 µs chosen by run matmul_128_xgb_first16 against 128 µs" in vd.ranking
    html = write_slice_report(failing, tmp_path / "out", SvgExporter(), pdf=False).html
    text = html.read_text()
    assert '<section id="ranking"' in text
    assert "Tuning: 1 of 3 ranked tuning choices" in text
    assert 'href="#ranking">Did the compiler choose well?</a>' in text
    assert "no prediction recorded" in text


def test_a_healthy_tuning_slice_has_no_page_one_line(tmp_path: Path) -> None:
    r = _result(tmp_path, [_record("matmul_128_xgb"), _record("conv2d_14x14x32_xgb")])
    v = assemble(r).view("ranking")
    assert v.material == 0
    assert v.sentence == ""
    assert page(assemble(r)).verdict.ranking == ""


def test_records_without_scores_say_no_prediction_recorded(tmp_path: Path) -> None:
    """Inductor records no cost-model score: one sentence says so; its choices, listed fastest
    first, draw no search (two trials a run)."""
    logs = [CORPUS / "inductor_autotune" / f"{x}.log" for x in ("quiet_a", "quiet_b")]
    v = assemble(_result(tmp_path, logs)).view("ranking")
    assert v.predicted == 0
    assert {x.no_prediction for x in v.lines} == {section.NO_PREDICTION}
    assert v.curves == ()
    assert section.figures(v) == {}


def test_a_slice_without_tuning_records_leaves_the_section_out(
    demo_results: dict[str, SliceResult],
) -> None:
    parts = {p.id: p for p in assemble(demo_results["bert-base"]).parts}
    assert (parts["ranking"].shown, parts["ranking"].not_measured) == (False, "")


def _trial(plan: str, n: int, us: float) -> Trial:
    return Trial(
        plan, "mm", "mm", None, "8x8", n, f"{plan}-{n}", (us, us), us, None, None, None, plan
    )


def test_a_long_search_is_drawn_with_a_few_hundred_points_a_curve() -> None:
    """5,000 trials, each a little faster than the last: the curve keeps its first and last
    trial and at most MAX_POINTS points between; the chart's data stays proportional."""
    trials = [_trial("long", n, 10_000.0 - n) for n in range(1, 5001)]
    r = rank(trials, Thresholds(bootstrap_resamples=10))
    v = section.view(section.Read(r, None))
    (cv,) = v.curves
    assert len(cv.trials) == section.MAX_POINTS
    assert (cv.trials[0], cv.trials[-1]) == (1, 5000)
    assert cv.ratio[-1] == pytest.approx(1.0)
    fig = section.search_curves(v)
    assert fig is not None
    assert sum(len(t.x) for t in fig.data) == section.MAX_POINTS
