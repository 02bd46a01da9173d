"""Slices reported by worker processes (`--jobs N`): the same reports, history and index as
one process, progress with an ETA, and a worker's death failing its slice, not the night."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mapreport.analysis import Stored
from mapreport.core.window import EVERYTHING
from mapreport.report import export
from mapreport.report.export import SvgExporter, browsers_below
from mapreport.run.config import default_config
from mapreport.run.outcome import SliceOutcome
from mapreport.run.pipeline import Due, ReportRun, Ticker
from mapreport.run.reporting import report
from tests.test_golden import compare


def _history(dataset: Path) -> list[dict[str, object]]:
    """Every history row, volatile columns (run id, times) left out, in a stable order."""
    rows = []
    for f in sorted((dataset / "history").rglob("*.parquet")):
        for r in pq.read_table(f).to_pylist():
            rows.append({k: v for k, v in r.items() if not k.endswith(("run_id", "_at"))})
    return sorted(rows, key=repr)


@pytest.mark.slow
def test_workers_report_what_one_process_reports(
    demo_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers (PDFs with charts, history recorded) against one process: every slice's
    findings.json, the history rows and the index's slice list are the same; run again, every
    slice is unchanged and no worker starts."""
    one, two = tmp_path / "one", tmp_path / "two"
    for d in (one, two):
        shutil.copytree(demo_dataset, d / "ds")
    config = default_config()
    night = "2026-11-29"
    serial = report(one / "ds", one / "out", config, pdf=False, record=True, run_date=night)
    before = browsers_below(os.getpid())  # this session's own warm renderers, if any
    parallel = report(
        two / "ds", two / "out", config, pdf=True, record=True, run_date=night, jobs=2
    )
    assert [o.name for o in parallel] == [o.name for o in serial]
    assert all(o.error is None for o in parallel), [o.error for o in parallel]
    for a, b in zip(serial, parallel, strict=True):
        got = json.loads((b.folder / "findings.json").read_text())
        want = json.loads((a.folder / "findings.json").read_text())
        assert compare(got, want, rel=0.0, ci_abs=0.0) == [], a.name
        assert "report.pdf" in b.written
        first_page = subprocess.run(
            ["pdftotext", "-f", "1", "-l", "1", str(b.folder / "report.pdf"), "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert a.workload in first_page
    assert _history(two / "ds") == _history(one / "ds")
    index = (two / "out" / "index.html").read_text()
    assert all(o.name in index for o in parallel)
    # each worker stopped its Chromium with itself: none of this process's descendants is a
    # Chromium the run started (other processes on the machine are none of this test's business)
    assert browsers_below(os.getpid()) - before == set()

    from mapreport.run import workers

    def no_workers(*args: object) -> None:
        raise AssertionError("a worker started for unchanged slices")

    monkeypatch.setattr(workers, "report_in_workers", no_workers)
    again = report(two / "ds", two / "out", config, pdf=True, record=True, run_date=night, jobs=2)
    assert all(o.unchanged for o in again), [(o.name, o.error) for o in again]


def test_a_dead_worker_fails_its_slice_with_a_line(tmp_path: Path) -> None:
    """A worker killed (out of memory) fails its slice with why, in one line."""
    from mapreport.run.workers import _outcome

    run = ReportRun(
        tmp_path, tmp_path / "out", default_config(), False, False, "2026-11-29", False,
        EVERYTHING, "r", datetime.now(UTC),
    )  # fmt: skip
    dead: Future[SliceOutcome] = Future()
    dead.set_exception(BrokenProcessPool("A process in the process pool was terminated"))
    out = _outcome(run, ("bert-base", ""), dead)
    assert out.error is not None
    assert "worker process died" in out.error
    assert out.folder == tmp_path / "out" / "bert-base"


def test_progress_counts_slices_and_gives_an_eta() -> None:
    """slices done/total, elapsed and the time left while slices remain, predicted from the
    reports made (unchanged slices, settled first, predict nothing)."""
    lines: list[str] = []
    ticker = Ticker(4, lines.append)
    ticker.done(SliceOutcome("u", "", Path("u"), unchanged=True))
    ticker.t0 -= 60  # a minute spent on the first report
    ticker.done(SliceOutcome("a", "", Path("a")))
    ticker.done(SliceOutcome("b", "x", Path("b")))
    ticker.done(SliceOutcome("c", "", Path("c"), error="boom"))
    assert lines[0] == "slices 1/4 (u unchanged), 0:00 elapsed"
    assert lines[1].startswith("slices 2/4 (a reported), 1:00 elapsed, ETA 2:00")
    assert lines[2].startswith("slices 3/4 (b/x reported), 1:00 elapsed, ETA 0:30")
    assert lines[3] == "slices 4/4 (c failed), 1:00 elapsed"


def test_a_worker_that_cannot_start_fails_each_slice_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose dataset cannot be opened fails its slices with the reason, one line."""
    from mapreport.run import workers

    monkeypatch.setattr(workers, "_REPORTER", None)
    run = ReportRun(
        tmp_path / "gone", tmp_path / "out", default_config(), False, False, "2026-11-29",
        False, EVERYTHING, "r", datetime.now(UTC),
    )  # fmt: skip
    workers._start(run, 1)
    due = Due("bert-base", "", tmp_path / "out" / "bert-base", "", Stored(), "")
    out = workers._make(due)
    assert out.error is not None
    assert out.error.startswith("its worker could not start: DatasetError: ")
    assert "gone" in out.error
    assert "\n" not in out.error
    assert out.folder == tmp_path / "out" / "bert-base"


def test_a_browser_that_does_not_stop_is_killed_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopping the warm browser is bounded: kaleido's stop, which waits on its browser without
    a limit, hung a report worker's exit once (the make test run of 2026-12-06 sat 11 minutes
    in `SvgExporter.close`); a stop that has not returned in time kills the Chromium processes
    below this one (here a stand-in process) and close returns, kaleido's own exit-time close
    told not to wait again."""
    import kaleido
    from kaleido import _sync_server

    stuck = threading.Event()
    browser = subprocess.Popen(["sleep", "60"])
    monkeypatch.setattr(kaleido, "stop_sync_server", lambda **_: stuck.wait())
    monkeypatch.setattr(export, "browsers_below", lambda root: {browser.pid})

    class Server:
        _initialized = True

        def __new__(cls) -> type:
            return cls

    monkeypatch.setattr(_sync_server, "GlobalKaleidoServer", Server)
    exporter = SvgExporter(_started=True)
    exporter.close(within_s=0.05)
    assert browser.wait(timeout=30) == -signal.SIGKILL
    assert not exporter._started
    assert Server._initialized is False
    assert "did not stop within" in caplog.text
    stuck.set()
    exporter.close(within_s=0.05)  # a second close does nothing
