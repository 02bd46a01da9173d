"""One night per report: day partitions, windows, the plan in force, backfill, late data and
retention (docs/dataset.md, docs/metrics.md "Closed loop across nights")."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mapreport.analysis import Thresholds, analyze_slice
from mapreport.app.cli import main
from mapreport.core.errors import DatasetError
from mapreport.core.records import replace
from mapreport.core.window import night_window, range_window
from mapreport.dataset.store import Dataset
from mapreport.demo import synth
from mapreport.run.config import Config, load_config
from mapreport.run.ingesting import ingest
from mapreport.run.nightly import NightRun, run
from mapreport.run.reporting import report

DAY_US = 86_400_000_000
BERT = next(w for w in synth.WORKLOADS if w.workload == "bert-base")


def at(moment: str) -> float:
    """Microseconds since the epoch of an ISO time (UTC)."""
    return datetime.fromisoformat(moment).replace(tzinfo=UTC).timestamp() * 1e6


def requests(path: Path, starts: list[float], prefix: str = "r", compute: float = 250.0) -> Path:
    """A native runtime file: one request of workload w per start time."""
    lines = [
        {
            "workload": "w",
            "request_id": f"{prefix}{i}",
            "shape": {"batch": 4, "seq": 96},
            "arrival_us": t,
            "compute_start_us": t + 50.0,
            "compute_end_us": t + 50.0 + compute,
            "plan_id": "p",
        }
        for i, t in enumerate(starts)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def plan(path: Path, predicted: float, captured_at: str | None) -> Path:
    """A native compile profile of plan p, captured at `captured_at` (None: no environment)."""
    lines: list[dict[str, Any]] = (
        [{"environment": {"captured_at": captured_at}}] if captured_at else []
    )
    lines.append(
        {
            "workload": "w",
            "plan_id": "p",
            "shape_bucket": {"batch": [1, 8], "seq": [65, 128]},
            "op": "__total__",
            "predicted_us": predicted,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def hours(day: str, n: int, first: int = 1) -> list[float]:
    """n arrival times spread over the UTC day `day` from `first` o'clock."""
    start = at(f"{day}T{first:02d}:00:00")
    return [start + i * 60e6 for i in range(n)]


def count(ds: Path, window: Any, table: str = "request") -> int:
    row = Dataset(ds).connect(None, window).execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


def test_each_night_counts_its_own_files(tmp_path: Path) -> None:
    """Three nights of dated folders into one dataset: each night's window holds exactly its
    files' requests, its partition only, and `all` holds every one (the old behaviour)."""
    sizes = {"2026-11-28": 30, "2026-11-29": 45, "2026-11-30": 60}
    for day, n in sizes.items():
        files = [requests(tmp_path / "tel" / day / "w.jsonl", hours(day, n), prefix=day)]
        ingest(tmp_path / "ds", files)
    ds = Dataset(tmp_path / "ds")
    for day, n in sizes.items():
        window = night_window(date.fromisoformat(day))
        assert count(tmp_path / "ds", window) == n
        (scan,) = ds.scans("request", "w", set(ds.live()), window)
        assert {f.parent.name for f in scan.files} == {f"day={day}"}
    assert count(tmp_path / "ds", night_window(date(2026, 11, 27))) == 0
    assert count(tmp_path / "ds", night_window(date(2026, 11, 30), "all")) == 135
    assert count(tmp_path / "ds", night_window(date(2026, 11, 30), "2d")) == 105
    assert count(tmp_path / "ds", night_window(date(2026, 11, 30), "6h")) == 0  # 01:00-02:00 only


