"""A comparison's evidence packs: for the slice's pooled quantiles, every tested request shape
and every tested op x shape, each side's rows (`<id>.a.parquet`, `<id>.b.parquet`, with
`source_id` and `line`), the self-contained SQL that selects them from each side's dataset
(`<id>.sql`), and a spec (`<id>.json`: the ratio, its n and CI as compare.json states them,
each side's dataset, slice, night and files, the thresholds).

The SQL is the comparison's own selection (`compare.SAMPLES`, `compare.OP_CALLS`) with each
value written in as a literal, and the figure follows from the rows by the comparison's own
functions (`ratio_interval`, `mean_ratio`) with the same seeds. `mapreport explain ID --compare
OUT` rebuilds the SQL from the spec's parameters (never text read from the folder), reruns it
on both datasets and says whether the ratio, n and CI are the ones compare.json states.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.packs import PACK_ID, close
from mapreport.analysis.base.query import comment
from mapreport.analysis.comparing.packs import (
    GROUPED_BY,
    QUANTILE_OF,
    SIDE_ROWS,
    ComparePack,
    Figure,
    SideSpec,
)
from mapreport.core.errors import DatasetError, UsageError
from mapreport.core.files import atomic_write
from mapreport.core.window import EVERYTHING, night_window
from mapreport.dataset.store import Dataset
from mapreport.dataset.views import view_script
from mapreport.run.evidence import from_folder

FOLDER = "evidence"
"""The packs' folder inside a comparison's output folder."""


def write_packs(out: Path, done: list[ComparePack]) -> None:
    """Each pack's rows per side, its SQL and its spec under OUT/evidence (tonight's only)."""
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    keep = {p.id for p in done}
    for old in folder.iterdir():
        if old.name.split(".")[0] not in keep:
            old.unlink()
    cons: dict[tuple[str, str | None, str], duckdb.DuckDBPyConnection] = {}
    read: dict[tuple[Any, ...], _Rows] = {}
    for p in done:
        for name, side in (("a", p.a), ("b", p.b)):
            rows = _side_rows(read, cons, p, side)
            pq.write_table(rows, folder / f"{p.id}.{name}.parquet")
        atomic_write(folder / f"{p.id}.sql", _sql_file(p, cons, folder))
        spec = msgspec.json.format(msgspec.json.encode(p), indent=1)
        atomic_write(folder / f"{p.id}.json", spec)


def _sql_file(
    p: ComparePack,
    cons: dict[tuple[str, str | None, str], duckdb.DuckDBPyConnection],
    folder: Path,
) -> bytes:
    """A pack's `.sql`: per side, the statements that make its dataset's views, then its rows
    as a table (B's views replace A's), then the SELECT of the ratio from both, so plain
    DuckDB prints the figure compare.json states."""
    text = comment(f"mapreport comparison pack {p.id}: {p.subject}") + (
        "-- self-contained: each side's dataset views (its committed files by their path from "
        f"this folder), its rows (the tables {SIDE_ROWS['a']} and {SIDE_ROWS['b']}), then the "
        "ratio of the two; run it from this folder with: duckdb < FILE\n"
    )
    for name, side in (("A", p.a), ("B", p.b)):
        # by their path from the pack's folder: an output folder moved with its datasets runs
        views = from_folder(view_script(_connection(cons, side)), Path(side.dataset), folder)
        views = views or ""
        rows = f"CREATE OR REPLACE TEMP TABLE {SIDE_ROWS[name.lower()]} AS\n{p.sql(side)};\n"
        text += "\n" + comment(f"{name}: {side.dataset}") + views + rows
    text += (
        "\n-- the ratio as compare.json states it; its 95% CI, "
        f"[{p.ci[0]!r}, {p.ci[1]!r}], is a bootstrap\n"
        f"-- with the comparison's seed, which SQL does not draw: mapreport explain {p.id} "
        "--compare OUT\n"
    )
    return (text + p.figure_sql() + ";\n").encode()


class _Rows(msgspec.Struct):
    """Every row one side's packs of one kind select from (every shape's requests, or every
    op x shape's calls, of the side's files), and the row numbers of each shape (op x shape)
    in it, found when a pack first asks."""

    table: pa.Table
    groups: dict[tuple[str, ...], np.ndarray] | None = None


def _side_rows(
    read: dict[tuple[Any, ...], _Rows],
    cons: dict[tuple[str, str | None, str], duckdb.DuckDBPyConnection],
    p: ComparePack,
    side: SideSpec,
) -> pa.Table:
    """A pack's rows of one side, as its own query (`ComparePack.sql`) selects them. The side's
    rows are read once for all its packs and each pack takes its shape's: a query per pack
    scanned and sorted the side's every request once per shape, which made a comparison of
    thousands of shapes quadratic. The pack's query filters the same ordered selection by the
    same columns, so the rows and their order are the same (a pooled quantile's pack selects
    the whole of it)."""
    pooled = Figure.OP if p.figure == Figure.OP else Figure.SLICE
    files = None if side.sources is None else tuple(side.sources)
    k = (pooled, side.dataset, side.night, side.workload, side.slice, files)
    if k not in read:
        read[k] = _Rows(_connection(cons, side).sql(p.pooled_sql(side)).to_arrow_table())
    rows = read[k]
    if p.figure == Figure.SLICE:
        return rows.table
    columns = GROUPED_BY[p.figure]
    if rows.groups is None:
        rows.groups = _row_groups(rows.table, columns)
    wanted = tuple(p.shape_of(side) if c == "shape" else getattr(p, c) for c in columns)
    return rows.table.take(rows.groups.get(wanted, np.zeros(0, dtype=np.int64)))


def _row_groups(table: pa.Table, columns: tuple[str, ...]) -> dict[tuple[str, ...], np.ndarray]:
    """The row numbers (in table order) of each value of `columns`; NULLs match no pack (a
    pack's `=` never selects them)."""
    keys = list(zip(*(table[c].to_pylist() for c in columns), strict=True))
    out: dict[tuple[str, ...], list[int]] = {}
    for i, key in enumerate(keys):
        if None not in key:
            out.setdefault(key, []).append(i)
    return {key: np.asarray(rows, dtype=np.int64) for key, rows in out.items()}


def _connection(
    cons: dict[tuple[str, str | None, str], duckdb.DuckDBPyConnection],
    side: SideSpec,
) -> duckdb.DuckDBPyConnection:
    """One connection per (dataset, night, workload) a pack's side reads."""
    k = (side.dataset, side.night, side.workload)
    if k not in cons:
        window = night_window(date.fromisoformat(side.night)) if side.night else EVERYTHING
        cons[k] = Dataset(Path(side.dataset)).connect(side.workload, window)
    return cons[k]


def _values(rows: pa.Table, figure: Figure) -> np.ndarray:
    column = "dur" if figure == Figure.OP else "latency_us"
    return np.asarray(rows[column].to_numpy(zero_copy_only=False), dtype=np.float64)


def load(out: Path, pid: str) -> ComparePack:
    """A comparison's pack spec, every field checked for its type."""
    if not PACK_ID.fullmatch(pid):
        raise UsageError(
            f"{pid!r} is not an evidence pack id (12 hexadecimal digits, as compare.json's "
            "evidence fields give them)"
        )
    path = out / FOLDER / f"{pid}.json"
    if not path.is_file():
        raise UsageError(f"no evidence pack {pid!r} in {out / FOLDER}")
    try:
        p = msgspec.json.decode(path.read_bytes(), type=ComparePack, strict=True)
    except OSError as e:
        raise DatasetError(f"{path}: cannot read the pack spec: {e.strerror}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise DatasetError(f"{path}: not a usable pack spec: {str(e).splitlines()[0]}") from None
    if p.id != pid:
        raise DatasetError(f"{path}: the spec is of pack {p.id!r}, not {pid!r}")
    for side in (p.a, p.b):
        if side.night is not None:
            try:
                date.fromisoformat(side.night)
            except ValueError:
                raise DatasetError(f"{path}: night {side.night!r} is not a date") from None
    if p.figure != Figure.OP and p.quantile not in QUANTILE_OF:
        raise DatasetError(f"{path}: quantile {p.quantile!r} is not one of p50, p95, p99")
    try:
        msgspec.convert(p.thresholds, Thresholds, strict=True)
    except msgspec.ValidationError as e:
        raise DatasetError(f"{path}: thresholds: {str(e).splitlines()[0]}") from None
    return p


def explain(out: Path, pid: str) -> tuple[list[str], bool]:
    """Rerun a comparison pack's queries on both datasets and its ratio and CI from the rows:
    the lines to print and whether compare.json's figure, n and CI are reproduced."""
    p = load(out, pid)
    cons: dict[tuple[str, str | None, str], duckdb.DuckDBPyConnection] = {}
    got = []
    for side in (p.a, p.b):
        if not Path(side.dataset).is_dir():
            raise DatasetError(f"pack {pid}: dataset {side.dataset} is no longer there")
        try:
            got.append(_connection(cons, side).sql(p.sql(side)).to_arrow_table())
        except duckdb.Error as e:
            raise DatasetError(
                f"pack {pid}: its query no longer runs on {side.dataset}: {e}"
            ) from None
    xa, xb = (_values(t, p.figure) for t in got)
    n_ok = (len(xa), len(xb)) == (p.n_a, p.n_b)
    ratio, ci = p.reduce(xa, xb) if len(xa) and len(xb) else (float("nan"), (float("nan"),) * 2)
    ok = n_ok and close(ratio, p.ratio) and all(close(x, y) for x, y in zip(ci, p.ci, strict=True))
    lines = [
        f"{p.subject}: B/A {ratio:.6g} (compare.json: {p.ratio:.6g}), 95% CI "
        f"[{ci[0]:.6g}, {ci[1]:.6g}] (compare.json: [{p.ci[0]:.6g}, {p.ci[1]:.6g}]), "
        f"n {len(xa)} vs {len(xb)} (compare.json: {p.n_a} vs {p.n_b})",
        "reproduced exactly"
        if ok
        else "NOT reproduced: the datasets no longer hold what the comparison was computed from",
    ]
    for name, side, rows in (("A", p.a, got[0]), ("B", p.b, got[1])):
        files = sorted({str(f) for f in rows["source_id"].to_pylist()})
        lines.append(f"{name}: {side.dataset}, {rows.num_rows} row(s) from {len(files)} file(s)")
    lines.append(f"SQL: {out / FOLDER / (p.id + '.sql')}")
    return lines, ok
