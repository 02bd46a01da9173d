"""One convention per quantity (issue 50, item 7): headroom has one sign in the HTML and the
PDF; an action's impact prints with its unit; counts print whole; what a reader takes away
names no path of the machine that built it; the PDF has bookmarks for its sections."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pypdf
import pytest

from mapreport.analysis.actions.action_params import Impact
from mapreport.core.kinds import ImpactUnit
from mapreport.report import words
from mapreport.report.filters import metric_value, signed_pct
from tests.conftest import BUILT_UNDER
from tests.test_render import SLICES, pdftotext


def _text(html: str) -> str:
    html = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("name", SLICES)
def test_headroom_has_one_sign_in_the_html_and_the_pdf(demo_reports: Path, name: str) -> None:
    """Before: page 1 of the PDF said +15.7% and the HTML's verdict −15.7% for one met p95."""
    folder = demo_reports / name
    doc = json.loads((folder / "findings.json").read_text())
    html = _text((folder / "report.html").read_text())
    pdf = pdftotext(folder / "report.pdf", 1)
    scope = doc["scope"]
    for q in ("p95", "p99"):
        target, value = scope[f"sla_{q}_us"], scope[f"latency_{q}_us"]
        if not target or value is None:
            continue
        said = signed_pct(-(value / target - 1))  # the one sign: positive with room to spare
        assert f"headroom {said}" in html, (name, q, said)
        row = next(line for line in pdf.splitlines() if line.strip().startswith(q))
        assert said in row.split(), (name, q, row)


def test_impact_prints_with_its_unit(demo_reports: Path) -> None:
    """Before: the packet's Impact column printed a unitless 128.1% (traffic share times a
    relative effect); now each action states what it acts on, in a unit."""
    unit = re.compile(
        r"^(≈ )?[\d.,]+ (µs|ms|s) of (request latency|compute|device time)"
        r"|^(< |> )?[\d.]+% of (requests|the devices' span, idle)|^none: |^–$"
    )
    for findings in sorted(demo_reports.rglob("findings.json")):
        doc = json.loads(findings.read_text())
        page = _flat(pdftotext(findings.parent / "report.pdf"))
        html = _text((findings.parent / "report.html").read_text())
        for a in doc["actions"]:
            impact = a["impact"]
            assert set(impact) == {"unit", "value", "share", "text"}
            assert unit.match(impact["text"]), impact
            assert f"Impact {impact['text']}" in html
            first = impact["text"].split(" of ")[0].split(":")[0]
            assert first in page, (findings, impact["text"])
    assert words.impact(Impact(ImpactUnit.DEVICE_US, 1_234.0, 0.25)) == (
        "1.23 ms of device time (25.0%)"
    )
    assert words.impact(Impact(ImpactUnit.REQUEST_SHARE, 0.071)) == "7.1% of requests"


def test_counts_print_whole() -> None:
    """Before: a count kept as a float printed `environment mismatches = 1.00`, and a relative
    change `... against the compared night = 0.13`."""
    assert metric_value(1.0, "environment.mismatches") == "1"
    assert metric_value(18.0, "blocked_requests") == "18"
    assert metric_value(0.13, "latency_p95_change") == "+13.0%"
    assert metric_value(0.5, "fallback_share") == "50.0%"


def test_the_demo_reports_print_counts_whole(demo_reports: Path) -> None:
    count = re.compile(r"\b(n|mismatches|requests|night) = \d[\d,]*\.\d")
    for html in sorted(demo_reports.rglob("report.html")):
        text = _text(html.read_text())
        assert not count.search(text), (html, count.search(text))
        pdf = _flat(pdftotext(html.parent / "report.pdf"))
        assert not count.search(pdf), (html, count.search(pdf))


def test_no_build_machine_path_reaches_a_reader(demo_reports: Path, sample_dir: Path) -> None:
    """HTML (its tickets among it), PDF text, findings.json and the board name the input files
    below the folder they were ingested from (before: `below /tmp/.../sample` in the PDF,
    every ticket's files and findings.json's `sources` with absolute paths, the board's
    dataset by its path)."""
    machine = (str(sample_dir), str(demo_reports.parent), str(demo_reports), *BUILT_UNDER)
    outputs = [
        *demo_reports.rglob("report.html"),
        *demo_reports.rglob("findings.json"),
        demo_reports / "index.html",
    ]
    for f in outputs:
        text = f.read_text()
        assert not [m for m in machine if m in text], f
    for pdf in demo_reports.rglob("report.pdf"):
        text = "".join(pdftotext(pdf).split())
        assert not [m for m in machine if "".join(m.split()) in text], pdf
    doc = json.loads((demo_reports / "bert-base" / "findings.json").read_text())
    paths = {s["path"] for s in doc["sources"]}
    assert paths == {"bert-base.runtime.jsonl.gz", "bert-base.compile.jsonl"}


@pytest.mark.parametrize("name", SLICES)
def test_the_packet_has_bookmarks_for_its_sections(demo_reports: Path, name: str) -> None:
    """A reader jumps to a part of the packet from the PDF's outline."""
    reader = pypdf.PdfReader(demo_reports / name / "report.pdf")

    def titles(outline: list[object]) -> list[str]:
        out: list[str] = []
        for o in outline:
            out += titles(o) if isinstance(o, list) else [o.title]  # type: ignore[attr-defined]
        return out

    marks = titles(reader.outline)
    for part in ("Actions", "The loop", "Appendix", "Review checklist", "Data sources"):
        assert part in marks, (name, part, marks)
    assert marks[0] == name
