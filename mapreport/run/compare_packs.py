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

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.query import SqlValue, inline
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.comparing.compare import (
    OP_CALLS,
    SAMPLES,
    Comparison,
    mean_ratio,
    ratio_interval,
    shape_seed,
)
from mapreport.core.errors import DatasetError, UsageError
from mapreport.core.files import atomic_write
from mapreport.core.window import EVERYTHING, night_window
from mapreport.dataset.store import Dataset
from mapreport.run.evidence import PACK_ID, close

FOLDER = "evidence"
"""The packs' folder inside a comparison's output folder."""


class Figure(StrEnum):
    """What a comparison pack's figure is."""

    SLICE = "slice"
    """A quantile of the slice, every shape pooled: B over A."""
    SHAPE = "shape"
    """A quantile of a request shape (p50, p95, p99): B over A."""
    OP = "op"
    """An op x shape's mean device time per call: B over A."""


QUANTILE_OF = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True)
class SideSpec:
    """Where one side's rows are: its dataset, slice, night and (chosen by environment) files."""

    dataset: str
    workload: str
    slice: str
    night: str | None
    """The UTC day (ISO) whose arrivals the side holds; None: every night."""
    sources: list[str] | None
    """The files the side was restricted to (an environment selection); None: all."""


@dataclass(frozen=True)
class ComparePack:
    """One figure of a comparison and how to reproduce it from both datasets."""

    id: str
    figure: Figure
    subject: str
    key: list[str]
    """The comparison's key (each side's workload and slice): part of every seed."""
    shape: str
    """The request shape (SHAPE), the op's input dims (OP), '' (SLICE)."""
    quantile: str
    """`p95`, `p99` (SLICE, SHAPE); '' (OP)."""
    op: str
    types: str
    a: SideSpec
    b: SideSpec
    ratio: float
    ci: list[float]
    n_a: int
    n_b: int
    thresholds: dict[str, Any]
    basis: str = "end_to_end"
    """`span`: every request's latency is its span (`compare.SAMPLES`' `$span`)."""
    blocks: list[int] = field(default_factory=lambda: [1, 1])
    """The block length each side's latencies were resampled in (SLICE, SHAPE)."""
    shape_b: str = ""
    """B's own name of the shape, where B names it otherwise (`compare_names`); '': the same."""

    def shape_of(self, side: SideSpec) -> str:
        """The shape as the side's own rows name it."""
        return self.shape_b if self.shape_b and side is self.b else self.shape

    def sql(self, side: SideSpec) -> str:
        """The self-contained query of one side's rows, built from the parameters alone."""
        return self._sql(side, pooled=False)

    def pooled_sql(self, side: SideSpec) -> str:
        """The query of every row one side's packs of this kind select from (every shape's
        requests, or every op x shape's calls): `sql` is it filtered to this pack's."""
        return self._sql(side, pooled=True)

    def _sql(self, side: SideSpec, pooled: bool) -> str:
        start, end = _bounds(side)
        bound: dict[str, SqlValue] = {
            "w": side.workload,
            "s": side.slice,
            "start": start,
            "end": end,
            "shape": self.shape_of(side),
            "op": self.op,
            "types": self.types,
            "span": self.basis == "span",
        }
        if self.figure == Figure.OP:
            select = f"SELECT * FROM ({OP_CALLS})"
            if not pooled:
                select += " WHERE op = $op AND shape = $shape AND types = $types"
        else:
            select = f"SELECT * FROM ({SAMPLES})"
            if self.figure == Figure.SHAPE and not pooled:
                select += " WHERE shape = $shape"
        if side.sources is not None:
            bound["ids"] = side.sources
            select = f"SELECT * FROM ({select}) WHERE list_contains($ids, source_id)"
        if self.figure != Figure.OP:  # in time order: the block bootstrap reads it so
            select += " ORDER BY at_us, source_id, line"
        return inline(select, bound)

    def reduce(self, a: np.ndarray, b: np.ndarray) -> tuple[float, tuple[float, float]]:
        """The ratio and CI from each side's values, as the comparison computed them."""
        th = msgspec.convert(self.thresholds, Thresholds, strict=True)
        if self.figure == Figure.OP:
            seed = seed_for(th.seed, *self.key, self.op, self.shape, self.types, "op")
            ratio, ci, _ = mean_ratio(a, b, th.bootstrap_resamples, seed)
        else:
            q, bl = QUANTILE_OF[self.quantile], (self.blocks[0], self.blocks[1])
            seed = seed_for(th.seed, *self.key, self.quantile, "slice")
            if self.figure == Figure.SHAPE:
                seed = shape_seed(th.seed, tuple(self.key), self.shape, self.quantile)
            ratio, ci, _ = ratio_interval(a, b, q, th.bootstrap_resamples, seed, bl)
        return ratio, ci


