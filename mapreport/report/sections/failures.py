"""Failures and restarts: the compile attempts that did not compile (and what ran instead), and
the model server's restarts. Shown only when there is one: its absence is good news."""

from __future__ import annotations

import msgspec

from mapreport.analysis.mapping.telemetry import MetricWindow
from mapreport.analysis.serving.compiles import CompileFailure
from mapreport.core.kinds import JudgementFamily
from mapreport.report.sections.unit import Facts, Section, same


class FailuresView(msgspec.Struct, frozen=True):
    """The failed compile attempts, the intervals a restart reset, and the counter resets."""

    failed: tuple[CompileFailure, ...]
    restarts: tuple[MetricWindow, ...]
    """The scrape intervals the server's counters reset in."""
    resets: int


def read(f: Facts) -> FailuresView:
    """The compile log's failures and the server's restarts."""
    c, t = f.r.compiled.compiles, f.r.serving.telemetry
    return FailuresView(
        c.failures if c else (),
        tuple(w for w in t.windows if w.reset) if t else (),
        t.resets if t else 0,
    )


SECTION = Section(
    "failures",
    "Failures and restarts",
    read,
    same,
    has=lambda v: bool(v.failed or v.resets),
    family=JudgementFamily.COMPILES,
)
