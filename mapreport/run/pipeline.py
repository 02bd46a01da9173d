"""The nightly run and single-slice regeneration, shared by every CLI command."""

from __future__ import annotations

import hashlib
import logging
import stat
import time
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import NamedTuple

import msgspec

from mapreport import __version__
from mapreport.analysis import RunKey, Stored, analyze_slice
from mapreport.analysis.steps.record import history_rows
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.connection import Connection
from mapreport.core.errors import MapreportError
from mapreport.core.files import atomic_write
from mapreport.core.names import folder_name
from mapreport.core.window import (
    Window,
)
from mapreport.dataset.store import Dataset
from mapreport.dataset.views import Scan, view_scans
from mapreport.engine.engines import Engine
from mapreport.report import (
    ENTRY,
    write_slice_report,
)
from mapreport.report.export import SvgExporter
from mapreport.report.html import TEMPLATES_DIR
from mapreport.run.config import Config
from mapreport.run.evidence import PACKS, write_packs
from mapreport.run.outcome import Progress, SliceOutcome
from mapreport.run.recording import (
    earlier_digest,
    inputs_digest,
    recompute_later,
    review_of,
    revision_of,
    stored_history,
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


class ReportRun(msgspec.Struct, frozen=True):
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


def _files_read(scans: dict[str, list[Scan]]) -> dict[str, list[Scan]]:
    """Each table's scans that read a file: an empty scan adds no row (a server-wide table's
    own files, where there are none), so two connections differing by one read the same."""
    return {table: [s for s in listed if s.files] for table, listed in scans.items()}


class SliceReporter:
    """Reports slices one after the other, with one warm Chromium, each on a connection over
    its workload's files (`Engine.views_per_workload`) or one over all of them."""

    def __init__(self, run: ReportRun, engine: Engine, con: Connection | None = None) -> None:
        self.run, self.engine = run, engine
        self.ds = Dataset(run.dataset)
        self.live = set(self.ds.live())
        self._cons: dict[str | None, Connection] = {run.workload: con} if con else {}
        self._every: dict[str, list[Scan]] | None = None
        """The files the connection over every workload reads, by table (`_covers`)."""
        self.exporter = SvgExporter()

    def connection(self, workload: str) -> Connection:
        """The connection `workload`'s slices are analysed on: made once and kept while its
        slices (consecutive in the listing) are reported. With 200 workloads in a dataset, a
        query over all of them opens every workload's files: a slice's analysis took 1.9 s
        there against 1.0 s over its own (plus 0.3 s to make the views)."""
        key = workload if self.engine.views_per_workload else self.run.workload
        if key not in self._cons and self._covers(key):
            # the listing's connection over every workload reads what this one's would (a
            # dataset of one workload): its views are this workload's, made again for nothing
            # (0.07 s of a small trace's 1.2 s report)
            self._cons[key] = self._cons[None]
        if key not in self._cons:
            for other in [k for k in self._cons if k != self.run.workload]:
                del self._cons[other]  # the previous workload's: its slices are done
            self._cons[key] = self.engine.connect(self.ds, key, self.run.window)
        return self._cons[key]

    def _covers(self, workload: str | None) -> bool:
        """Whether the connection over every workload (the listing's, when held) has the
        views `workload`'s own connection would have: the same files for every table."""
        if None not in self._cons or workload is None:
            return False
        if self._every is None:  # listed once a run, not again for each of 200 workloads
            self._every = _files_read(view_scans(self.ds, None, self.run.window, self.live))
        return _files_read(view_scans(self.ds, workload, self.run.window, self.live)) == self._every

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
        try:
            con = self.connection(due.workload)
        except Exception as e:  # noqa: BLE001 - one slice fails, the night goes on
            return failed(due, e)
        analysed = self.analyse(due, con)
        return analysed if isinstance(analysed, SliceOutcome) else self.finish(due, analysed)

    def analyse(self, due: Due, con: Connection) -> Analysed | SliceOutcome:
        """The slice's analysis on `con` and its evidence packs (the part of a report that
        runs queries: `report_concurrently` runs it for several slices at once, each on its
        own connection), or the one-line error that stopped it."""
        run, ds = self.run, self.ds
        try:
            (due.folder / STAMP).unlink(missing_ok=True)
            key = RunKey(
                run.run_id,
                run.run_date,
                run.config.baseline_run,
                run.window,
                due.inputs,
                revision_of(due.stored, run.run_date, due.inputs),
                run.now.isoformat(timespec="seconds"),
            )
            review = review_of(run.config, due.workload, due.slice_)
            result = analyze_slice(
                con, due.workload, due.slice_, run.config.thresholds, review, due.stored, key
            )
            write_packs(con, result, due.folder / PACKS, ds.root / PACKS, live=True)
            return Analysed(key, result)
        except Exception as e:  # noqa: BLE001 - one slice fails, the night goes on
            return failed(due, e)

    def finish(self, due: Due, analysed: Analysed) -> SliceOutcome:
        """The analysed slice's report written (its pages, charts and PDF with the warm
        Chromium), its night recorded, its stamp set; or the one-line error that stopped it."""
        run, ds = self.run, self.ds
        workload, slice_, folder = due.workload, due.slice_, due.folder
        try:
            written = write_slice_report(
                analysed.result,
                folder,
                self.exporter,
                run.pdf,
                index=run.out / "index.html",
                full=run.config.pdf_form == "full",
            )
            later: tuple[str, ...] = ()
            if run.record:
                rows = history_rows(analysed.result, analysed.key)
                ds.write_history(run.run_date, workload, slice_, rows)
                later = recompute_later(ds, self.engine, workload, slice_, run.config, analysed.key)
            atomic_write(folder / STAMP, due.stamp.encode())
            return SliceOutcome(
                workload,
                slice_,
                folder,
                written=written.names,
                night=run.run_date,
                recomputed=later,
            )
        except Exception as e:  # noqa: BLE001 - one slice fails, the night goes on
            return failed(due, e)


class Analysed(NamedTuple):
    """A slice analysed, its report not yet written."""

    key: RunKey
    result: SliceResult


def failed(due: Due, e: Exception) -> SliceOutcome:
    """The outcome of a slice whose report `e` stopped: its one-line error (the traceback is
    for -v)."""
    log.info("report of %s/%s failed", due.workload, due.slice_, exc_info=True)
    system = isinstance(e, OSError)
    return SliceOutcome(
        due.workload, due.slice_, due.folder, f"{type(e).__name__}: {e}", refused_by_system=system
    )


STAMP = ".inputs"
"""The fingerprint of what a slice's report was made from, kept in its folder."""


def code_identity(files: list[Path]) -> str:
    """A hash of code files (this version's): each counts by its path, size and modification
    time, not its bytes. An edit, a checkout or an install changes them, and reading the
    package's 300 files was 22 ms of every small report; a file touched without a change only
    redoes its reports."""
    h = hashlib.sha256(__version__.encode())
    for f in sorted(files):
        st = f.stat()
        if stat.S_ISREG(st.st_mode):
            h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


@cache
def _code_id() -> str:
    """The identity of the package's code and templates (`code_identity`), once a process: a
    report made by other code is redone."""
    pkg = Path(__file__).resolve().parents[1]  # the whole package, not only run/
    return code_identity([*pkg.rglob("*.py"), *pkg.rglob("*.json"), *TEMPLATES_DIR.rglob("*")])


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