def _bounds(side: SideSpec) -> tuple[float | None, float | None]:
    if side.night is None:
        return None, None
    w = night_window(date.fromisoformat(side.night))
    return w.start_us, w.end_us


def _pack(fields: dict[str, Any]) -> ComparePack:
    """A pack with its id: the hash of everything that defines its figure."""
    body = json.dumps(fields, sort_keys=True, default=str).encode()
    return ComparePack(id=hashlib.sha256(body).hexdigest()[:12], **fields)


def packs(
    c: Comparison,
    a: SideSpec,
    b: SideSpec,
    key: tuple[str, ...],
    th: Thresholds,
    ops: bool = True,
) -> list[ComparePack]:
    """A pack per pooled quantile, per tested shape and (`ops`: both sides' op times are device
    time, which `OP_CALLS` selects) per tested op x shape."""
    common = {"key": list(key), "a": a, "b": b, "thresholds": asdict(th), "basis": c.basis.value}
    b_names = {a_name: b_name for b_name, a_name in c.renamed}

    def one(
        figure: Figure,
        subject: str,
        ratio: float,
        ci: tuple[float, float],
        n: tuple[int, int],
        shape: str = "",
        quantile: str = "",
        op: str = "",
        types: str = "",
        blocks: tuple[int, int] = (1, 1),
    ) -> ComparePack:
        what = {"figure": figure, "subject": subject, "shape": shape, "quantile": quantile}
        if figure == Figure.SHAPE and shape in b_names:  # B's rows name it otherwise
            what["shape_b"] = b_names[shape]
        return _pack(
            {**common, **what, "op": op, "types": types, "ratio": ratio, "ci": list(ci)}
            | {"n_a": n[0], "n_b": n[1], "blocks": list(blocks)}
        )

    out = [
        one(
            Figure.SLICE,
            f"the slice's {t.quantile}, every shape pooled",
            t.ratio,
            t.ci,
            (t.n_a, t.n_b),
            quantile=t.quantile,
            blocks=t.blocks,
        )
        for t in c.tail
    ]
    out += [
        one(
            Figure.SHAPE,
            f"{t.quantile} of {s.shape}",
            t.ratio,
            t.ci,
            (s.n_a, s.n_b),
            shape=s.shape,
            quantile=t.quantile,
            blocks=t.blocks,
        )
        for s in c.shapes
        for t in s.tests
    ]
    out += [
        one(
            Figure.OP,
            f"mean device time per call of {o.op} at {o.shape or 'no dims'}",
            o.ratio,
            o.ci,
            (o.count_a, o.count_b),
            shape=o.shape,
            op=o.op,
            types=o.types,
        )
        for o in c.ops
        if o.ci is not None and ops
    ]
    return out


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
        text = f"-- A: {p.a.dataset}\n{p.sql(p.a)};\n\n-- B: {p.b.dataset}\n{p.sql(p.b)};\n"
        atomic_write(folder / f"{p.id}.sql", text.encode())
        spec = msgspec.json.format(msgspec.json.encode(p), indent=1)
        atomic_write(folder / f"{p.id}.json", spec)


@dataclass
class _Rows:
    """Every row one side's packs of one kind select from (every shape's requests, or every
    op x shape's calls, of the side's files), and the row numbers of each shape (op x shape)
    in it, found when a pack first asks."""

    table: pa.Table
    groups: dict[tuple[str, ...], np.ndarray] | None = None


GROUPED_BY = {Figure.SHAPE: ("shape",), Figure.OP: ("op", "shape", "types")}
"""The columns a pack of each kind selects its rows from its side's rows by."""


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


def evidence_ids(done: list[ComparePack]) -> dict[tuple[str, ...], str]:
    """Each pack's id by what it is of: (slice, quantile), (shape, shape), (op, op, dims,
    types); compare.json and the page link each figure to its pack by it."""
    out: dict[tuple[str, ...], str] = {}
    for p in done:
        if p.figure == Figure.SLICE:
            out[(p.figure.value, p.quantile)] = p.id
        elif p.figure == Figure.SHAPE:
            out[(p.figure.value, p.shape, p.quantile)] = p.id
            if p.quantile == "p95":
                out[(p.figure.value, p.shape)] = p.id
        else:
            out[(p.figure.value, p.op, p.shape, p.types)] = p.id
    return out
