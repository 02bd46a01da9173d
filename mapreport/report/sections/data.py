"""Data sources: every input file the slice's numbers rest on, named below the folder it was
ingested from, with its rows and the records rejected under the quarantine policy."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import SourceFile
from mapreport.report.sections.unit import Facts, Section
from mapreport.report.sources import folder_name, source_paths


class DataView(msgspec.Struct, frozen=True):
    """The input files, each named below their common folder, and their rejected records."""

    sources: tuple[SourceFile, ...]
    folder: str
    """The name of the folder every input file lies below (its own path is the build
    machine's, and stays out of the report)."""
    paths: dict[str, str]
    """Per source id: its path relative to that folder."""
    rejected_total: int
    unlisted: dict[str, int]
    """Per source id: rejected records beyond the ones listed (all are in `quarantine`)."""


class Source(msgspec.Struct):
    """One input file of findings.json `sources` (`SourceFile`, its path relative to the
    folder the slice's files were ingested from)."""

    source_id: str
    path: str
    format: str
    rows: dict[str, int]
    rejected: int
    rejections: tuple[dict[str, str | int | None], ...]
    """The first rejected records: line, field, reason."""


class Fragment(msgspec.Struct):
    """findings.json `sources`."""

    sources: tuple[Source, ...]


def read(f: Facts) -> tuple[SourceFile, ...]:
    """The slice's input files."""
    return f.r.sources


def view(sources: tuple[SourceFile, ...]) -> DataView:
    """The files with their shown paths and the rejections not listed."""
    return DataView(
        sources,
        folder_name(sources),
        source_paths(sources),
        sum(s.rejected for s in sources),
        {s.source_id: s.rejected - len(s.rejections) for s in sources},
    )


def fragment(v: DataView) -> Fragment:
    """Every file, by its shown path."""
    return Fragment(
        tuple(
            Source(
                s.source_id,
                v.paths[s.source_id],
                s.format,
                s.rows,
                s.rejected,
                s.rejections,  # type: ignore[arg-type]
            )
            for s in v.sources
        )
    )


SECTION = Section("data", "Data sources", read, view, fragment)
