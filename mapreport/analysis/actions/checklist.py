"""The review checklist and the known pitfalls, evaluated from data and configuration."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from mapreport.analysis.actions.actions import Action
from mapreport.analysis.base.common import QualityGuard, Review, Thresholds
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.base.query import records
from mapreport.analysis.mapping.coverage import Coverage
from mapreport.analysis.mapping.environment import EnvironmentCheck
from mapreport.core.connection import Connection
from mapreport.core.kinds import (
    ActionKind,
    CheckGap,
    CheckItem,
    CheckState,
    JudgementFamily,
    OwnerRole,
    PitfallKind,
    Status,
    StatusReason,
)

if TYPE_CHECKING:
    from mapreport.analysis.serving.shape import ShapeMetrics

REFERENCE_PRECISIONS = frozenset({"fp32", "tf32", "float32"})
"""Precisions that are not a change; any other plan precision needs quality evidence."""
PRECISION_WORD = re.compile(r"\b(?:fp|bf|tf|int|float|bfloat|mxfp|nvfp)\d{1,2}\b", re.IGNORECASE)
"""A precision named in free text: fp8, bf16, int4, float16, nvfp4."""
PRECISION_ALIASES = {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16", "float8": "fp8"}


class PrecisionCheck(msgspec.Struct, frozen=True):
    """The precision changes of a slice's plans, by their quality evidence."""

    passing: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    """Changes without any quality record."""
    failing: tuple[str, ...] = ()
    """Changes whose quality drop exceeds the record's max_drop."""
    described: tuple[str, ...] = ()
    """Precisions the slice's description names when its plans run none of them."""
    planned: tuple[str, ...] = ()
    """Every precision the slice's plans run."""
    records: tuple[QualityGuard, ...] = ()
    """The first quality record of each changed precision that has one."""

    @property
    def guard(self) -> QualityGuard | None:
        """The change whose quality guardrail the validation matrices carry, with its record."""
        changed = self.missing + self.failing + self.passing
        if not changed:
            return None
        known = {g.precision: g for g in self.records}
        return known.get(changed[0], QualityGuard(changed[0]))


BreachWhy = Literal["no_evidence", "no_n", "no_ci", "ci_includes_zero", "few_samples"]
"""How an action breaks the evidence rules: it states neither n nor a CI, no n (none, or 0),
no CI, a CI that includes zero, or an n below min_samples."""


class Breach(msgspec.Struct, frozen=True):
    """An action that breaks the evidence rules, and how."""

    action_id: str
    kind: ActionKind
    shape: str
    why: BreachWhy
    n: int | None = None


class ChecklistItem(msgspec.Struct, frozen=True):
    """One review-checklist item, evaluated from data and configuration: passed only when
    something was checked, else not applicable with what is absent (`gap`)."""

    item: CheckItem
    state: CheckState
    gap: CheckGap | None = None
    """Why nothing was checked (state not_applicable)."""
    roles: tuple[OwnerRole, ...] = ()
    """Roles without an owner (ownership) or without a sign-off (signoff)."""
    breaches: tuple[Breach, ...] = ()


class Pitfall(msgspec.Struct, frozen=True):
    """A known pitfall and whether this slice falls into it."""

    kind: PitfallKind
    present: bool
    actions: tuple[tuple[str, str], ...] = ()
    """(action id, shape) of the actions an average-only claim rests on."""


def named_precisions(text: str) -> set[str]:
    """The precisions free text names, in their short form (bfloat16 is bf16)."""
    words = {w.lower() for w in PRECISION_WORD.findall(text)}
    return {PRECISION_ALIASES.get(w, w) for w in words}


def precision_changes(
    plan_precisions: Sequence[str], quality: Sequence[dict[str, Any]], description: str = ""
) -> PrecisionCheck:
    """Precision changes of a slice's plans, by their quality evidence, and the precisions its
    description names when the plans run none of them (a reviewer reads the description)."""
    planned = {PRECISION_ALIASES.get(p.lower(), p.lower()) for p in plan_precisions if p}
    named = named_precisions(description)
    described = tuple(sorted(named)) if named and planned and not named & planned else ()
    changed = sorted({p for p in plan_precisions if p and p.lower() not in REFERENCE_PRECISIONS})
    ok, missing, failing = [], [], []
    for p in changed:
        recs = [q for q in quality if q["precision"] == p]
        if not recs:
            missing.append(p)
        elif all(
            q["max_drop"] is None or q["baseline"] - q["value"] <= q["max_drop"] for q in recs
        ):
            ok.append(p)
        else:
            failing.append(p)
    first: dict[str, dict[str, Any]] = {}
    for rec in quality:
        first.setdefault(rec["precision"], rec)
    records = tuple(
        QualityGuard(p, f["metric"], f["baseline"], f["value"], f["max_drop"])
        for p in changed
        if (f := first.get(p)) is not None
    )
    return PrecisionCheck(
        tuple(ok), tuple(missing), tuple(failing), described, tuple(sorted(planned)), records
    )


