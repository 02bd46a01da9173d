"""The review checklist (issue 50, item 5): an item passes only when something was checked
and holds; with nothing to check it is not applicable and says what is absent; the evidence
item fails on any action without an n or a CI."""

from __future__ import annotations

import json
from pathlib import Path

from mapreport.analysis.actions import action_params as P
from mapreport.analysis.actions.actions import NO_ROLLBACK, Action, ValidationRow
from mapreport.analysis.actions.checklist import ChecklistItem, checklist
from mapreport.analysis.base.common import Evidence, Interval, Review, Thresholds
from mapreport.analysis.mapping.environment import EnvironmentCheck
from mapreport.core.kinds import (
    ActionKind,
    CheckGap,
    CheckItem,
    CheckState,
    Criterion,
    OwnerRole,
)

LOCKED = EnvironmentCheck({"driver": "1"}, {"driver": "1"}, (), (), ("driver",))
SIGNED = Review(
    sla_p95_us=9_000.0,
    owners=dict.fromkeys(OwnerRole, "someone"),
    signoffs=dict.fromkeys(OwnerRole, "someone, 2026-11-27"),
)


def _action(evidence: Evidence, kind: ActionKind = ActionKind.QUEUEING) -> Action:
    row = ValidationRow("batch=8", "queue_p95_us", 1_000.0, Criterion.HALVED)
    return Action(
        id="0123456789ab",
        kind=kind,
        shape="batch=8",
        owner_role=OwnerRole.MODEL_SERVING_ARCHITECT,
        owner="someone",
        evidence=evidence,
        rollback_trigger=NO_ROLLBACK,
        validation_matrix=(row,),
        impact=0.1,
        params=P.TailShare(evidence.value),
    )


def _items(
    *actions: Action,
    requests: int = 500,
    review: Review = SIGNED,
    env: EnvironmentCheck = LOCKED,
) -> dict[CheckItem, ChecklistItem]:
    return {c.item: c for c in checklist(review, env, actions, Thresholds(), requests)}


def test_an_action_with_n_zero_and_no_ci_fails_the_evidence_item() -> None:
    """Before: the item passed while an action had n = 0 and no CI."""
    bare = _action(Evidence("tail_share.queueing", 0.6, 0, None, ()))
    item = _items(bare)[CheckItem.EVIDENCE]
    assert item.state == CheckState.FAIL
    assert [b.why for b in item.breaches] == ["no_evidence"]


def test_a_ci_that_includes_zero_or_is_missing_fails_and_a_sound_one_passes() -> None:
    zero = _action(Evidence("net_gain_p50", 0.02, 300, Interval(-0.01, 0.05), ()))
    no_ci = _action(Evidence("net_gain_p50", 0.02, 300, None, ()))
    few = _action(Evidence("net_gain_p50", 0.2, 5, Interval(0.1, 0.3), ()))
    sound = _action(Evidence("net_gain_p50", 0.2, 300, Interval(0.1, 0.3), ()))
    assert [b.why for b in _items(zero, no_ci, few)[CheckItem.EVIDENCE].breaches] == [
        "ci_includes_zero",
        "no_ci",
        "few_samples",
    ]
    assert _items(sound)[CheckItem.EVIDENCE].state == CheckState.PASS


def test_a_blocker_states_no_n_and_fails_the_evidence_item() -> None:
    """An action on a missing record (here: the runtime side's environment) rests on no n
    and no CI: the item says so instead of passing over it."""
    ev = Evidence("environment.runtime", None, 0, None, ())
    blocker = _action(ev, ActionKind.OBSERVABILITY)
    item = _items(blocker)[CheckItem.EVIDENCE]
    assert item.state == CheckState.FAIL
    assert item.breaches[0].kind == ActionKind.OBSERVABILITY


def test_a_slice_with_no_action_is_not_applicable_with_its_reason() -> None:
    """Before: evidence and ownership passed with nothing to check."""
    items = _items()
    for item in (CheckItem.EVIDENCE, CheckItem.OWNERSHIP):
        assert items[item].state == CheckState.NOT_APPLICABLE
        assert items[item].gap == CheckGap.NO_ACTIONS
    assert items[CheckItem.SCOPE].state == CheckState.PASS
    assert items[CheckItem.SIGNOFF].state == CheckState.PASS


def test_scope_and_environment_with_nothing_to_check() -> None:
    """A trace alone (no requests, no SLA, one side recorded): neither passes."""
    one_side = EnvironmentCheck({}, {"driver": "1"}, (), (), (), ("runtime",))
    items = _items(requests=0, review=Review(), env=one_side)
    assert items[CheckItem.SCOPE].gap == CheckGap.NO_REQUESTS
    assert items[CheckItem.ENVIRONMENT].gap == CheckGap.ONE_SIDE
    for item in (CheckItem.SCOPE, CheckItem.ENVIRONMENT):
        assert items[item].state == CheckState.NOT_APPLICABLE
    # requests without a target: checked, and failed
    assert _items(review=Review())[CheckItem.SCOPE].state == CheckState.FAIL


def test_findings_and_the_packet_state_the_checklist(demo_reports: Path) -> None:
    """findings.json states each item's state and reason; page 1 of every PDF counts the
    items and names the failing ones and the pitfalls found; the appendix lists them all."""
    from tests.test_render import pdftotext

    for findings in sorted(demo_reports.rglob("findings.json")):
        doc = json.loads(findings.read_text())
        states = [c["state"] for c in doc["checklist"]]
        assert set(states) <= {"pass", "fail", "not_applicable"}
        assert all(c["reason"] for c in doc["checklist"])
        pdf = findings.parent / "report.pdf"
        first = " ".join(pdftotext(pdf, 1).split())
        count = ", ".join(
            f"{states.count(s)} {s.replace('_', ' ')}"
            for s in ("pass", "fail", "not_applicable")
            if s in states
        )
        assert f"Review checklist: {count}" in first, findings
        for c in doc["checklist"]:
            if c["state"] == "fail":
                assert " ".join(c["item"].split()[:3]) in first, c
        for p in doc["pitfalls"]:
            if p["present"]:
                assert " ".join(p["name"].split()[:3]) in first, p
        text = " ".join(pdftotext(pdf).split())
        assert all(" ".join(c["item"].split()[:3]) in text for c in doc["checklist"])
        assert all(" ".join(p["name"].split()[:3]) in text for p in doc["pitfalls"])
