"""Record streams from the native containers: JSON Lines (optionally gzip), CSV and Parquet.

Every stream yields `(line, record)` pairs with 1-based line (or row) numbers and never holds
more than one Parquet batch or one line in memory. A decoding failure raises InputError naming
the file and line.
"""

from __future__ import annotations

import csv
import gzip
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar, cast

import msgspec

from mapreport.core.errors import InputError
from mapreport.ingest.gunzip import Gunzip, Spooled

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

Container = Literal["jsonl", "csv", "parquet"]

MAX_LINE_BYTES = 4 * 1024 * 1024
"""A native record longer than this is rejected before it is decoded (resource limit)."""

PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"


class BadRecord(NamedTuple):
    """A line or row that could not be decoded; readers pass it to `Sink.reject`."""

    field: str | None
    reason: str
    raw: bytes | str


T = TypeVar("T")
R = TypeVar("R")


class JsonDecoder(Generic[T]):
    """msgspec's JSON decoder, with one more kind of malformed input: a value nested deeper
    than Python's recursion limit allows (100,000 brackets) is a DecodeError like any other,
    not a RecursionError. Every reader decodes JSON through it."""

    def __init__(self, type: Any = Any) -> None:
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(type)

    def decode(self, data: bytes | bytearray | memoryview | str) -> T:
        """The decoded value; DecodeError when `data` is not such a value."""
        try:
            return self._decoder.decode(data)
        except RecursionError:
            raise msgspec.DecodeError("JSON nested too deeply") from None


TRUNCATED = "truncated or corrupt gzip stream; the rest of the file is unreadable"


def open_bytes(path: Path, ahead: bool = False, spool: Path | None = None) -> IO[bytes]:
    """Open a file for reading, transparently decompressing gzip (detected by magic bytes);
    `ahead`: a thread decompresses ahead of the reader (`gunzip.Gunzip`: read and close only,
    for readers that stream a large file in blocks); with `spool` too, into that plain file
    (`gunzip.Spooled`, which a second process can read)."""
    fh = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    magic = fh.read(2)
    fh.seek(0)
    if magic == GZIP_MAGIC:
        if ahead and spool is not None:
            return cast(IO[bytes], Spooled(fh, spool))
        stream = Gunzip(fh) if ahead else gzip.GzipFile(fileobj=fh, mode="rb")
        return cast(IO[bytes], stream)
    return fh


HEAD_CHUNK = 4096
"""Bytes read at a time while sniffing: a gzip cut short keeps what came before the cut."""


def read_head(path: Path, size: int = 65536) -> tuple[bytes, bool]:
    """The first `size` bytes of a file, decompressed if gzip, and whether the stream broke
    before them (truncated or corrupt): the bytes are those that came before the break."""
    out = bytearray()
    try:
        with open_bytes(path) as fh:
            while len(out) < size and (chunk := fh.read(min(HEAD_CHUNK, size - len(out)))):
                out += chunk
    except (OSError, EOFError, zlib.error):
        return bytes(out), True
    return bytes(out), False


def head_bytes(path: Path, size: int = 65536) -> bytes:
    """The first `size` bytes of a file, decompressed if gzip (`read_head` without the break)."""
    return read_head(path, size)[0]


def container_of(path: Path, head: bytes) -> Container | None:
    """Which native container a file is, from its first bytes (and its name for CSV)."""
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        return "jsonl"
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".csv", ".tsv")) and b"\n" in head:
        return "csv"
    return None


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Decode a JSON Lines file line by line; blank lines are skipped, bad ones are BadRecord."""
    decoder: JsonDecoder[Any] = JsonDecoder()
    for lineno, raw in iter_jsonl_raw(path):
        if isinstance(raw, BadRecord):
            yield lineno, raw
            continue
        try:
            yield lineno, decoder.decode(raw)
        except msgspec.DecodeError as e:
            yield lineno, BadRecord(None, f"invalid JSON: {e}", raw[:2000])


def accepted(stream: Iterable[tuple[int, R | BadRecord]], sink: Sink) -> Iterator[tuple[int, R]]:
    """The decoded records of a stream; each BadRecord goes to `sink.reject` by its line."""
    for line, rec in stream:
        if isinstance(rec, BadRecord):
            sink.reject(line, rec.field, rec.reason, rec.raw)
        else:
            yield line, rec


BATCH_BYTES = 64 << 20
"""Line bytes a batch of `iter_jsonl_batches` holds at most, whatever its line count."""


def iter_jsonl_batches(path: Path, size: int) -> Iterator[list[tuple[int, bytes | BadRecord]]]:
    """`iter_jsonl_raw` in lists of up to `size` lines and BATCH_BYTES of them: a count of
    lines alone bounded nothing where each line may be MAX_LINE_BYTES (an 8.9 MB gzip of 1 MiB
    lines held 20 GB before the machine killed the ingest)."""
    batch: list[tuple[int, bytes | BadRecord]] = []
    held = 0
    for item in iter_jsonl_raw(path):
        batch.append(item)
        held += len(item[1]) if isinstance(item[1], bytes) else 0
        if len(batch) >= size or held >= BATCH_BYTES:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def bounded_lines(fh: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line) of a byte stream, each line at most MAX_LINE_BYTES; a longer one
    is None, its rest skipped without being held (a 6 GiB line costs time, not memory)."""
    lineno = 0
    while True:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the line
                raw = fh.readline(MAX_LINE_BYTES)
            yield lineno, None
            continue
        yield lineno, raw