def _breach(a: Action, th: Thresholds) -> Breach | None:
    """How an action breaks the evidence rules, or None. Every action is held to them: one
    that rests on a missing or differing record (a blocker) states no n and no CI, so the
    evidence item fails until the record is there."""
    ev = a.evidence
    if not ev.n:
        return Breach(a.id, a.kind, a.shape, "no_evidence" if ev.ci is None else "no_n", ev.n)
    if ev.ci is None:
        return Breach(a.id, a.kind, a.shape, "no_ci", ev.n)
    if not ev.ci.excludes_zero():
        return Breach(a.id, a.kind, a.shape, "ci_includes_zero", ev.n)
    # a tail share counts tail requests; its shape already passed min_samples_p95 in classify
    if not ev.metric.startswith("tail_share") and ev.n < th.min_samples:
        return Breach(a.id, a.kind, a.shape, "few_samples", ev.n)
    return None


def _state(ok: bool) -> CheckState:
    return CheckState.PASS if ok else CheckState.FAIL


def checklist(
    review: Review,
    env: EnvironmentCheck,
    actions: Sequence[Action],
    th: Thresholds,
    requests: int,
) -> tuple[ChecklistItem, ...]:
    """The five review items of METRICS.md: each passes only when something was checked and
    held, fails with what failed it, or is not applicable with what is absent (`requests`:
    the slice's per-request latency records)."""
    na = CheckState.NOT_APPLICABLE
    breaches = tuple(b for a in actions if (b := _breach(a, th)))
    unowned = tuple(sorted({a.owner_role for a in actions if not a.owner}))
    unsigned = tuple(role for role in OwnerRole if role not in review.signoffs)
    sla = bool(review.sla_p95_us or review.sla_p99_us)
    if sla or requests:
        scope = ChecklistItem(CheckItem.SCOPE, _state(sla))
    else:
        scope = ChecklistItem(CheckItem.SCOPE, na, CheckGap.NO_REQUESTS)
    if env.unrecorded and not env.missing_sides and not env.mismatches:
        environment = ChecklistItem(CheckItem.ENVIRONMENT, na, CheckGap.IN_PROCESS)
    elif env.locked and not env.compared:
        environment = ChecklistItem(CheckItem.ENVIRONMENT, na, CheckGap.ONE_SIDE)
    else:
        environment = ChecklistItem(CheckItem.ENVIRONMENT, _state(env.locked))
    if not actions:
        evidence = ChecklistItem(CheckItem.EVIDENCE, na, CheckGap.NO_ACTIONS)
        ownership = ChecklistItem(CheckItem.OWNERSHIP, na, CheckGap.NO_ACTIONS)
    else:
        evidence = ChecklistItem(CheckItem.EVIDENCE, _state(not breaches), breaches=breaches)
        owned = not unowned and all(a.validation_matrix for a in actions)
        ownership = ChecklistItem(CheckItem.OWNERSHIP, _state(owned), roles=unowned)
    signoff = ChecklistItem(CheckItem.SIGNOFF, _state(not unsigned), roles=unsigned)
    return (scope, environment, evidence, ownership, signoff)


def pitfalls(
    coverage: Coverage,
    actions: Sequence[Action],
    shapes: Sequence[ShapeMetrics],
    precision: PrecisionCheck,
) -> tuple[Pitfall, ...]:
    """The seed's pitfalls (synthetic-only shapes, average-only claims, precision changes
    without quality evidence) and a description that names another precision than the plan."""
    by_shape = {m.shape: m for m in shapes}
    average_only = tuple(
        (a.id, a.shape)
        for a in actions
        if a.shape in by_shape and "latency_p95_us" in by_shape[a.shape].insufficient
    )
    return (
        Pitfall(PitfallKind.SYNTHETIC_ONLY, bool(coverage.synthetic_only_buckets)),
        Pitfall(PitfallKind.AVERAGE_ONLY, bool(average_only), average_only),
        Pitfall(
            PitfallKind.PRECISION_WITHOUT_QUALITY, bool(precision.missing or precision.failing)
        ),
        Pitfall(PitfallKind.DESCRIBED_PRECISION, bool(precision.described)),
    )


def quality_records(con: Connection, workload: str, slice_: str) -> list[dict[str, Any]]:
    """Quality evidence of a slice (records without a slice apply to every slice), the slice's
    own records first, then by file and line: a precision's first record is the guard every
    validation matrix names, and without an order it was the scan's pick."""
    cur = con.execute(
        """SELECT precision, metric, baseline, value, max_drop, source_id FROM quality
           WHERE workload = $w AND (slice = $s OR slice = '')
           ORDER BY slice = $s DESC, source_id, line""",
        {"w": workload, "s": slice_},
    )
    return records(cur)


def judge_quality(p: PrecisionCheck) -> Judgement | None:
    """Precision changes against their quality evidence: failing when a change's quality drop
    exceeds its record's max_drop; at risk when a change has no quality record or the
    description names a precision the plans do not run; healthy when every change holds its
    bound (None: the plans run no precision, or only reference precisions)."""
    family = JudgementFamily.QUALITY
    changes = len(p.passing) + len(p.missing) + len(p.failing)
    if p.failing:
        reason, state, subject = StatusReason.QUALITY_DROP, Status.FAILING, p.failing[0]
    elif p.missing:
        reason, state, subject = StatusReason.NO_QUALITY_EVIDENCE, Status.AT_RISK, p.missing[0]
    elif p.described:
        reason, state, subject = StatusReason.DESCRIBED_PRECISION, Status.AT_RISK, p.described[0]
    elif p.passing:
        reason, state, subject = StatusReason.QUALITY_HELD, Status.HEALTHY, p.passing[0]
    else:
        return None
    return Judgement(family, state, reason, float(changes), n=changes, subject=subject)
