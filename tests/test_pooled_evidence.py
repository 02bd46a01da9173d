"""An action rests on the evidence of what it names (issue 50, item 3): its evidence n counts
its own shape's requests, a figure pooled from other shapes says so, and acts on no shape with
fewer than min_samples_p95 requests of its own (insufficient evidence, no tuning action, what to
record listed). A shape with its own evidence is acted on (control)."""

from __future__ import annotations

from typing import Any

from mapreport.analysis.actions.actions import Scope, gain_evidence, shape_actions
from mapreport.analysis.actions.observe import profile_next
from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.steps.decision import borrows, decide
from mapreport.core.kinds import (
    ActionKind,
    BottleneckClass,
    Collect,
    Decision,
    GainBasis,
    GainState,
)
from mapreport.core.records import replace

TH = Thresholds()


def test_a_pooled_figure_acts_on_no_thin_shape(demo_results: Any) -> None:
    """A shape of 18 requests, all eager fallback, whose gain compares them with 231 compiled
    requests of comparable shapes: its decision is insufficient_evidence, no action is
    proposed, what to profile next asks for its requests; the evidence n of a shape with
    enough requests of its own counts them, and says how many it pools."""
    r = demo_results["bert-base"]
    m = next(
        s
        for s in r.shapes
        if s.decision == Decision.CLOSE_THE_LOOP and s.diagnosis.cls == BottleneckClass.NONE
    )
    pooled_gain = replace(m.gain, basis=GainBasis.COMPARABLE_SHAPES, n_adapted=231, n_baseline=18)
    assert pooled_gain.state == GainState.SIGNIFICANT
    thin = replace(m, n=18, n_total=18, n_adapted=0, n_fallback=18, n_static=0, gain=pooled_gain)
    assert borrows(thin.gain, thin.n, TH)
    decision = decide(thin.accuracy.state, thin.gain.state, borrows(thin.gain, thin.n, TH))
    assert decision == Decision.INSUFFICIENT_EVIDENCE
    thin = replace(thin, decision=decision)
    s = Scope(r.workload, r.slice, TH, r.review, r.shapes, None, r.latency, r.blocking, None)
    assert not [a for a in shape_actions(s, thin, None) if a.kind == ActionKind.CLOSE_THE_LOOP]
    wanted = profile_next([replace(thin, traffic_share=0.05)], TH)
    assert (wanted[0].collect, wanted[0].need) == (Collect.MORE_REQUESTS, TH.min_samples_p95 - 18)

    # control: enough requests of its own (60 eager ones): it acts, n = 60, 231 pooled
    thick = replace(thin, n=60, n_fallback=60, decision=Decision.CLOSE_THE_LOOP)
    thick = replace(thick, gain=replace(pooled_gain, n_baseline=60))
    assert not borrows(thick.gain, thick.n, TH)
    ev = gain_evidence(thick, TH)
    assert (ev.n, ev.pooled_n) == (60, 231)
    (loop,) = [a for a in shape_actions(s, thick, None) if a.kind == ActionKind.CLOSE_THE_LOOP]
    assert (loop.evidence.n, loop.evidence.pooled_n) == (60, 231)
    # and a shape's own comparison is its own: nothing pooled
    own = gain_evidence(m, TH)
    assert (own.n, own.pooled_n) == (m.gain.n_adapted, 0)
