"""Ingestors: a registry of readers (name -> reader), detection by sniffing, and the per-file
ingest that stages a file's rows and commits them atomically to the dataset."""

from __future__ import annotations

import gc
import gzip
import shutil
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mapreport.core.errors import ErrorPolicy, InputError, MapreportError
from mapreport.core.records import replace
from mapreport.core.window import UNDATED
from mapreport.ingest.aiperf import AiperfReader
from mapreport.ingest.aiperf_gpu import AiperfGpuReader
from mapreport.ingest.aiperf_summary import AiperfSummaryReader
from mapreport.ingest.base import FileSniffer, Head, Reader
from mapreport.ingest.capture_details import CaptureDetailsReader
from mapreport.ingest.digest import Digest, file_sha256
from mapreport.ingest.inductor_autotune import InductorAutotuneReader
from mapreport.ingest.kineto import KinetoReader
from mapreport.ingest.mlperf_detail import MlperfDetailReader
from mapreport.ingest.mlperf_summary import MlperfSummaryReader
from mapreport.ingest.mlperf_system import MlperfSystemReader
from mapreport.ingest.model_analyzer import ModelAnalyzerReader
from mapreport.ingest.native import NATIVE_READERS
from mapreport.ingest.otlp import OtlpReader
from mapreport.ingest.perf_analyzer import PerfAnalyzerReader
from mapreport.ingest.prometheus import PrometheusReader
from mapreport.ingest.records import TRUNCATED, read_head
from mapreport.ingest.sidecars import Sidecar, sidecar_of
from mapreport.ingest.torch_trace import TorchTraceReader
from mapreport.ingest.triton_autotune import TritonAutotuneReader
from mapreport.ingest.triton_trace import TritonTraceReader
from mapreport.ingest.trtexec import TrtexecReader
from mapreport.ingest.tvm import TvmReader
from mapreport.ingest.xla_trace import XlaTraceReader, XplaneReader

if TYPE_CHECKING:
    from mapreport.dataset.log import LogEntry
    from mapreport.dataset.store import Dataset

_ALL: tuple[Reader, ...] = (
    XlaTraceReader(),  # before Kineto's: both are Chrome traces, this one names XLA planes
    XplaneReader(),
    KinetoReader(),
    TorchTraceReader(),
    TrtexecReader(),
    TvmReader(),
    InductorAutotuneReader(),
    TritonAutotuneReader(),
    ModelAnalyzerReader(),
    PerfAnalyzerReader(),
    AiperfReader(),
    AiperfGpuReader(),
    AiperfSummaryReader(),
    OtlpReader(),
    MlperfSummaryReader(),
    MlperfDetailReader(),
    MlperfSystemReader(),
    TritonTraceReader(),
    CaptureDetailsReader(),
    *NATIVE_READERS,
    PrometheusReader(),
)
READERS: dict[str, Reader] = {r.name: r for r in _ALL}
"""Every known format by name, in sniffing order."""