LONG_LINE = f"line longer than {MAX_LINE_BYTES} bytes"


def iter_jsonl_raw(path: Path) -> Iterator[tuple[int, bytes | BadRecord]]:
    """The non-blank lines of a JSON Lines file, undecoded, with their line numbers; an
    over-long line or a truncated gzip stream is a BadRecord."""
    lineno = 0
    with open_bytes(path) as fh:
        try:
            for lineno, raw in bounded_lines(fh):
                if raw is None:
                    yield lineno, BadRecord(None, LONG_LINE, b"")
                elif raw.strip():
                    yield lineno, raw
        except (EOFError, zlib.error, gzip.BadGzipFile):
            yield lineno + 1, BadRecord(None, TRUNCATED, b"")


_LONG = "\ud800"
"""The line `_text_lines` gives for a physical line over MAX_LINE_BYTES: no decoding yields a
lone high surrogate, so the row it makes can be told from every real row."""


def _text_lines(raw: IO[bytes]) -> Iterator[str]:
    """Physical lines decoded as UTF-8; undecodable bytes become lone surrogates, so the row
    that holds them can be rejected with its own line number. A line over MAX_LINE_BYTES is
    skipped without being held and stands as `_LONG`."""
    while True:
        line = raw.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = raw.readline(MAX_LINE_BYTES)
            yield _LONG + "\n"
            continue
        yield line.decode("utf-8", errors="surrogateescape")


def _has_undecodable(cells: list[str]) -> bool:
    return any("\udc80" <= ch <= "\udcff" for cell in cells for ch in cell)


def _rows(reader: Any) -> Iterator[tuple[int, list[str] | BadRecord]]:
    """The rows of a csv reader; a row the csv module refuses (a cell over its field limit)
    is a BadRecord and the rows after it are read on."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield reader.line_num, BadRecord(None, f"bad CSV: {e}", b"")
            continue
        if row and row[0].startswith(_LONG):
            yield reader.line_num, BadRecord(None, f"line longer than {MAX_LINE_BYTES} bytes", b"")
            continue
        yield reader.line_num, row


def iter_csv(path: Path) -> Iterator[tuple[int, dict[str, str] | BadRecord]]:
    """Read a CSV file with a header row; each row is a dict of strings (line 1 is the header).
    Every row is yielded, as a record or a BadRecord: none after a bad one is lost."""
    with open_bytes(path) as raw:
        reader = csv.reader(_text_lines(raw))
        rows = _rows(reader)
        try:
            line, header = next(rows, (0, []))
            if isinstance(header, BadRecord):
                yield line, BadRecord(None, f"header: {header.reason}; the file is unreadable", b"")
                return
            if not header:
                return
            if _has_undecodable(header):
                yield 1, BadRecord(None, "header is not UTF-8; the file is unreadable", b"")
                return
            for line, row in rows:
                if isinstance(row, BadRecord):
                    yield line, row
                    continue
                if not row:
                    continue
                if _has_undecodable(row):
                    yield line, BadRecord(None, "not UTF-8", ",".join(row)[:2000])
                    continue
                if len(row) != len(header):
                    reason = f"row has {len(row)} cells, the header has {len(header)}"
                    yield line, BadRecord(None, reason, ",".join(row)[:2000])
                    continue
                yield line, dict(zip(header, row, strict=True))
        except (EOFError, zlib.error, gzip.BadGzipFile):
            yield reader.line_num + 1, BadRecord(None, TRUNCATED, b"")


def csv_header(path: Path) -> list[str]:
    """The header cells of a CSV file (empty when it has none or it is not UTF-8)."""
    try:
        with open_bytes(path) as raw:
            first = raw.readline(MAX_LINE_BYTES).decode("utf-8")
        return next(csv.reader([first]), [])
    except (UnicodeDecodeError, csv.Error, OSError, EOFError, zlib.error):
        return []


def iter_parquet(path: Path, batch_rows: int = 65536) -> Iterator[tuple[int, dict[str, Any]]]:
    """Read a Parquet file batch by batch; row numbers count from 1."""
    try:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        row = 0
        for batch in pf.iter_batches(batch_size=batch_rows):
            for rec in batch.to_pylist():
                row += 1
                yield row, rec
    except (OSError, ValueError) as e:
        raise InputError(path, None, None, f"unreadable Parquet: {e}") from None


def parquet_columns(path: Path) -> list[str]:
    """Column names of a Parquet file; InputError when its footer cannot be read."""
    try:
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    except (OSError, ValueError) as e:
        raise InputError(
            path, None, None, f"unreadable Parquet (truncated or corrupt): {e}"
        ) from None


def iter_records(path: Path, container: Container) -> Iterator[tuple[int, Any]]:
    """Records of a native file in its container, with their line numbers."""
    if container == "jsonl":
        return iter_jsonl(path)
    if container == "csv":
        return iter_csv(path)
    return iter_parquet(path)


class Memo(dict[bytes, str | None]):
    """`fn(raw)` per distinct raw JSON text, computed on first sight (files repeat a few shapes
    and launch geometries). Past `limit` entries it starts over, so a file of all-distinct
    values costs time, never unbounded memory."""

    def __init__(self, fn: Callable[[bytes], str | None], limit: int = 100_000) -> None:
        super().__init__()
        self.fn = fn
        self.limit = limit

    def __missing__(self, key: bytes) -> str | None:
        if len(self) >= self.limit:
            self.clear()
        value = self[key] = self.fn(key)
        return value
