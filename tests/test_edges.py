"""Edges that end in a clear line: windows and dates at the calendar's ends, huge durations and
retention, damaged dataset files, a dataset from a newer mapreport (docs/reliability.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from mapreport.cli import main
from mapreport.store import Dataset
from mapreport.window import EVERYTHING, range_window


@pytest.fixture(scope="module")
def night_dataset(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """bert-base's plan and runtime ingested for the demo's first night."""
    dataset = tmp_path_factory.mktemp("edges") / "ds"
    files = [
        str(sample_dir / "bert-base.compile.jsonl"),
        *map(str, sample_dir.glob("bert-base.runtime.*")),
    ]
    res = CliRunner().invoke(
        main, ["ingest", "--dataset", str(dataset), "-q", "--date", "2026-11-28", *files]
    )
    assert res.exit_code == 0, res.output
    return dataset


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--date", "9999-12-31"], 2, "the last night that can be reported"),
        (["--date", "9999-12-30", "--window", "6h"], 2, "the last night that can be reported"),
        (["--date", "0001-01-01", "--window", "7d"], 2, "starts before the year 1"),
        (
            ["--date", "2026-11-28", "--window", "1000000000000000000000m"],
            2,
            "longer than the calendar",
        ),
        (["--date", "2026-11-28", "--window", "4000000d"], 2, "longer than the calendar"),
        (["--date", "2026-11-28", "--window", "800000d"], 2, "starts before the year 1"),
        (["--since", "0001-01-01T00:00-12:00", "--until", "0001-01-01T06:00-12:00"], 2, "outside"),
        (["--date", "0001-01-01"], 0, "index"),
        (["--since", "0001-01-01T00:00+05:00"], 0, "index"),
        (["--until", "9999-12-31T23:59:59.999999+00:00"], 0, "index"),
    ],
)
def test_dates_and_windows_at_the_edges_are_usage_errors_or_reports(
    night_dataset: Path, tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    """The last date, the first with a window before it, a window of 10^21 minutes: a usage
    error (exit 2) in one line, never an internal error; a range reaching past the calendar
    is clamped to it and reports."""
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main, ["report", "--dataset", str(night_dataset), "--out", str(out), "--no-pdf", *args]
    )
    assert res.exit_code == code, res.output
    assert says in res.output
    if code:
        assert len(res.output.strip().splitlines()) == 1, res.output


def test_a_window_costs_the_days_with_data_not_the_days_it_names(night_dataset: Path) -> None:
    """`--since 0001-01-01 --until 9999-12-31` names 3.6 million days; the files it reads are
    found from the days the dataset holds (it ran past 15 minutes at 1.9 GB when every named
    day was globbed). Its scans are those of the whole dataset."""
    ds = Dataset(night_dataset)
    wide = range_window(datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC))
    live = set(ds.live())
    for table in ("request", "adaptation_event", "compile_plan"):
        wide_files = sorted(f for s in ds.scans(table, None, live, wide) for f in s.files)
        all_files = sorted(f for s in ds.scans(table, None, live, EVERYTHING) for f in s.files)
        assert wide_files == all_files, table


def test_huge_retention_keeps_everything(
    night_dataset: Path, sample_dir: Path, tmp_path: Path
) -> None:
    """`retain --days` of a million or 2^63-1 nights keeps every night (exit 0), as does the
    config's run.retain_days; a config's window longer than the calendar is a config error
    naming the key (exit 4)."""
    for days in ("1000000", str(2**63 - 1)):
        res = CliRunner().invoke(
            main, ["retain", "--dataset", str(night_dataset), "--days", days, "--dry-run"]
        )
        assert res.exit_code == 0, res.output
        assert "would remove 0 day partition(s)" in res.output
    config = tmp_path / "mapreport.toml"
    sample = sample_dir / "bert-base.compile.jsonl"
    base = (
        f'[run]\ndataset = "{night_dataset}"\nout = "{tmp_path / "out"}"\nsources = ["{sample}"]\n'
    )
    config.write_text(base + f"retain_days = {2**63 - 1}\n")
    res = CliRunner().invoke(main, ["run", str(config), "--date", "2026-11-28", "-q"])
    assert res.exit_code == 0, res.output
    config.write_text(base + 'window = "1000000000000000000000m"\n')
    res = CliRunner().invoke(main, ["run", str(config), "--date", "2026-11-28", "-q"])
    assert res.exit_code == 4, res.output
    assert "run.window" in res.output
