"""Edges that end in a clear line: windows and dates at the calendar's ends, huge durations and
retention, damaged dataset files, a dataset from a newer mapreport (docs/reliability.md)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from mapreport.app.cli import main
from mapreport.core.window import EVERYTHING, range_window
from mapreport.dataset.store import Dataset


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


@pytest.mark.slow
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
    asked: list[int] = []
    files = ds.files

    def counted(
        table: str, workload: str | None = None, live: Any = None, days: Any = None, **kw: Any
    ) -> list[Path]:
        if days is not None:
            days = list(days)
            asked.append(len(days))
        return files(table, workload, live, days, **kw)

    ds.files = counted  # type: ignore[method-assign]
    for table in ("request", "adaptation_event", "compile_plan"):
        asked.clear()
        wide_files = sorted(f for s in ds.scans(table, None, live, wide) for f in s.files)
        all_files = sorted(f for s in ds.scans(table, None, live, EVERYTHING) for f in s.files)
        assert wide_files == all_files, table
        held = len(ds.days(table))
        assert all(n <= held for n in asked), (table, asked)  # not one per named day


@pytest.mark.slow
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
    copy = _copy(night_dataset, tmp_path)
    base = f'[run]\ndataset = "{copy}"\nout = "{tmp_path / "out"}"\nsources = ["{sample}"]\n'
    config.write_text(base + f"retain_days = {2**63 - 1}\n")
    res = CliRunner().invoke(main, ["run", str(config), "--date", "2026-11-28", "-q"])
    assert res.exit_code == 0, res.output
    config.write_text(base + 'window = "1000000000000000000000m"\n')
    res = CliRunner().invoke(main, ["run", str(config), "--date", "2026-11-28", "-q"])
    assert res.exit_code == 4, res.output
    assert "run.window" in res.output


def _copy(night_dataset: Path, tmp_path: Path) -> Path:
    dataset = tmp_path / "ds"
    shutil.copytree(night_dataset, dataset)
    return dataset


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[: max(8, f.stat().st_size // 3)])


@pytest.mark.slow
def test_a_damaged_commit_record_is_named_and_repaired(
    night_dataset: Path, sample_dir: Path, tmp_path: Path
) -> None:
    """A truncated ingest_log part: report and ingest end in exit 5 naming it (not an internal
    error); `check` names it (exit 5); `check --repair` sets it aside with its source's data
    files; ingesting the inputs again reads that source back, and the report runs."""
    ds = _copy(night_dataset, tmp_path)
    record = sorted((ds / "ingest_log").glob("*.parquet"))[-1]
    _truncate(record)
    out = str(tmp_path / "out")
    for res in (
        _run("report", "--dataset", str(ds), "--out", out, "--no-pdf"),
        _run("ingest", "--dataset", str(ds), str(sample_dir / "quality.jsonl")),
        _run("check", "--dataset", str(ds)),
    ):
        assert res.exit_code == 5, res.output
        assert str(record) in res.output
    res = _run("check", "--dataset", str(ds), "--repair")
    assert res.exit_code == 0, res.output
    assert (ds / "damaged").is_dir()
    assert _run("check", "--dataset", str(ds)).exit_code == 0
    inputs = [
        str(sample_dir / "bert-base.compile.jsonl"),
        *map(str, sample_dir.glob("bert-*.runtime.*")),
    ]
    res = _run("ingest", "--dataset", str(ds), "--date", "2026-11-28", *inputs)
    assert res.exit_code == 0, res.output
    assert "ingested" in res.output  # the set-aside source read again
    assert _run("report", "--dataset", str(ds), "--out", out, "--no-pdf").exit_code == 0


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "missing", "retyped", "newer"])
def test_a_damaged_data_file_is_named_with_what_to_ingest_again(
    night_dataset: Path, sample_dir: Path, tmp_path: Path, damage: str
) -> None:
    """A request file truncated, deleted, with a column of another type, or from a newer
    schema: `check` names it and the input to ingest again (exit 5); the report is exit 5,
    not an internal error; after `--repair` and that ingest the dataset checks clean."""
    ds = _copy(night_dataset, tmp_path)
    (data,) = sorted((ds / "request").rglob("*.parquet"))[:1]
    if damage == "truncated":
        _truncate(data)
    elif damage == "missing":
        data.unlink()
    else:
        t = pq.read_table(data)
        if damage == "retyped":
            i = t.schema.get_field_index("arrival_us")
            t = t.set_column(i, "arrival_us", pc.cast(t["arrival_us"], pa.string()))
            pq.write_table(t, data)
        else:
            meta = {**(t.schema.metadata or {}), b"mapreport.schema_version": b"2"}
            pq.write_table(t.replace_schema_metadata(meta), data)
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5, res.output
    (line,) = [x for x in res.output.splitlines() if x.startswith("damaged")]
    assert "ingest " in line
    assert "runtime" in line  # the input file that holds those rows
    if damage != "retyped":  # DuckDB casts a numeric text column; check is where it shows
        res = _run("report", "--dataset", str(ds), "--out", str(tmp_path / "o"), "--no-pdf")
        assert res.exit_code in (0, 5), res.output  # a missing or newer file: skipped or named
        assert "internal error" not in res.output
    assert _run("check", "--dataset", str(ds), "--repair").exit_code == 0
    inputs = map(str, sample_dir.glob("bert-base.runtime.*"))
    assert _run("ingest", "--dataset", str(ds), "--date", "2026-11-28", *inputs).exit_code == 0
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 0, res.output


def test_a_dataset_from_a_newer_mapreport_is_refused_up_front(
    night_dataset: Path, tmp_path: Path
) -> None:
    """A commit record of a higher schema version: every command that reads the dataset says
    which schema it needs, exit 5, before any query."""
    ds = _copy(night_dataset, tmp_path)
    record = sorted((ds / "ingest_log").glob("*.parquet"))[0]
    t = pq.read_table(record)
    i = t.schema.get_field_index("schema_version")
    t = t.set_column(i, t.schema.field(i), pa.array(["2"] * t.num_rows, pa.string()))
    pq.write_table(t, record)
    for args in (
        ["report", "--dataset", str(ds), "--out", str(tmp_path / "o"), "--no-pdf"],
        ["check", "--dataset", str(ds)],
        ["retain", "--dataset", str(ds), "--days", "3", "--dry-run"],
    ):
        res = _run(*args)
        assert res.exit_code == 5, (args, res.output)
        assert "newer mapreport (dataset schema 2" in res.output


@pytest.mark.slow
def test_damaged_history_and_specs_are_named(night_dataset: Path, tmp_path: Path) -> None:
    """A truncated history file makes the report exit 5 naming it; `check` names it with the
    night to run again, and a corrupt evidence spec with the slice to report again."""
    ds = _copy(night_dataset, tmp_path)
    out = str(tmp_path / "o")
    res = _run("report", "--dataset", str(ds), "--out", out, "--no-pdf", "--record-history")
    assert res.exit_code == 0, res.output
    history = sorted((ds / "history" / "history_shape").rglob("*.parquet"))[0]
    _truncate(history)
    spec = sorted((ds / "evidence").glob("*.json"))[0]
    _truncate(spec)
    res = _run("report", "--dataset", str(ds), "--out", out, "--no-pdf", "--force")
    assert "internal error" not in res.output
    assert str(history) in res.output
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5
    assert f"damaged   {history}: history" in res.output
    assert "--date" in res.output
    assert f"damaged   {spec}: evidence spec" in res.output
    stray = ds / "evidence" / "notes.json"  # a file whose name is no pack id
    stray.write_text("{}")
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5, res.output
    assert f"damaged   {stray}: evidence spec: 'notes' is not an evidence pack id" in res.output


@pytest.mark.parametrize(
    ("quantile", "says"),
    [
        ("inf", "not a finite number: 'inf'"),
        ("+Inf", "not a finite number: '+Inf'"),
        ("NaN", "not a finite number: 'NaN'"),
        ("abc", "not a finite number: 'abc'"),
        ("1.5", "'1.5' is not between 0 and 1"),
    ],
)
def test_a_summary_quantile_that_is_no_quantile_is_named(
    tmp_path: Path, quantile: str, says: str
) -> None:
    """A Prometheus summary's `quantile` label that is not a number in [0, 1]: one line naming
    the file, the line, the field and the label's own text (it said `not a number: None`)."""
    scrape = tmp_path / "metrics.txt"
    scrape.write_text(
        "# HELP s A summary.\n# TYPE s summary\n"
        f's{{quantile="0.5"}} 1.0\ns{{quantile="{quantile}"}} 2.0\ns_sum 3\ns_count 2\n'
    )
    res = _run("ingest", "--dataset", str(tmp_path / "ds"), "--on-error", "abort", str(scrape))
    assert res.exit_code == 3, res.output
    assert res.output.strip() == f"mapreport: {scrape}:4: field 'quantile': {says}"
