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
    glossary,
    graphs,
    history,
    loadgen,
    method,
    operators,
    profile_next,
    roofline,
    scheduling,
    scope,
    serving,
    shapes,
    tail,
    timeline,
    tokens,
)
from mapreport.report.sections.unit import Legacy, Part, Section, part

SECTIONS: tuple[Section[Any, Any] | Legacy, ...] = (
    Legacy("summary", "Executive summary", "sections/summary.html.j2"),
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
    Legacy(
        "failures",
        "Failures and restarts",
        "sections/failures.html.j2",
        needs="failures_or_restarts",
        optional=True,
    ),
    decisions.SECTION,
    tail.SECTION,
    blocking.SECTION,
    classes.SECTION,
    scheduling.SECTION,
    tokens.SECTION,
    serving.SECTION,
    batch_policy.SECTION,
    loadgen.SECTION,
    Legacy("actions", "Retuning actions", "sections/actions.html.j2"),
    profile_next.SECTION,
    history.SECTION,
    checklist.SECTION,
    shapes.SECTION,
    Legacy("not_measured", "Not measured", "sections/not_measured.html.j2"),
    data.SECTION,
    method.SECTION,
    glossary.SECTION,
)


def not_measured(s: Legacy, r: SliceResult, formats: str) -> str:
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


NOT_MEASURED = "not_measured"
"""The section that names the others without their data (shown only when one is)."""


def _legacy_part(s: Legacy, r: SliceResult, formats: str) -> Part[None]:
    """A legacy section's part: shown, left out (optional) or not measured, as its `needs` say."""
    gone = (
        (s.needs_requests and not r.requests)
        or (s.needs_plan and not r.coverage.plans)
        or (bool(s.needs) and not getattr(r, s.needs))
    )
    if not gone:
        return Part(s, None, True, "")
    return Part(s, None, False, "" if s.optional else not_measured(s, r, formats))


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
        listed = bool(self.missing)
        return tuple(p for p in self.parts if p.shown and (p.id != NOT_MEASURED or listed))

    def view(self, section: str) -> Any:
        """The view of one section, by id."""
        for p in self.parts:
            if p.id == section:
                return p.v
        known = ", ".join(p.id for p in self.parts)
        raise KeyError(f"unknown section {section!r}; known: {known}")


def assemble(r: SliceResult) -> Assembled:
    """One slice's report in one pass over its sections."""
    facts = Facts(r)
    return Assembled(
        facts,
        tuple(
            _legacy_part(s, r, facts.formats) if isinstance(s, Legacy) else part(s, facts)
            for s in SECTIONS
        ),
    )


CHARTS = tuple(c for s in SECTIONS for c in s.charts)
"""Every chart a report may draw, by id, in page order."""
