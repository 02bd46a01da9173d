"""The HTML reports and the index as a reader's browser shows them: headless Chromium
(Debian's, driven by Playwright) at a phone's, a laptop's and a desktop's width."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mapreport.report.prose import md_text
from mapreport.report.sections import CHARTS

playwright = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTHS = (390, 900, 1400)
SLICES = ["bert-base", "resnet50-int8/prod", "llama-decode/chat"]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by `make test`"),
]

BROKEN_LINKS = """() => Array.from(document.querySelectorAll('a[href^="#"]'))
    .map(a => a.getAttribute('href')).filter(h => !document.getElementById(h.slice(1)))"""
DRAWN = """() => Array.from(document.querySelectorAll('div.chart'))
    .filter(d => d.querySelector('svg.main-svg')).map(d => d.id)"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module."""
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser: Any, path: Path, width: int) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", SLICES)
def test_report_reads_at_every_width(
    browser: Any, demo_reports: Path, name: str, width: int
) -> None:
    """No sideways scroll of the page, no console error, every chart drawn, every in-page
    link lands on something and the report links back to its index (before: at 390 px the
    document was 932 px wide; the only links were the contents)."""
    page, errors = _open(browser, demo_reports / name / "report.html", width)
    try:
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} at {width} px scrolls sideways by {overflow} px"
        assert errors == []
        drawn = set(page.evaluate(DRAWN))
        source = (demo_reports / name / "report.html").read_text()
        expected = {f"chart-{c}" for c in CHARTS if f'id="chart-{c}"' in source}
        assert drawn == expected
        assert len(expected) >= 5
        assert page.evaluate(BROKEN_LINKS) == []
        back = page.locator("p.back a")
        assert back.get_attribute("href").endswith("index.html")
        assert (demo_reports / name / back.get_attribute("href")).resolve() == (
            demo_reports / "index.html"
        ).resolve()
    finally:
        page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_index_reads_at_every_width(browser: Any, demo_reports: Path, width: int) -> None:
    page, errors = _open(browser, demo_reports / "index.html", width)
    try:
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"index at {width} px scrolls sideways by {overflow} px"
        if width >= 1400:  # a desktop screen shows every column: the file links were hidden
            box = page.evaluate(
                "(() => { const s = document.querySelector('.scroll');"
                " return s.scrollWidth - s.clientWidth; })()"
            )
            assert box <= 0, f"the board hides {box} px of its columns at {width} px"
        assert errors == []
    finally:
        page.close()


def test_actions_link_their_evidence_and_copy_as_tickets(browser: Any, demo_reports: Path) -> None:
    """Each action links its shape's row, its evidence and its files; "Copy as ticket" puts
    the action's Markdown (title, owner, evidence, rollback trigger, matrix) on the clipboard;
    the per-shape table sorts by a column."""
    doc = json.loads((demo_reports / "bert-base" / "findings.json").read_text())
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    try:
        page.goto((demo_reports / "bert-base" / "report.html").as_uri())
        for a in doc["actions"]:
            block = page.locator(f"#action-{a['id']}")
            hrefs = [h.get_attribute("href") for h in block.locator("a").all()]
            assert any(h.startswith(("#class-", "#cores-", "#decision-")) for h in hrefs) or (
                a["shape"] == "*"
            ), (a["title"], hrefs)
            for sid in a["evidence"]["sources"]:
                assert f"#source-{sid}" in hrefs
        first = doc["actions"][0]
        page.locator(f"#action-{first['id']} button.copy-ticket").click()
        page.wait_for_function(
            "document.querySelector('button.copy-ticket').textContent != 'Copy as ticket'"
        )
        ticket = page.evaluate("navigator.clipboard.readText()")
        assert ticket.startswith(f"### {md_text(first['title'])}")
        assert md_text(first["owner"]) in ticket
        assert md_text(first["rollback_trigger"]["text"]) in ticket
        assert "| Validate on shape | Metric | Now | Pass when |" in ticket
        assert ticket.count("\n| `") == len(first["validation_matrix"])
        p95 = page.locator("#shapes table.sortable thead th").nth(5)
        p95.click()
        p95.click()  # descending
        top = page.locator("#shapes table.sortable tbody tr").first.locator("td").first
        slowest = max(doc["shapes"], key=lambda s: s["latency_p95_us"] or 0)
        assert top.inner_text() == slowest["shape"]
    finally:
        context.close()
