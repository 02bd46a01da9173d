"""What time a report covers, in words: its window, and a moment on its clock."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from mapreport.core.window import Window, WindowKind


def moment(t_us: float, tz: str, with_date: bool = True, seconds: bool = False) -> str:
    """A wall-clock time in `tz`: `2026-11-29 06:00` (or `06:00`, or `06:00:12`)."""
    t = datetime.fromtimestamp(t_us / 1e6, ZoneInfo(tz))
    clock = "%H:%M:%S" if seconds else "%H:%M"
    return t.strftime(f"%Y-%m-%d {clock}" if with_date else clock)


def period(w: Window) -> str:
    """The window a report covers, as a reader reads it."""
    tz = w.timezone
    if w.kind is WindowKind.ALL:
        return "everything in the dataset"
    if w.kind is WindowKind.DAY:
        return f"the night of {w.night} (its calendar day, {tz})"
    if w.kind is WindowKind.DURATION:
        assert w.start_us is not None
        assert w.end_us is not None
        return (
            f"the {w.spec} ending with the night of {w.night}: "
            f"{moment(w.start_us, tz)} to {moment(w.end_us, tz)} {tz}"
        )
    start = moment(w.start_us, tz) if w.start_us is not None else "the first record"
    end = moment(w.end_us, tz) if w.end_us is not None else "the last record"
    return f"{start} to {end} {tz}"
