"""The closed-loop history on disk: one row set per slice and night, under
`<root>/history/<table>/run_date=<date>/<slice key>.parquet` (a part of the dataset's layout,
kept beside `store.py`)."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.core.errors import DatasetError
from mapreport.core.files import write_parquet
from mapreport.core.schema import HISTORY_TABLES


class _Locked(Protocol):
    """What the history methods need of their dataset: its folder and its writer lock."""

    root: Path

    def writing(self, wait: bool = True) -> contextlib.AbstractContextManager[None]: ...


class HistoryFiles:
    """The history methods of a dataset (`store.Dataset` mixes them in)."""

    root: Path

    def write_history(
        self: _Locked,
        run_date: str,
        workload: str,
        slice_: str,
        rows: dict[str, list[dict[str, Any]]],
    ) -> None:
        """Store one slice's history rows of one nightly run under
        history/<table>/run_date=<date>/. A second run on the same date replaces the first.

        Each file is written atomically; the `history_run` file is written last, and readers
        only use runs that have one, so a run killed half-way is invisible."""
        safe = _history_key(workload, slice_)
        with self.writing():
            for table in ("history_shape", "history_action", "history_op", "history_run"):
                d = self.root / "history" / table / f"run_date={quote(run_date, safe='-')}"
                d.mkdir(parents=True, exist_ok=True)
                write_parquet(
                    pa.Table.from_pylist(rows.get(table, []), schema=HISTORY_TABLES[table]),
                    d / f"{safe}.parquet",
                )

    def history(self, table: str, workload: str, slice_: str) -> list[dict[str, Any]]:
        """Rows of a history table for one slice, from complete runs, oldest run first.

        Only this slice's files are read (one per run date, named by the slice's key)."""
        base = self.root / "history"
        name = f"{_history_key(workload, slice_)}.parquet"
        complete = {f.parent.name for f in (base / "history_run").glob(f"*/{name}")}
        files = [f for f in (base / table).glob(f"*/{name}") if f.parent.name in complete]
        if not files:
            return []
        parts = []
        for f in files:
            try:
                parts.append(pq.read_table(f, schema=HISTORY_TABLES[table]))
            except (OSError, pa.ArrowException) as e:
                raise DatasetError(
                    f"{f}: damaged history file ({str(e).splitlines()[0]}); run `mapreport "
                    f"check --dataset {self.root} --repair` to set it aside"
                ) from None
        rows = pa.concat_tables(parts).to_pylist()
        return sorted(rows, key=lambda r: (r["run_date"], r["run_id"]))

    def recorded_nights(self) -> set[str]:
        """Every run date the history holds (of any slice)."""
        base = self.root / "history" / "history_run"
        return (
            {d.name.split("=", 1)[1] for d in base.glob("run_date=*")} if base.is_dir() else set()
        )


def _history_key(workload: str, slice_: str) -> str:
    """The file name stem of one slice's history files."""
    return hashlib.sha256(f"{workload}\x1f{slice_}".encode()).hexdigest()[:16]
