"""The time window a report covers: a night (a calendar day in a time zone), a duration ending
at a night's end, an explicit range, or everything in the dataset.

A record's time is on the wall clock when it lies between 2000-01-01 and 2100-01-01 UTC
(FORMATS.md allows any fixed origin per file: a profiler's monotonic clock reads days of
uptime, trtexec counts from zero). A window selects wall-clock records by their time; a
record timed from another origin carries no date, so it belongs to the night its file was
ingested for, and a window selects it by that night.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from mapreport.core.errors import UsageError

US_PER_DAY = 86_400_000_000
WALL_CLOCK_FROM_US = 946_684_800_000_000.0
"""2000-01-01 00:00 UTC: an earlier time is not a wall-clock time but one from another origin."""
WALL_CLOCK_UNTIL_US = 4_102_444_800_000_000.0
"""2100-01-01 00:00 UTC: a later time is not a wall-clock time either."""
UNDATED = "undated"
"""The day partition of records without a wall-clock time whose file names no night."""
_DURATION = re.compile(r"(\d+)\s*([mhd])")
_CALENDAR_US = (date.max - date.min).days * US_PER_DAY
"""The longest duration a window can be: 0001-01-01 to 9999-12-31."""
_UNIT_US = {"m": 60_000_000, "h": 3_600_000_000, "d": US_PER_DAY}


class WindowKind(StrEnum):
    """How a window was chosen."""

    DAY = "day"
    DURATION = "duration"
    RANGE = "range"
    ALL = "all"


class Window(msgspec.Struct, frozen=True):
    """A half-open time span [start_us, end_us) of wall-clock time, and the nights whose
    records without wall-clock time it includes. A bound that is None is open."""

    kind: WindowKind
    start_us: float | None
    end_us: float | None
    first_night: str | None
    last_night: str | None
    timezone: str = "UTC"
    night: str | None = None
    """The night a day or duration window ends with (the date its history is recorded under)."""
    spec: str = "all"
    """The window as it was asked for (`day`, `6h`, `7d`, `all`, or `range`)."""

    @property
    def everything(self) -> bool:
        """True when the window selects every record of the dataset."""
        return self.kind is WindowKind.ALL

    def bounded(self) -> bool:
        """True when both ends of the window are set (a window open at either end reads every
        wall-clock partition)."""
        return self.start_us is not None and self.end_us is not None

    def holds_utc_day(self, day: str) -> bool:
        """True when the UTC day `day` (a partition's name) may hold wall-clock records of the
        window. Asked of the days a dataset holds, so a window costs the days with data, not
        the days it names (0001-01-01 to 9999-12-31 is 3.6 million)."""
        try:
            start = (date.fromisoformat(day) - date(1970, 1, 1)).days * US_PER_DAY
        except ValueError:
            return False  # not a date: no wall-clock day
        lo = max(self.start_us if self.start_us is not None else -math.inf, WALL_CLOCK_FROM_US)
        hi = min(self.end_us if self.end_us is not None else math.inf, WALL_CLOCK_UNTIL_US)
        return start < hi and start + US_PER_DAY > lo

    def contains_night(self, night: str) -> bool:
        """True when records without wall-clock time ingested for `night` are in the window."""
        if night == UNDATED:
            return self.everything
        return (self.first_night is None or night >= self.first_night) and (
            self.last_night is None or night <= self.last_night
        )


def day_of(t_us: float) -> str:
    """The UTC date (ISO) of a wall-clock time in microseconds."""
    return (date(1970, 1, 1) + timedelta(days=int(t_us // US_PER_DAY))).isoformat()


def is_wall_clock(t_us: float | None) -> bool:
    """True for a time between 2000 and 2100 in microseconds since the Unix epoch."""
    return t_us is not None and WALL_CLOCK_FROM_US <= t_us < WALL_CLOCK_UNTIL_US


def zone(name: str) -> ZoneInfo:
    """A time zone by its IANA name; an unknown one is a UsageError."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"unknown time zone {name!r} (an IANA name: UTC, Europe/Paris)") from None


def _us(moment: datetime) -> float:
    return moment.timestamp() * 1e6


def parse_date(text: str, what: str = "--date") -> date:
    """An ISO date (YYYY-MM-DD); anything else is a UsageError naming `what`."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a date (YYYY-MM-DD)") from None


def parse_duration_us(text: str) -> int:
    """A duration such as `6h`, `7d`, `90m` or `1d12h` in microseconds."""
    spec = text.replace(" ", "")
    parts = _DURATION.findall(spec)
    if not parts or "".join(n + u for n, u in parts) != spec:
        raise UsageError(f"window {text!r}: not day, all or a duration such as 6h, 7d or 90m")
    total = sum(int(n) * _UNIT_US[u] for n, u in parts)
    if total <= 0:
        raise UsageError(f"window {text!r}: a duration must be longer than zero")
    if total > _CALENDAR_US:
        raise UsageError(
            f"window {text!r}: longer than the calendar ({_CALENDAR_US // US_PER_DAY} days); "
            "'all' reads everything"
        )
    return total


def last_complete_day(tz: str, now: datetime | None = None) -> date:
    """Yesterday in time zone `tz`: the last calendar day that has ended."""
    moment = (now or datetime.now(UTC)).astimezone(zone(tz))
    return moment.date() - timedelta(days=1)


def night_window(night: date, spec: str = "day", tz: str = "UTC") -> Window:
    """The window `spec` (`day`, a duration, or `all`) of a night in time zone `tz`. A night
    or a duration beyond the calendar (after 9999-12-30, before 0001-01-01) is a UsageError."""
    if spec == "all":
        return Window(WindowKind.ALL, None, None, None, None, tz, night.isoformat(), "all")
    z = zone(tz)
    if night >= date.max - timedelta(days=1):
        last = (date.max - timedelta(days=2)).isoformat()
        raise UsageError(
            f"--date {night.isoformat()}: the last night that can be reported is {last}"
        )
    end = _us(datetime.combine(night + timedelta(days=1), time(), z))
    if spec == "day":
        start = _us(datetime.combine(night, time(), z))
        kind = WindowKind.DAY
    else:
        start = end - parse_duration_us(spec)
        kind = WindowKind.DURATION
    earliest = _us(datetime.combine(date.min, time(), z))
    if start < earliest:
        raise UsageError(
            f"window {spec!r} of {night.isoformat()}: starts before the year 1 (a window may "
            f"reach back {(end - earliest) // US_PER_DAY:.0f} days from this night; 'all' "
            "reads everything)"
        )
    first = datetime.fromtimestamp(start / 1e6, z).date()
    iso = night.isoformat()
    return Window(kind, start, end, first.isoformat(), iso, tz, iso, spec)


_RANGE_FROM = datetime(1, 1, 2, tzinfo=UTC)
_RANGE_UNTIL = datetime(9999, 12, 30, tzinfo=UTC)
"""An explicit range is clamped to these: a day inside the calendar's ends, so that any time
zone can still name the dates of its bounds (no record lies near them)."""


def range_window(since: datetime | None, until: datetime | None, tz: str = "UTC") -> Window:
    """An explicit [since, until) range; a time without a zone is read in `tz`. A bound
    beyond the calendar's ends (0001-01-01 as "from the start", say) is clamped to them."""
    z = zone(tz)

    def aware(t: datetime) -> datetime:
        t = t if t.tzinfo is not None else t.replace(tzinfo=z)
        us = min(max(_us(t), _us(_RANGE_FROM)), _us(_RANGE_UNTIL))  # no overflow: floats
        return datetime.fromtimestamp(us / 1e6, UTC)

    lo = aware(since) if since else None
    hi = aware(until) if until else None
    if lo and hi and hi <= lo and since and until and _us(until) > _us(since):
        raise UsageError(
            f"--since/--until: the range lies outside {_RANGE_FROM.date()}..{_RANGE_UNTIL.date()}"
            ", where no record can be"
        )
    if lo and hi and hi <= lo:
        raise UsageError(f"--until ({hi.isoformat()}) must be after --since ({lo.isoformat()})")
    first = lo.astimezone(z).date().isoformat() if lo else None
    last = (hi - timedelta(microseconds=1)).astimezone(z).date().isoformat() if hi else None
    return Window(
        WindowKind.RANGE,
        _us(lo) if lo else None,
        _us(hi) if hi else None,
        first,
        last,
        tz,
        last,
        "range",
    )


EVERYTHING = Window(WindowKind.ALL, None, None, None, None)
"""Every record of the dataset, as reports covered before windows existed."""
