"""The nightly run and single-slice regeneration, shared by every CLI command."""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import msgspec

from mapreport import __version__
from mapreport.analysis import RunKey, Stored, analyze_slice, list_slices
from mapreport.analysis.history import history_rows
from mapreport.config import Config
from mapreport.connection import Connection
from mapreport.engine import Engine, EngineName, open_engine
from mapreport.errors import DatasetError, MapreportError
from mapreport.evidence import PACKS, write_packs
from mapreport.files import atomic_write
from mapreport.ingesting import Progress, quiet
from mapreport.names import folder_name
from mapreport.recording import (
    earlier_digest,
    inputs_digest,
    recompute_later,
    review_of,
    revision_of,
    stored_history,
)
from mapreport.report import (
    ENTRY,
    IndexEntry,
    read_entry,
    write_index,
    write_slice_report,
)
from mapreport.report.export import SvgExporter
from mapreport.report.html import TEMPLATES_DIR
from mapreport.schema import DAY_PARTITIONED
from mapreport.store import Dataset
from mapreport.window import (
    EVERYTHING,
    UNDATED,
    Window,
    WindowKind,
)

log = logging.getLogger(__name__)


def slice_dir(out: Path, workload: str, slice_: str) -> Path:
    """OUT/<workload>[/<slice>] (`names.folder_name`: unique per name)."""
    d = out / folder_name(workload)
    return d / folder_name(slice_) if slice_ else d


class FolderRefused(MapreportError):
    """A slice folder mapreport will not write into (the slice fails, the others go on)."""


def check_folder(out: Path, folder: Path) -> None:
    """Refuse a slice folder reached through a symbolic link (it could lead outside OUT, or
    onto another slice's folder) or that is not a folder."""
    d = out
    for part in folder.relative_to(out).parts:
        d = d / part
        if d.is_symlink():
            raise FolderRefused(f"refusing to write through the symbolic link {d}")
        if d.exists() and not d.is_dir():
            raise FolderRefused(f"refusing to write into {d}: not a folder")


