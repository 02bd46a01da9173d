"""The set-up a new user follows: `make demo` installs mapreport with its runtime dependencies
alone and says how to call it, replaces only what it writes under demo/, and shows pip's
progress; `make test` installs every extra the tests use; no doc sends users to a package
index that has no mapreport. Checked on `make -n -B` (the commands, none of them run)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _commands(target: str) -> str:
    """What `make TARGET` would run from scratch (every prerequisite remade), not run."""
    out = subprocess.run(
        ["make", "-n", "-B", "-C", str(REPO), target],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def _pip_installs(commands: str) -> list[str]:
    """The requirement of each `pip install -e` command."""
    return re.findall(r"-m pip install [^|]*?-e '([^']*)' 2>&1", commands)


def test_make_demo_installs_the_package_alone_and_says_how_to_call_it() -> None:
    demo = _commands("demo")
    assert _pip_installs(demo) == ["."]
    assert "openjdk" not in demo
    assert "poppler-utils" not in demo
    assert "chromium" in demo  # the PDF's charts
    last = [line for line in demo.splitlines() if line.startswith("echo ")][-2:]
    assert ".venv/bin/mapreport --help" in last[0]
    assert "source .venv/bin/activate" in last[1]


def test_make_demo_replaces_only_the_folders_its_config_writes() -> None:
    """`rm -rf` names run.dataset and run.out of the demo's config, nothing else of demo/."""
    config = tomllib.loads((REPO / "sample_data" / "mapreport.toml").read_text())["run"]
    written = sorted(
        (REPO / "sample_data" / config[k]).resolve().relative_to(REPO).as_posix()
        for k in ("dataset", "out")
    )
    removals = [line for line in _commands("demo").splitlines() if line.startswith("rm ")]
    assert removals == [f"rm -rf {' '.join(written)}"]


def test_make_test_installs_every_extra_the_tests_use() -> None:
    test = _commands("test")
    assert _pip_installs(test) == [".[dev,spark,xplane]"]
    for package in ("openjdk-17-jre-headless", "poppler-utils", "chromium"):
        assert package in test


def test_make_compiles_what_its_processes_import() -> None:
    """`make demo` and `make test` compile the installed modules (not their packages' own
    tests) and mapreport's to bytecode: where PYTHONDONTWRITEBYTECODE is set (CI's machine,
    this project's), every process compiled every module it imported, 9.0 s against 1.8 s
    for what a test worker imports."""
    for target in ("demo", "test", "test-fast"):
        compiles = [c for c in _commands(target).splitlines() if "-m compileall" in c]
        assert any(" mapreport" in c for c in compiles), target
        # the installed packages' tests left out, and only below site-packages: a clone in a
        # folder named test/ compiles as any other
        assert any(
            "purelib" in c and "site-packages/(.+/)?(tests?|testing)/" in c for c in compiles
        )


def test_pips_output_becomes_a_line_per_package() -> None:
    """The filter `make` pipes pip through: a line per package, from an index or a local
    wheel, one when it unpacks them, one at the end; pip's warnings dropped."""
    (install,) = [c for c in _commands("venv-demo").splitlines() if " -e '.'" in c]
    sed = install.split(" 2>&1 | ", 1)[1].split(" || ", 1)[0]
    pip = (
        "Obtaining file:///tmp/clone\n"
        "WARNING: Location 'file:///opt/pypi-more/simple/click/' is ignored\n"
        "Collecting click<9,>=8.3 (from mapreport==0.1.0)\n"
        "Processing /opt/pypi/files/jinja2-3.1.6-py3-none-any.whl (from mapreport==0.1.0)\n"
        "  Building editable for mapreport (pyproject.toml): started\n"
        "Installing collected packages: click, jinja2, mapreport\n"
        "Successfully installed click-8.3.0 jinja2-3.1.6 mapreport-0.1.0\n"
    )
    shown = subprocess.run(["bash", "-c", sed], input=pip, capture_output=True, text=True)
    assert shown.stdout.splitlines() == [
        "  collecting click<9,>=8.3",
        "  collecting jinja2==3.1.6",
        "  building mapreport (editable: it runs from this clone)",
        "  installing (unpacking every package: the longest step)",
        "  installed",
    ]


def test_no_doc_installs_mapreport_from_an_index() -> None:
    """mapreport is installed from its clone: no `pip install mapreport` or
    `pip install 'mapreport[...]'` in the README, docs/ or the package's messages."""
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    texts += sorted((REPO / "mapreport").rglob("*.py"))
    wrong = re.compile(r"pip install\s+['\"]?mapreport\b")
    found = [
        f"{f.relative_to(REPO)}:{n}"
        for f in texts
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if wrong.search(line)
    ]
    assert found == []
    readme = (REPO / "README.md").read_text()
    assert "`.venv/bin/mapreport`" in readme
    assert "source .venv/bin/activate" in readme
