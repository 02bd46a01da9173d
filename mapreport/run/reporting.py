"""`report`: every slice of a dataset (or the one `--slice` names) planned, made here or by
worker processes (`workers`), and the index rewritten. The per-slice machinery is
`pipeline`'s; this module only orders it, so the workers and the pipeline never import each
other's callers."""

from __future__ import annotations

import itertools
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from mapreport.analysis import list_slices
from mapreport.core.connection import Connection
from mapreport.core.errors import DatasetError, MapreportError
from mapreport.core.schema import DAY_PARTITIONED
from mapreport.core.window import EVERYTHING, UNDATED, Window, WindowKind
from mapreport.dataset.store import Dataset
from mapreport.engine.engines import Engine, open_engine
from mapreport.engine.settings import EngineName
from mapreport.report import IndexEntry, read_entry, write_index
from mapreport.run.config import Config
from mapreport.run.outcome import Progress, SliceOutcome, quiet
from mapreport.run.pipeline import Due, ReportRun, SliceReporter, Ticker, slice_dir


def slice_candidates(text: str) -> list[tuple[str, str | None]]:
    """The (workload, slice) pairs `--slice TEXT` may mean, most literal first: the whole text
    as a workload (every slice of it), then each split at a `/` (a workload may hold `/`)."""
    if not text:
        raise MapreportError("--slice must be WORKLOAD or WORKLOAD/SLICE, got ''")
    splits = [(text[:i], text[i + 1 :]) for i, ch in enumerate(text) if ch == "/" and i]
    return [(text, None), *splits]


def report(
    dataset_dir: Path,
    out: Path,
    config: Config,
    only: str | None = None,
    pdf: bool = True,
    progress: Progress = quiet,
    record: bool = False,
    run_date: str | None = None,
    force: bool = False,
    window: Window = EVERYTHING,
    engine: Engine | None = None,
    jobs: int = 1,
) -> list[SliceOutcome]:
    """Report every slice with data in the window (or only the --slice one) and rewrite
    OUT/index.html.

    Every report shows the history of the nights before its own; `record` adds this run to
    it (the nightly job does), dated `run_date` (default: the window's night, else today,
    UTC), and recomputes the later nights already recorded (a backfill), so their action
    states follow from this one. A slice whose inputs are those its folder's report was made
    from is left as it is unless `force`. The analysis runs on `engine` (default: the one
    config.engine names, opened and closed here); on DuckDB, `jobs` worker processes report
    slices at once (`workers.py`), each with its own connection and warm Chromium; on Spark,
    `jobs` slices are analysed at once on one session (`report_concurrently`)."""
    ds = Dataset(dataset_dir)
    ds.check_links()  # before any pack spec or history file is written into it
    now = datetime.now(UTC)
    on = engine or open_engine(config.engine)
    try:
        # on Spark the session starts here: a minute before the first slice is done
        progress(f"slices: listing them on {on.name}")
        t0 = time.monotonic()
        slices, wanted, con = _slices(ds, on, only, window)
        progress(f"slices 0/{len(slices)} listed in {time.monotonic() - t0:.1f} s")
        out.mkdir(parents=True, exist_ok=True)  # refused: a system error (exit 7) naming it
        run = ReportRun(
            dataset=ds.root,
            out=out,
            config=config,
            pdf=pdf,
            record=record,
            run_date=run_date or window.night or now.date().isoformat(),
            force=force,
            window=window,
            # unique per recording: one process may record several nights within a second
            run_id=f"{now.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid():x}-{next(_RUNS)}",
            now=now,
            workload=wanted[0] if wanted else None,
        )
        ticker = Ticker(len(slices), progress)
        reporter = SliceReporter(run, on, con)
        try:
            # unchanged slices are settled here: workers start only for reports to make
            plans = {(w, s): reporter.plan(w, s) for w, s in slices}
            done = {k: ticker.done(p) for k, p in plans.items() if isinstance(p, SliceOutcome)}
            due = [p for p in plans.values() if isinstance(p, Due)]
            if jobs > 1 and len(due) > 1:
                # process pools load multiprocessing (14 ms) that one slice's report never uses
                from mapreport.run.workers import report_concurrently, report_in_workers

                if on.name is EngineName.DUCKDB:
                    done |= report_in_workers(run, due, min(jobs, len(due)), ticker)
                else:
                    done |= report_concurrently(reporter, due, min(jobs, len(due)), ticker)
            else:
                done |= {(d.workload, d.slice_): ticker.done(reporter.make(d)) for d in due}
        finally:
            reporter.close()
        outcomes = [done[k] for k in slices]
        _index(ds, on, out, outcomes, run.window, None if wanted else slices)
        return outcomes
    finally:
        if engine is None:
            on.close()


def _slices(
    ds: Dataset, engine: Engine, only: str | None, window: Window
) -> tuple[list[tuple[str, str]], tuple[str, str | None] | None, Connection]:
    """The slices to report (with data in the window), the (workload, slice) `--slice` named
    (None without one), and the connection they were listed on."""
    for workload, slice_ in slice_candidates(only) if only else []:
        con = engine.connect(ds, workload, window)
        slices = [s for s in list_slices(con) if s[0] == workload and slice_ in (None, s[1])]
        if slices:
            return slices, (workload, slice_), con
    if only:
        every = list_slices(engine.connect(ds, None, window))
        names = ", ".join(f"{w}/{s}" if s else w for w, s in every) or "none"
        raise DatasetError(
            f"no slice {only!r} in {ds.root}{_in(window)} (slices: {names}){_days(ds)}"
        )
    con = engine.connect(ds, None, window)
    slices = list_slices(con)
    if not slices:
        raise DatasetError(f"{ds.root} holds no requests to report on{_in(window)}{_days(ds)}")
    return slices, None, con


def _in(window: Window) -> str:
    """' in the night of D' and the like, for an error message."""
    if window.everything:
        return ""
    if window.kind is WindowKind.DAY:
        return f" in the night of {window.night} ({window.timezone})"
    if window.kind is WindowKind.DURATION:
        return f" in the {window.spec} ending with the night of {window.night} ({window.timezone})"
    return " in the --since/--until range"


def _days(ds: Dataset) -> str:
    """'; it holds nights A to B' for an error message (nothing when it holds no day)."""
    days = sorted({d for t in DAY_PARTITIONED for d in ds.days(t)} - {UNDATED})
    if not days:
        return ""
    span = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    return f"; it holds data of {span} (--window all reports everything)"


_RUNS = itertools.count(1)
"""Reports made by this process, numbering their run ids."""


def _index(
    ds: Dataset,
    engine: Engine,
    out: Path,
    outcomes: list[SliceOutcome],
    window: Window,
    every: list[tuple[str, str]] | None = None,
) -> None:
    """Rewrite the index over every slice of the dataset (`every`, when the caller has listed
    them already): tonight's outcomes, and the entries kept beside earlier reports."""
    now = {(o.workload, o.slice): o for o in outcomes}
    entries: list[IndexEntry] = []
    listed = every if every is not None else list_slices(engine.connect(ds, None, window))
    for workload, slice_ in listed:
        folder = slice_dir(out, workload, slice_)
        name = f"{workload}/{slice_}" if slice_ else workload
        rel = folder.relative_to(out).as_posix()
        o = now.get((workload, slice_))
        if o is not None and o.error is not None:
            entries.append(IndexEntry(name=name, dir=rel, error=o.error))
            continue
        entries.append(msgspec.structs.replace(read_entry(folder, name, rel), name=name, dir=rel))
    write_index(out, entries, str(ds.root))
