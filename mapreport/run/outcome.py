"""What a run says back: one slice's outcome, and the progress callback every stage takes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

Progress = Callable[[str], None]
"""Where a run says what it is doing (one line at a time)."""


def quiet(_: str) -> None:
    """Progress that prints nothing."""
    return None


class SliceOutcome(msgspec.Struct, frozen=True):
    """What reporting one slice did."""

    workload: str
    slice: str
    folder: Path
    error: str | None = None
    unchanged: bool = False
    """Its inputs were those of the report already in its folder: nothing was redone."""
    written: tuple[str, ...] = ()
    """The files its report wrote, by name."""
    refused_by_system: bool = False
    """The operating system refused a write (a full disk, a read-only folder)."""
    night: str = ""
    """The night (run date) the report was made for."""
    recomputed: tuple[str, ...] = ()
    """Later nights whose history was recomputed after this one (a backfill)."""

    @property
    def name(self) -> str:
        """`workload` or `workload/slice`."""
        return f"{self.workload}/{self.slice}" if self.slice else self.workload
