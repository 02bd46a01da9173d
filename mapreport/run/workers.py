"""Slices reported in parallel (`report --jobs N`, `run --jobs N`): in worker processes on
DuckDB, in threads over one Spark session on Spark (`report_concurrently`).

A night of hundreds of slices spends most of its time per slice: the analysis, the charts'
export through Chromium and WeasyPrint's layout of the PDF, all in one Python process each.
Workers are spawned (not forked: the parent holds DuckDB's threads and maybe a browser), each
opens one DuckDB connection over the dataset's views and keeps one warm Chromium for all the
slices it is given, and hands back each slice's outcome; the parent writes the index. Slices
write only their own folders and their own history files (under the dataset's writer lock),
so the result is the same as reporting them one after the other.
"""

from __future__ import annotations

from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    as_completed,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.util import Finalize

from mapreport.engine.engines import DuckDBEngine
from mapreport.run.config import usable_cores
from mapreport.run.outcome import SliceOutcome
from mapreport.run.pipeline import (
    Analysed,
    Due,
    ReportRun,
    SliceReporter,
    Ticker,
    failed,
    slice_dir,
)
from mapreport.run.processes import spawn_context

_REPORTER: SliceReporter | None = None
"""The worker's reporter: its connection and warm Chromium, kept across its slices."""
_FAILED: str | None = None
"""Why the worker's reporter could not be made (the dataset unreadable, say)."""


def report_in_workers(
    run: ReportRun, due: list[Due], jobs: int, ticker: Ticker
) -> dict[tuple[str, str], SliceOutcome]:
    """The outcome of each report `due` (planned by the parent: the workers do not plan it
    again), by (workload, slice), from `jobs` worker processes."""
    spawn = spawn_context()
    outcomes: dict[tuple[str, str], SliceOutcome] = {}
    threads = max(1, usable_cores() // jobs)  # two workers never oversubscribe two cores
    with ProcessPoolExecutor(jobs, spawn, initializer=_start, initargs=(run, threads)) as pool:
        pending: dict[Future[SliceOutcome], tuple[str, str]] = {
            pool.submit(_make, d): (d.workload, d.slice_) for d in due
        }
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    key = pending.pop(f)
                    outcomes[key] = ticker.done(_outcome(run, key, f))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # Ctrl-C: no worker left behind
            raise
    return outcomes


def _outcome(run: ReportRun, key: tuple[str, str], f: Future[SliceOutcome]) -> SliceOutcome:
    """The worker's outcome, or the slice failed with why its worker could not give one."""
    try:
        return f.result()
    except BrokenProcessPool:
        why = "its worker process died (out of memory, or killed); run it again with --jobs 1"
    except Exception as e:  # noqa: BLE001 - one slice fails, the night goes on
        why = f"{type(e).__name__}: {e}"
    return SliceOutcome(key[0], key[1], slice_dir(run.out, *key), why)


def _start(run: ReportRun, threads: int) -> None:
    """A worker's start: its reporter, whose connections have `threads` DuckDB threads (its
    share of the cores). What stops it is kept, for each of its slices to fail with, instead
    of breaking the pool."""
    global _REPORTER, _FAILED
    try:
        reporter = SliceReporter(run, DuckDBEngine(threads))
    except Exception as e:  # noqa: BLE001 - said per slice, in the outcome's one line
        _FAILED = f"its worker could not start: {type(e).__name__}: {e}".splitlines()[0]
        return
    _REPORTER = reporter
    # multiprocessing's exit runs Finalize callbacks, not atexit: Chromium stops with the worker
    Finalize(reporter, reporter.close, exitpriority=10)


def _make(due: Due) -> SliceOutcome:
    """One slice's report, made by this worker."""
    if _REPORTER is None:
        why = _FAILED or "its worker did not start"
        return SliceOutcome(due.workload, due.slice_, due.folder, why)
    return _REPORTER.make(due)


def report_concurrently(
    reporter: SliceReporter, due: list[Due], jobs: int, ticker: Ticker
) -> dict[tuple[str, str], SliceOutcome]:
    """On an engine whose connections share one session's executors (Spark): up to `jobs`
    slices analysed at once, each on a connection of its own (a child session, with its own
    temporary views), so that the cluster's cores do not wait on one slice's driver; each
    report is then written here, one at a time, with the one warm Chromium. The reports are
    those of one slice after the other: no slice reads another's views."""

    def analyse(d: Due) -> Analysed | SliceOutcome:
        try:
            con = reporter.engine.connect(reporter.ds, d.workload, reporter.run.window)
        except Exception as e:  # noqa: BLE001 - one slice fails, the night goes on
            return failed(d, e)
        return reporter.analyse(d, con)

    outcomes: dict[tuple[str, str], SliceOutcome] = {}
    pool = ThreadPoolExecutor(jobs, thread_name_prefix="mapreport-slice")
    try:
        pending = {pool.submit(analyse, d): d for d in due}
        for f in as_completed(pending):
            d = pending[f]
            got = f.result()
            done = got if isinstance(got, SliceOutcome) else reporter.finish(d, got)
            outcomes[(d.workload, d.slice_)] = ticker.done(done)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # Ctrl-C: no analysis left running
    return outcomes
