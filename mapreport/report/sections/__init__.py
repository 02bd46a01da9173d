"""The report's sections, in order: the registry (one line a section) and the one pass that
makes a slice's parts from it.

A section registered here appears in the HTML, the PDF (with a bookmark and a table-of-
contents entry) and findings.json, and is checked by the completeness tests; one without its
data is not printed empty but named, with the input that would add it, in the one "Not
measured" section."""

from __future__ import annotations

from typing import Any, TypeVar, cast

import msgspec

from mapreport.analysis.steps.results import SliceResult
from mapreport.report.sections import (
    accuracy,
    actions,
    adaptation,
    batch_policy,
    blocking,
    checklist,
    classes,
    compiles,
    coverage,
    data,
    decisions,
    environment,
    failures,
    glossary,
    graphs,
    history,
    loadgen,
    method,
    not_measured,
    operators,
    profile_next,
    ranking,
    roofline,
    scheduling,
    scope,
    serving,
    shapes,
    summary,
    tail,
    timeline,
    tokens,
)
from mapreport.report.sections.unit import Facts, Part, Section, part

V = TypeVar("V")

SECTIONS: tuple[Section[Any, Any], ...] = (
    summary.SECTION,
    scope.SECTION,
    environment.SECTION,
    coverage.SECTION,
    accuracy.SECTION,
    ranking.SECTION,
    adaptation.SECTION,
    operators.SECTION,
    roofline.SECTION,
    timeline.SECTION,
    graphs.SECTION,
    compiles.SECTION,
    failures.SECTION,
    decisions.SECTION,
    tail.SECTION,
    blocking.SECTION,
    classes.SECTION,
    scheduling.SECTION,
    tokens.SECTION,
    serving.SECTION,
    batch_policy.SECTION,
    loadgen.SECTION,
    actions.SECTION,
    profile_next.SECTION,
    history.SECTION,
    checklist.SECTION,
    shapes.SECTION,
    not_measured.SECTION,
    data.SECTION,
    method.SECTION,
    glossary.SECTION,
)


class Assembled(msgspec.Struct, frozen=True):
    """One slice's sections, each read and viewed once, in page order."""

    facts: Facts
    parts: tuple[Part[Any], ...]
    """Every registered section's part, shown or not."""

    @property
    def missing(self) -> tuple[Part[Any], ...]:
        """The sections without their data, each with why and which input would add it."""
        return tuple(p for p in self.parts if p.not_measured)

    @property
    def shown(self) -> tuple[Part[Any], ...]:
        """The sections with something to show, in order ("Not measured" among them when any
        other is not)."""
        return tuple(p for p in self.parts if p.shown)

    def view(self, section: str) -> Any:
        """The view of one section, by id (typed: `of`)."""
        for p in self.parts:
            if p.id == section:
                return p.v
        known = ", ".join(p.id for p in self.parts)
        raise KeyError(f"unknown section {section!r}; known: {known}")

    def of(self, section: Section[Any, V]) -> V:
        """The view of one registered section, typed as that section makes it."""
        return cast(V, self.view(section.id))


def assemble(r: SliceResult) -> Assembled:
    """One slice's report in one pass over its sections ("Not measured" last made: its view
    is the others without their data)."""
    facts = Facts(r)
    made: dict[str, Part[Any]] = {
        s.id: part(s, facts) for s in SECTIONS if s is not not_measured.SECTION
    }
    missing = tuple(p for p in made.values() if p.not_measured)
    listed = not_measured.SECTION
    made[listed.id] = Part(listed, listed.view(missing), bool(missing), "")
    return Assembled(facts, tuple(made[s.id] for s in SECTIONS))


CHARTS = tuple(c for s in SECTIONS for c in s.charts)
"""Every chart a report may draw, by id, in page order."""
CAPTIONS = {c: text for s in SECTIONS for c, text in s.captions.items()}
"""Each chart's caption, by id."""
