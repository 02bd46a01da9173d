"""Blocking behind adaptation: the adapting requests that held their worker while others
waited, the requests that waited, and why none did when none did."""

from __future__ import annotations

import msgspec

from mapreport.analysis.serving.blocking import MINOR_SHARE, Blocking, BlockingEvent, Victims
from mapreport.analysis.serving.compiles import VaryingDim
from mapreport.analysis.serving.tail import TailDrivers
from mapreport.core.kinds import ActionKind, BlockingRemedy, Driver
from mapreport.core.window import is_wall_clock
from mapreport.report import causes
from mapreport.report.filters import duration, plural
from mapreport.report.period import moment
from mapreport.report.sections.unit import Facts, Section


class BlockingLine(msgspec.Struct, frozen=True):
    """One blocking event as the blocking section lists it."""

    e: BlockingEvent
    when: str
    """Its start on the slice's clock."""
    how: str
    worker: str
    material: bool
    """Named by the finding (at least 1% of the blocked wait)."""
    shapes: str


BLOCKING_ROWS = 20
"""Adapting requests the blocking table lists at most beyond the named ones: at fleet size a
slice held 36,281 (its PDF 2,618 pages); findings.json keeps every one."""


class BlockingRest(msgspec.Struct, frozen=True):
    """The adapting requests the blocking table leaves out (all minor)."""

    count: int
    blocked: int
    """Requests that waited behind them."""


class BlockingTable(msgspec.Struct, frozen=True):
    """The blocking section's table: the lines it lists and what it leaves out."""

    lines: tuple[BlockingLine, ...]
    rest: BlockingRest | None


def blocking_lines(b: Blocking, tz: str) -> BlockingTable:
    """The blocking events the section lists, named ones first (then by start): every named
    one and the BLOCKING_ROWS minor ones behind which most requests waited; and the rest."""
    named = {e.source for e in b.material}
    minor = sorted(
        (e for e in b.events if e.source not in named),
        key=lambda e: (-(e.wait_us or 0.0), -e.blocked, e.start_us),
    )
    listed = [e for e in b.events if e.source in named] + minor[:BLOCKING_ROWS]
    left = minor[BLOCKING_ROWS:]
    rest = BlockingRest(len(left), sum(e.blocked for e in left)) if left else None
    lines = tuple(
        BlockingLine(
            e,
            moment(e.start_us, tz, seconds=True)
            if is_wall_clock(e.start_us)
            else duration(e.start_us),
            causes.adaptation(e.how),
            "one worker" if e.worker < 0 else f"core {e.worker}",
            e.source in named,
            causes.shape_list(e.shapes),
        )
        for e in sorted(listed, key=lambda e: (e.source not in named, e.start_us))
    )
    return BlockingTable(lines, rest)


class BlockingFacts(msgspec.Struct, frozen=True):
    """What the section reads: the blocking, the slice's tail and clock, the actions."""

    b: Blocking
    tail: TailDrivers | None
    timezone: str
    action: tuple[int, str] | None
    """(number, id) of the blocking action, when blocking drives the slice's tail."""
    drives_tail: bool


class BlockingView(msgspec.Struct, frozen=True):
    """The blocking, its table, the action on it, and why none waited when none did."""

    b: Blocking
    table: BlockingTable
    action: tuple[int, str] | None
    none_waited: str
    """Why no request shows as blocked behind adaptation ('' when some do)."""
    drives_tail: bool
    minor_share: float = MINOR_SHARE
    """Below this share of the blocked wait an adapting request is minor."""


class BlockingFinding(msgspec.Struct):
    """findings.json `blocking` (`Blocking`, with its totals and what the finding names)."""

    events: tuple[BlockingEvent, ...]
    victims: tuple[Victims, ...]
    unblocked_p50_us: float | None
    limit_hits: int
    varying: tuple[VaryingDim, ...]
    adapting: int
    blocked: int
    wait_us: float | None
    material: tuple[str, ...]
    """The sources of the adapting requests the finding names."""
    triggers: tuple[str, ...]
    remedy: BlockingRemedy | None
    drives_tail: bool


class Fragment(msgspec.Struct):
    """findings.json `blocking`."""

    blocking: BlockingFinding


def no_blocking(b: Blocking, tail: TailDrivers | None) -> str:
    """Why the slice shows no request blocked behind adaptation: it was not measurable,
    nothing adapted, or what adapted held no one."""
    if tail is not None and Driver.BLOCKED_BEHIND_ADAPTATION in tail.unmeasured:
        return (
            "Not measurable: the requests record no queue wait (client-side timing), so whether "
            "one waited behind an adapting request cannot be told."
        )
    if not b.adapting:
        return (
            "No request adapted (none recompiled, re-tuned or ran the fallback path), so none "
            "could wait behind one."
        )
    return (
        f"{plural(b.adapting, 'request')} adapted, and no request of its worker was "
        "ready while one of them ran: none waited behind adaptation."
    )


def read(f: Facts) -> BlockingFacts:
    """The blocking with the tail, the clock and the blocking action."""
    r = f.r
    action = next(
        ((i, a.id) for i, a in enumerate(r.actions, 1) if a.kind == ActionKind.ADAPTATION_BLOCKING),
        None,
    )
    return BlockingFacts(r.blocking, r.tail, r.period.timezone, action, r.blocking_drives_tail)


def view(x: BlockingFacts) -> BlockingView:
    """The table of adapting requests, or why none waited."""
    b = x.b
    none_waited = "" if b.events else no_blocking(b, x.tail)
    return BlockingView(b, blocking_lines(b, x.timezone), x.action, none_waited, x.drives_tail)


def fragment(v: BlockingView) -> Fragment:
    """Every event and victim, the totals, the named events and the remedy."""
    b = v.b
    return Fragment(
        BlockingFinding(
            events=b.events,
            victims=b.victims,
            unblocked_p50_us=b.unblocked_p50_us,
            limit_hits=b.limit_hits,
            varying=b.varying,
            adapting=b.adapting,
            blocked=b.blocked,
            wait_us=b.wait_us,
            material=tuple(e.source for e in b.material),
            triggers=b.triggers,
            remedy=b.remedy(),
            drives_tail=v.drives_tail,
        )
    )


SECTION = Section(
    "blocking", "Blocking behind adaptation", read, view, fragment, needs_requests=True
)