def test_a_file_spanning_midnight_lands_in_both_days(tmp_path: Path) -> None:
    starts = [at("2026-11-28T23:58:00") + i * 30e6 for i in range(8)]  # 23:58 to 00:01:30
    f = requests(tmp_path / "span.jsonl", starts)
    (result,) = ingest(tmp_path / "ds", [f])
    assert result.days == ("2026-11-28", "2026-11-29")
    assert count(tmp_path / "ds", night_window(date(2026, 11, 28))) == 4
    assert count(tmp_path / "ds", night_window(date(2026, 11, 29))) == 4
    (again,) = ingest(tmp_path / "ds", [f])  # idempotent: the same file adds nothing
    assert again.status == "unchanged"
    assert count(tmp_path / "ds", night_window(date(2026, 11, 29), "all")) == 8


def test_a_night_in_another_time_zone_covers_its_own_hours(tmp_path: Path) -> None:
    """Europe/Paris is UTC+1 in November: its night of the 29th runs 23:00 UTC on the 28th to
    23:00 UTC on the 29th, reading two UTC day partitions."""
    starts = [at("2026-11-28T22:30:00"), at("2026-11-28T23:30:00"), at("2026-11-29T22:30:00")]
    starts.append(at("2026-11-29T23:30:00"))
    ingest(tmp_path / "ds", [requests(tmp_path / "tz.jsonl", starts)])
    paris = night_window(date(2026, 11, 29), "day", "Europe/Paris")
    assert count(tmp_path / "ds", paris) == 2
    assert count(tmp_path / "ds", night_window(date(2026, 11, 29))) == 2


def test_rows_without_a_wall_clock_time_belong_to_their_files_night(tmp_path: Path) -> None:
    """A profiler's relative clock dates nothing: such a file counts in the night it was
    ingested for (--date), and without one only in `all`."""
    relative = requests(tmp_path / "rel.jsonl", [1000.0 * i for i in range(5)])
    other = requests(tmp_path / "rel2.jsonl", [1000.0 * i for i in range(3)], prefix="x")
    ingest(tmp_path / "ds", [relative], night="2026-11-29")
    ingest(tmp_path / "ds", [other])
    assert count(tmp_path / "ds", night_window(date(2026, 11, 29))) == 5
    assert count(tmp_path / "ds", night_window(date(2026, 11, 28))) == 0
    assert count(tmp_path / "ds", night_window(date(2026, 11, 29), "all")) == 8
    since = range_window(datetime(2026, 11, 29, 6, tzinfo=UTC), None)
    assert count(tmp_path / "ds", since) == 5
    assert Dataset(tmp_path / "ds").days("request") == ["2026-11-29", "undated"]


@pytest.mark.slow
def test_the_plan_in_force_is_the_latest_captured_before_the_night_ends(tmp_path: Path) -> None:
    """A plan rebuilt mid-week changes predictions from its night on; earlier nights (a
    backfill) keep the version they ran with, and the report names both."""
    days = ("2026-11-28", "2026-11-29", "2026-11-30")
    files = [requests(tmp_path / d / "w.jsonl", hours(d, 20), prefix=d) for d in days]
    files.append(plan(tmp_path / "plans" / "p-v1.jsonl", 250.0, "2026-11-20T00:00:00Z"))
    files.append(plan(tmp_path / "plans" / "p-v2.jsonl", 400.0, "2026-11-29T12:00:00Z"))
    ingest(tmp_path / "ds", files)
    predicted = {}
    for d in days:
        con = Dataset(tmp_path / "ds").connect("w", night_window(date.fromisoformat(d)))
        r = analyze_slice(con, "w", "", Thresholds())
        (m,) = r.shapes
        predicted[d] = m.accuracy.predicted_us
        (force,) = [p for p in r.plan.versions if p.in_force]
        assert force.versions == 2
        assert Path(force.path).name == ("p-v1.jsonl" if d == "2026-11-28" else "p-v2.jsonl")
    assert predicted == {"2026-11-28": 250.0, "2026-11-29": 400.0, "2026-11-30": 400.0}