def get_reader(name: str) -> Reader:
    """The reader called `name`; a miss suggests the closest names."""
    try:
        return READERS[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, READERS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise MapreportError(
            f"unknown format {name!r}{hint} (known: {', '.join(READERS)})"
        ) from None


def detect(path: Path) -> Reader:
    """The reader whose sniffing test accepts the file's first bytes (a known file no reader
    reads, `sidecars.py`, is an error here: `identify` tells it apart)."""
    found = identify(path)
    if isinstance(found, Sidecar):
        raise InputError(path, None, None, f"not a telemetry file: {found.what}")
    return found


def identify(path: Path) -> Reader | Sidecar:
    """The reader whose sniffing test accepts the file's first bytes, else the kind of file
    recorded beside telemetry that no reader reads (skipped, not an error), else a one-line
    InputError: empty, or not recognised."""
    data, broken = read_head(path)
    head = Head(path, data)
    if data.strip():
        for reader in READERS.values():
            if reader.sniff(head):
                return reader
        if data.lstrip().startswith(b"{") and not broken:
            for reader in READERS.values():
                if isinstance(reader, FileSniffer) and reader.sniff_file(path):
                    return reader
    side = sidecar_of(path, data)
    if side is not None:
        return side
    if not data.strip():
        why = TRUNCATED if broken else "file is empty (or an empty gzip stream)"
        raise InputError(path, None, None, why)
    raise InputError(path, None, None, f"format not recognised (known: {', '.join(READERS)})")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a reader runs: readers allocate millions of
    short-lived objects and no cycles, and the collector's passes over them cost more than the
    parsing (a 297 MiB Kineto trace: 16.0 s with it, 10.8 s without)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class IngestResult(msgspec.Struct, frozen=True):
    """What ingesting one file did."""

    path: Path
    source_id: str
    format: str
    status: str
    """"ingested", "unchanged", "retired" (its rows aged out of the dataset) or "skipped" (a
    file no reader reads, `sidecars.py`: its format is the kind's name, its note what it is)."""
    rows: dict[str, int]
    rejected: int
    days: tuple[str, ...] = ()
    """The day partitions its runtime rows went into (`window.py`); empty when unchanged."""
    notes: tuple[str, ...] = ()
    """What the reader kept but could not fully read (`Sink.note`), once per file."""


class Staged(msgspec.Struct, frozen=True):
    """A file read into its staging folder, not yet committed (or found unchanged)."""

    result: IngestResult
    staging: Path | None = None
    entry: LogEntry | None = None


class Reading(msgspec.Struct, frozen=True):
    """How every file of one ingest is read: the error policy (None: each format's own), the
    format (None: sniffed), the slice hints, the night of rows without a wall-clock time."""

    policy: ErrorPolicy | None = None
    fmt: str | None = None
    hints: dict[str, str] | None = None
    night: str | None = None

    def stage(self, dataset: Dataset, path: Path) -> Staged:
        """Stage one file (`stage_file`), in this process or any other."""
        return stage_file(dataset, path, self.policy, self.fmt, self.hints, self.night)


def ingest_file(
    dataset: Dataset,
    path: Path,
    policy: ErrorPolicy | None = None,
    fmt: str | None = None,
    hints: dict[str, str] | None = None,
    night: str | None = None,
) -> IngestResult:
    """Ingest one file: skip it when its content is already in, else stage and commit it.

    Without a policy the reader's default applies: `abort` for the native formats,
    `quarantine` for TORCH_TRACE logs (a corrupted record is counted, not fatal)."""
    return commit_staged(dataset, stage_file(dataset, path, policy, fmt, hints, night))


def stage_file(
    dataset: Dataset,
    path: Path,
    policy: ErrorPolicy | None = None,
    fmt: str | None = None,
    hints: dict[str, str] | None = None,
    night: str | None = None,
) -> Staged:
    """Everything of ingesting a file but the commit: it may run in another process. Rows
    without a wall-clock time go to the day partition of `night` (else `undated`)."""
    # the sink and the store (Arrow's compute, Parquet) load only when a file is read, so
    # listing and detecting formats stays light
    from mapreport.dataset.log import LogEntry
    from mapreport.dataset.store import Dataset
    from mapreport.ingest.sink import Sink

    path = path.resolve()
    if not path.is_file():
        raise InputError(path, None, None, "no such file")
    st = path.stat()
    same = dataset.same_file(str(path), st.st_size, st.st_mtime_ns)
    if same is not None:
        return Staged(IngestResult(path, same.source_id, same.format, "unchanged", same.rows, 0))
    # sniffed before the hash: a file no reader reads is neither hashed nor kept
    reader = get_reader(fmt) if fmt else identify(path)
    if isinstance(reader, Sidecar):
        return Staged(IngestResult(path, "", reader.name, "skipped", {}, 0, notes=(reader.what,)))
    if dataset.may_hold(st.st_size):  # the hash decides whether the file is read at all
        sha = file_sha256(path)
        known = dataset.find(sha)
        if known is not None:
            result = IngestResult(path, known.source_id, known.format, "unchanged", known.rows, 0)
            return Staged(result)
        if dataset.retired(sha):  # its rows aged out (run.retain_days): not read back in
            return Staged(IngestResult(path, sha[:20], "", "retired", {}, 0))
        digest = Digest.of(sha)
    else:  # new content: hashed while it is read
        digest = Digest.start(path)
    staging = dataset.staging_dir()
    chosen = policy or reader.default_policy
    sink = Sink(staging, digest, path, chosen, dict(hints or {}), night or UNDATED)
    try:
        with gc_paused():
            try:
                reader.read(path, sink)
            except (EOFError, zlib.error, gzip.BadGzipFile) as e:
                # readers that read a document whole cannot keep what came before the break
                raise InputError(
                    path, None, None, f"truncated or corrupt gzip stream: {e}"
                ) from None
        sink.enforce_unique()
        rows = sink.close()
        sha, source_id = digest.sha256, digest.source_id
    except BaseException:
        digest.cancel()
        sink.abandon()  # writes in flight finish before their folder goes
        shutil.rmtree(staging, ignore_errors=True)
        raise
    entry = LogEntry(
        source_id=source_id,
        path=str(path),
        format=reader.name,
        sha256=sha,
        size_bytes=st.st_size,
        mtime_ns=st.st_mtime_ns,
        night=night,
        ingested_at=datetime.now(UTC).isoformat(timespec="microseconds"),
        rows=rows,
        rejected=sink.rejected,
        rejections=sink.rejections,
        supersedes=(),
        files=Dataset.staged_files(staging),
    )
    days = Dataset.staged_days(staging)
    result = IngestResult(
        path, source_id, reader.name, "ingested", rows, sink.rejected, days, tuple(sink.notes)
    )
    return Staged(result, staging, entry)


def commit_staged(dataset: Dataset, staged: Staged) -> IngestResult:
    """Commit a staged file: it supersedes the live versions of its path; a file of the same
    content committed meanwhile (by a parallel reader) makes it unchanged instead."""
    entry, staging = staged.entry, staged.staging
    if entry is None or staging is None:
        return staged.result
    known = dataset.find(entry.sha256)
    if known is not None:
        shutil.rmtree(staging, ignore_errors=True)
        r = staged.result
        return IngestResult(r.path, known.source_id, known.format, "unchanged", known.rows, 0)
    # its own id too when a source whose files were lost is read again: never superseded
    previous = tuple(s for s in dataset.versions(entry.path) if s != entry.source_id)
    dataset.commit(staging, replace(entry, supersedes=previous))
    return staged.result
