"""`mapreport export`: the tables of written reports (their findings.json files) and of
comparisons (their compare.json files) as CSV, Parquet and one workbook per slice or
comparison (`api_tables`, `api_compared`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa

from mapreport.core.errors import UsageError
from mapreport.run.api_compared import COMPARE, compare_tables, read_compared
from mapreport.run.api_findings import FINDINGS, read_findings
from mapreport.run.api_tables import report_tables, write_tables
from mapreport.run.pipeline import slice_dir

Export = Callable[[], tuple[dict[str, pa.Table], dict[str, str]]]
"""One document's tables and the metadata each Parquet file carries, read when called."""


def findings_files(paths: Iterable[Path]) -> list[Path]:
    """The findings.json and compare.json files `paths` name: each such a file, or a folder
    searched for them (a report's OUT, one slice's folder, a comparison's OUT); none found is
    a one-line UsageError."""
    found: list[Path] = []
    for p in paths:
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            found += sorted(f for name in (FINDINGS, COMPARE) for f in p.rglob(name) if f.is_file())
        else:
            raise UsageError(f"{p}: no such file or folder")
    if not found:
        raise UsageError(
            f"no {FINDINGS} or {COMPARE} in {', '.join(map(str, paths))} (write reports "
            "first: `mapreport report --dataset DS --out OUT`, or `mapreport compare`)"
        )
    return list(dict.fromkeys(found))


def _planned(f: Path, out: Path) -> tuple[str, Path, Export]:
    """Where one document's tables go, its name, and how they are made."""
    if f.name == COMPARE:
        c = read_compared(f)
        return f"compare {c.name}", out / c.name, lambda: (compare_tables(c), c.meta())
    doc = read_findings(f)
    meta = {
        "findings_schema_version": doc.schema_version,
        "workload": doc.workload,
        "slice": doc.slice,
        "generated_at": doc.generated_at,
    }
    return doc.name, slice_dir(out, doc.workload, doc.slice), lambda: (report_tables(doc.doc), meta)


def export(paths: Iterable[Path], out: Path) -> list[tuple[str, Path]]:
    """Every report's tables under `out/<workload>[/<slice>]/` (the report's own folder
    names) and every comparison's under `out/<its folder's name>/`, as CSV, Parquet and one
    workbook; returns each one's name and folder. Every file is read before anything is
    written; two documents bound for one folder are a one-line UsageError."""
    plans = [_planned(f, out) for f in findings_files(list(paths))]
    taken: dict[Path, str] = {}
    for name, folder, _ in plans:
        if folder in taken:
            raise UsageError(
                f"{taken[folder]} and {name} would both be exported to {folder}: "
                "export them with separate --out folders"
            )
        taken[folder] = name
    for _, folder, tables in plans:
        made, meta = tables()
        write_tables(made, folder, meta)
    return [(name, folder) for name, folder, _ in plans]
