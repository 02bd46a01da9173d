"""The findings.json types several sections state: a tail split, an evidence record with its
note (shapes, the slice's tail, actions), and the document's head. Each is a `msgspec.Struct`:
findings.json's schema is generated from them and the sections' fragments."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import Evidence, Interval
from mapreport.analysis.serving.tail import TailDrivers
from mapreport.core.kinds import Driver
from mapreport.report.words import evidence_note


class Tail(msgspec.Struct):
    """A tail split: each driver's share of the excess above p50 of the requests above p95
    (its p50 and p95 are the shape's or the slice's own)."""

    shares: dict[Driver, float]
    share_ci: dict[Driver, Interval]
    material: bool
    n: int
    n_tail: int
    excess_us: float
    unmeasured: tuple[Driver, ...]


class Evidenced(msgspec.Struct):
    """What a finding rests on (`Evidence`), with what its figure is where its metric name
    does not say it."""

    metric: str
    value: float | None
    n: int
    ci: Interval | None
    sources: tuple[str, ...]
    pooled_n: int
    note: str


def tail(t: TailDrivers | None) -> Tail | None:
    """A tail split as findings.json states it."""
    if t is None:
        return None
    return Tail(t.shares, t.share_ci, t.material, t.n, t.n_tail, t.excess_us, t.unmeasured)


def evidence(e: Evidence | None) -> Evidenced | None:
    """An evidence record with its note."""
    if e is None:
        return None
    return Evidenced(e.metric, e.value, e.n, e.ci, e.sources, e.pooled_n, evidence_note(e))
