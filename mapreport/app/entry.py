"""The `mapreport` command as its own process (the console script and `python -m mapreport`):
the command line of `cli.main`, in a process that never imports pandas.

No command reads or writes a DataFrame, yet pyarrow imports pandas on its first array only to
ask whether its input is a pandas object: 0.15-0.25 s and about 40 MiB in every process, a
sixth of a small trace's `ingest --report` (1.48 s against 1.22 s without it, medians of 7 on
H100 bert-small). The Python API (`mapreport.run.api`) runs in its caller's process and is
untouched: it gives DataFrames where asked.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

UNUSED = ("pandas",)
"""Top-level packages the command's process refuses to import: a library that asks for one
optionally (pyarrow, plotly, DuckDB) is told it is not installed and goes on without it."""


class Unused:
    """A meta path finder that refuses the `UNUSED` packages (`ModuleNotFoundError`, as for
    a package that is not installed)."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """None for every module but an unused package's, which raises."""
        if name.partition(".")[0] in UNUSED:
            raise ModuleNotFoundError(f"{name} is not used by the mapreport command", name=name)
        return None


def run(args: Sequence[str] | None = None) -> None:
    """The command line (`args`, else the process's arguments), in this process, which then
    imports no `UNUSED` package."""
    if not any(isinstance(finder, Unused) for finder in sys.meta_path):
        sys.meta_path.insert(0, Unused())
    from mapreport.app.cli import main

    main(args)
