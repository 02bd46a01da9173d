"""What to profile next: the shapes whose findings are thin but matter, and what to collect
to settle them (more requests, a profiler trace of the tail, per-core or memory telemetry,
request arrivals, static-plan requests), most valuable first."""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from mapreport.analysis.actions.actions import SLICE_WIDE
from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.core.kinds import AccuracyState, ClassBasis, Collect, Driver
from mapreport.core.shapes import UNKNOWN

MATERIAL_TRAFFIC = 0.005
"""A shape below this share of the slice's requests is not worth a collection of its own."""
P99_TRAFFIC = 0.01
"""From this share of traffic up, a shape short of the p99 evidence threshold is listed."""
MOST = 10
"""Items the list keeps."""
UNDECIDED = (ClassBasis.WEAK_EVIDENCE, ClassBasis.TIE, ClassBasis.NO_DRIVER_DECIDES)
TELEMETRY = {
    Driver.BLOCKED_BEHIND_ADAPTATION: Collect.SERVER_TIMING,
    Driver.QUEUEING: Collect.SERVER_TIMING,
    Driver.MAPPING_FALLBACK: Collect.SERVER_TIMING,
    Driver.CORE_IMBALANCE: Collect.CORE_TELEMETRY,
    Driver.MEMORY_BURST: Collect.MEMORY,
}
"""What settles a driver the telemetry could not measure (client-side timing: the server's
queue and compute split)."""


class ProfileItem(msgspec.Struct, frozen=True):
    """One collection that would settle a thin finding on a shape that matters."""

    shape: str
    collect: Collect
    traffic_share: float
    need: int | None
    """More requests needed (of the shape, or on its static plan); None for a trace or field."""
    ci_width: float | None
    """The width of the undecided figure's 95% CI (a tail share), when there is one."""
    score: float
    """Traffic share x what is unknown (the CI width; 1 for an unmeasured figure)."""


def _items(m: ShapeMetrics, th: Thresholds) -> list[ProfileItem]:
    share, out = m.traffic_share, list[ProfileItem]()
    if m.n == 0 or m.shape == UNKNOWN:
        # failed requests only, or a shape nobody can name: no collection settles a finding
        return out

    def add(c: Collect, need: int | None, width: float | None, weight: float) -> None:
        out.append(ProfileItem(m.shape, c, share, need, width, share * weight))

    c = m.diagnosis
    if c.basis == ClassBasis.LATENCY_NOT_MEASURED:
        add(Collect.ARRIVALS, None, None, 1.0)
    elif m.n < th.min_samples_p95:
        add(Collect.MORE_REQUESTS, th.min_samples_p95 - m.n, None, 1.0)
    elif m.n < th.min_samples_p99 and share >= P99_TRAFFIC:
        add(Collect.MORE_REQUESTS, th.min_samples_p99 - m.n, None, 0.5)
    t = m.tail
    if t is not None and t.material and c.basis in UNDECIDED:
        ci = c.evidence.ci if c.evidence is not None else None
        width = None if ci is None else ci.high - ci.low
        add(Collect.PROFILER_TRACE, None, width, 1.0 if width is None else width)
        for what in dict.fromkeys(TELEMETRY[d] for d in t.unmeasured):
            add(what, None, None, 1.0)
    if m.covered and m.accuracy.state == AccuracyState.NOT_MEASURED and m.n:
        add(Collect.STATIC_REQUESTS, th.min_samples - m.n_static, None, 0.5)
    return out


def profile_next(shapes: Sequence[ShapeMetrics], th: Thresholds) -> tuple[ProfileItem, ...]:
    """The MOST collections worth making, by score (ties: shape, what)."""
    items = [i for m in shapes if m.traffic_share >= MATERIAL_TRAFFIC for i in _items(m, th)]
    # arrivals are recorded by the server for every shape at once: one item for the slice
    unrecorded = [i for i in items if i.collect == Collect.ARRIVALS]
    items = [i for i in items if i.collect != Collect.ARRIVALS]
    if unrecorded:
        share = math.fsum(i.traffic_share for i in unrecorded)
        items.append(ProfileItem(SLICE_WIDE, Collect.ARRIVALS, share, None, None, share))
    return tuple(sorted(items, key=lambda i: (-i.score, i.shape, i.collect))[:MOST])
