"""What time a report covers, in words: its window, the span of its data, and the version of
each compile plan in force for it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from mapreport.analysis.mapping.coverage import PlanVersion
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.window import Window, WindowKind, is_wall_clock
from mapreport.report.sources import shown

CAPTURED_BY = {
    "captured_at": "captured_at of its environment record",
    "night": "the night its file was ingested for",
    "ingested_at": "when it was ingested (no captured_at, no night)",
}
"""How a plan version's capture time was known."""


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


def data_span(r: SliceResult) -> str:
    """From the slice's first arrival to its last completion."""
    if r.window_start_us is None or r.window_end_us is None:
        return "–"
    t0, t1 = r.window_start_us, r.window_end_us
    hours = (t1 - t0) / 3.6e9
    if is_wall_clock(t0):
        return f"{moment(t0, r.period.timezone)} {r.period.timezone}, {hours:.2f} h"
    return f"{hours:.2f} h (relative timestamps)"


@dataclass(frozen=True)
class PlanLine:
    """The version of one compile plan the report's predictions come from."""

    plan_id: str
    path: str
    captured: str
    captured_by: str
    versions: str
    """The versions held beside it and the one it replaced ('' when it is the only one)."""
    note: str
    """Why this version, when it is not simply the one captured before the window's end."""


def plan_lines(r: SliceResult, root: str) -> tuple[PlanLine, ...]:
    """One line per plan: its version in force, its capture time and how many versions the
    dataset holds (paths relative to `root` when they lie below it)."""
    lines = []
    tz = r.period.timezone
    for v in r.plans:
        if not v.in_force:
            continue
        others = [p for p in r.plans if p.plan_id == v.plan_id and not p.in_force]
        later = [p for p in others if _after(p, v)]
        earlier = [p for p in others if _after(v, p)]
        held = ""
        if earlier:
            prev = earlier[0]  # newest first
            held = f"it replaced {_relative(prev, root)}, captured {_when(prev, tz)}"
        if later:
            held += ("; " if held else "") + f"{len(later)} later version(s) not yet in force"
        note = "" if v.before_end else "captured after this window; no earlier version is held"
        lines.append(
            PlanLine(
                v.plan_id,
                _relative(v, root),
                _when(v, tz),
                CAPTURED_BY.get(v.captured_by, v.captured_by),
                held,
                note,
            )
        )
    return tuple(lines)


def _when(v: PlanVersion, tz: str) -> str:
    return f"{moment(v.captured_us, tz)} {tz}" if v.captured_us is not None else "–"


def _after(p: PlanVersion, v: PlanVersion) -> bool:
    """True when `p` was captured after `v`."""
    return p.captured_us is not None and v.captured_us is not None and p.captured_us > v.captured_us


def _relative(v: PlanVersion, root: str) -> str:
    return shown(v.path, root)
