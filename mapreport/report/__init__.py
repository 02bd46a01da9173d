"""Rendering: results in, report.html / report.pdf / findings.json out.

Renderers only consume results; nothing here computes a metric."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from mapreport import __version__
from mapreport.analysis.decision import ACTIONS
from mapreport.analysis.environment import SHOWN
from mapreport.analysis.results import DRIVERS, OWNER_ROLES, SliceResult
from mapreport.config import SliceConfig
from mapreport.report import charts as chart_builders
from mapreport.report import html
from mapreport.report.export import SvgExporter
from mapreport.report.findings import findings
from mapreport.report.sections import SECTIONS


def atomic_write(path: Path, data: bytes) -> None:
    """Write a file under a temporary name and rename it, so no reader sees half of it."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _window(r: SliceResult) -> str:
    if r.window_start_us is None or r.window_end_us is None:
        return "–"
    t0, t1 = r.window_start_us, r.window_end_us
    hours = (t1 - t0) / 3.6e9
    if t0 > 9.0e14:  # microseconds since the Unix epoch
        start = datetime.fromtimestamp(t0 / 1e6, UTC).strftime("%Y-%m-%d %H:%M UTC")
        return f"{start}, {hours:.2f} h"
    return f"{hours:.2f} h (relative timestamps)"


def _context(
    r: SliceResult,
    sla: SliceConfig | None,
    generated_at: str,
    media: str,
    chart_markup: dict[str, Markup],
    notes: list[str],
) -> dict[str, Any]:
    return {
        "r": r,
        "sla": sla,
        "sections": SECTIONS,
        "charts": chart_markup,
        "media": media,
        "css": Markup(html.css()),
        "plotly_js": Markup(html.plotly_js()) if media == "screen" else None,
        "generated_at": generated_at,
        "version": __version__,
        "decision_text": ACTIONS,
        "window": _window(r),
        "env_keys": [k for k in SHOWN if k in r.environment.compile or k in r.environment.runtime],
        "mismatch_keys": {m.key for m in r.environment.mismatches},
        "notes": notes,
        "drivers": DRIVERS,
        "roles": OWNER_ROLES,
    }


@dataclass(frozen=True)
class Written:
    """The files one slice's report wrote, and what degraded."""

    html: Path
    pdf: Path | None
    findings: Path
    notes: tuple[str, ...]
    blocked_urls: tuple[str, ...]


def write_slice_report(
    r: SliceResult,
    sla: SliceConfig | None,
    folder: Path,
    exporter: SvgExporter,
    pdf: bool = True,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Written:
    """Write report.html, report.pdf and findings.json for one slice into `folder`."""
    from mapreport.report.pdf import write_pdf  # WeasyPrint is slow to import

    folder.mkdir(parents=True, exist_ok=True)
    generated_at = clock().isoformat(timespec="seconds")
    figs = chart_builders.build_charts(r)
    doc = findings(r, sla, generated_at)
    atomic_write(folder / "findings.json", json.dumps(doc, indent=2).encode())
    screen = html.render(
        "report.html.j2",
        **_context(
            r,
            sla,
            generated_at,
            "screen",
            {c: html.interactive_chart(c, f) for c, f in figs.items()},
            [],
        ),
    )
    atomic_write(folder / "report.html", screen.encode())
    if not pdf:
        return Written(folder / "report.html", None, folder / "findings.json", (), ())
    svgs = {c: exporter.svg(f, c) for c, f in figs.items()}
    notes = []
    if exporter.failure:
        notes.append(
            f"Charts are missing from this PDF because chart export failed: {exporter.failure}"
        )
    printable = html.render(
        "report.html.j2",
        **_context(
            r,
            sla,
            generated_at,
            "print",
            {c: html.static_chart(c, svgs[c], exporter.failure) for c in figs},
            notes,
        ),
    )
    tmp = folder / f".report.pdf.tmp{os.getpid()}"
    blocked = write_pdf(printable, tmp)
    os.replace(tmp, folder / "report.pdf")
    return Written(
        folder / "report.html",
        folder / "report.pdf",
        folder / "findings.json",
        tuple(notes),
        tuple(blocked),
    )


def write_index(out: Path, entries: list[dict[str, Any]], dataset: str) -> Path:
    """Write OUT/index.html linking every slice's report (and listing failed slices)."""
    page = html.render(
        "index.html.j2",
        entries=entries,
        dataset=dataset,
        css=Markup(html.css()),
        media="screen",
        plotly_js=None,
        version=__version__,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    path = out / "index.html"
    atomic_write(path, page.encode())
    return path
