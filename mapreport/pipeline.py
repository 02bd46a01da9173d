"""The nightly run and single-slice regeneration, shared by every CLI command."""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from mapreport import __version__
from mapreport.analysis import Review, RunKey, Stored, analyze_slice, list_slices
from mapreport.analysis.history import history_rows
from mapreport.config import Config
from mapreport.errors import ConfigError, DatasetError, ErrorPolicy, InputError, MapreportError
from mapreport.files import atomic_write
from mapreport.ingest import (
    IngestResult,
    Staged,
    commit_staged,
    helper,
    ingest_file,
    stage_file,
)
from mapreport.kinds import OwnerRole
from mapreport.names import folder_name
from mapreport.report import ENTRY, IndexEntry, read_entry, write_index, write_slice_report
from mapreport.report.export import SvgExporter
from mapreport.report.html import TEMPLATES_DIR
from mapreport.schema import PARTITIONED
from mapreport.store import Dataset, iter_files

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


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


def ingest(
    dataset_dir: Path,
    paths: Sequence[Path],
    policy: ErrorPolicy | None = None,
    fmt: str | None = None,
    progress: Progress = _quiet,
    hints: dict[str, str] | None = None,
    jobs: int = 1,
    wait: bool = True,
) -> list[IngestResult]:
    """Ingest files (folders are walked) into the dataset under its writer lock (`wait`
    false: fail at once when another writer holds it); each file commits atomically.

    Under `abort` the first bad file stops the command (files before it stay committed).
    Under `quarantine` a file that cannot be read at all is skipped, the others are ingested,
    and an IngestFailures error then lists every skipped file. With `jobs` > 1, that many
    processes read files at once; commits still happen here, one at a time in the files'
    order, so the dataset ends as a serial ingest leaves it (peak memory: one reader per job)."""
    ds = Dataset(dataset_dir, create=True)
    with ds.writing(wait):
        return _ingest(ds, paths, policy, fmt, progress, hints, jobs)


def _ingest(
    ds: Dataset,
    paths: Sequence[Path],
    policy: ErrorPolicy | None,
    fmt: str | None,
    progress: Progress,
    hints: dict[str, str] | None,
    jobs: int,
) -> list[IngestResult]:
    dataset_dir = ds.root
    ds.recover()
    ds.live()  # the log read once here; reader processes get it with their work
    results = []
    failures: list[InputError] = []
    files = list(iter_files(list(paths)))
    root = dataset_dir.resolve()
    for f in files:
        if f.resolve().is_relative_to(root):  # its rows would be added again every night
            raise InputError(f, None, None, f"is inside the dataset {dataset_dir}: not a source")
    pool = (
        ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_reader_process,
            initargs=(ds,),  # the dataset and its log go to each process once, not per file
        )
        if jobs > 1 and len(files) > 1
        else None
    )
    try:
        pending = [pool.submit(_stage, f, policy, fmt, hints) if pool else None for f in files]
        for i, (f, job) in enumerate(zip(files, pending, strict=True), 1):
            progress(f"ingest {i}/{len(files)} {f}")
            try:
                if job is None:
                    results.append(ingest_file(ds, f, policy, fmt, hints))
                else:
                    results.append(commit_staged(ds, job.result()))
            except InputError as e:
                if policy != "quarantine":
                    raise
                failures.append(e)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
            ds.recover()  # files staged after a fatal error are not committed
    if failures:
        raise IngestFailures(results, failures)
    return results


_READER_DATASET: list[Dataset] = []
"""In an `ingest --jobs` reader process: the dataset it stages for."""


def _reader_process(ds: Dataset) -> None:
    """Initialise a reader process: its dataset, and no helper processes (the jobs already
    use the cores)."""
    helper.disable()
    _READER_DATASET.append(ds)


def _stage(
    path: Path, policy: ErrorPolicy | None, fmt: str | None, hints: dict[str, str] | None
) -> Staged:
    """Stage one file in a reader process."""
    return stage_file(_READER_DATASET[0], path, policy, fmt, hints)


