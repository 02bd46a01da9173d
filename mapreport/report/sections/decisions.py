"""Accuracy versus gain: the decision per shape, the matrix of how many shapes each got, and
what each decision asks of the team."""

from __future__ import annotations

import msgspec

from mapreport.core.kinds import Decision
from mapreport.report.lines import ShapeLine
from mapreport.report.sections.unit import Facts, Section
from mapreport.report.words import DECISION_MEANING


class DecisionGroup(msgspec.Struct, frozen=True):
    """The shapes of one decision, with what the decision asks."""

    decision: Decision
    meaning: str
    shapes: tuple[ShapeLine, ...]


class DecisionsView(msgspec.Struct, frozen=True):
    """Every decision with its shapes, in the order of `Decision`."""

    groups: tuple[DecisionGroup, ...]
    tolerance: float
    """The APE at or below which a prediction is accurate (the matrix's row)."""

    @property
    def counts(self) -> dict[str, int]:
        """Shapes per decision."""
        return {g.decision: len(g.shapes) for g in self.groups}


class DecisionShapes(msgspec.Struct):
    """One decision of findings.json `decisions`: its shapes and what it asks."""

    shapes: tuple[str, ...]
    meaning: str


class Fragment(msgspec.Struct):
    """findings.json `decisions`."""

    decisions: dict[Decision, DecisionShapes]


def read(f: Facts) -> tuple[tuple[ShapeLine, ...], float]:
    """The shapes with their reasons, and the accuracy tolerance."""
    return f.shapes, f.r.thresholds.tolerance


def view(x: tuple[tuple[ShapeLine, ...], float]) -> DecisionsView:
    """The shapes grouped by decision."""
    lines, tolerance = x
    groups = tuple(
        DecisionGroup(d, DECISION_MEANING[d], tuple(s for s in lines if s.m.decision == d))
        for d in Decision
    )
    return DecisionsView(groups, tolerance)


def fragment(v: DecisionsView) -> Fragment:
    """Each decision's shapes and meaning."""
    return Fragment(
        {
            g.decision: DecisionShapes(tuple(x.m.shape for x in g.shapes), g.meaning)
            for g in v.groups
        }
    )


SECTION = Section(
    "decisions",
    "Accuracy versus gain: decision per shape",
    read,
    view,
    fragment,
    needs_requests=True,
    needs_plan=True,
)
