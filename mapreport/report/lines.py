"""The lines several sections print: one action with its words and evidence link, one checklist
or pitfall line (the view builds them; the verdict and findings.json read them)."""

from __future__ import annotations

from dataclasses import dataclass

from mapreport.analysis.actions.actions import Action
from mapreport.analysis.steps.impact import Impact
from mapreport.core.kinds import CheckState


@dataclass(frozen=True)
class ActionView:
    """One action as the report shows it, with where its evidence is."""

    a: Action
    title: str
    rollback: str
    shape_key: str
    """The anchor key of the action's shape ('' for a slice-wide action)."""
    evidence_href: str
    """The report anchor showing the evidence the action rests on."""
    impact: Impact
    """What the action acts on, in its unit."""
    impact_text: str
    """The impact in words with its unit (`words.impact`)."""
    ticket: str = ""
    """The action as Markdown, for an issue tracker."""


@dataclass(frozen=True)
class CheckLine:
    """One review-checklist item: its name, its state and why."""

    name: str
    state: CheckState
    text: str

    @property
    def failed(self) -> bool:
        """The item was checked and does not hold."""
        return self.state == CheckState.FAIL

    @property
    def passed(self) -> bool:
        """The item was checked and holds."""
        return self.state == CheckState.PASS


@dataclass(frozen=True)
class Row:
    """A label, its text and whether it is a problem: one line of the pitfalls."""

    name: str
    flag: bool
    text: str
