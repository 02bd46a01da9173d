"""The house's rules, checked: stages import only what lies before them, every category has
its words, templates only loop and print, and no module or function outgrows its limit."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

import pytest

from mapreport.analysis import SliceResult
from mapreport.analysis.actions.action_params import ActionParams, kind_params
from mapreport.core import kinds
from mapreport.core.errors import InputError
from mapreport.ingest import READERS, detect
from mapreport.report import (
    causes,
    compare_tuning,
    compare_whole,
    decisions,
    devicetime,
    judgements,
    prose,
    titles,
    words,
)
from mapreport.report import compare as compare_words
from mapreport.report.html import TEMPLATES_DIR
from mapreport.report.sections import (
    SECTIONS,
    checklist,
    history,
    profile_next,
    ranking,
    scheduling,
)
from tests.conftest import REALDATA, SAMPLE_DATA

PACKAGE = Path(__file__).resolve().parents[1] / "mapreport"
TESTS = Path(__file__).resolve().parent
MAX_MODULE_LINES = 800
"""A module is read in one sitting: a backstop, not a design rule. A module is split by
responsibility (the import rules, the rooms and the sections' fan-in say what a design keeps),
never to pass this number (the old 600 split `core/kinds.py` for no reason but the count)."""
MAX_FUNCTION_LINES = 100
"""A function reads on one screen."""

LAYERS: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "dataset": frozenset({"core"}),
    "ingest": frozenset({"core", "dataset"}),
    "engine": frozenset({"core", "dataset", "ingest"}),
    "analysis": frozenset({"core"}),
    "report": frozenset({"core", "analysis"}),
    "run": frozenset({"core", "dataset", "ingest", "engine", "analysis", "report"}),
    "app": frozenset({"core", "dataset", "ingest", "engine", "run"}),
    "demo": frozenset({"core"}),
}
"""Per folder (a stage), the folders it may import besides itself: the arrows point one way.
`core` is the shared vocabulary and imports nothing of mapreport's; the readers know formats,
the analysis tables, the report facts; `run` orders them and `app` is the command line. Any
module may read the package's version (`mapreport/__init__.py` holds nothing else)."""
ROOT_MODULES = {"__init__.py", "__main__.py"}


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = f.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = f
    return found


def _edges(name: str, f: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules `name` imports, at any depth of the file (TYPE_CHECKING and
    function-level imports count: a circle of types is still a circle). `from pkg import
    sub` is an arrow to the submodule, not to the package's __init__."""
    out = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
            out |= subs | ({node.module} if len(subs) < len(node.names) else set())
    return {m for m in out if m in modules and m != name}


def test_the_root_holds_only_init_and_main_and_every_module_lies_in_a_stage() -> None:
    assert {f.name for f in PACKAGE.glob("*.py")} == ROOT_MODULES
    folders = {d.name for d in PACKAGE.iterdir() if d.is_dir() and d.name != "__pycache__"}
    assert folders - {"templates"} == set(LAYERS)


@pytest.mark.parametrize("stage", sorted(LAYERS))
def test_stages_import_only_what_lies_before_them(stage: str) -> None:
    modules = _modules()
    bad = []
    for name, f in modules.items():
        if name.split(".")[1:2] != [stage]:
            continue
        for m in _edges(name, f, modules):
            target = m.split(".")[1] if m.count(".") else ""
            if target and target != stage and target not in LAYERS[stage]:
                bad.append(f"{name} imports {m}")
    assert bad == []


ANALYSIS_ROOMS: dict[str, frozenset[str]] = {
    "base": frozenset(),
    "device": frozenset({"base"}),
    "mapping": frozenset({"base"}),
    "tuning": frozenset({"base"}),
    "serving": frozenset({"base", "device", "mapping"}),
    "actions": frozenset({"base", "device", "mapping", "tuning", "serving"}),
    "loop": frozenset({"base", "serving", "actions"}),
    "steps": frozenset({"base", "device", "mapping", "tuning", "serving", "actions", "loop"}),
    "comparing": frozenset({"base", "device", "tuning", "steps"}),
}
"""Per room of analysis/, the rooms it may import besides itself (docs/architecture.md): the
families stand on `base`; `serving` reads the device and the mapping; actions are drawn from
them, the loop verifies actions, `steps` assembles a slice's result and `comparing` compares
two slices' results."""
MAX_ROOM_MODULES = 10


def test_analysis_rooms_import_only_what_lies_below_them() -> None:
    modules = _modules()
    rooms = {n.split(".")[2] for n in modules if n.count(".") >= 3 and ".analysis." in n}
    assert rooms == set(ANALYSIS_ROOMS)
    top = {n.split(".")[2] for n in modules if n.startswith("mapreport.analysis.")}
    assert top == rooms, "every analysis module lies in a room"
    bad = []
    for name, f in modules.items():
        if not name.startswith("mapreport.analysis.") or name.count(".") < 3:
            continue
        room = name.split(".")[2]
        for m in _edges(name, f, modules):
            if m.startswith("mapreport.analysis."):
                target = m.split(".")[2]
                if target != room and target not in ANALYSIS_ROOMS[room]:
                    bad.append(f"{name} imports {m}")
    assert bad == []
    sizes = {r: sum(1 for n in modules if n.startswith(f"mapreport.analysis.{r}.")) for r in rooms}
    assert max(sizes.values()) <= MAX_ROOM_MODULES, sizes


def test_no_import_circle_anywhere() -> None:
    """No module reaches itself through the modules it imports (Tarjan's strongly connected
    components over the whole package)."""
    modules = _modules()
    edges = {n: _edges(n, f, modules) for n, f in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert circles == []


HEAVY = ("duckdb", "plotly", "weasyprint", "kaleido", "jinja2", "scipy", "pyarrow.compute")
"""Libraries a command that neither reads nor analyses must not load: their imports cost more
than the rest of the command line's start (benchmarks/README.md, `startup.py`)."""


@pytest.mark.parametrize(
    "module", ["mapreport.app.cli", "mapreport.ingest", "mapreport.run.config"]
)
def test_light_entry_points_load_no_heavy_library(module: str) -> None:
    """`mapreport --help`, `formats` and format detection import the readers' declarations,
    not the readers' columns code, the analysis, the report or an engine (counted, not
    timed: a fresh interpreter's modules after the import)."""
    probe = f"import sys, {module}; print(*sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    ours = [m for m in loaded if m.startswith(("mapreport.analysis.", "mapreport.report"))]
    light = {"mapreport.analysis.base", "mapreport.analysis.base.common"}
    assert (heavy, [m for m in ours if m not in light]) == ([], [])


ON_DEMAND = ("plotly", "weasyprint", "kaleido", "scipy", "pyspark", "ruptures", "pandas")
"""Libraries only some slices or commands use (charts, PDFs, change points, Welch's interval,
Spark): imported where they are used, never by importing the package's Python API or the
pipeline (scipy.stats alone is 0.77 s)."""


@pytest.mark.parametrize(
    "module", ["mapreport.run.api", "mapreport.run.nightly", "mapreport.run.reporting"]
)
def test_the_api_and_the_pipeline_load_no_library_on_demand(module: str) -> None:
    """Importing the Python API or the pipeline loads none of `ON_DEMAND` (counted in a
    fresh interpreter)."""
    probe = f"import sys, {module}; print(*sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert [m for m in loaded if m.split(".")[0] in ON_DEMAND] == []


DATACLASSES = {"Sink", "Config", "Facts"}
"""The records left dataclasses: three that hide fields from their repr."""


def test_records_are_structs() -> None:
    """A record class is a msgspec Struct (`core/records.py`): made in C at import, where a
    dataclass compiles each method it generates (1.1 ms a class, paid by every command)."""
    made = []
    for f in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            decorated = isinstance(node, ast.ClassDef) and any(
                "dataclass" in ast.unparse(d) for d in node.decorator_list
            )
            if decorated and node.name not in DATACLASSES:
                made.append(f"{f.relative_to(PACKAGE.parent)}: {node.name}")
    assert made == []


def test_modules_and_functions_stay_small() -> None:
    big = []
    for f in sorted(PACKAGE.rglob("*.py")):
        lines = f.read_text().splitlines()
        if len(lines) > MAX_MODULE_LINES:
            big.append(f"{f.relative_to(PACKAGE)}: {len(lines)} lines")
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    big.append(f"{f.relative_to(PACKAGE)}:{node.lineno} {node.name}: {n} lines")
    assert big == []
    assert len((PACKAGE / "analysis" / "__init__.py").read_text().splitlines()) < 40


WORDED: dict[type[StrEnum], dict[str, str]] = {
    kinds.Decision: words.DECISION_MEANING,
    kinds.Criterion: words.CRITERIA,
    kinds.CheckItem: words.CHECK_ITEMS,
    kinds.CheckGap: checklist.CHECK_GAPS,
    kinds.ImpactUnit: words.IMPACT_UNITS,
    kinds.PitfallKind: words.PITFALLS,
    kinds.GainGap: decisions.GAIN_GAPS,
    kinds.PredictionGap: decisions.PREDICTION_GAPS,
    kinds.AccuracyGap: decisions.ACCURACY_GAPS,
    kinds.FallbackCause: decisions.FALLBACK_CAUSES,
    kinds.StatusReason: judgements.WORDS,
    kinds.JudgementFamily: judgements.FAMILY_NAMES,
    kinds.ClassBasis: words.CLASS_BASES,
    kinds.FusionGap: scheduling.FUSION_GAPS,
    kinds.HistoryNote: history.HISTORY_NOTES,
    kinds.BlockingRemedy: causes.REMEDIES,
    kinds.Collect: profile_next.COLLECT,
    kinds.HeadroomRemedy: prose.HEADROOM_REMEDIES,
    kinds.OpKind: devicetime.KIND_WORDS,
    kinds.Bound: devicetime.BOUND_WORDS,
    kinds.Suspect: devicetime.SUSPECT_WORDS,
    kinds.DeviceActivity: devicetime.ACTIVITY_WORDS,
    kinds.CompareVerdict: compare_words.VERDICT_WORDS,
    kinds.ShipReason: compare_words.SHIP_WORDS,
    kinds.TimeBasis: compare_whole.BASIS_WORDS,
    kinds.TimeCategory: compare_whole.CATEGORY_WORDS,
    kinds.Unranked: ranking.UNRANKED,
    kinds.RegretRemedy: ranking.REGRET_REMEDIES,
    kinds.TuningEdge: compare_tuning.EDGE_WORDS,
}
"""Enums whose members each say a sentence; every other enum's members have a label."""


def _enums() -> list[type[StrEnum]]:
    return [
        v
        for module in (kinds,)
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, StrEnum) and v is not StrEnum
    ]


@pytest.mark.parametrize("enum", _enums(), ids=lambda e: e.__name__)
def test_every_category_has_its_words(enum: type[StrEnum]) -> None:
    table = WORDED.get(enum, words.LABELS)
    missing = [m.value for m in enum if not table.get(m)]
    assert missing == [], f"{enum.__name__} members without words"


def test_every_action_kind_declares_its_params_and_each_has_a_title(
    demo_results: dict[str, SliceResult],
) -> None:
    """Every kind is stated by typed params that name its owner, every params class has a
    title (`titles.titled`), and every action the demo's analysis makes carries params of its
    kind and gets a title."""
    declared = kind_params()
    assert set(declared) == set(kinds.ActionKind)
    assert set(titles.TITLES) == set(ActionParams.REGISTERED.values())
    for r in demo_results.values():
        for a in r.actions:
            assert isinstance(a.params, declared[a.kind]), (a.kind, a.params)
            assert prose.action_title(a, r.name)


JINJA = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
ARITHMETIC = re.compile(r"(?<![\w\"'])(\d+(\.\d+)?)(?![\w\"'])|[^\s|]\s*[*/+]\s*[^\s]|\s-\s")


def test_templates_hold_no_arithmetic_and_no_numeric_literals() -> None:
    found = []
    for f in sorted(TEMPLATES_DIR.rglob("*.j2")):
        for m in JINJA.finditer(f.read_text()):
            expr = m.group(1) or m.group(2) or ""
            code = re.sub(r"\"[^\"]*\"|'[^']*'", '""', expr)  # string literals are words
            if ARITHMETIC.search(code):
                found.append(f"{f.name}: {expr.strip()}")
    assert found == []


def test_every_section_has_its_template() -> None:
    """Every printed section has its partial (a part of findings.json alone has none)."""
    for s in SECTIONS:
        assert (TEMPLATES_DIR / s.template).is_file() == s.page, s.id


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is not beside the repo")
def test_every_reader_reads_a_real_file_and_has_its_test() -> None:
    """Each registered reader recognises at least one file of ../shared/realdata (the native
    formats, ours, one of sample_data; XLA's and Inductor's autotuning, of runs recorded here
    into tests/corpus; Triton's autotune cache, of files Triton's own code wrote here with
    made-up timings, no GPU being at hand: tests/corpus/triton_autotune/README.md) and its
    module has a test file of its own."""
    found: dict[str, Path] = {}
    corpus = TESTS / "corpus" / "xla"
    autotune = TESTS / "corpus" / "inductor_autotune"
    triton = TESTS / "corpus" / "triton_autotune"
    for root in (REALDATA, SAMPLE_DATA, corpus, autotune, triton):  # real files first
        for f in sorted(p for p in root.rglob("*") if p.is_file()):
            try:
                found.setdefault(detect(f).name, f)
            except InputError:
                continue  # READMEs, Model Analyzer's own CSVs
    native = {name for name, f in found.items() if f.is_relative_to(SAMPLE_DATA)}
    assert {n for n, f in found.items() if f.is_relative_to(corpus)} == {"xla-trace", "xplane"}
    assert set(READERS) == set(found), set(READERS) - set(found)
    assert native == {n for n in READERS if n.startswith("native-")}, native
    for reader in READERS.values():
        module = type(reader).__module__.rsplit(".", 1)[-1]
        assert (TESTS / f"test_ingest_{module}.py").is_file(), f"{reader.name}: no test module"
