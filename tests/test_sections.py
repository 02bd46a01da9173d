"""A report section is one unit (issue 52): its module under report/sections/, its partial and
its registry line. Checked here: every module declares the section of its name and is
registered once, the partials read no result (the context holds none), and no module but the
unit's contract is imported by more than a third of the section modules."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from mapreport.analysis.steps.results import SliceResult
from mapreport.report import write_slice_report
from mapreport.report.export import SvgExporter
from mapreport.report.html import TEMPLATES_DIR
from mapreport.report.sections import SECTIONS, assemble
from mapreport.report.sections.unit import Section

SECTIONS_DIR = Path(__file__).resolve().parents[1] / "mapreport" / "report" / "sections"
CONTRACT = "mapreport.report.sections.unit"
"""What every section module imports: `Section` and `Facts`."""


def _modules() -> list[Path]:
    return sorted(p for p in SECTIONS_DIR.glob("*.py") if p.stem not in ("__init__", "unit"))


def test_every_section_module_declares_its_section_and_is_registered_once() -> None:
    ids = [s.id for s in SECTIONS]
    assert len(ids) == len(set(ids))
    for path in _modules():
        section = importlib.import_module(f"mapreport.report.sections.{path.stem}").SECTION
        assert isinstance(section, Section)
        assert section.id == path.stem
        assert ids.count(path.stem) == 1, path.stem
        assert (TEMPLATES_DIR / section.template).is_file() == section.page
    assert len(ids) == len(_modules())


def test_no_module_but_the_contract_is_imported_by_a_third_of_the_sections() -> None:
    """Apart from the shared vocabulary, a section depends on what it reads: a module every
    section imports (as view.py, words.py, findings.py were) would cut the report by kind of
    text again."""
    users: dict[str, set[str]] = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "mapreport.report":
                    names = {f"mapreport.report.{a.name}" for a in node.names}
                else:
                    names = {node.module}
                for m in names:
                    if m.startswith("mapreport.report"):
                        users.setdefault(m, set()).add(path.stem)
    assert users[CONTRACT] == {p.stem for p in _modules()}
    crowded = {
        m: len(u) for m, u in users.items() if m != CONTRACT and len(u) * 3 > len(_modules())
    }
    assert crowded == {}


def test_a_slice_is_assembled_in_one_pass_and_its_pages_read_no_result(
    demo_results: dict[str, SliceResult], tmp_path: Path
) -> None:
    """Every section has its part, in the registry's order; the page renders with no result in
    its context (a partial that reads one fails: the environment's undefined is strict)."""
    r = demo_results["bert-base"]
    made = assemble(r)
    assert [p.id for p in made.parts] == [s.id for s in SECTIONS]
    assert {p.id for p in made.shown} <= {s.id for s in SECTIONS if s.page}
    written = write_slice_report(r, tmp_path / "out", SvgExporter(), pdf=False)
    page = written.html.read_text()
    for p in made.shown:
        assert f'<section id="{p.id}"' in page, p.id