@dataclass(frozen=True)
class SliceOutcome:
    """What reporting one slice did."""

    workload: str
    slice: str
    folder: Path
    error: str | None = None
    unchanged: bool = False
    """Its inputs were those of the report already in its folder: nothing was redone."""
    written: tuple[str, ...] = ()
    """The files its report wrote, by name."""
    refused_by_system: bool = False
    """The operating system refused a write (a full disk, a read-only folder)."""
    night: str = ""
    """The night (run date) the report was made for."""
    recomputed: tuple[str, ...] = ()
    """Later nights whose history was recomputed after this one (a backfill)."""

    @property
    def name(self) -> str:
        """`workload` or `workload/slice`."""
        return f"{self.workload}/{self.slice}" if self.slice else self.workload


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
    slices at once (`workers.py`), each with its own connection and warm Chromium."""
    ds = Dataset(dataset_dir)
    ds.check_links()  # before any pack spec or history file is written into it
    now = datetime.now(UTC)
    on = engine or open_engine(config.engine)
    try:
        slices, wanted, con = _slices(ds, on, only, window)
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
            if jobs > 1 and len(due) > 1 and on.name is EngineName.DUCKDB:
                from mapreport.workers import report_in_workers

                done |= report_in_workers(run, due, min(jobs, len(due)), ticker)
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


@dataclass(frozen=True)
class ReportRun:
    """What every slice of one `report` shares; worker processes receive it once."""

    dataset: Path
    out: Path
    config: Config
    pdf: bool
    record: bool
    run_date: str
    force: bool
    window: Window
    run_id: str
    now: datetime
    workload: str | None = None
    """The workload `--slice` named: connections need views over it alone."""


class Ticker:
    """Progress over the run's slices: done / total, time elapsed and the time left (from the
    reports made so far: an unchanged slice costs nothing and predicts nothing)."""

    def __init__(self, total: int, progress: Progress) -> None:
        self.total, self.progress, self.count, self.made = total, progress, 0, 0
        self.t0 = time.monotonic()

    def done(self, outcome: SliceOutcome) -> SliceOutcome:
        """Count one finished slice and say so (with an ETA while slices remain)."""
        self.count += 1
        self.made += not outcome.unchanged
        elapsed = time.monotonic() - self.t0
        left = self.total - self.count
        eta = f", ETA {_clock(elapsed / self.made * left)}" if left and self.made else ""
        what = "failed" if outcome.error else "unchanged" if outcome.unchanged else "reported"
        self.progress(
            f"slices {self.count}/{self.total} ({outcome.name} {what}), "
            f"{_clock(elapsed)} elapsed{eta}"
        )
        return outcome


def _clock(seconds: float) -> str:
    """`1:05` or `2:03:07`: a duration as a terminal shows it."""
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Due(NamedTuple):
    """A slice whose report must be made, with what `SliceReporter.plan` read for it."""

    workload: str
    slice_: str
    folder: Path
    inputs: str
    stored: Stored
    stamp: str
    """The fingerprint its folder keeps once the report is written."""


class SliceReporter:
    """Reports slices one after the other, with one warm Chromium, each on a connection over
    its workload's files (`Engine.views_per_workload`) or one over all of them."""

    def __init__(self, run: ReportRun, engine: Engine, con: Connection | None = None) -> None:
        self.run, self.engine = run, engine
        self.ds = Dataset(run.dataset)
        self.live = set(self.ds.live())
        self._cons: dict[str | None, Connection] = {run.workload: con} if con else {}
        self.exporter = SvgExporter()

    def connection(self, workload: str) -> Connection:
        """The connection `workload`'s slices are analysed on: made once and kept while its
        slices (consecutive in the listing) are reported. With 200 workloads in a dataset, a
        query over all of them opens every workload's files: a slice's analysis took 1.9 s
        there against 1.0 s over its own (plus 0.3 s to make the views)."""
        key = workload if self.engine.views_per_workload else self.run.workload
        if key not in self._cons:
            for other in [k for k in self._cons if k != self.run.workload]:
                del self._cons[other]  # the previous workload's: its slices are done
            self._cons[key] = self.engine.connect(self.ds, key, self.run.window)
        return self._cons[key]

    def close(self) -> None:
        """Stop the warm Chromium."""
        self.exporter.close()

    def report(self, workload: str, slice_: str) -> SliceOutcome:
        """One slice's report, or the one-line error that stopped it."""
        due = self.plan(workload, slice_)
        return due if isinstance(due, SliceOutcome) else self.make(due)

    def plan(self, workload: str, slice_: str) -> SliceOutcome | Due:
        """What a slice needs: nothing (its outcome: unchanged, or its folder refused), or a
        report made from these inputs. Cheap: file fingerprints and the stored history."""
        run, ds = self.run, self.ds
        folder = slice_dir(run.out, workload, slice_)
        try:
            check_folder(run.out, folder)
        except FolderRefused as e:
            return SliceOutcome(workload, slice_, folder, str(e))
        inputs = inputs_digest(ds, self.live, workload, run.window)
        stored = stored_history(ds, workload, slice_)
        earlier = earlier_digest(stored, run.run_date)
        stamp = _fingerprint(
            inputs, run.window, workload, slice_, run.config, run.run_date, run.pdf, run.record
        )
        if not run.force and _unchanged(folder, stamp + earlier, run.pdf):
            return SliceOutcome(workload, slice_, folder, unchanged=True)
        return Due(workload, slice_, folder, inputs, stored, stamp + earlier)

    def make(self, due: Due) -> SliceOutcome:
        """The report `plan` found due, or the one-line error that stopped it."""
        run, ds = self.run, self.ds
        workload, slice_, folder, inputs, stored, stamp = due
        try:
            (folder / STAMP).unlink(missing_ok=True)
            key = RunKey(
                run.run_id,
                run.run_date,
                run.config.baseline_run,
                run.window,
                inputs,
                revision_of(stored, run.run_date, inputs),
                run.now.isoformat(timespec="seconds"),
            )
            review = review_of(run.config, workload, slice_)
            con = self.connection(workload)
            result = analyze_slice(
                con, workload, slice_, run.config.thresholds, review, stored, key
            )
            written = write_slice_report(
                result, folder, self.exporter, run.pdf, index=run.out / "index.html"
            )
            write_packs(con, result, folder / PACKS, ds.root / PACKS)
            later: tuple[str, ...] = ()
            if run.record:
                ds.write_history(
                    run.run_date, workload, slice_, history_rows(result, written.titles, key)
                )
                later = recompute_later(ds, self.engine, workload, slice_, run.config, key)
            atomic_write(folder / STAMP, stamp.encode())
            return SliceOutcome(
                workload,
                slice_,
                folder,
                written=written.names,
                night=run.run_date,
                recomputed=later,
            )
        except Exception as e:
            # the outcome carries the one-line error; the traceback is for -v
            log.info("report of %s/%s failed", workload, slice_, exc_info=True)
            system = isinstance(e, OSError)
            return SliceOutcome(
                workload, slice_, folder, f"{type(e).__name__}: {e}", refused_by_system=system
            )


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

STAMP = ".inputs"
"""The fingerprint of what a slice's report was made from, kept in its folder."""


def _code_id() -> str:
    """A hash of the package's code and templates: a report made by other code is redone."""
    global _CODE_ID
    if _CODE_ID is None:
        h = hashlib.sha256(__version__.encode())
        pkg = Path(__file__).resolve().parent
        for f in sorted([*pkg.rglob("*.py"), *pkg.rglob("*.json"), *TEMPLATES_DIR.rglob("*")]):
            if f.is_file():
                h.update(f.name.encode() + f.read_bytes())
        _CODE_ID = h.hexdigest()
    return _CODE_ID


_CODE_ID: str | None = None


def _fingerprint(
    inputs: str,
    window: Window,
    workload: str,
    slice_: str,
    config: Config,
    run_date: str,
    pdf: bool,
    record: bool,
) -> str:
    """What a slice's report depends on besides its history (`_earlier`): the source files
    its window reads (`inputs`), the window, the configuration, the run date, the code."""
    h = hashlib.sha256()
    for part in (
        _code_id(),
        repr(window),
        repr(config),
        workload,
        slice_,
        run_date,
        str(pdf),
        str(record),
        inputs,
    ):
        h.update(part.encode() + b"\x1f")
    return h.hexdigest()


def _unchanged(folder: Path, stamp: str, pdf: bool) -> bool:
    """True when the folder holds a complete report made from the same inputs."""
    f = folder / STAMP
    outputs = ["report.html", "findings.json", ENTRY, *(["report.pdf"] if pdf else [])]
    return f.is_file() and f.read_text() == stamp and all((folder / n).is_file() for n in outputs)


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
