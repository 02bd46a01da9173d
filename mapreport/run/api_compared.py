"""A comparison's compare.json read back as the tables its page shows (`mapreport export`,
docs/api.md "Exports"): the same columns as compare.json's keys, nothing computed here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa

from mapreport.core.errors import DatasetError
from mapreport.run.api_tables import arrow_table, flat

COMPARE = "compare.json"
READ_MAJOR = "1"
"""The compare.json major version these tables read (docs/compare.md)."""

COMPARE_TABLES: dict[str, str] = {
    "shapes": "one row per shape both sides have (`shapes`, without the nested `quantiles`)",
    "shape_tests": "one row per shape x quantile tested (`shapes[].quantiles`)",
    "tail": "one row per quantile of the slice, every shape pooled (`tail`)",
    "shapes_one_side": "one row per shape only one side has (`only_a`, `only_b`): side, shape",
    "ops": "one row per op x shape both traces ran (`ops`)",
    "ops_one_side": "one row per op x shape one trace ran (`ops_only_a`, `ops_only_b`), by side",
    "categories": "one row per op category of the whole (`whole.categories`)",
    "mapping_shapes": "one row per shape of both sides' mapping (`mapping.shapes`)",
}
"""The tables of a comparison, by the name each export file and sheet has."""


class ComparedDoc(msgspec.Struct, frozen=True):
    """One compare.json: its path, version, sides and the whole document."""

    path: Path
    schema_version: str
    doc: dict[str, Any]

    @property
    def name(self) -> str:
        """The comparison's folder name: where its tables are exported (`OUT/<name>/`)."""
        return self.path.parent.name or "compare"

    def meta(self) -> dict[str, str]:
        """What each exported Parquet file names in its metadata."""
        out = {"compare_schema_version": self.schema_version}
        for side in ("a", "b"):
            got = self.doc.get(side) or {}
            for key in ("label", "workload", "slice"):
                if isinstance(got.get(key), str):
                    out[f"{side}_{key}"] = got[key]
        if isinstance(self.doc.get("generated_at"), str):
            out["generated_at"] = self.doc["generated_at"]
        return out


def read_compared(path: Path) -> ComparedDoc:
    """compare.json (or the folder holding it) as a ComparedDoc; an unreadable file, another
    major version or a field that is not what compare.json holds is a one-line DatasetError."""
    f = path / COMPARE if path.is_dir() else path
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{f}: no such compare file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DatasetError(f"{f}: cannot read compare.json ({str(e).splitlines()[0]})") from None
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if not isinstance(version, str) or version.split(".")[0] != READ_MAJOR:
        raise DatasetError(
            f"{f}: compare schema_version {version or 'missing'!r}: this mapreport reads "
            f"{READ_MAJOR}.x (write it again with `mapreport compare`)"
        )
    return ComparedDoc(f, version, doc)


def _objects(where: Path, value: Any, field: str) -> list[dict[str, Any]]:
    """`value`, compare.json's `field`, as a list of objects (missing or null: none); anything
    else is a one-line DatasetError naming the file and the field."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise DatasetError(f"{where}: field '{field}': expected a list, got {value!r:.60}")
    for i, row in enumerate(value):
        if not isinstance(row, Mapping):
            raise DatasetError(
                f"{where}: field '{field}[{i}]': expected an object, got {row!r:.60}"
            )
    return value


def _part(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The object at `key` (null or missing: an empty one)."""
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def _names(where: Path, value: Any, field: str) -> list[str]:
    """The shape names of `only_a` or `only_b`."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"{where}: field '{field}': expected a list of shape names")
    return value


def compare_rows(c: ComparedDoc) -> dict[str, list[dict[str, Any]]]:
    """Each table of COMPARE_TABLES as rows (flat objects) of one compare.json."""
    f, d = c.path, c.doc
    shapes = _objects(f, d.get("shapes"), "shapes")
    tests = [
        {"shape": s.get("shape")} | flat(q)
        for i, s in enumerate(shapes)
        for q in _objects(f, s.get("quantiles"), f"shapes[{i}].quantiles")
    ]
    one_side = [
        {"side": side, "shape": name}
        for side in ("a", "b")
        for name in _names(f, d.get(f"only_{side}"), f"only_{side}")
    ]
    ops_one_side = [
        {"side": side} | flat(o)
        for side in ("a", "b")
        for o in _objects(f, d.get(f"ops_only_{side}"), f"ops_only_{side}")
    ]
    whole, mapping = _part(d, "whole"), _part(d, "mapping")
    return {
        "shapes": [flat({k: v for k, v in s.items() if k != "quantiles"}) for s in shapes],
        "shape_tests": tests,
        "tail": [flat(t) for t in _objects(f, d.get("tail"), "tail")],
        "shapes_one_side": one_side,
        "ops": [flat(o) for o in _objects(f, d.get("ops"), "ops")],
        "ops_one_side": ops_one_side,
        "categories": [flat(k) for k in _objects(f, whole.get("categories"), "whole.categories")],
        "mapping_shapes": [flat(m) for m in _objects(f, mapping.get("shapes"), "mapping.shapes")],
    }


def compare_tables(c: ComparedDoc) -> dict[str, pa.Table]:
    """Every table of COMPARE_TABLES of one compare.json, as Arrow tables."""
    return {name: arrow_table(rows) for name, rows in compare_rows(c).items()}
