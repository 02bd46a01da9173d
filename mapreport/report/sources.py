"""How a report names its input files: relative to the folder they were ingested from (the
deepest folder holding every one of the slice's files), or by file name; never by the build
machine's absolute path. HTML, PDF, tickets, findings.json and the board read these names; a
command's own output (`mapreport check`'s remedies) keeps full paths, which a user acts on."""

from __future__ import annotations

import os
from pathlib import PurePath

from mapreport.analysis.base.common import SourceFile


def source_dir(sources: tuple[SourceFile, ...]) -> str:
    """The deepest folder holding every input file of the slice ('' without files)."""
    folders = [str(PurePath(s.path).parent) for s in sources]
    return os.path.commonpath(folders) if folders else ""


def shown(path: str, root: str) -> str:
    """A file's name as a report shows it: below `root` when it lies there, else its name."""
    if root and path and os.path.commonpath([root, path]) == root:
        return PurePath(os.path.relpath(path, root)).as_posix()
    return PurePath(path).name


def source_paths(sources: tuple[SourceFile, ...]) -> dict[str, str]:
    """Each input file's name below `source_dir`, by source id."""
    root = source_dir(sources)
    return {s.source_id: shown(s.path, root) for s in sources}


def folder_name(sources: tuple[SourceFile, ...]) -> str:
    """The name of the folder the slice's files were ingested from ('' without files)."""
    return PurePath(source_dir(sources)).name
