"""The tables a report shows, taken from its findings document (the machine-readable twin),
and written as CSV, Parquet and one workbook (`mapreport export`, docs/api.md).

Every table's columns are findings.json's keys, a nested object's as `parent.child`; a list of
numbers (a CI) stays a list in Parquet and is JSON text in CSV and the workbook; a list of
objects is JSON text everywhere. Nothing here computes a figure."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from mapreport.core.errors import UsageError
from mapreport.core.files import atomic_write, replacing

REPORT_TABLES: dict[str, str] = {
    "per_shape": "one row per request shape (findings.json `shapes`, without the nested `tail`)",
    "op_shape": "one row per op x input shape of a profiler trace (`ops`)",
    "tail_drivers": "one row per driver of the slice's tail (shape `*`) and of each shape's",
    "judgements": "one row per judgement (`judgements`)",
    "actions": "one row per action (`actions`; `validation_matrix` as JSON text)",
    "checklist": "one row per review checklist item (`checklist`)",
}
"""The tables a report shows, by the name each export file and sheet has."""
WORKBOOK = "tables.xlsx"
SHEET_CHARS = 31
"""The longest sheet name a workbook allows."""


def flat(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A JSON object with its nested objects' keys as `parent.child` columns."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, Mapping):
            out |= flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def _tail_rows(shape: str, tail: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One tail split as rows, one per driver with a share or left unmeasured."""
    if not tail:
        return []
    unmeasured = list(tail.get("unmeasured") or [])
    drivers = [*tail.get("shares", {}), *(d for d in unmeasured if d not in tail["shares"])]
    return [
        {
            "shape": shape,
            "driver": d,
            "share": tail["shares"].get(d),
            "share_ci": tail.get("share_ci", {}).get(d),
            "material": tail.get("material"),
            "unmeasured": d in unmeasured,
            "n": tail.get("n"),
            "n_tail": tail.get("n_tail"),
            "excess_us": tail.get("excess_us"),
        }
        for d in drivers
    ]


def report_rows(doc: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each table of REPORT_TABLES as rows (flat objects) of one findings document."""
    tails = _tail_rows("*", doc.get("tail_drivers"))
    for s in doc.get("shapes") or []:
        tails += _tail_rows(s["shape"], s.get("tail"))
    actions = [
        flat({k: v for k, v in a.items() if k != "validation_matrix"})
        | {"validation_matrix": json.dumps(a.get("validation_matrix"))}
        for a in doc.get("actions") or []
    ]
    return {
        "per_shape": [flat({k: v for k, v in s.items() if k != "tail"}) for s in doc["shapes"]],
        "op_shape": [flat(o) for o in doc.get("ops") or []],
        "tail_drivers": tails,
        "judgements": [flat(j) for j in doc.get("judgements") or []],
        "actions": actions,
        "checklist": [flat(c) for c in doc.get("checklist") or []],
    }


def _column(values: list[Any]) -> pa.Array:
    """A column typed from its values (JSON text where they mix types or nest objects)."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([None if v is None else json.dumps(v) for v in values], pa.string())


def arrow_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows as an Arrow table, the columns in the order they first appear."""
    rows = list(rows)
    names = list(dict.fromkeys(k for r in rows for k in r))
    return pa.table({n: _column([r.get(n) for r in rows]) for n in names})


def report_tables(doc: Mapping[str, Any]) -> dict[str, pa.Table]:
    """Every table of REPORT_TABLES of one findings document, as Arrow tables."""
    return {name: arrow_table(rows) for name, rows in report_rows(doc).items()}


def _texted(t: pa.Table) -> pa.Table:
    """`t` with every list or struct column as JSON text (CSV and cells hold scalars)."""
    for i, f in enumerate(t.schema):
        if pa.types.is_nested(f.type):
            text = [None if v is None else json.dumps(v) for v in t.column(i).to_pylist()]
            t = t.set_column(i, pa.field(f.name, pa.string()), pa.array(text, pa.string()))
    return t


def write_tables(
    tables: Mapping[str, pa.Table], folder: Path, meta: Mapping[str, str] | None = None
) -> list[Path]:
    """Each table as `<name>.csv` and `<name>.parquet` in `folder`, and all of them as one
    workbook (a sheet per table); returns the files written."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, t in tables.items():
        with replacing(folder / f"{name}.parquet") as tmp:
            keys = {f"mapreport.{k}": v for k, v in (meta or {}).items()}
            pq.write_table(t.replace_schema_metadata(keys), tmp)
        with replacing(folder / f"{name}.csv") as tmp:
            pcsv.write_csv(_texted(t), tmp)
        written += [folder / f"{name}.csv", folder / f"{name}.parquet"]
    written.append(write_workbook(tables, folder / WORKBOOK))
    return written


def write_workbook(tables: Mapping[str, pa.Table], path: Path) -> Path:
    """One workbook with a sheet per table: a header row of the column names, then each row
    with numbers, booleans and text as their own cell types (lists as JSON text)."""
    from io import BytesIO

    from openpyxl import Workbook

    wb = Workbook(write_only=True)
    for name, t in tables.items():
        if len(name) > SHEET_CHARS:
            raise UsageError(f"table name {name!r} is longer than a sheet name may be")
        ws = wb.create_sheet(title=name)
        texted = _texted(t)
        ws.append(texted.column_names)
        for row in texted.to_pylist():
            ws.append([_cell(v) for v in row.values()])
    buf = BytesIO()
    wb.save(buf)
    atomic_write(path, buf.getvalue())
    return path


def _cell(v: Any) -> Any:
    """A value as a workbook cell takes it (a non-finite float as an empty cell)."""
    if isinstance(v, float) and v != v:  # NaN
        return None
    return v
