"""The report's sections, in order: the registry (one line a section) and the one pass that
makes a slice's parts from it.

A section registered here appears in the HTML, the PDF (with a bookmark and a table-of-
contents entry) and findings.json, and is checked by the completeness tests; one without its
data is not printed empty but named, with the input that would add it, in the one "Not
measured" section."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mapreport.analysis.steps.results import SliceResult
from mapreport.report.lines import Facts
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
from mapreport.report.sections.unit import Legacy, Part, Section, part

SECTIONS: tuple[Section[Any, Any] | Legacy, ...] = (
    summary.SECTION,
    scope.SECTION,
    environment.SECTION,
    coverage.SECTION,
    accuracy.SECTION,
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
    ranking.SECTION,
)


def _legacy_missing(s: Legacy, r: SliceResult, formats: str) -> str:
    """Why a section has nothing to show for this slice and which input would add it."""
    if s.needs_requests and not r.requests:
        return (
            f"no per-request records (this slice holds {formats} data only); a native request "
            "log, a PyTorch profiler trace with request annotations, Triton trace files or "
            "Triton's OpenTelemetry spans add it (an AIPerf export adds client-side latency)"
        )
    if s.needs_plan and not r.coverage.plans:
        return (
            "no compile plan names this slice, so there is no prediction to hold the runtime "
            "against; a native compile profile, TensorRT layer info, TORCH_TRACE or TVM tuning "
            "records add one"
        )
    return ""


def _legacy_part(s: Legacy, r: SliceResult, formats: str) -> Part[None]:
    """A legacy section's part: shown, left out (optional) or not measured, as its `needs` say."""
    gone = (
        (s.needs_requests and not r.requests)
        or (s.needs_plan and not r.coverage.plans)
        or (bool(s.needs) and not getattr(r, s.needs))
    )
    if not gone:
        return Part(s, None, True, "")
    return Part(s, None, False, "" if s.optional else _legacy_missing(s, r, formats))


@dataclass(frozen=True)
class Assembled:
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
        """The view of one section, by id."""
        for p in self.parts:
            if p.id == section:
                return p.v
        known = ", ".join(p.id for p in self.parts)
        raise KeyError(f"unknown section {section!r}; known: {known}")


def assemble(r: SliceResult) -> Assembled:
    """One slice's report in one pass over its sections ("Not measured" last made: its view
    is the others without their data)."""
    facts = Facts(r)
    made: dict[str, Part[Any]] = {
        s.id: _legacy_part(s, r, facts.formats) if isinstance(s, Legacy) else part(s, facts)
        for s in SECTIONS
        if s is not not_measured.SECTION
    }
    missing = tuple(p for p in made.values() if p.not_measured)
    listed = not_measured.SECTION
    made[listed.id] = Part(listed, listed.view(missing), bool(missing), "")
    return Assembled(facts, tuple(made[s.id] for s in SECTIONS))


CHARTS = tuple(c for s in SECTIONS for c in s.charts)
"""Every chart a report may draw, by id, in page order."""