class IngestFailures(InputError):
    """Files that could not be read at all under the quarantine policy; the rest went in."""

    def __init__(self, results: list[IngestResult], failures: list[InputError]):
        self.results = results
        self.failures = failures
        self.outcomes: list[SliceOutcome] = []
        super().__init__(failures[0].path, failures[0].line, failures[0].field, failures[0].reason)

    def message(self) -> str:
        """All failed files, one line each (the list of known formats once, at the end)."""
        known = ""
        lines = []
        for f in self.failures:
            text = f.message()
            head, sep, tail = text.partition(" (known: ")
            if sep:
                text, known = head, "known formats: " + tail.rstrip(")")
            lines.append("  " + text)
        return "\n".join(
            [
                f"{len(self.failures)} file(s) could not be read:",
                *lines,
                *([known] if known else []),
            ]
        )


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

    @property
    def name(self) -> str:
        """`workload` or `workload/slice`."""
        return f"{self.workload}/{self.slice}" if self.slice else self.workload


def review_of(config: Config, workload: str, slice_: str) -> Review:
    """What a slice is reviewed against: its description, SLA targets, the owners and the
    sign-offs."""
    sla = config.slice_config(workload, slice_)
    return Review(
        sla_p95_us=sla.sla_p95_us if sla else None,
        sla_p99_us=sla.sla_p99_us if sla else None,
        owners={OwnerRole(k): v for k, v in config.owners.items()},
        signoffs={OwnerRole(k): v for k, v in config.signoffs.items()},
        description=sla.description if sla else "",
    )


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
    progress: Progress = _quiet,
    record: bool = False,
    run_date: str | None = None,
    force: bool = False,
) -> list[SliceOutcome]:
    """Report every slice of the dataset (or only the --slice one) and rewrite OUT/index.html.

    Every report shows the history of earlier recorded runs; `record` adds this run to it
    (the nightly job does), dated `run_date` (default: today, UTC). A slice whose inputs are
    those its folder's report was made from is left as it is unless `force`."""
    ds = Dataset(dataset_dir)
    now = datetime.now(UTC)
    run_date = run_date or now.date().isoformat()
    run_id = f"{now.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid():x}"
    wanted = None
    for workload, slice_ in slice_candidates(only) if only else []:
        con = ds.connect(workload)
        slices = [s for s in list_slices(con) if s[0] == workload and slice_ in (None, s[1])]
        if slices:
            wanted = (workload, slice_)
            break
    if only:
        if wanted is None:
            every = (
                ", ".join(f"{w}/{s}" if s else w for w, s in list_slices(ds.connect())) or "none"
            )
            raise DatasetError(f"no slice {only!r} in {dataset_dir} (slices: {every})")
    else:
        con = ds.connect()
        slices = list_slices(con)
        if not slices:
            raise DatasetError(f"{dataset_dir} holds no requests to report on")
    out.mkdir(parents=True, exist_ok=True)  # refused: a system error (exit 7) naming it
    key = RunKey(run_id, run_date, config.baseline_run)
    exporter = SvgExporter()
    outcomes = []
    live = set(ds.live())
    try:
        for i, (workload, slice_) in enumerate(slices, 1):
            name = f"{workload}/{slice_}" if slice_ else workload
            progress(f"report {i}/{len(slices)} {name}")
            folder = slice_dir(out, workload, slice_)
            try:
                check_folder(out, folder)
            except FolderRefused as e:
                outcomes.append(SliceOutcome(workload, slice_, folder, str(e)))
                continue
            stamp = _fingerprint(ds, live, workload, slice_, config, run_date, pdf, record)
            if not force and _unchanged(folder, stamp, pdf):
                outcomes.append(SliceOutcome(workload, slice_, folder, unchanged=True))
                continue
            try:
                (folder / STAMP).unlink(missing_ok=True)
                review = review_of(config, workload, slice_)
                stored = _stored(ds, workload, slice_)
                result = analyze_slice(
                    con, workload, slice_, config.thresholds, review, stored, key
                )
                written = write_slice_report(
                    result, folder, exporter, pdf, index=out / "index.html"
                )
                if record:
                    rows = history_rows(result, written.titles, key)
                    ds.write_history(run_date, workload, slice_, rows)
                atomic_write(folder / STAMP, stamp.encode())
                outcomes.append(SliceOutcome(workload, slice_, folder, written=written.names))
            except Exception as e:
                # the outcome carries the one-line error; the traceback is for -v
                log.info("report of %s failed", name, exc_info=True)
                error = f"{type(e).__name__}: {e}"
                system = isinstance(e, OSError)
                outcomes.append(
                    SliceOutcome(workload, slice_, folder, error, refused_by_system=system)
                )
    finally:
        exporter.close()
    _index(ds, out, outcomes, dataset_dir, None if wanted else slices)
    return outcomes


