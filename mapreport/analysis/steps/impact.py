"""What an action acts on, in a unit a reader can act on: the time it holds over the report's
period (a night, on the nightly job), or the share of device time or of requests it concerns.
`Action.impact` stays the ordering key (traffic share times the relative size of the effect:
no unit); this is the figure a reader weighs (docs/metrics.md, "Impact")."""

from __future__ import annotations

from mapreport.analysis.actions import action_params as P
from mapreport.analysis.actions.action_params import Impact
from mapreport.analysis.actions.actions import SLICE_WIDE, Action
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import EVIDENCE_FREE, ActionKind, ImpactUnit

TAIL_KINDS = frozenset(
    {
        ActionKind.QUEUEING,
        ActionKind.CORE_IMBALANCE,
        ActionKind.MAPPING_FALLBACK,
        ActionKind.MEMORY_BURST,
        ActionKind.ADAPTATION_BLOCKING,
    }
)
"""Kinds whose evidence is a driver's share of a tail's excess."""
GAIN_KINDS = frozenset(
    {ActionKind.ADAPTATION_OVERHEAD, ActionKind.SPECIALISE, ActionKind.CLOSE_THE_LOOP}
)
"""Kinds whose evidence is a shape's net p50 adaptation gain."""


def _tail(a: Action, r: SliceResult) -> Impact:
    """The driver's part of the tail excess: its share of the excess times the excess (the
    blocking action: the wait behind the adapting requests it names)."""
    unit = ImpactUnit.LATENCY_US
    if isinstance(a.params, P.Blocking) and a.params.wait_us is not None:
        return Impact(unit, a.params.wait_us)
    shape = next((m for m in r.shapes if m.shape == a.shape), None)
    tail = r.tail if a.shape == SLICE_WIDE else shape.tail if shape else None
    share = a.evidence.value
    if tail is None or share is None or not a.evidence.metric.startswith("tail_share."):
        return Impact(unit)
    return Impact(unit, share * tail.excess_us)


def _gain(a: Action, r: SliceResult) -> Impact:
    """The compute the shape's requests save (or lose) at its net median gain."""
    m = next((m for m in r.shapes if m.shape == a.shape), None)
    g = m.gain if m else None
    if m is None or g is None or g.net_gain_p50 is None or g.baseline_p50_us is None:
        return Impact(ImpactUnit.COMPUTE_US)
    return Impact(ImpactUnit.COMPUTE_US, abs(g.net_gain_p50) * g.baseline_p50_us * m.n)


def action_impact(a: Action, r: SliceResult) -> Impact:
    """An action's impact in the unit its evidence supports: its params' own where
    they hold it (`ActionParams.impact`), else by the kind's evidence."""
    p = a.params
    if a.kind in EVIDENCE_FREE or isinstance(p, P.Consistency | P.MissingField):
        return Impact(ImpactUnit.NONE)
    if a.kind in TAIL_KINDS:
        return _tail(a, r)
    if a.kind in GAIN_KINDS:
        return _gain(a, r)
    own = p.impact()
    if own is not None:
        return own
    share = next((m.traffic_share for m in r.shapes if m.shape == a.shape), None)
    return Impact(ImpactUnit.REQUEST_SHARE, share)
