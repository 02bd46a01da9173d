"""Retuning actions: each action with its evidence and pack, impact, owner, rollback trigger,
validation matrix and ticket (the verdict, page 1 and the packet name the first ones)."""

from __future__ import annotations

import msgspec

from mapreport.core.kinds import ActionKind, ImpactUnit, OwnerRole
from mapreport.report import fragments, prose, words
from mapreport.report.fragments import Evidenced
from mapreport.report.lines import ActionView
from mapreport.report.sections.unit import Facts, Section, same
from mapreport.report.sources import source_paths


class ActionsView(msgspec.Struct, frozen=True):
    """Tonight's actions with their words, and the input files' shown paths."""

    actions: tuple[ActionView, ...]
    paths: dict[str, str]
    """Per source id: the path of the file its evidence rests on, as the report names it."""


class Rollback(msgspec.Struct):
    """An action's rollback trigger, with its window and words."""

    metric: str
    threshold: float | None
    window: str
    text: str


class Validation(msgspec.Struct):
    """One row of an action's validation matrix, its criterion in words."""

    shape: str
    metric: str
    baseline: float | None
    criterion: str


class ImpactLine(msgspec.Struct):
    """What an action acts on, in its unit, and in words."""

    unit: ImpactUnit
    value: float | None
    share: float | None
    text: str


class ActionEntry(msgspec.Struct):
    """One action of findings.json `actions` (its kind is `class`)."""

    id: str
    title: str
    shape: str
    kind: ActionKind = msgspec.field(name="class")
    owner_role: OwnerRole
    owner: str | None
    evidence: Evidenced | None
    rollback_trigger: Rollback
    validation_matrix: tuple[Validation, ...]
    impact: ImpactLine


class Fragment(msgspec.Struct):
    """findings.json `actions`."""

    actions: tuple[ActionEntry, ...]


def read(f: Facts) -> ActionsView:
    """Tonight's actions, and how the report names the files they rest on."""
    return ActionsView(f.actions, source_paths(f.r.sources))


def entry(v: ActionView) -> ActionEntry:
    """One action as findings.json states it."""
    a, rb, i = v.a, v.a.rollback_trigger, v.impact
    return ActionEntry(
        id=a.id,
        title=v.title,
        shape=a.shape,
        kind=a.kind,
        owner_role=a.owner_role,
        owner=a.owner,
        evidence=fragments.evidence(a.evidence),
        rollback_trigger=Rollback(rb.metric, rb.threshold, prose.rollback_window(rb), v.rollback),
        validation_matrix=tuple(
            Validation(x.shape, x.metric, x.baseline, words.criterion(x))
            for x in a.validation_matrix
        ),
        impact=ImpactLine(i.unit, i.value, i.share, v.impact_text),
    )


def fragment(v: ActionsView) -> Fragment:
    """Every action."""
    return Fragment(tuple(entry(x) for x in v.actions))


SECTION = Section("actions", "Retuning actions", read, same, fragment)