def _stored(ds: Dataset, workload: str, slice_: str) -> Stored:
    """The slice's recorded history, as the dataset holds it."""
    return Stored(
        ds.history("history_run", workload, slice_),
        ds.history("history_shape", workload, slice_),
        ds.history("history_action", workload, slice_),
    )


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
    ds: Dataset,
    live: set[str],
    workload: str,
    slice_: str,
    config: Config,
    run_date: str,
    pdf: bool,
    record: bool,
) -> str:
    """What a slice's report depends on: the committed source files of its workload, the
    configuration, the earlier nights of its history, the run date, the code."""
    h = hashlib.sha256()
    sources = sorted(
        {f.name.split("-", 1)[0] for t in PARTITIONED for f in ds.files(t, workload, live)}
    )
    for part in (
        _code_id(),
        repr(config),
        workload,
        slice_,
        run_date,
        str(pdf),
        str(record),
        ",".join(sources),
        ",".join(d for d in ds.history_runs(workload, slice_) if d != f"run_date={run_date}"),
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
    out: Path,
    outcomes: list[SliceOutcome],
    dataset_dir: Path,
    every: list[tuple[str, str]] | None = None,
) -> None:
    """Rewrite the index over every slice of the dataset (`every`, when the caller has listed
    them already): tonight's outcomes, and the entries kept beside earlier reports."""
    now = {(o.workload, o.slice): o for o in outcomes}
    entries: list[IndexEntry] = []
    for workload, slice_ in every if every is not None else list_slices(ds.connect()):
        folder = slice_dir(out, workload, slice_)
        name = f"{workload}/{slice_}" if slice_ else workload
        rel = folder.relative_to(out).as_posix()
        o = now.get((workload, slice_))
        if o is not None and o.error is not None:
            entries.append(IndexEntry(name=name, dir=rel, error=o.error))
            continue
        entries.append(msgspec.structs.replace(read_entry(folder, name, rel), name=name, dir=rel))
    write_index(out, entries, str(dataset_dir))


def run(
    config: Config,
    progress: Progress = _quiet,
    run_date: str | None = None,
    force: bool = False,
    jobs: int | None = None,
    wait: bool = True,
) -> tuple[list[IngestResult], list[SliceOutcome]]:
    """The nightly job: ingest the configured sources (`jobs` files at once; default the
    config's run.jobs), then report every slice."""
    if not config.sources:
        raise ConfigError(f"{config.path}: run.sources lists no input files")
    failed: IngestFailures | None = None
    try:
        ingested = ingest(
            config.dataset,
            config.source_files(),
            config.on_error,
            progress=progress,
            jobs=jobs or config.jobs,
            wait=wait,
        )
    except IngestFailures as e:
        ingested, failed = e.results, e
    outcomes = report(
        config.dataset,
        config.out,
        config,
        progress=progress,
        record=config.record_history,
        run_date=run_date,
        force=force,
    )
    if failed is not None:
        failed.outcomes = outcomes
        raise failed
    return ingested, outcomes
