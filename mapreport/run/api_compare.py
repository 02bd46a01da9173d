"""compare.json read back as typed values (the Python API, docs/api.md "compare.json read
back"): the document's own Structs (`report/compare_file.py`, which `mapreport compare` writes
it from), decoded by msgspec in strict mode (no text read as a number, no number as text). A
key of a later 1.x minor version is ignored; one an earlier 1.x did not write yet takes its
default (None, or empty)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mapreport.core.errors import DatasetError
from mapreport.ingest.records import JsonDecoder
from mapreport.report.compare_file import (
    Blocks,
    CategoryCompared,
    CompareJson,
    CompareSide,
    Figure,
    MappingCompared,
    MappingShape,
    MeanLatency,
    OpCompared,
    OpOneSide,
    Pair,
    PartQuantiles,
    PooledAccuracy,
    QuantileTest,
    Renamed,
    RunOp,
    RunQuantile,
    Runs,
    RunShift,
    ShapeCompared,
    Ship,
    SideBlocks,
    TailQuantile,
    TuningCompared,
    TuningSide,
    TuningWorkload,
    Whole,
)
from mapreport.run.api_compared import COMPARE, READ_MAJOR, ComparedDoc, compare_tables

if TYPE_CHECKING:
    import pandas as pd


class CompareFile(CompareJson, frozen=True, kw_only=True):
    """One compare.json read back, every part typed (docs/compare.md; its objects are
    `report/compare_file.py`'s, the ones `mapreport compare` writes it from)."""

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables of the comparison (`api_compared.COMPARE_TABLES`), as DataFrames."""
        doc = msgspec.json.decode(msgspec.json.encode(self))  # JSON's own values: lists
        found = compare_tables(ComparedDoc(Path(COMPARE), self.schema_version, doc))
        return {name: t.to_pandas() for name, t in found.items()}


class _Version(msgspec.Struct):
    schema_version: str


_AT = re.compile(r"^(.*) - at `\$\.?(.*)`$")
_VERSION: JsonDecoder[_Version] = JsonDecoder(_Version)
_DOCUMENT: JsonDecoder[CompareFile] = JsonDecoder(CompareFile)
"""Strict (msgspec's default): no number read from text, no text from a number; a document
nested deeper than the recursion limit is a DecodeError, not a RecursionError."""


def read_compare(path: str | Path) -> CompareFile:
    """A compare.json (or the comparison folder holding one) read back as typed values; a
    missing or unreadable file, another major version or a field that is not what
    compare.json holds is a one-line DatasetError naming the file (and the field)."""
    f = Path(path)
    if f.is_dir():
        f = f / COMPARE
    try:
        raw = f.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{f}: no such compare file") from None
    except OSError as e:
        raise DatasetError(f"{f}: cannot read compare.json ({e.strerror or e})") from None
    try:
        version = _VERSION.decode(raw).schema_version
        if version.split(".")[0] != READ_MAJOR:
            raise DatasetError(
                f"{f}: compare schema_version {version!r}: this mapreport reads {READ_MAJOR}.x "
                "(write it again with `mapreport compare`)"
            )
        return _DOCUMENT.decode(raw)
    except msgspec.ValidationError as e:
        at = _AT.match(str(e))
        if at is None:
            raise DatasetError(f"{f}: not a compare.json: {e}") from None
        raise DatasetError(f"{f}: field '{at.group(2) or '$'}': {at.group(1)}") from None
    except msgspec.DecodeError as e:
        raise DatasetError(f"{f}: cannot read compare.json ({e})") from None


__all__ = [
    "Blocks",
    "CategoryCompared",
    "CompareFile",
    "CompareSide",
    "Figure",
    "MappingCompared",
    "MappingShape",
    "MeanLatency",
    "OpCompared",
    "OpOneSide",
    "Pair",
    "PartQuantiles",
    "PooledAccuracy",
    "QuantileTest",
    "Renamed",
    "RunOp",
    "RunQuantile",
    "RunShift",
    "Runs",
    "ShapeCompared",
    "Ship",
    "SideBlocks",
    "TailQuantile",
    "TuningCompared",
    "TuningSide",
    "TuningWorkload",
    "Whole",
    "read_compare",
]
