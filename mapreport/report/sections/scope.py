"""Scope and SLA targets: what the slice is, the time it covers, the compile plans in force,
its latency and the targets it is held to."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import Percentiles, Review, SlaCheck
from mapreport.analysis.mapping.coverage import PlanVersion
from mapreport.core.kinds import JudgementFamily
from mapreport.core.records import replace
from mapreport.core.window import Window, WindowKind, is_wall_clock
from mapreport.report.period import moment, period
from mapreport.report.sections.unit import Facts, Section
from mapreport.report.sources import shown, source_dir

CAPTURED_BY = {
    "captured_at": "captured_at of its environment record",
    "night": "the night its file was ingested for",
    "ingested_at": "when it was ingested (no captured_at, no night)",
}
"""How a plan version's capture time was known."""


def data_span(start_us: float | None, end_us: float | None, tz: str) -> str:
    """From the slice's first arrival to its last completion."""
    if start_us is None or end_us is None:
        return "–"
    hours = (end_us - start_us) / 3.6e9
    if is_wall_clock(start_us):
        return f"{moment(start_us, tz)} {tz}, {hours:.2f} h"
    return f"{hours:.2f} h (relative timestamps)"


class PlanLine(msgspec.Struct, frozen=True):
    """The version of one compile plan the report's predictions come from."""

    plan_id: str
    path: str
    captured: str
    captured_by: str
    versions: str
    """The versions held beside it and the one it replaced ('' when it is the only one)."""
    note: str
    """Why this version, when it is not simply the one captured before the window's end."""


def plan_lines(plans: tuple[PlanVersion, ...], tz: str, root: str) -> tuple[PlanLine, ...]:
    """One line per plan: its version in force, its capture time and how many versions the
    dataset holds (paths relative to `root` when they lie below it)."""
    lines = []
    for v in plans:
        if not v.in_force:
            continue
        others = [p for p in plans if p.plan_id == v.plan_id and not p.in_force]
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


class ScopeFacts(msgspec.Struct, frozen=True):
    """What the scope reads of the slice: its names, review, window, plans and latency."""

    workload: str
    slice: str
    review: Review
    period: Window
    plans: tuple[PlanVersion, ...]
    requests: int
    failed: int
    window_start_us: float | None
    window_end_us: float | None
    latency: Percentiles
    sla: tuple[SlaCheck, ...]
    root: str
    """The folder every input file lies below (plan paths are shown relative to it)."""


class ScopeView(msgspec.Struct, frozen=True):
    """The scope's facts and their words."""

    s: ScopeFacts
    period: str
    """The time window the report covers, in words (`period.period`)."""
    window: str
    """From the slice's first arrival to its last completion."""
    plans: tuple[PlanLine, ...]
    """The compile plan versions in force for the window."""

    @property
    def description(self) -> str:
        """The slice's description from the run configuration."""
        return self.s.review.description


class Period(msgspec.Struct):
    """The window a report covers (`Window`), with its words."""

    kind: WindowKind
    window: str
    timezone: str
    night: str | None
    start_us: float | None
    end_us: float | None
    text: str


class Scope(msgspec.Struct):
    """findings.json `scope`."""

    requests: int
    failed: int
    window_start_us: float | None
    window_end_us: float | None
    latency_p50_us: float | None
    latency_p95_us: float | None
    latency_p99_us: float | None
    sla_p95_us: float | None
    sla_p99_us: float | None
    sla_from: str | None
    period: Period
    plans: tuple[PlanVersion, ...]
    """Every version of the slice's plans, each path relative to the input files' folder."""


class Fragment(msgspec.Struct):
    """findings.json `scope`."""

    scope: Scope


def read(f: Facts) -> ScopeFacts:
    """The slice's names, review, window, plans and latency."""
    r = f.r
    return ScopeFacts(
        r.workload,
        r.slice,
        r.review,
        r.period,
        r.plan.versions,
        r.requests,
        r.failed,
        r.window_start_us,
        r.window_end_us,
        r.latency,
        r.sla,
        source_dir(r.sources),
    )


def view(s: ScopeFacts) -> ScopeView:
    """The window, the data's span and the plans in force, in words."""
    tz = s.period.timezone
    return ScopeView(
        s,
        period(s.period),
        data_span(s.window_start_us, s.window_end_us, tz),
        plan_lines(s.plans, tz, s.root),
    )


def fragment(v: ScopeView) -> Fragment:
    """The scope's figures, its window with its words and every plan version."""
    s, w, lat = v.s, v.s.period, v.s.latency
    return Fragment(
        Scope(
            requests=s.requests,
            failed=s.failed,
            window_start_us=s.window_start_us,
            window_end_us=s.window_end_us,
            latency_p50_us=lat.p50,
            latency_p95_us=lat.p95,
            latency_p99_us=lat.p99,
            sla_p95_us=s.review.sla_p95_us,
            sla_p99_us=s.review.sla_p99_us,
            sla_from=s.review.sla_from,
            period=Period(w.kind, w.spec, w.timezone, w.night, w.start_us, w.end_us, v.period),
            plans=tuple(replace(p, path=shown(p.path, s.root)) for p in s.plans),
        )
    )


SECTION = Section(
    "scope", "Scope and SLA targets", read, view, fragment, family=JudgementFamily.SLA
)
