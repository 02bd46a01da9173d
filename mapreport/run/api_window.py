"""The window a report (or the Python API) reads, from the options that name it: a night, a
window ending with a night, a --since/--until range, or everything. Light: the command line
imports it at start."""

from __future__ import annotations

from datetime import date, datetime

from mapreport.core.errors import UsageError
from mapreport.core.window import (
    EVERYTHING,
    Window,
    last_complete_day,
    night_window,
    parse_date,
    range_window,
)


def report_window(
    night: str | date | None = None,
    window: str | None = None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    tz: str = "UTC",
) -> Window:
    """The window `report`'s options ask for (everything when they ask for none): a night
    (`--date`, default the last complete day in `tz`) with `--window` (day, a duration, all),
    or a --since/--until range."""
    if since is not None or until is not None:
        if night is not None or window is not None:
            raise UsageError("--since/--until and --date/--window do not go together")
        return range_window(moment(since, "--since"), moment(until, "--until"), tz)
    if night is None and window is None:
        return EVERYTHING
    if isinstance(night, date):
        day = night
    else:
        day = parse_date(night) if night else last_complete_day(tz)
    return night_window(day, window or "day", tz)


def moment(value: str | datetime | None, what: str) -> datetime | None:
    """An ISO time (`2026-11-29T06:00`, with or without a zone), a datetime, or None."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{what}: {value!r} is not an ISO time (2026-11-29T06:00Z)") from None
