"""Domain errors: each carries enough context for a one-line message and an exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

ErrorPolicy = Literal["abort", "quarantine"]
"""What a bad record does: `abort` the file with its one-line error, or `quarantine` it (kept
in the quarantine table, counted, the file read on)."""
ERROR_POLICIES: tuple[ErrorPolicy, ...] = get_args(ErrorPolicy)


class MapreportError(Exception):
    """Base of every error the CLI turns into a one-line message."""

    exit_code = 1

    def lines(self) -> list[str]:
        """The message as the lines it is printed in: one, whatever a name in it holds (a
        line break in a file name is printed escaped, never as a second line)."""
        return [str(self)]


class InputError(MapreportError):
    """A record in an input file breaks the format: names the file, the line and the field."""

    exit_code = 3

    def __init__(self, path: Path | str, line: int | None, field: str | None, reason: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.reason = reason
        super().__init__(self.message())

    def __reduce__(self) -> tuple[type[InputError], tuple[str, int | None, str | None, str]]:
        """Picklable with its four parts (a reader in another process raises it)."""
        return (InputError, (self.path, self.line, self.field, self.reason))

    def message(self) -> str:
        """The one-line form: file:line: field 'x': reason."""
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        what = f"field '{self.field}': " if self.field else ""
        return f"{where}: {what}{self.reason}"


class UsageError(MapreportError):
    """A command-line value mapreport cannot use (a date, a window, a time zone)."""

    exit_code = 2


class ConfigError(MapreportError):
    """The run configuration is invalid; names the file and the key."""

    exit_code = 4


class DatasetError(MapreportError):
    """The dataset folder is missing, unreadable or holds nothing to report on."""

    exit_code = 5


class ReportError(MapreportError):
    """One or more reports could not be written."""

    exit_code = 6
