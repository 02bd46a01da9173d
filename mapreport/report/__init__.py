"""Rendering: results in, report.html / report.pdf / findings.json out.

Renderers only consume results; nothing here computes a metric."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from markupsafe import Markup

from mapreport import __version__
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.files import atomic_write, replacing
from mapreport.core.kinds import Status
from mapreport.report import html, packet
from mapreport.report.board import board
from mapreport.report.export import SvgExporter
from mapreport.report.findings import document, encode
from mapreport.report.sections import CAPTIONS
from mapreport.report.verdict import holding
from mapreport.report.view import ReportView, build
from mapreport.report.words import label


def _context(
    v: ReportView,
    generated_at: str,
    media: str,
    chart_markup: dict[str, Markup],
    notes: list[str],
    index_href: str = "",
) -> dict[str, Any]:
    return {
        "v": v,
        "charts": chart_markup,
        "captions": CAPTIONS,
        "media": media,
        "css": Markup(html.css()),
        # a page without a chart (a trace's, a compile log's) carries no plotly.js (3.6 MB)
        "plotly_js": Markup(html.plotly_js()) if media == "screen" and chart_markup else None,
        "page_js": Markup(html.page_js()) if media == "screen" else None,
        "index_href": index_href if media == "screen" else "",
        "generated_at": generated_at,
        "version": __version__,
        "notes": notes,
        "used_terms": None,
    }


class IndexEntry(msgspec.Struct, frozen=True):
    """What the index shows of one slice's report; kept beside the report (ENTRY) so that
    an index over slices not redone tonight needs no re-analysis."""

    name: str
    dir: str
    error: str | None = None
    summary: str = ""
    requests: int = 0
    covered: float | None = None
    mape: float | None = None
    decisions: dict[str, int] | None = None
    actions: int = 0
    checklist_failed: int = 0
    pdf: bool = False
    health: str = ""
    """`kinds.Health` of the slice (empty for a failed report)."""
    tail_quantile: str = ""
    tail_us: float | None = None
    sla_us: float | None = None
    tail_change: float | None = None
    tail_since: str = ""
    """The baseline night of `tail_change`, with `(within SLA)` when it met its target."""
    status: str = ""
    """`kinds.Status` (failing, at_risk, healthy; empty for a failed report)."""
    status_reason: str = ""
    states: list[str] = []
    """Every `kinds.Health` state that holds (not only the first)."""
    deciding: str = ""
    """The family whose judgement is the status (`report.judgements.FAMILY_NAMES`)."""
    judged: list[str] = []
    """The other families failing or at risk, with their state ("Device idle: at risk")."""
    workload: str = ""
    trend: list[float] = []
    """The headline quantile over the recorded nights, tonight's last (the sparkline)."""
    top_short: str = ""
    """The top action's imperative (`packet.short`); `top_action` has the whole title."""
    top_action: str = ""
    top_owner: str = ""
    period: str = ""
    """What the report covers (`view.period`)."""
    revised: bool = False
    """The night was recorded again from other inputs (late data)."""

    @property
    def tail_since_night(self) -> str:
        """The baseline night of `tail_since` alone (the board keeps the date whole)."""
        return self.tail_since.partition(" ")[0]

    @property
    def tail_since_note(self) -> str:
        """What `tail_since` says after its night (`(within SLA)`, or nothing)."""
        return self.tail_since.partition(" ")[2]


class Written(msgspec.Struct, frozen=True):
    """The files one slice's report wrote, and what degraded."""

    html: Path
    pdf: Path | None
    findings: Path
    notes: tuple[str, ...]
    blocked_urls: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The files written, by name."""
        return tuple(p.name for p in (self.html, self.pdf, self.findings) if p is not None)


ENTRY = ".entry.json"
"""A slice folder's index entry, written with its report."""


def read_entry(folder: Path, name: str, rel: str) -> IndexEntry:
    """The index entry kept in a slice folder; one that says so when there is none."""
    try:
        return msgspec.json.decode((folder / ENTRY).read_bytes(), type=IndexEntry)
    except (OSError, msgspec.DecodeError):
        return IndexEntry(name=name, dir=rel, error="not reported yet")


