"""Review checklist: each item with why it passed, failed or had nothing to check, what each
pitfall found (the item names are `words.CHECK_ITEMS`), and every role's sign-off. Page 1,
the verdict and the index read its view."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mapreport.analysis.actions.checklist import Breach, ChecklistItem, Pitfall
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import (
    EVIDENCE_FREE,
    CheckGap,
    CheckItem,
    CheckState,
    OwnerRole,
    PitfallKind,
)
from mapreport.report.filters import duration, plural, plural_word
from mapreport.report.lines import CheckLine, Row
from mapreport.report.sections.unit import Facts, Section, same
from mapreport.report.words import CHECK_ITEMS, PITFALLS, env_keys, label, shape_name

CHECK_GAPS: dict[CheckGap, str] = {
    CheckGap.NO_REQUESTS: "not applicable: no per-request records, so no latency to hold to an "
    "SLA target (this slice holds {formats} data)",
    CheckGap.ONE_SIDE: "not applicable: the slice has its {side} side only (recorded: {keys}), "
    "so there is no other side to lock it against",
    CheckGap.NO_ACTIONS: "not applicable: the slice calls for no action",
    CheckGap.IN_PROCESS: "not applicable: the compile side ({formats}) compiled in the serving "
    "process, in the runtime's environment, so there is no other environment to lock it against",
}
"""Why a checklist item had nothing to check."""

BREACHES: dict[str, str] = {
    "no_evidence": "n = 0 and no confidence interval",
    "no_n": "a confidence interval but no n",
    "no_ci": "n = {n} but no confidence interval",
    "ci_includes_zero": "its confidence interval includes zero (n = {n})",
    "few_samples": "n = {n}, below {min_samples}",
}
"""How an action breaks the evidence rules (`checklist.BreachWhy`)."""


def _breach(b: Breach, r: SliceResult) -> str:
    """One action that breaks the evidence rules, by its number in the report."""
    number = next((i for i, a in enumerate(r.actions, 1) if a.id == b.action_id), None)
    who = f"#{number}" if number else b.action_id
    what = BREACHES[b.why].format(n=f"{b.n or 0:,}", min_samples=r.thresholds.min_samples)
    if b.kind in EVIDENCE_FREE:
        what += ", as every blocker: it rests on a missing or differing record"
    return f"{who} {label(b.kind)} ({shape_name(b.shape)}): {what}"


def _environment_reason(r: SliceResult) -> str:
    env = r.environment
    if env.locked:
        return f"both sides match on {env_keys(env.compared_keys)}"
    if not env.comparable:
        return (
            "not comparable: no key is stated on both sides (neither states "
            f"{env_keys(env.uncompared_keys)} on both)"
        )
    return "; ".join(
        [f"no environment record on the {s} side" for s in env.missing_sides]
        + [
            f"{env_keys((m.key,))} differs ({'/'.join(m.compile) or '-'} vs "
            f"{'/'.join(m.runtime) or '-'})"
            for m in env.mismatches
        ]
    )


def check_reason(c: ChecklistItem, r: SliceResult) -> str:
    """Why a checklist item passed, failed, or had nothing to check."""
    rv, env = r.review, r.environment
    if c.gap is not None:
        side = " and ".join(env.sides)
        recorded = {**env.compile, **env.runtime}
        formats = ", ".join(
            env.unrecorded_formats
            if c.gap is CheckGap.IN_PROCESS
            else dict.fromkeys(s.format for s in r.sources)
        )
        formats = formats or "no"
        keys = env_keys(tuple(recorded)) if recorded else "nothing"
        return CHECK_GAPS[c.gap].format(formats=formats, side=side, keys=keys)
    passed = c.state == CheckState.PASS
    if c.item == CheckItem.SCOPE:
        sla = [
            f"p95 {duration(rv.sla_p95_us)}" if rv.sla_p95_us else "",
            f"p99 {duration(rv.sla_p99_us)}" if rv.sla_p99_us else "",
        ]
        text = ", ".join(s for s in sla if s)
        if text:
            if rv.sla_from:
                return f"SLA from the {rv.sla_from}: {text} (none configured)"
            return f"SLA configured: {text}"
        return f"no SLA target configured for {r.name} ([[slices]] in the config)"
    if c.item == CheckItem.ENVIRONMENT:
        return _environment_reason(r)
    if c.item == CheckItem.EVIDENCE:
        if passed:
            n = len(r.actions)
            which = "its one action rests" if n == 1 else f"each of its {n:,} actions rests"
            return f"{which} on n and a CI that excludes zero"
        return "; ".join(_breach(b, r) for b in c.breaches)
    if c.item == CheckItem.OWNERSHIP:
        if passed:
            return (
                f"{plural(len(r.actions), 'action')}, each with an owner, a rollback trigger and a "
                "validation matrix"
            )
        if not c.roles:
            bare = sum(1 for a in r.actions if not a.validation_matrix)
            return f"{plural(bare, 'action')} without a validation matrix"
        roles = f"{plural_word(len(c.roles), 'role')} {', '.join(label(x) for x in c.roles)}"
        return f"no owner configured for the {roles} ([owners] in the config)"
    if passed:
        return "signed by " + ", ".join(
            f"{label(OwnerRole(k)) if k in set(OwnerRole) else k}: {v}"
            for k, v in sorted(rv.signoffs.items())
        )
    return "missing sign-off: " + ", ".join(label(x) for x in c.roles)


def checklist_count(states: Sequence[CheckState]) -> str:
    """How the checklist stands, in one phrase: `3 pass, 1 fail, 1 not applicable`."""
    return ", ".join(
        f"{n} {label(s)}" for s in CheckState if (n := sum(1 for x in states if x == s))
    )


def pitfall_detail(p: Pitfall, r: SliceResult) -> str:
    """What a pitfall found (or that it found nothing)."""
    if p.kind == PitfallKind.SYNTHETIC_ONLY:
        synthetic = r.coverage.synthetic_only_buckets
        if not r.coverage.buckets:
            return "not applicable: no compiled bucket to check"
        if not synthetic:
            return "every compiled bucket served production traffic"
        return ", ".join(f"{b.plan_id}: {b.bucket}" for b in synthetic) + " compiled, never served"
    if p.kind == PitfallKind.AVERAGE_ONLY:
        if not p.actions:
            return "every action's shape has a p95 with enough samples"
        return ", ".join(f"{aid} at {shape}" for aid, shape in p.actions) + (
            " rest on shapes without a p95"
        )
    q = r.precision
    if p.kind == PitfallKind.DESCRIBED_PRECISION:
        if not q.described:
            return "the description names no precision, or one the plan runs"
        return (
            f"the description says {', '.join(q.described)}; the plan runs "
            f"{', '.join(q.planned)}: correct the description or check the plan that was served"
        )
    return (
        "; ".join(
            [f"{x}: no quality record" for x in q.missing]
            + [f"{x}: the quality drop exceeds the largest drop allowed" for x in q.failing]
        )
        or "every precision change has passing quality evidence"
    )


class ChecklistView(msgspec.Struct, frozen=True):
    """The checklist, the pitfalls and the sign-offs, in words."""

    checklist: tuple[CheckLine, ...]
    pitfalls: tuple[Row, ...]
    signoffs: tuple[tuple[str, str, str, bool], ...]
    """(role, owner, signed by, signed) per role."""

    @property
    def count(self) -> str:
        """How many items pass, fail and are not applicable (`3 pass, 1 fail, 1 not
        applicable`)."""
        return checklist_count([c.state for c in self.checklist])

    @property
    def failed(self) -> tuple[str, ...]:
        """The items that fail, by name."""
        return tuple(c.name for c in self.checklist if c.failed)


class Check(msgspec.Struct):
    """One item of findings.json `checklist`."""

    item: str
    state: CheckState
    reason: str


class PitfallLine(msgspec.Struct):
    """One pitfall of findings.json `pitfalls`."""

    name: str
    present: bool
    detail: str


class Fragment(msgspec.Struct):
    """findings.json `checklist` and `pitfalls`."""

    checklist: tuple[Check, ...]
    pitfalls: tuple[PitfallLine, ...]


def read(f: Facts) -> ChecklistView:
    """Each item and pitfall with its words, and each role's sign-off."""
    r = f.r
    rv = r.review
    return ChecklistView(
        tuple(CheckLine(CHECK_ITEMS[c.item], c.state, check_reason(c, r)) for c in r.checklist),
        tuple(Row(PITFALLS[p.kind], p.present, pitfall_detail(p, r)) for p in r.pitfalls),
        tuple(
            (role, rv.owners.get(role, "–"), rv.signoffs.get(role, "missing"), role in rv.signoffs)
            for role in OwnerRole
        ),
    )


def fragment(v: ChecklistView) -> Fragment:
    """Each item's state and reason, each pitfall's finding."""
    return Fragment(
        tuple(Check(c.name, c.state, c.text) for c in v.checklist),
        tuple(PitfallLine(p.name, p.flag, p.text) for p in v.pitfalls),
    )


SECTION = Section("checklist", "Review checklist", read, same, fragment)
