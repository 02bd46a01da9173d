"""mapreport's Python API (docs/api.md): open a dataset as the command line reads it
(committed sources only, the same window options), take any canonical table of a window or a
slice as a pandas DataFrame or an Arrow table, analyse a slice into the `SliceResult` its
report is written from, read a findings.json back as typed values, and compare two datasets
(and read a compare.json back as typed values).

    from mapreport.run import api as mr
    ds = mr.open_dataset("demo/dataset", date="2026-11-28")
    ds.table("request", "bert-base")        # a pandas DataFrame
    ds.findings("bert-base").tables()["per_shape"]

Errors are `MapreportError`s with a one-line message (a missing dataset, an unknown table or
slice, a bad window)."""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pyarrow as pa

from mapreport.analysis import RunKey, analyze_slice, list_slices
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.errors import DatasetError, UsageError
from mapreport.core.schema import TABLES
from mapreport.core.window import Window
from mapreport.dataset.store import Dataset
from mapreport.run.api_compare import CompareFile, read_compare
from mapreport.run.api_findings import Findings, findings_of, read_findings
from mapreport.run.api_tables import REPORT_TABLES, arrow_table, flat
from mapreport.run.api_window import report_window
from mapreport.run.comparing import Compared, compare_runs
from mapreport.run.config import Config, default_config, load_config
from mapreport.run.recording import inputs_digest, review_of, revision_of, stored_history
from mapreport.run.reporting import slice_candidates

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

__all__ = [
    "REPORT_TABLES",
    "CompareFile",
    "Compared",
    "Findings",
    "OpenDataset",
    "SliceResult",
    "compare",
    "compare_tables",
    "open_dataset",
    "read_compare",
    "read_findings",
]


class SliceName(msgspec.Struct, frozen=True):
    """A slice of a dataset: a workload, and a slice of it ("" for the whole workload)."""

    workload: str
    slice: str

    def __str__(self) -> str:
        return f"{self.workload}/{self.slice}" if self.slice else self.workload