def index_entry(v: ReportView, pdf: bool) -> IndexEntry:
    """The index's entry of a slice reported now, from its page's and sections' views (its
    folder, relative to OUT, is the pipeline's to fill in)."""
    h = v.of["history"].h
    return IndexEntry(
        name=v.name,
        dir="",
        summary=v.summary,
        requests=v.requests,
        covered=v.of["coverage"].covered_traffic_share,
        mape=v.of["accuracy"].a.mape_weighted,
        decisions={d: n for d, n in v.decision_counts.items() if n},
        actions=len(v.actions),
        checklist_failed=len(v.checklist_failed),
        pdf=pdf,
        health=v.health,
        tail_quantile=v.headline[0],
        tail_us=v.headline[1],
        sla_us=v.headline[2],
        status=v.status.status.value if v.status else "",
        status_reason=v.status_reason,
        states=list(holding(v.of["environment"].env.locked, v.verdict.sla, v.checklist)),
        deciding=next((j.family for j in v.judgements if j.deciding), ""),
        judged=[
            f"{j.family}: {label(j.state)}"
            for j in v.judgements
            if not j.deciding and j.state in (Status.FAILING, Status.AT_RISK)
        ],
        workload=v.of["scope"].s.workload,
        trend=[
            x
            for p in v.recent_runs
            if (x := p.latency_p99_us if v.headline[0] == "p99" else p.latency_p95_us)
        ],
        top_short=packet.short(v.actions[0].title) if v.actions else "",
        tail_change=v.tail_change.change if v.tail_change else None,
        tail_since=(
            f"{v.tail_change.night}{' (within SLA)' if v.tail_change.within_sla else ''}"
            if v.tail_change
            else ""
        ),
        top_action=v.actions[0].title if v.actions else "",
        top_owner=(v.actions[0].a.owner or "unassigned") if v.actions else "",
        period=v.period,
        revised=any(p.revised for p in h.runs if p.current) if h else False,
    )


def write_slice_report(
    r: SliceResult,
    folder: Path,
    exporter: SvgExporter,
    pdf: bool = True,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    index: Path | None = None,
    full: bool = False,
) -> Written:
    """Write report.html, report.pdf and findings.json for one slice into `folder`; the HTML
    links back to `index` (the run's index.html) when given. The PDF is the design-review
    packet (`packet.html.j2`), or with `full` every section."""
    folder.mkdir(parents=True, exist_ok=True)
    generated_at = clock().isoformat(timespec="seconds")
    v = build(r)
    figs = {c: f for p in v.assembled.parts for c, f in p.figures().items()}
    doc = document(v.assembled, generated_at)
    atomic_write(folder / "findings.json", encode(doc))
    entry = index_entry(v, pdf)
    screen = html.render(
        "report.html.j2",
        **_context(
            v,
            generated_at,
            "screen",
            {c: html.interactive_chart(c, f) for c, f in figs.items()},
            [],
            Path(os.path.relpath(index, folder)).as_posix() if index else "",
        ),
    )
    atomic_write(folder / "report.html", screen.encode())
    if not pdf:
        atomic_write(folder / ENTRY, msgspec.json.encode(entry))
        return Written(folder / "report.html", None, folder / "findings.json", (), ())
    from mapreport.report.pdf import write_pdf  # WeasyPrint is slow to import (0.4 s)

    # the packet prints one chart: exporting the others through Chromium is wasted (issue 38)
    printed = figs if full else {c: f for c, f in figs.items() if c in packet.CHARTS}
    svgs = {c: exporter.svg(f, c) for c, f in printed.items()}
    notes = []
    if exporter.failure:
        notes.append(
            f"Charts are missing from this PDF because chart export failed: {exporter.failure}"
        )
    context = _context(
        v,
        generated_at,
        "print",
        {c: html.static_chart(c, svgs[c], exporter.failure) for c in printed},
        notes,
    )
    template, extra = ("report.html.j2", {}) if full else ("packet.html.j2", {"p": packet.build(v)})
    # the PDF's glossary holds the terms its pages use: a first rendering finds them
    first = html.render(template, **{**context, **extra})
    used = {"used_terms": html.terms_used(first)}
    printable = html.render(template, **{**context, **extra, **used})
    with replacing(folder / "report.pdf") as tmp:
        blocked = write_pdf(printable, tmp)
    atomic_write(folder / ENTRY, msgspec.json.encode(entry))
    return Written(
        folder / "report.html",
        folder / "report.pdf",
        folder / "findings.json",
        tuple(notes),
        tuple(blocked),
    )


def write_index(out: Path, entries: list[IndexEntry], dataset: str) -> Path:
    """Write OUT/index.html linking every slice's report (and listing failed slices)."""
    periods = sorted({e.period for e in entries if e.period})
    page = html.render(
        "index.html.j2",
        entries=entries,
        b=board(entries),
        periods=periods,
        mixed_periods=len(periods) > 1,
        # the board names the dataset relative to itself, not by the build machine's path
        dataset=Path(os.path.relpath(dataset, out)).as_posix(),
        css=Markup(html.css()),
        media="screen",
        plotly_js=None,
        page_js=Markup(html.page_js()),
        version=__version__,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    path = out / "index.html"
    atomic_write(path, page.encode())
    return path