def test_a_plan_captured_after_every_night_is_still_used_and_said(tmp_path: Path) -> None:
    files = [requests(tmp_path / "w.jsonl", hours("2026-11-28", 20))]
    files.append(plan(tmp_path / "p.jsonl", 250.0, "2026-12-05T00:00:00Z"))
    ingest(tmp_path / "ds", files)
    con = Dataset(tmp_path / "ds").connect("w", night_window(date(2026, 11, 28)))
    r = analyze_slice(con, "w", "", Thresholds())
    (v,) = r.plan.versions
    assert v.in_force
    assert not v.before_end
    assert r.shapes[0].accuracy.predicted_us == 250.0


def bert_night(folder: Path, day: str, i: int, **changes: dict[str, float]) -> Path:
    """The bert demo telemetry of one night (seeded per night), some shapes changed."""
    shapes = tuple(replace(s, **changes.get(synth.shape_key(s.dims), {})) for s in BERT.shapes)
    w = replace(BERT, shapes=shapes)
    start = synth.WINDOW_START_US + (date.fromisoformat(day) - date(2026, 11, 28)).days * DAY_US
    synth.generate(folder / day, seed=synth.SEED + i, workloads=[w], start_us=start)
    return folder / day


def bert_config(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "mapreport.toml"
    p.write_text(
        f"""[run]
dataset = "ds"
out = "out"
sources = ["tel/{{date}}/*"]
{extra}
"""
    )
    return p


def states(ds: Path, day: str) -> dict[str, str]:
    rows = Dataset(ds).history("history_action", "bert-base", "")
    return {r["shape"] + " " + r["class"]: r["state"] for r in rows if str(r["run_date"]) == day}


QUEUEING = "batch=8,seq=200"


def backfill(tmp_path: Path) -> tuple[Config, dict[str, str], NightRun]:
    """bert's 28th and 30th run as nightly jobs, the queueing fix in from the 29th, then the
    29th run late (a backfill): the config, the 30th's states before, the backfill's run."""
    tel = tmp_path / "tel"
    bert_night(tel, "2026-11-28", 0)
    config = load_config(bert_config(tmp_path))
    run(config, night=date(2026, 11, 28), pdf=False)
    bert_night(tel, "2026-11-30", 2, **{QUEUEING: {"queue_burst": 0.0}})
    run(config, night=date(2026, 11, 30), pdf=False)
    before = states(config.dataset, "2026-11-30")
    bert_night(tel, "2026-11-29", 1, **{QUEUEING: {"queue_burst": 0.0}})
    return config, before, run(config, night=date(2026, 11, 29), pdf=False)


@pytest.mark.slow
def test_backfill_of_a_middle_night_recomputes_the_later_nights(tmp_path: Path) -> None:
    """Three nights; the queueing fix lands on the second. Recorded with the second night's
    telemetry missing, the third night calls the queueing action open; once the second night
    is run (a backfill) the queueing action is verified there, and the third night, recomputed,
    no longer carries it."""
    config, before, done = backfill(tmp_path)
    assert before[f"{QUEUEING} queueing"] == "verified"
    assert [o.recomputed for o in done.outcomes] == [("2026-11-30",)]
    assert states(config.dataset, "2026-11-29")[f"{QUEUEING} queueing"] == "verified"
    assert f"{QUEUEING} queueing" not in states(config.dataset, "2026-11-30")
    runs = Dataset(config.dataset).history("history_run", "bert-base", "")
    assert [(str(r["run_date"]), r["requests"]) for r in runs] == [
        ("2026-11-28", 4224),
        ("2026-11-29", 4224),
        ("2026-11-30", 4224),
    ]
    doc = json.loads((config.out / "bert-base" / "findings.json").read_text())
    assert doc["scope"]["period"]["night"] == "2026-11-29"
    assert [r["requests"] for r in doc["history"]["runs"]] == [4224, 4224]  # none after it


@pytest.mark.slow
def test_a_late_file_changes_its_night_only_when_that_night_is_run_again(tmp_path: Path) -> None:
    late_day, today = "2026-11-28", "2026-11-29"
    tel = tmp_path / "tel"
    for day in (late_day, today):
        requests(tel / day / "w.jsonl", hours(day, 30), prefix=day)
    config = load_config(bert_config(tmp_path))
    run(config, night=date(2026, 11, 28), pdf=False)
    # a file of the 28th arrives with the 29th's telemetry
    requests(tel / today / "late.jsonl", hours(late_day, 12, first=9), prefix="late")
    done = run(config, night=date(2026, 11, 29), pdf=False)
    assert [(Path(x.path).name, x.nights) for x in done.late] == [("late.jsonl", (late_day,))]
    runs = {str(r["run_date"]): r for r in Dataset(config.dataset).history("history_run", "w", "")}
    assert runs[late_day]["requests"] == 30
    assert runs[today]["requests"] == 30
    config28 = replace(config, sources=("tel/2026-11-28/*",))
    run(config28, night=date(2026, 11, 28), pdf=False)
    runs = {str(r["run_date"]): r for r in Dataset(config.dataset).history("history_run", "w", "")}
    assert (runs[late_day]["requests"], runs[late_day]["revision"]) == (42, 2)
    assert runs[today]["revision"] == 1  # recomputed from the revised night, same inputs
    doc = json.loads((config.out / "w" / "findings.json").read_text())
    assert [r["revision"] for r in doc["history"]["runs"]] == [2]
    index = (config.out / "index.html").read_text()
    assert "revised" in index


@pytest.mark.slow
def test_retention_removes_old_partitions_and_retires_their_files(tmp_path: Path) -> None:
    tel = tmp_path / "tel"
    days = ("2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29")
    for day in days:
        requests(tel / day / "w.jsonl", hours(day, 25), prefix=day)
    config = load_config(bert_config(tmp_path, "retain_days = 2"))
    for day in days[:3]:
        run(replace(config, retain_days=None), night=date.fromisoformat(day), pdf=False)
    ds = Dataset(config.dataset)
    plan_ = ds.retain("2026-11-28", dry_run=True)
    assert [p.name for p in plan_.partitions] == ["day=2026-11-26", "day=2026-11-27"]
    assert len(plan_.retired) == 2
    assert ds.days("request") == list(days[:3])  # a dry run removes nothing
    done = run(config, night=date(2026, 11, 29), pdf=False)
    assert done.retention is not None
    assert [p.name for p in done.retention.partitions] == ["day=2026-11-26", "day=2026-11-27"]
    assert ds.days("request") == ["2026-11-28", "2026-11-29"]
    assert len(ds.live()) == 2
    assert len(ds.history("history_run", "w", "")) == 4  # history rows are kept
    # the retired files, found again, are not read back in
    old = [tel / d / "w.jsonl" for d in days[:2]]
    assert [r.status for r in ingest(config.dataset, old)] == ["retired", "retired"]
    assert count(config.dataset, night_window(date(2026, 11, 29), "all")) == 50


@pytest.mark.slow
def test_the_cli_states_the_night_backfill_and_retention(tmp_path: Path) -> None:
    tel = tmp_path / "tel"
    for day in ("2026-11-28", "2026-11-29"):
        requests(tel / day / "w.jsonl", hours(day, 25), prefix=day)
    cfg = bert_config(tmp_path)
    cli = CliRunner()
    for day in ("2026-11-29", "2026-11-28"):
        r = cli.invoke(main, ["run", str(cfg), "--date", day])
        assert r.exit_code == 0, r.output
    assert "night     2026-11-28 (day window, UTC)" in r.output
    assert "backfill  w: 2026-11-28 recorded again; the later night(s) 2026-11-29" in r.output
    retain = ["retain", "--dataset", str(tmp_path / "ds"), "--days", "1", "--date", "2026-11-29"]
    r = cli.invoke(main, [*retain, "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "would remove request/workload=w/day=2026-11-28" in r.output
    assert "1 source file(s) would be retired" in r.output
    r = cli.invoke(main, retain)
    assert r.exit_code == 0, r.output
    assert "removed 1 day partition(s) before 2026-11-29" in r.output
    r = cli.invoke(main, ["run", str(cfg), "--date", "2026-11-31"])
    assert r.exit_code == 2  # a usage error, not an internal one
    assert "--date: '2026-11-31' is not a date (YYYY-MM-DD)" in r.output
    r = cli.invoke(main, ["run", str(cfg), "--date", "2026-11-29", "--window", "5x"])
    assert r.exit_code == 2
    assert "window '5x': not day, all or a duration such as 6h, 7d or 90m" in r.output


@pytest.mark.slow
def test_report_windows_from_the_command_line(tmp_path: Path) -> None:
    for day in ("2026-11-28", "2026-11-29"):
        ingest(tmp_path / "ds", [requests(tmp_path / f"{day}.jsonl", hours(day, 25), prefix=day)])
    cli = CliRunner()
    base = ["report", "--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "out"), "--no-pdf"]

    def requests_of(*args: str) -> int:
        r = cli.invoke(main, [*base, *args])
        assert r.exit_code == 0, r.output
        doc = json.loads((tmp_path / "out" / "w" / "findings.json").read_text())
        return int(doc["scope"]["requests"])

    assert requests_of() == 50  # everything, as before windows
    assert requests_of("--date", "2026-11-29") == 25
    assert requests_of("--window", "all", "--date", "2026-11-29") == 50
    assert requests_of("--since", "2026-11-28T01:10:00Z", "--until", "2026-11-29T01:05:00Z") == 20
    html = (tmp_path / "out" / "w" / "report.html").read_text()
    assert "Covers 2026-11-28 01:10 to 2026-11-29 01:05 UTC." in html
    r = cli.invoke(main, [*base, "--date", "2026-11-20"])
    assert r.exit_code == 5
    assert "holds no requests to report on in the night of 2026-11-20 (UTC)" in r.output
    assert "it holds data of 2026-11-28 to 2026-11-29" in r.output
    r = cli.invoke(main, [*base, "--date", "2026-11-29", "--since", "2026-11-28T00:00:00"])
    assert r.exit_code == 2


def test_an_empty_night_is_a_dataset_error_naming_the_night(tmp_path: Path) -> None:
    ingest(tmp_path / "ds", [requests(tmp_path / "w.jsonl", hours("2026-11-28", 5))])
    with pytest.raises(DatasetError, match="night of 2026-11-27"):
        report(
            tmp_path / "ds",
            tmp_path / "out",
            load_config(bert_config(tmp_path)),
            window=night_window(date(2026, 11, 27)),
        )


@pytest.mark.slow
def test_nights_recorded_within_one_second_stay_apart(tmp_path: Path, monkeypatch: Any) -> None:
    """Run ids made in the same second by one process: the history keys each night by its
    date, so a backfilled night never reads a later night's actions as its own past."""
    import itertools

    from mapreport.run import reporting

    monkeypatch.setattr(reporting, "_RUNS", itertools.repeat(1))

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Frozen:
            return cls(2026, 12, 1, 2, 0, 0, tzinfo=UTC)

    monkeypatch.setattr(reporting, "datetime", Frozen)
    config, _, _ = backfill(tmp_path)
    runs = Dataset(config.dataset).history("history_run", "bert-base", "")
    assert len({r["run_id"] for r in runs}) == 1  # the ids did collide
    assert states(config.dataset, "2026-11-29")[f"{QUEUEING} queueing"] == "verified"


@pytest.mark.parametrize(
    "window",
    [
        night_window(date(2026, 11, 29)),
        night_window(date(2026, 11, 29), "7d", "Europe/Paris"),
        night_window(date(2026, 11, 29), "all"),
        range_window(datetime(2026, 11, 29, 6, tzinfo=UTC), datetime(2026, 11, 30, 6, tzinfo=UTC)),
    ],
)
def test_a_recorded_night_recomputes_over_the_window_it_covered(window: Any) -> None:
    """A backfill recomputes a later night over its own recorded window, bounds and nights."""
    from mapreport.run.recording import stored_window

    row = {
        "run_date": window.night,
        "window": window.spec,
        "timezone": window.timezone,
        "window_start_us": window.start_us,
        "window_end_us": window.end_us,
    }
    assert stored_window(row) == window
    assert stored_window({"run_date": "2026-11-29"}).everything  # recorded before windows


def test_without_a_date_the_night_is_the_last_complete_day_of_its_time_zone() -> None:
    from mapreport.core.window import last_complete_day

    now = datetime(2026, 12, 1, 0, 30, tzinfo=UTC)
    assert last_complete_day("UTC", now) == date(2026, 11, 30)
    assert last_complete_day("America/Los_Angeles", now) == date(2026, 11, 29)  # 16:30 there
    assert last_complete_day("Asia/Tokyo", now) == date(2026, 11, 30)  # 09:30 on the 1st


def test_the_history_table_lists_the_latest_nights_only(tmp_path: Path) -> None:
    """A report's size does not grow with the history kept: the table lists the latest 14
    nights and says how many earlier ones the trend and findings.json hold."""
    from mapreport.analysis import RunKey, Stored
    from mapreport.report.sections import assemble
    from mapreport.report.sections.history import HISTORY_ROWS

    ingest(tmp_path / "ds", [requests(tmp_path / "w.jsonl", hours("2026-12-28", 30))])
    stored = Stored(
        runs=[
            {
                "run_id": f"r{i}",
                "run_date": (date(2026, 11, 28) + timedelta(days=i)).isoformat(),
                "requests": 30,
                "latency_p50_us": 300.0,
                "latency_p95_us": 300.0,
                "latency_p99_us": 300.0,
                "covered_traffic_share": None,
                "mape_weighted": None,
                "actions": 0,
            }
            for i in range(30)
        ]
    )
    window = night_window(date(2026, 12, 28))
    con = Dataset(tmp_path / "ds").connect("w", window)
    r = analyze_slice(
        con, "w", "", Thresholds(), stored=stored, run=RunKey("x", "2026-12-28", window=window)
    )
    assert r.history is not None
    assert len(r.history.runs) == 31
    v = assemble(r).view("history")
    assert len(v.recent_runs) == HISTORY_ROWS
    assert v.recent_runs[-1].current
    assert v.older_runs == 31 - HISTORY_ROWS


@pytest.mark.slow
def test_report_with_record_history_backfills_and_says_so(tmp_path: Path) -> None:
    for day in ("2026-11-28", "2026-11-29"):
        ingest(tmp_path / "ds", [requests(tmp_path / f"{day}.jsonl", hours(day, 25), prefix=day)])
    cli = CliRunner()
    base = ["report", "--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "out")]
    for day in ("2026-11-29", "2026-11-28"):
        r = cli.invoke(main, [*base, "--no-pdf", "--record-history", "--date", day])
        assert r.exit_code == 0, r.output
    assert "backfill  w: 2026-11-28 recorded again; the later night(s) 2026-11-29" in r.output


def test_ingest_says_when_rows_get_no_night(tmp_path: Path) -> None:
    f = requests(tmp_path / "rel.jsonl", [1000.0 * i for i in range(3)])
    cli = CliRunner()
    r = cli.invoke(main, ["ingest", "--dataset", str(tmp_path / "ds"), str(f)])
    assert r.exit_code == 0, r.output
    assert "rows without a wall-clock time count only in --window all reports" in r.output
    assert len(r.output.strip().splitlines()) == 1
    g = requests(tmp_path / "rel2.jsonl", [1000.0 * i for i in range(3)], prefix="x")
    r = cli.invoke(
        main, ["ingest", "--dataset", str(tmp_path / "ds"), "--date", "2026-11-29", str(g)]
    )
    assert "wall-clock" not in r.output
