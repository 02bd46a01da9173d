"""Where readers put canonical rows: bounded buffers flushed to the staging folder as Parquet."""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.core.files import write_parquet
from mapreport.core.schema import DAY_PARTITIONED, PARTITIONED, TABLES
from mapreport.core.window import (
    UNDATED,
    US_PER_DAY,
    WALL_CLOCK_FROM_US,
    WALL_CLOCK_UNTIL_US,
    day_of,
)
from mapreport.dataset.store import Dataset
from mapreport.ingest.digest import Digest
from mapreport.ingest.spec import MAX_MAGNITUDE, out_of_range

FLUSH_ROWS = 100_000
WRITES_IN_FLIGHT = 2
"""Staged Parquet writes queued behind the reader at most."""
_NO_HIVE = "hive_partitioning = false"
"""Staging folders are not data: a row's workload is the value it holds."""
SMALL_UNIQUE = 100_000
"""Up to this many rows, a file's keys are checked for uniqueness in Arrow; beyond, DuckDB
counts them (it spills, memory stays bounded)."""
MAX_REJECTIONS_LOGGED = 50
"""ingest_log keeps the first rejections in full; all of them land in the quarantine table."""


def beyond_range(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per value of a floating-point column: not finite, or beyond MAX_MAGNITUDE (a null is
    in range). The bound every reader's numbers pass (the sink's check, the JSON Lines fast
    path's routing); in numpy, not Arrow's compute functions, whose module costs a compile
    log's ingest 45 ms to import."""
    parts = []
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        values = np.asarray(chunk.to_numpy(zero_copy_only=False), np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(values) <= MAX_MAGNITUDE)  # NaN and inf compare false
        if chunk.null_count:
            bits = np.frombuffer(chunk.buffers()[0], np.uint8)
            valid = np.unpackbits(bits, bitorder="little")[chunk.offset : chunk.offset + len(chunk)]
            bad &= valid.astype(bool)
        parts.append(bad)
    return np.concatenate(parts) if parts else np.zeros(0, bool)


@dataclass
class Sink:
    """Collects one source file's rows, partitioned by workload, and its rejected records."""

    staging: Path
    digest: Digest | str
    """The source file's content hash, or its source id (a helper's sink, a test's)."""
    path: Path
    policy: ErrorPolicy = "abort"
    hints: dict[str, str] = field(default_factory=dict)
    """Values a format does not carry itself (workload, slice), given by the user."""
    night: str = UNDATED
    """The day partition of rows without a wall-clock time (the night the file was ingested
    for; `window.py`)."""
    part: str = ""
    """Starts the number in this sink's file names: a helper process reading part of the
    same file (`helper.py`) writes beside this one without a clash."""
    rows: Counter[str] = field(default_factory=Counter)
    rejected: int = 0
    rejections: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What a reader kept but the user should know (once per file, not per record)."""
    _buffers: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    _seq: int = 0
    _writer: ThreadPoolExecutor | None = field(default=None, repr=False)
    _writing: deque[Future[None]] = field(default_factory=deque, repr=False)
    _source_id: str | None = field(default=None, repr=False)

    @property
    def source_id(self) -> str:
        """The source id every row carries; the first use waits for the hash (`digest.py`)."""
        if self._source_id is None:
            d = self.digest
            self._source_id = d if isinstance(d, str) else d.source_id
        return self._source_id

    def add(self, table: str, line: int | None, row: dict[str, Any]) -> None:
        """Add one canonical row; provenance columns are filled in here and columns the row
        leaves out are null."""
        row["source_id"] = self.source_id
        row["line"] = line
        key = (table, (row.get("workload") or "") if table in PARTITIONED else "")
        buf = self._buffers.setdefault(key, [])
        buf.append(row)
        self.rows[table] += 1
        if len(buf) >= FLUSH_ROWS:
            self._flush(key)

    def add_table(
        self,
        table: str,
        workload: str,
        lines: pa.Array | pa.ChunkedArray,
        columns: dict[str, Any],
    ) -> None:
        """Add many rows of one workload at once, as Arrow arrays or lists per column (a
        nullable column left out is null)."""
        n = len(lines)
        if not n:
            return
        source = pa.repeat(pa.scalar(self.source_id, pa.string()), n)
        data = {**columns, "source_id": source, "line": lines}
        self.rows[table] += n
        schema = TABLES[table]
        cols = {f.name: data[f.name] if f.name in data else pa.nulls(n, f.type) for f in schema}
        self._write(table, workload, pa.table(cols, schema=schema))

    def for_part(self, part: str) -> Sink:
        """A sink for a helper process reading part of the same file: same staging folder,
        file names starting with `part`; its counts come back through `absorb`."""
        return Sink(
            self.staging, self.source_id, self.path, self.policy, dict(self.hints), self.night, part
        )

    def counts(self) -> tuple[dict[str, int], int, list[dict[str, Any]]]:
        """(rows per table, rejected, logged rejections): what `absorb` takes."""
        return dict(self.rows), self.rejected, list(self.rejections)

    def absorb(self, rows: dict[str, int], rejected: int, rejections: list[dict[str, Any]]) -> None:
        """Count a helper's rows and rejections (of lines after this sink's own) as ours."""
        self.rows.update(rows)
        self.rejected += rejected
        room = MAX_REJECTIONS_LOGGED - len(self.rejections)
        self.rejections += rejections[: max(room, 0)]

    def discard_part(self, part: str) -> None:
        """Remove what a helper staged (it failed: its part is read again here)."""
        for f in self.staging.rglob(f"{self.source_id}-{part}*.parquet"):
            f.unlink()

    def note(self, text: str) -> None:
        """Say once, for the whole file, what was kept but not fully read."""
        self.notes.append(text)

    def reject(self, line: int | None, field_name: str | None, reason: str, raw: Any) -> None:
        """A bad record: raise under the abort policy, else quarantine it and count it."""
        if self.policy == "abort":
            raise InputError(self.path, line, field_name, reason)
        self.rejected += 1
        if len(self.rejections) < MAX_REJECTIONS_LOGGED:
            self.rejections.append({"line": line, "field": field_name, "reason": reason})
        if isinstance(raw, bytes):
            text = raw.decode("utf-8", "backslashreplace")
        elif isinstance(raw, str):
            # lone surrogates (undecodable input bytes) are written back as \xNN escapes
            text = raw.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        else:
            text = repr(raw)
        self.add(
            "quarantine",
            line,
            {"field": field_name, "reason": reason, "raw": text[:2000]},
        )

    def _flush(self, key: tuple[str, str]) -> None:
        table, workload = key
        rows = self._buffers.pop(key, [])
        if not rows:
            return
        self._write(table, workload, pa.Table.from_pylist(rows, schema=TABLES[table]))

    def _in_range(self, table: str, data: pa.Table) -> pa.Table:
        """The rows whose numbers are all finite and within MAX_MAGNITUDE; every other row is
        rejected by its line and first bad column (every reader's rows pass here, so no
        reader can stage a number the analysis cannot compute with)."""
        masks = {}
        for col in data.schema:
            if pa.types.is_floating(col.type):
                this = beyond_range(data[col.name])
                if this.any():
                    masks[col.name] = this
        if not masks:
            return data
        bad = np.logical_or.reduce(list(masks.values()))
        for i in np.flatnonzero(bad):  # in row order: under abort the first bad line is named
            name = next(c for c, m in masks.items() if m[i])
            value = data[name][int(i)].as_py()
            self.reject(data["line"][int(i)].as_py(), name, out_of_range(name, value).reason, value)
        self.rows[table] -= int(bad.sum())
        return data.filter(pa.array(~bad))

    def _write(self, table: str, workload: str, data: pa.Table) -> None:
        """One staged Parquet file of `table` (in the workload's partition when it has one),
        written by a background thread: Parquet encoding and compression release the GIL, so
        they run on the second core while the reader decodes the next batch. At most
        WRITES_IN_FLIGHT batches wait, so memory stays bounded. Every row holds `workload`
        when it names one (`add` keys its buffers by it, `add_table` takes one workload's
        rows), so its dictionary is made, not found."""
        data = Dataset.as_written(table, self._in_range(table, data), workload or None)
        if data.num_rows == 0:
            return
        for day, rows in self._days(table, data):
            self._seq += 1
            name = f"{self.source_id}-{self.part}{self._seq:05d}.parquet"
            self._submit(rows, Dataset.table_path(self.staging, table, workload, name, day))

    def _days(self, table: str, data: pa.Table) -> list[tuple[str | None, pa.Table]]:
        """A runtime table's rows split by day: a wall-clock time's UTC date, else the night
        the file was ingested for. Other tables are not split (day None)."""
        column = DAY_PARTITIONED.get(table)
        if column is None:
            return [(None, data)]
        t = np.asarray(data[column].to_numpy(zero_copy_only=False), dtype=np.float64)
        with np.errstate(invalid="ignore"):
            wall = (t >= WALL_CLOCK_FROM_US) & (t < WALL_CLOCK_UNTIL_US)
        index = np.where(wall, np.floor(np.where(wall, t, 0.0) / US_PER_DAY), -1).astype(np.int64)
        first, last = int(index.min()), int(index.max())
        if first == last:  # the common case: one day, no copy
            return [(self._day_name(first), data)]
        return [
            (self._day_name(int(d)), data.filter(pa.array(index == d))) for d in np.unique(index)
        ]

    def _day_name(self, index: int) -> str:
        return self.night if index < 0 else day_of(index * US_PER_DAY)

    def _submit(self, data: pa.Table, target: Path) -> None:
        """Queue one Parquet write behind the reader."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sink-parquet")
        while len(self._writing) >= WRITES_IN_FLIGHT:
            self._writing.popleft().result()
        self._writing.append(self._writer.submit(write_parquet, data, target))

    def _drain(self) -> None:
        """Wait for every background write and end the writer thread; the first failure is
        raised (the rest are waited for too)."""
        try:
            while self._writing:
                self._writing.popleft().result()
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Stop writing: wait for writes in flight, ignoring their errors (the file failed, so
        its staging folder is about to be removed), and end the writer thread."""
        while self._writing:
            with contextlib.suppress(Exception):
                self._writing.popleft().result()
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    def enforce_unique(self, table: str = "request", key: str = "request_id") -> None:
        """Reject rows whose key repeats an earlier row of the same file (FORMATS.md: request
        ids are unique within a file). Runs over the staged Parquet with DuckDB, so it holds
        no per-row state in Python; the first occurrence is kept."""
        self.close()
        files = sorted((self.staging / table).rglob("*.parquet"))
        if not files:
            return
        if self.rows[table] <= SMALL_UNIQUE:
            # a small file: its keys counted by Arrow, without DuckDB's start-up per file
            keys = pa.concat_arrays(
                [pq.read_table(f, columns=[key])[key].combine_chunks() for f in files]
            )
            if len(set(keys.to_pylist())) == len(keys):
                return
        from mapreport.dataset.views import (
            duckdb_connection,  # DuckDB: only above Arrow's key count
        )

        con = duckdb_connection([self.staging])
        paths = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
        # the common case first: one hash aggregate (DuckDB spills it), no window over the rows
        distinct, total = con.execute(
            f"SELECT count(DISTINCT {key}), count(*) FROM read_parquet([{paths}], {_NO_HIVE})"
        ).fetchall()[0]
        if distinct == total:
            con.close()
            return
        dups = con.execute(
            f"""
            SELECT line, first_line, {key} FROM (
                SELECT {key}, line, min(line) OVER (PARTITION BY {key}) AS first_line,
                    row_number() OVER (PARTITION BY {key} ORDER BY line) AS rn
                FROM read_parquet([{paths}], {_NO_HIVE})
            ) WHERE rn > 1 ORDER BY line
            """
        ).fetchall()
        con.close()
        if not dups:
            return
        line, first, value = dups[0]
        if self.policy == "abort":
            raise InputError(
                self.path, line, key, f"duplicate {key} {value!r} (first on line {first})"
            )
        import pyarrow.compute as pc  # a file with repeated keys only

        bad = pa.array([d[0] for d in dups], pa.int64())
        for f in files:
            t = pq.read_table(f)
            keep = t.filter(pc.invert(pc.is_in(t["line"], value_set=bad)))
            if keep.num_rows != t.num_rows:
                write_parquet(keep.replace_schema_metadata(None), f)
        self.rows[table] -= len(dups)
        for line, first, value in dups:
            self.reject(line, key, f"duplicate {key} {value!r} (first on line {first})", value)
        self.close()

    def close(self) -> dict[str, int]:
        """Flush every buffer and wait for the writes; returns rows written per table."""
        for key in list(self._buffers):
            self._flush(key)
        self._drain()
        return dict(self.rows)