class OpenDataset:
    """A dataset read over one window, as `mapreport report` reads it (`open_dataset`)."""

    def __init__(self, path: Path, window: Window, config: Config) -> None:
        self.dataset = Dataset(path)
        self.window = window
        self.config = config
        self._cons: dict[str | None, duckdb.DuckDBPyConnection] = {}

    @property
    def path(self) -> Path:
        """The dataset's folder."""
        return self.dataset.root

    def connection(self, workload: str | None = None) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection whose views (one per canonical table) hold the window's rows
        of committed sources, of one workload or of all; made once and kept."""
        if workload not in self._cons:
            self._cons[workload] = self.dataset.connect(workload, self.window)
        return self._cons[workload]

    def slices(self) -> list[SliceName]:
        """Every slice with data in the window, as `report` lists them."""
        return [SliceName(w, s) for w, s in list_slices(self.connection())]

    def resolve(self, name: str) -> list[SliceName]:
        """The slices `name` means (`workload` for all its slices, or `workload/slice`), as
        `report --slice` reads it; one it does not name is a one-line UsageError."""
        return self._match(name)[1]

    def _match(self, name: str) -> tuple[str | None, list[SliceName]]:
        """The slice `name` names (None: every slice of its workload) and the slices it
        means."""
        for workload, slice_ in slice_candidates(name):
            found = [
                SliceName(w, s)
                for w, s in list_slices(self.connection(workload))
                if w == workload and slice_ in (None, s)
            ]
            if found:
                return slice_, found
        held = ", ".join(str(s) for s in self.slices()) or "none"
        raise UsageError(f"no slice {name!r} in {self.path} in this window (slices: {held})")

    def one(self, name: str) -> SliceName:
        """The one slice `name` means (a workload with several slices must name one)."""
        found = self.resolve(name)
        if len(found) > 1:
            raise UsageError(
                f"{name!r} holds {len(found)} slices ({', '.join(map(str, found))}); name one"
            )
        return found[0]

    def arrow(self, table: str, slice: str | None = None) -> pa.Table:
        """A canonical table's rows in the window, as an Arrow table: of every workload, or
        of the workload `slice` names; of `workload/slice`, where the table has a `slice`
        column, the slice's own rows and its workload's that name no slice (`request`: its
        own rows only)."""
        if table not in TABLES and table != "plan_version":
            known = ", ".join([*TABLES, "plan_version"])
            raise UsageError(f"no table {table!r} (tables: {known})")
        if slice is None:
            return self.connection().sql(f"SELECT * FROM {table}").to_arrow_table()
        named, found = self._match(slice)
        workload = found[0].workload
        con = self.connection(workload)
        columns = {c[0] for c in con.execute(f"SELECT * FROM {table} LIMIT 0").description}
        where, args = "true", {}
        if "workload" in columns:
            where, args = "workload = $w", {"w": workload}
        if named is not None and "slice" in columns:
            same = "slice = $s" if table == "request" else "slice IN ($s, '')"
            where, args = f"{where} AND {same}", args | {"s": named}
        return con.sql(f"SELECT * FROM {table} WHERE {where}", params=args).to_arrow_table()

    def table(self, table: str, slice: str | None = None) -> pd.DataFrame:
        """A canonical table's rows in the window (of a slice, as `arrow` chooses them), as a
        pandas DataFrame."""
        return _frame(self.arrow(table, slice))

    def sql(self, query: str, workload: str | None = None) -> pd.DataFrame:
        """A query over the window's views (each canonical table by its name) as a DataFrame."""
        rows = self.connection(workload).sql(query)
        return _frame(rows.to_arrow_table())

    def analyze(self, slice: str) -> SliceResult:
        """The analysis of one slice over the window, as its report is written from it (the
        configuration's thresholds and SLA, the recorded history of earlier nights)."""
        name = self.one(slice)
        w, s = name.workload, name.slice
        stored = stored_history(self.dataset, w, s)
        now = datetime.now(UTC)
        run_date = self.window.night or now.date().isoformat()
        inputs = inputs_digest(self.dataset, set(self.dataset.live()), w, self.window)
        key = RunKey(
            "api",
            run_date,
            self.config.baseline_run,
            self.window,
            inputs,
            revision_of(stored, run_date, inputs),
            now.isoformat(timespec="seconds"),
        )
        review = review_of(self.config, w, s)
        th = self.config.thresholds
        return analyze_slice(self.connection(w), w, s, th, review, stored, key)

    def findings(self, slice: str) -> Findings:
        """The findings document of one slice (what its report's findings.json would hold),
        as typed values; `.tables()` gives the tables the report shows."""
        from mapreport.report.findings import findings, strict

        r = self.analyze(slice)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        return findings_of(strict(findings(r, now)), f"{self.path}:{slice}")

    def close(self) -> None:
        """Close the connections (they also close when the object is collected)."""
        for con in self._cons.values():
            con.close()
        self._cons.clear()

    def __enter__(self) -> OpenDataset:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def open_dataset(
    path: str | Path,
    *,
    date: str | date | None = None,
    window: str | None = None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    timezone: str | None = None,
    config: str | Path | None = None,
) -> OpenDataset:
    """A dataset read as `mapreport report` reads it with the same options (`date`,
    `window`, `since`, `until`; everything without them), with a run configuration's
    thresholds, SLA targets and time zone."""
    cfg = load_config(Path(config)) if config else default_config()
    tz = timezone or cfg.timezone
    span = report_window(date, window, since, until, tz)
    if not Path(path).is_dir():
        raise DatasetError(f"{path}: no such dataset folder")
    return OpenDataset(Path(path), span, cfg)


def compare(
    a: str | Path,
    b: str | Path,
    *,
    a_slice: str | None = None,
    b_slice: str | None = None,
    a_date: str | date | None = None,
    b_date: str | date | None = None,
    out: str | Path | None = None,
) -> Compared:
    """Side B compared with side A, as `mapreport compare` does (without a PDF); its
    compare.json, compare.html and evidence packs go to `out` (a new temporary folder
    without one)."""
    folder = Path(out) if out else Path(tempfile.mkdtemp(prefix="mapreport-compare-"))
    return compare_runs(
        Path(a),
        Path(b),
        folder,
        a_slice,
        b_slice,
        _day(a_date, "a_date"),
        _day(b_date, "b_date"),
        pdf=False,
    )


def _day(value: str | date | None, what: str) -> date | None:
    from mapreport.core.window import parse_date

    return value if value is None or isinstance(value, date) else parse_date(value, what)


def compare_tables(c: Compared) -> dict[str, pd.DataFrame]:
    """A comparison's rows as DataFrames: `shapes` (one per shape both sides have), `ops`
    (one per op x shape both sides' traces ran) and `tail` (the slice's quantiles)."""
    import msgspec

    def frame(rows: Any) -> pd.DataFrame:
        return _frame(arrow_table(flat(x) for x in msgspec.to_builtins(rows)))

    k = c.comparison
    return {"shapes": frame(k.shapes), "ops": frame(k.ops), "tail": frame(k.tail)}


def _frame(t: pa.Table) -> pd.DataFrame:
    """An Arrow table as a pandas DataFrame."""
    df: pd.DataFrame = t.to_pandas()
    return df
