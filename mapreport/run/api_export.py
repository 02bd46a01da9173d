"""`mapreport export`: the tables of written reports (their findings.json files) as CSV,
Parquet and one workbook per slice (`api_tables`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from mapreport.core.errors import UsageError
from mapreport.run.api_findings import FINDINGS, read_findings
from mapreport.run.api_tables import report_tables, write_tables
from mapreport.run.pipeline import slice_dir


def findings_files(paths: Iterable[Path]) -> list[Path]:
    """The findings.json files `paths` name: each a findings file, or a folder searched for
    them (a report's OUT or one slice's folder); none found is a one-line UsageError."""
    found: list[Path] = []
    for p in paths:
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            found += sorted(f for f in p.rglob(FINDINGS) if f.is_file())
        else:
            raise UsageError(f"{p}: no such file or folder")
    if not found:
        raise UsageError(
            f"no {FINDINGS} in {', '.join(map(str, paths))} (write reports first: "
            "`mapreport report --dataset DS --out OUT`)"
        )
    return list(dict.fromkeys(found))


def export(paths: Iterable[Path], out: Path) -> list[tuple[str, Path]]:
    """Every report's tables under `out/<workload>[/<slice>]/` (the report's own folder
    names) as CSV, Parquet and one workbook; returns each slice's name and folder."""
    done = []
    for f in findings_files(list(paths)):
        doc = read_findings(f)
        folder = slice_dir(out, doc.workload, doc.slice)
        meta = {
            "findings_schema_version": doc.schema_version,
            "workload": doc.workload,
            "slice": doc.slice,
            "generated_at": doc.generated_at,
        }
        write_tables(report_tables(doc.doc), folder, meta)
        done.append((doc.name, folder))
    return done
