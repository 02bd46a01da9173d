"""Ingest under the dataset's writer lock: files read here, by `--jobs` processes or by the
engine's workers (Spark's executors), committed here one at a time in the files' order."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from mapreport.core.errors import ErrorPolicy, InputError, MapreportError
from mapreport.dataset.store import Dataset, iter_files
from mapreport.engine.engines import DUCKDB, Engine
from mapreport.engine.settings import EngineName
from mapreport.ingest import IngestResult, Reading, Staged, commit_staged, helper
from mapreport.run.outcome import Progress, quiet
from mapreport.run.processes import spawn_context

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from mapreport.run.outcome import SliceOutcome


def ingest(
    dataset_dir: Path,
    paths: Sequence[Path],
    policy: ErrorPolicy | None = None,
    fmt: str | None = None,
    progress: Progress = quiet,
    hints: dict[str, str] | None = None,
    jobs: int = 1,
    wait: bool = True,
    night: str | None = None,
    engine: Engine = DUCKDB,
) -> list[IngestResult]:
    """Ingest files (folders are walked) into the dataset under its writer lock (`wait`
    false: fail at once when another writer holds it); each file commits atomically.

    Under `abort` the first bad file stops the command with an IngestAborted error that
    says which files before it are committed (they stay) and how many were not read.
    Under `quarantine` a file that cannot be read at all is skipped, the others are ingested,
    and an IngestFailures error then lists every skipped file. With `jobs` > 1, that many
    processes read files at once; on the Spark engine its executors read them. Commits still
    happen here, one at a time in the files' order, so the dataset ends as a serial ingest
    leaves it (peak memory: one reader per job). Rows without a wall-clock time belong to
    `night` (`window.py`)."""
    ds = Dataset(dataset_dir, create=True)
    with ds.writing(wait):
        return _ingest(ds, paths, Reading(policy, fmt, hints, night), progress, jobs, engine)


def _ingest(
    ds: Dataset,
    paths: Sequence[Path],
    how: Reading,
    progress: Progress,
    jobs: int,
    engine: Engine,
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
    # on Spark every file is read by an executor first; else by `jobs` processes as they go
    if len(files) > 1 and engine.name is not EngineName.DUCKDB:
        progress(f"ingest 0/{len(files)}: the files read on {engine.name}'s executors")
    spread = engine.stage_files(ds, files, how) if len(files) > 1 else None
    pool = _Readers(ds, how, jobs) if spread is None and jobs > 1 and len(files) > 1 else None
    try:
        pending: Sequence[Staged | MapreportError | Future[Staged] | None] = (
            spread if spread is not None else pool.submit(files) if pool else [None] * len(files)
        )
        for i, (f, job) in enumerate(zip(files, pending, strict=True), 1):
            progress(f"ingest {i}/{len(files)} {f}")
            try:
                if job is None:
                    results.append(commit_staged(ds, how.stage(ds, f)))
                elif pool is not None and isinstance(job, Future):
                    results.append(commit_staged(ds, pool.result(i - 1)))
                else:
                    results.append(commit_staged(ds, _staged(job)))
            except ReaderKilled as e:
                failures.append(e)  # never the policy's: the file may be fine, the machine not
            except InputError as e:
                if how.policy != "quarantine":
                    raise IngestAborted(results, e, len(files) - i) from None
                failures.append(e)
    finally:
        if pool is not None:
            pool.shutdown()
        if pool is not None or spread is not None:
            ds.recover()  # files staged after a fatal error are not committed
    if failures:
        raise IngestFailures(results, failures)
    return results


class ReaderKilled(InputError):
    """A file whose reader process was killed (by the out-of-memory killer, say) on its try
    in the shared pool and again when read alone in a fresh process: not ingested."""


class _Readers:
    """`--jobs` reader processes. When one is killed, every file not yet read is handed to a
    fresh pool of one process (the dead pool's futures all fail, whichever file killed it),
    where a file that kills its reader again is the one that did: it is reported by name,
    and the files after it go on in another fresh process. Files read before stay read."""

    def __init__(self, ds: Dataset, how: Reading, jobs: int) -> None:
        self.ds, self.how, self.jobs = ds, how, jobs
        self.files: list[Path] = []
        self.futures: list[Future[Staged]] = []
        self.pool = self._pool(jobs)
        self.careful = False
        """True once a reader was killed: one process at a time from then on."""

    def _pool(self, workers: int) -> ProcessPoolExecutor:
        from concurrent.futures import ProcessPoolExecutor  # --jobs only: one file reads here

        return ProcessPoolExecutor(
            max_workers=workers,
            mp_context=spawn_context(),
            initializer=_reader_process,
            initargs=(self.ds,),  # the dataset and its log go to each process once
        )

    def submit(self, files: list[Path]) -> list[Future[Staged]]:
        """Every file handed to the pool, in order."""
        self.files = list(files)
        self.futures = [self.pool.submit(_stage, f, self.how) for f in self.files]
        return list(self.futures)

    def result(self, i: int) -> Staged:
        """File i staged, its reader's error raised here, or ReaderKilled."""
        from concurrent.futures.process import BrokenProcessPool

        while True:
            try:
                return self.futures[i].result()
            except BrokenProcessPool:
                if self.careful:  # one process, file i the one it was reading
                    self._restart(i + 1)
                    raise ReaderKilled(
                        self.files[i],
                        None,
                        None,
                        "its reader process was killed while reading it, once among "
                        f"{self.jobs} readers and again alone (out of memory? see the system "
                        "log): not ingested; the other files were",
                    ) from None
                self.careful = True
                self._restart(i)

    def _restart(self, first: int) -> None:
        """A fresh one-process pool for files `first` onwards."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.pool = self._pool(1)
        for j in range(first, len(self.files)):
            self.futures[j] = self.pool.submit(_stage, self.files[j], self.how)

    def shutdown(self) -> None:
        """Stop the readers (files not yet read are not read)."""
        self.pool.shutdown(wait=True, cancel_futures=True)


def _staged(job: Staged | MapreportError | Future[Staged]) -> Staged:
    """A file staged elsewhere (its reader's error raised here, as a serial read raises it)."""
    if isinstance(job, MapreportError):
        raise job
    return job.result() if isinstance(job, Future) else job


_READER_DATASET: list[Dataset] = []
"""In an `ingest --jobs` reader process: the dataset it stages for."""


def _reader_process(ds: Dataset) -> None:
    """Initialise a reader process: its dataset, and no helper processes (the jobs already
    use the cores)."""
    helper.disable()
    _READER_DATASET.append(ds)


def _stage(path: Path, how: Reading) -> Staged:
    """Stage one file in a reader process."""
    return how.stage(_READER_DATASET[0], path)


class IngestFailures(InputError):
    """Files that could not be read at all under the quarantine policy; the rest went in."""

    def __init__(self, results: list[IngestResult], failures: list[InputError]):
        self.results = results
        self.failures = failures
        self.outcomes: list[SliceOutcome] = []
        super().__init__(failures[0].path, failures[0].line, failures[0].field, failures[0].reason)

    def message(self) -> str:
        """All failed files, one line each (the list of known formats once, at the end)."""
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        """The heading, one line per failed file, the known formats: a file's name that holds
        a line break stays inside its line."""
        known = ""
        lines = []
        for f in self.failures:
            text = f.message()
            head, sep, tail = text.partition(" (known: ")
            if sep:
                text, known = head, "known formats: " + tail.rstrip(")")
            lines.append("  " + text)
        return [
            f"{len(self.failures)} file(s) could not be read:",
            *lines,
            *([known] if known else []),
        ]


class IngestAborted(InputError):
    """The first bad file under the abort policy: its one-line error, then what the command
    had committed before it (those files stay in the dataset) and what it did not read."""

    def __init__(self, results: list[IngestResult], error: InputError, unread: int):
        self.results = results
        self.error = error
        self.unread = unread
        super().__init__(error.path, error.line, error.field, error.reason)

    def message(self) -> str:
        """The file's error and, on a second line, what stays committed."""
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        """The bad file's line; with other files in the command, a second line counting those
        committed before it (they stay), already in, skipped, and not read after it."""
        if not self.results and not self.unread:
            return [self.error.message()]
        counts = {
            "committed before it (they stay in the dataset)": "ingested",
            "already in the dataset": "unchanged",
            "skipped (not telemetry)": "skipped",
        }
        parts = [f"{sum(r.status == s for r in self.results)} {what}" for what, s in counts.items()]
        said = [p for p in parts if not p.startswith("0 ")] or [parts[0]]
        return [
            self.error.message(),
            f"ingest stopped at this file: {', '.join(said)}; {self.unread} after it not read",
        ]
