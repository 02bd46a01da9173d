"""Environment lock: the compile and the runtime side's environment records, key by key, and
whether they match."""

from __future__ import annotations

import msgspec

from mapreport.analysis.mapping.environment import EnvironmentCheck, EnvMismatch
from mapreport.core.kinds import JudgementFamily
from mapreport.core.schema import ENVIRONMENT_SHOWN
from mapreport.report.sections.unit import Facts, Section, shallow


class Card(msgspec.Struct, frozen=True):
    """Page 1's environment figure, the HTML's and the PDF's: its word, a note under it, and
    whether it reads well (`environment.judge` rests on the same check: "locked" exactly where
    it is healthy)."""

    word: str
    note: str
    ok: bool


class EnvironmentView(msgspec.Struct, frozen=True):
    """Both sides' records, the keys the table shows, those that differ, and page 1's card."""

    env: EnvironmentCheck
    keys: tuple[str, ...]
    mismatch_keys: frozenset[str]
    card: Card


def card(env: EnvironmentCheck) -> Card:
    """Locked where both sides match on a compared key; recorded where the slice has one side
    (nothing to lock it against: not judged); else not comparable or not locked."""
    if not env.comparable:
        return Card("not comparable", "", False)
    if not env.locked:
        return Card("not locked", "", False)
    if env.compared:
        return Card("locked", "", True)
    return Card("recorded", f"{' and '.join(env.sides)} side only", True)


class Environment(msgspec.Struct):
    """findings.json `environment` (`EnvironmentCheck`, with whether it is locked and whether
    the sides could be compared at all)."""

    compile: dict[str, str]
    runtime: dict[str, str]
    mismatches: tuple[EnvMismatch, ...]
    missing_sides: tuple[str, ...]
    compared_keys: tuple[str, ...]
    sides: tuple[str, ...]
    unrecorded: tuple[str, ...]
    unrecorded_formats: tuple[str, ...]
    locked: bool
    comparable: bool


class Fragment(msgspec.Struct):
    """findings.json `environment`."""

    environment: Environment


def read(f: Facts) -> EnvironmentCheck:
    """The slice's environment check."""
    return f.r.environment


def view(env: EnvironmentCheck) -> EnvironmentView:
    """The keys either side records, in the table's order, and the mismatched ones."""
    keys = tuple(k for k in ENVIRONMENT_SHOWN if k in env.compile or k in env.runtime)
    return EnvironmentView(env, keys, frozenset(m.key for m in env.mismatches), card(env))


def fragment(v: EnvironmentView) -> Fragment:
    """The check with its two verdicts."""
    env = v.env
    return Fragment(Environment(**shallow(env), locked=env.locked, comparable=env.comparable))


SECTION = Section(
    "environment",
    "Environment lock",
    read,
    view,
    fragment,
    family=JudgementFamily.ENVIRONMENT,
)
