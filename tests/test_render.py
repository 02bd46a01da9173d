"""Rendered artifacts as a reviewer sees them: the PDF (pages, headings, bookmarks, page
numbers, charts), the HTML in headless Chromium, findings.json against its schema."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pypdf
import pytest
from markupsafe import escape

from mapreport.report.judgements import FAMILY_NAMES
from mapreport.report.sections import CHARTS, SECTIONS

SLICES = ["bert-base", "resnet50-int8/prod", "llama-decode/chat"]
SCHEMA = json.loads(
    (
        Path(__file__).resolve().parents[1] / "mapreport" / "report" / "findings.schema.json"
    ).read_text()
)


def pdftotext(pdf: Path, page: int | None = None) -> str:
    """The PDF's text laid out (one page of it when `page` is given)."""
    pages = ["-f", str(page), "-l", str(page)] if page else []
    return subprocess.run(
        ["pdftotext", "-layout", *pages, str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout


def pdf_links(pdf: Path) -> list[str]:
    """Every URI link annotation of a PDF, in page order."""
    uris = []
    for page in pypdf.PdfReader(pdf).pages:
        for annot in page.get("/Annots") or []:
            action = annot.get_object().get("/A")
            if action is not None and action.get("/URI"):
                uris.append(str(action["/URI"]))
    return uris


@pytest.mark.slow
def test_every_pdf_link_opens_beside_the_pdf(demo_reports: Path) -> None:
    """Issue 35: the evidence links of every demo PDF are relative to the PDF's own folder (no
    `file://` path of the machine that built it), and each target exists."""
    pdfs = sorted(demo_reports.rglob("report.pdf"))
    assert len(pdfs) == len(SLICES)
    for pdf in pdfs:
        links = pdf_links(pdf)
        assert links, pdf
        for uri in links:
            assert not uri.startswith(("file:", "/")), (pdf, uri)
            assert (pdf.parent / uri.split("#")[0]).is_file(), (pdf, uri)


PARTS = ("Why the tail", "Mapping and adaptation", "Actions", "The loop")
"""Pages 2-5 of the design-review packet, in order (page 1 is the decision)."""


@pytest.mark.slow
@pytest.mark.parametrize("name", SLICES)
def test_pdf_is_a_five_page_packet(demo_reports: Path, name: str) -> None:
    """Issue 35: the PDF is the design review: page 1 decides (status, SLA with headroom,
    what changed, at most three decisions with owners, the sign-offs), pages 2-5 are the tail,
    the mapping, the actions and the loop, and the appendix runs at most 6 pages."""
    pdf = demo_reports / name / "report.pdf"
    reader = pypdf.PdfReader(pdf)
    pages = len(reader.pages)
    assert pages <= 11
    first = pdftotext(pdf, 1)
    doc = json.loads((demo_reports / name / "findings.json").read_text())
    status = {"failing": "Failing", "at_risk": "At risk", "healthy": "Healthy"}[doc["status"]]
    assert f"{status}:" in first
    for said in ("Headroom", "Decisions needed", "Sign-offs"):
        assert said in first, said
    decisions = min(3, len(doc["actions"]))
    for a in doc["actions"][:decisions]:
        # the owner's name (its table cell may wrap)
        owner = (a["owner"] or "unassigned").split()[-1].strip("()")
        assert owner in first, a["owner"]
    for page, title in enumerate(PARTS, start=2):
        assert pdftotext(pdf, page).lstrip().split("\n")[0].strip().endswith(title) or (
            title in pdftotext(pdf, page)
        ), (name, page, title)
    appendix = next(p for p in range(1, pages + 1) if "Appendix" in pdftotext(pdf, p))
    assert appendix == 6  # the main body is five pages
    text = pdftotext(pdf)
    assert f"page 2 of {pages}" in text
    assert name.split("/")[0] in reader.pages[1].extract_text()  # running header
    assert "lick" not in text  # no HTML-only words ("click to sort")
    assert "Accuracy versus gain per shape" in text  # the chart, as vector SVG text
    assert "missing from this PDF" not in text


@pytest.mark.slow
def test_the_full_pdf_keeps_every_section(demo_results: dict[str, Any], tmp_path: Path) -> None:
    """`--pdf full`: every section the HTML report has, with its contents page and bookmarks,
    for whoever wants the long form."""
    from mapreport.report import write_slice_report
    from mapreport.report.export import SvgExporter

    written = write_slice_report(
        demo_results["bert-base"], tmp_path / "out", SvgExporter(), full=True
    )
    assert written.pdf is not None
    reader = pypdf.PdfReader(written.pdf)
    text = pdftotext(written.pdf)
    assert "Contents" in text
    assert len(reader.pages) > 11

    def titles(outline: list[object]) -> list[str]:
        out: list[str] = []
        for o in outline:
            out += titles(o) if isinstance(o, list) else [o.title]  # type: ignore[attr-defined]
        return out

    marks = set(titles(reader.outline))
    # every section the demo has data for (nine need inputs it lacks: a profiler trace's
    # device time, timeline and graphs among them; "Not measured" lists them; bert-base has
    # no failure or restart to show, and no tuning records to rank)
    pages = [s for s in SECTIONS if s.page]
    assert len([s for s in pages if s.title in marks]) == len(pages) - 11


@pytest.mark.slow
def test_pdf_pages_rasterise(demo_reports: Path, tmp_path: Path) -> None:
    subprocess.run(
        [
            "pdftoppm",
            "-r",
            "40",
            "-png",
            str(demo_reports / "bert-base" / "report.pdf"),
            str(tmp_path / "p"),
        ],
        check=True,
    )
    pngs = sorted(tmp_path.glob("p-*.png"))
    assert len(pngs) == len(pypdf.PdfReader(demo_reports / "bert-base" / "report.pdf").pages)
    assert all(p.stat().st_size > 5_000 for p in pngs)


@pytest.mark.parametrize("name", SLICES)
def test_html_is_self_contained(demo_html: Path, name: str) -> None:
    """Nothing in the page loads from the network (plotly.js is inlined once)."""
    source = (demo_html / name / "report.html").read_text()
    assert re.search(r"<(script|link|img|iframe)[^>]+(src|href)=[\"']?(https?:)?//", source) is None
    drawn = [c for c in CHARTS if f'id="chart-{c}"' in source]
    assert source.count("Plotly.newPlot") == len(drawn) >= 5


@pytest.mark.parametrize("name", SLICES)
def test_findings_match_schema(demo_html: Path, name: str) -> None:
    doc = json.loads((demo_html / name / "findings.json").read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["workload"] == name.split("/")[0]
    required = {
        "shape",
        "n",
        "traffic_share",
        "covered",
        "bucket",
        "latency_p50_us",
        "latency_p95_us",
        "latency_p99_us",
        "queue_p95_us",
        "compute_p50_us",
        "predicted_us",
        "measured_static_p50_us",
        "signed_error",
        "ape",
        "gain_p50",
        "gain_p50_ci",
        "gain_p95",
        "net_gain_p50",
        "decision",
    }
    assert all(required <= set(s) for s in doc["shapes"])


@pytest.mark.slow
def test_index_links_every_report(demo_reports: Path) -> None:
    index = (demo_reports / "index.html").read_text()
    for name in SLICES:
        for f in ("report.html", "report.pdf", "findings.json"):
            assert f'href="{name}/{f}"' in index
            assert (demo_reports / name / f).is_file()
    assert not list(demo_reports.rglob(".*tmp*"))  # no temporary files left behind


@pytest.mark.parametrize("name", SLICES)
@pytest.mark.slow
def test_page_one_is_the_verdict(demo_reports: Path, name: str) -> None:
    """Page 1 states the status, each SLA target with its value, the shape driving a miss,
    the first decisions with their owners, all as findings.json has them."""
    from mapreport.report.filters import duration

    doc = json.loads((demo_reports / name / "findings.json").read_text())
    first = re.sub(r"\s+", " ", pdftotext(demo_reports / name / "report.pdf", 1))
    assert doc["status_reason"].split(",")[0] in first
    assert "Contents" not in first
    scope = doc["scope"]
    for q in ("p95", "p99"):
        target, value = scope[f"sla_{q}_us"], scope[f"latency_{q}_us"]
        if target:
            assert f"{q} {duration(value)} {duration(target)}" in first
    over = doc["over_sla"]
    if doc["status"] == "failing" and over["shapes"][0]["share"] >= 0.5:
        top = over["shapes"][0]
        assert f"Driven by {top['shape']}: {top['n_over']} of its {top['n']} requests" in first
    for a in doc["actions"][:3]:
        assert a["title"].split(":")[0][:40] in first
        assert (a["owner"] or "unassigned").split()[-1].strip("()") in first


def test_requests_over_the_sla_per_shape(demo_dataset: Path, demo_html: Path) -> None:
    """over_sla counted again from the canonical Parquet with pandas."""
    import pandas as pd

    doc = json.loads((demo_html / "bert-base" / "findings.json").read_text())
    over = doc["over_sla"]
    df = pd.concat(pd.read_parquet(f) for f in (demo_dataset / "request").rglob("*.parquet"))
    df = df[(df.workload == "bert-base") & (df.status == "ok")]
    late = df[df.compute_end_us - df.arrival_us > over["target_us"]]
    counts = late.groupby("shape").size().sort_values(ascending=False)
    assert over["n_over"] == len(late)
    assert {s["shape"]: s["n_over"] for s in over["shapes"]} == counts.to_dict()


def test_index_is_a_health_board(demo_html: Path) -> None:
    """Issue 35: the board lists slices most severe first (failing, at risk, healthy, not
    judged), each with its status as findings.json has it, the family that decided it and
    every other family failing or at risk (issue 50), and a failing checklist; names link to
    the reports; the top action's whole title is one click away; counts per status head the
    page; the table sorts."""
    index = (demo_html / "index.html").read_text()
    body = index.split("<tbody>")[1]
    rows = re.findall(r'<tr data-status="([^"]*)"[^>]*>(.*?)</tr>', body, re.S)
    assert len(rows) == len(SLICES)
    order = {"failing": 0, "at risk": 1, "healthy": 2, "not judged": 3}
    assert [order[s] for s, _ in rows] == sorted(order[s] for s, _ in rows)
    names = {str(k): v for k, v in FAMILY_NAMES.items()}
    for name in SLICES:
        doc = json.loads((demo_html / name / "findings.json").read_text())
        states = [
            names[j["family"]]
            for j in doc["judgements"]
            if j["deciding"] or j["state"] in ("failing", "at_risk")
        ]
        if any(c["state"] == "fail" for c in doc["checklist"]):
            states.append("checklist failing")
        (status, row) = next(
            (st, r) for st, r in rows if f'<a href="{name}/report.html">{name}</a>' in r
        )
        assert status == doc["status"].replace("_", " "), name
        for state in states:
            assert state in row, (name, state)
        assert str(escape(doc["actions"][0]["title"])) in row  # as autoescape writes it
    for words in ("failing", "at risk", "healthy", "not judged"):
        assert f"</strong> {words}</button>" in index
    assert "table.sortable" in index  # the inline sort script, no CDN


def test_data_sources_name_files_below_one_folder(demo_html: Path, sample_dir: Path) -> None:
    """Data sources names the folder the files were ingested from and each file below it
    (before: every absolute build path in full); findings.json names them the same way
    (issue 50: no path of the build machine in what a reader takes away)."""
    doc = json.loads((demo_html / "bert-base" / "findings.json").read_text())
    html = (demo_html / "bert-base" / "report.html").read_text()
    shown = re.findall(r'<td class="path">([^<]*)</td>', html)
    assert f"ingested from (<code>{sample_dir.name}</code>)" in html
    assert str(sample_dir) not in html
    assert sorted(shown) == sorted(s["path"] for s in doc["sources"])
    assert not [s["path"] for s in doc["sources"] if Path(s["path"]).is_absolute()]


@pytest.mark.parametrize("name", SLICES)
def test_validation_matrices_name_metrics_in_words(demo_html: Path, name: str) -> None:
    """`queue_p95_us` reads "p95 queue wait" in the matrices (findings.json keeps the key)."""
    html = (demo_html / name / "report.html").read_text()
    actions = html[html.index('<section id="actions"') : html.index('<section id="history"')]
    cells = re.findall(r"<td>([^<]*)</td>", actions)
    assert not [c for c in cells if re.fullmatch(r"(latency|queue|compute)_p\d+_us|error_rate", c)]
    assert "p95 queue wait" in actions or "p95 latency" in actions


@pytest.mark.slow
@pytest.mark.parametrize("name", SLICES)
def test_running_headers_name_the_section_a_page_is_in(demo_reports: Path, name: str) -> None:
    """Each page's running header names the section its first line belongs to: the section
    that starts at the top of the page, else the one carried over from the page before
    (before: the last heading on the page, so a chart was printed under the next section)."""
    pdf = demo_reports / name / "report.pdf"
    titles = {*PARTS, "Appendix"}
    current = ""
    for page in range(2, len(pypdf.PdfReader(pdf).pages) + 1):
        lines = [ln.strip() for ln in pdftotext(pdf, page).splitlines() if ln.strip()]
        header, body = lines[0], lines[1:]
        if body and body[0] in titles:
            current = body[0]
        assert header.endswith(current), (page, header, current)
        for line in body:
            if line in titles:
                current = line


def test_the_blocking_section_states_the_verdicts_counts(demo_html: Path) -> None:
    """The section lists every adapting request, and says which the finding names: the
    count behind them is the verdict's (page 1 and page 11 said 20 behind 3 and 21 behind 4)."""
    doc = json.loads((demo_html / "bert-base" / "findings.json").read_text())
    b = doc["blocking"]
    html = re.sub(r"\s+", " ", (demo_html / "bert-base" / "report.html").read_text())
    text = re.sub(r"<[^>]+>", "", html)
    named = [e for e in b["events"] if e["source"] in set(b["material"])]
    behind = sum(e["blocked"] for e in named)
    assert f"the finding names {len(named)} of them, behind which {behind} requests waited" in text
    assert f"({behind} requests behind {len(named)} recompiles of" in text


@pytest.mark.slow
def test_the_packet_exports_only_the_charts_it_prints(
    demo_results: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 38: each chart's export through Chromium costs; the packet prints one, so the
    packet's PDF exports that one (the HTML keeps every chart, drawn in the browser)."""
    from mapreport.report import packet, write_slice_report

    class Counting:
        failure = None

        def __init__(self) -> None:
            self.names: list[str] = []

        def svg(self, fig: Any, name: str = "") -> bytes:
            self.names.append(name)
            return b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'

    exporter = Counting()
    written = write_slice_report(demo_results["bert-base"], tmp_path / "out", exporter)  # type: ignore[arg-type]
    assert written.pdf is not None
    assert exporter.names == [c for c in packet.CHARTS if c in exporter.names]
    assert exporter.names  # bert-base has a compile plan: its accuracy-vs-gain chart
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count('class="figure"') > len(exporter.names)


def test_page_ones_environment_figure_follows_its_judgement(
    demo_results: dict[str, Any], tmp_path: Path
) -> None:
    """Page 1's environment figure, one card for the HTML and the PDF, reads "locked" exactly
    where the environment judgement is healthy: the demo's compiled slices, whose compile and
    runtime records match, read locked; the served LLM with one side recorded (qwen-chat: its
    profiler trace's runtime record, no compile side) reads "recorded (runtime side only)",
    judged not judged. The PDF had read "locked" there beside the judgement "one side records
    no environment to compare: not judged", while the HTML computed its own words."""
    from datetime import date

    from mapreport.analysis import Thresholds, analyze_slice
    from mapreport.core.kinds import JudgementFamily, Status
    from mapreport.dataset.store import Dataset
    from mapreport.demo.serving import MODEL, generate_serving
    from mapreport.report import packet, view
    from mapreport.run.config import default_config
    from mapreport.run.ingesting import ingest
    from mapreport.run.reporting import report

    ingest(tmp_path / "ds", generate_serving(tmp_path / "in", 0, date(2026, 11, 28)))
    served = analyze_slice(Dataset(tmp_path / "ds").connect(), MODEL, "", Thresholds())
    seen = {}
    for r in [*demo_results.values(), served]:
        assert r.status is not None
        page = view.build(r)
        card = dict(packet.build(page).cards)["Environment"]
        env = next(j for j in r.status.judgements if j.family is JudgementFamily.ENVIRONMENT)
        assert (card == "locked") == (env.state is Status.HEALTHY), (r.name, card, env.state)
        seen[r.name] = (env.state, card)
    assert seen[MODEL] == (Status.NOT_JUDGED, "recorded (runtime side only)")
    assert (Status.HEALTHY, "locked") in seen.values()
    report(tmp_path / "ds", tmp_path / "out", default_config(), pdf=False)
    page_one = (tmp_path / "out" / MODEL / "report.html").read_text()
    assert '<dd class="ok">recorded</dd><dd class="card-note">runtime side only</dd>' in page_one
