"""Shared fixtures: the demo data generated, ingested, analysed and reported once for every
test worker and every run of the same code (`cached`), each worker reading its own copy."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from datetime import date
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from mapreport.analysis import SliceResult, Thresholds, analyze_slice, list_slices
from mapreport.dataset.store import Dataset
from mapreport.demo.synth import generate
from mapreport.run.config import load_config
from mapreport.run.ingesting import ingest
from mapreport.run.nightly import run

# CI replays the same examples on every run (a red CI must be reproducible); local runs explore
# no per-example deadline: on a loaded machine one DuckDB call can take longer than
# hypothesis's 200 ms, which failed test_security's inline property once beside other work
settings.register_profile("shared", deadline=None)
settings.register_profile(
    "ci", parent=settings.get_profile("shared"), derandomize=True, print_blob=True
)
settings.load_profile("ci" if os.environ.get("CI") else "shared")

REPO = Path(__file__).resolve().parents[1]
REALDATA = Path(os.environ.get("MAPREPORT_REALDATA", REPO.parent / "shared" / "realdata"))
"""Real traces and profiles; tests that read them skip when it is absent (point the variable
at a missing folder to check they do)."""
SAMPLE_DATA = REPO / "sample_data"
DEMO_NIGHT = date(2026, 11, 28)
"""The night the generated demo telemetry was captured (`synth.WINDOW_START_US`)."""
CACHE = Path(os.environ.get("MAPREPORT_TEST_CACHE", REPO / ".pytest_cache" / "mapreport"))
"""Where `cached` keeps what it builds; MAPREPORT_TEST_CACHE=off builds in each session."""
BUILT_UNDER = () if str(CACHE) == "off" else (str(CACHE),)
"""Paths the cached outputs were written below (a reader must never see them)."""
KEYED = ("mapreport", "templates", "sample_data", "tests/golden", "tests/conftest.py")
"""What the cached set-ups are made from: their key is a hash of these files' contents."""


def pytest_configure(config: pytest.Config) -> None:
    """The key is taken once, before the test workers start, so that every worker of a run
    reads the same set-up even while files of the tree change under it."""
    if not hasattr(config, "workerinput"):
        os.environ["MAPREPORT_TEST_CACHE_KEY"] = _source_key()


SHARING = {"tests/test_spark.py": "spark", "tests/test_browser.py": "chromium"}
"""Test files whose tests share a costly fixture (the Spark session, a JVM with a 2 GB driver;
Chromium): `--dist loadgroup` runs each file's tests on one worker."""


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: -p no:xdist leaves it out
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` (`make test`) groups the files of `SHARING` and hands every other
    test out alone, the groups first, then in collection order (the slow and spark tests
    first): a worker takes the next test when it has two left, so neither waits long on the
    other's last. (pytest-xdist 3.8 groups by `xdist_group` marks by renaming tests, which
    pytest 9.2 no longer allows: every test would go out alone, a Spark session on each
    worker.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Sharing(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SHARING.get(nodeid.split("::", 1)[0], nodeid)

    return Sharing(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On test workers (pytest-xdist), the tests marked slow or spark first, the order
    otherwise kept: the workers share out the long tests while there is other work, and the run
    ends on short ones instead of one worker's last long test while the other waits."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: not any(map(item.get_closest_marker, ("slow", "spark"))))


@functools.cache
def cache_key() -> str:
    """The run's key (`pytest_configure`), or this process's own outside pytest-xdist."""
    return os.environ.get("MAPREPORT_TEST_CACHE_KEY") or _source_key()


def _source_key() -> str:
    """A hash of the package source, templates, demo inputs and this file, and of the
    versions of Python and the libraries whose results the set-up holds."""
    h = hashlib.sha256(sys.version.encode())
    for lib in ("duckdb", "pyarrow", "numpy", "plotly", "weasyprint", "kaleido", "jinja2"):
        h.update(f"{lib}={metadata.version(lib)}".encode())
    for name in KEYED:
        top = REPO / name
        for f in sorted(top.rglob("*")) if top.is_dir() else [top]:
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(f"\0{f.relative_to(REPO)}\0".encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:20]


def cached(name: str, build: Callable[[Path], None], factory: pytest.TempPathFactory) -> Path:
    """The folder `build` fills, built once per `cache_key` for every test worker and every
    run: the first worker to ask builds it in place (absolute paths it writes stay true)
    while the others wait on a lock; a build that did not finish is thrown away."""
    if str(CACHE) == "off":
        folder = factory.mktemp(name)
        build(folder)
        return folder
    root = CACHE / cache_key()
    folder, done = root / name, root / f"{name}.done"
    if done.is_file():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    _prune(root)
    return folder


def _prune(keep: Path, days: float = 2) -> None:
    """Cached set-ups of other code untouched for `days` (other runs may still read newer)."""
    for other in CACHE.iterdir():
        if other != keep and time.time() - other.stat().st_mtime > days * 86400:
            shutil.rmtree(other, ignore_errors=True)


def private_copy(folder: Path, factory: pytest.TempPathFactory, name: str) -> Path:
    """A copy of a cached folder that this worker's tests may change."""
    target = factory.mktemp(name) / folder.name
    shutil.copytree(folder, target)
    return target


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo inputs from the seeded generator, shared by every worker: read them, or
    change a `copy_sample` of them."""
    return cached("sample", generate, tmp_path_factory)


@pytest.fixture(scope="session")
def demo_dataset(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """The demo inputs ingested into a dataset (this worker's copy)."""
    built = cached("dataset", lambda ds: ingest(ds, sorted(sample_dir.iterdir())), tmp_path_factory)
    return private_copy(built, tmp_path_factory, "dataset")


@pytest.fixture(scope="session")
def demo_results(demo_dataset: Path) -> dict[str, SliceResult]:
    """Every demo slice analysed with default thresholds, by slice name."""
    con = Dataset(demo_dataset).connect()
    results = [analyze_slice(con, w, s, Thresholds()) for w, s in list_slices(con)]
    return {r.name: r for r in results}


def write_config(folder: Path, sources: Path, extra: str = "") -> Path:
    """A copy of the demo config that reads `sources` and writes below `folder`."""
    text = (SAMPLE_DATA / "mapreport.toml").read_text()
    text = text.replace('dataset = "../demo/dataset"', f'dataset = "{folder / "dataset"}"')
    text = text.replace('out = "../demo/reports"', f'out = "{folder / "reports"}"')
    text = re.sub(
        r"^sources = \[.*\]$",
        f'sources = ["{sources}/*.compile.jsonl", "{sources}/*.runtime.*", '
        f'"{sources}/quality.jsonl"]',
        text,
        count=1,
        flags=re.M,
    )
    assert f'"{sources}/quality.jsonl"' in text, "the demo config's sources line moved"
    path = folder / "mapreport.toml"
    path.write_text(text + extra)
    return path


def _nightly(sample_dir: Path, pdf: bool) -> Callable[[Path], None]:
    """A build of the nightly job run on the demo inputs into a folder."""

    def build(folder: Path) -> None:
        config = load_config(write_config(folder, sample_dir))
        outcomes = run(config, night=DEMO_NIGHT, pdf=pdf).outcomes
        assert all(o.error is None for o in outcomes), [o.error for o in outcomes]

    return build


@pytest.fixture(scope="session")
def demo_reports(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """The nightly job run on the demo inputs (HTML, PDF, findings.json); returns OUT (in
    this worker's copy of the run's folder, the dataset beside it)."""
    built = cached("run", _nightly(sample_dir, pdf=True), tmp_path_factory)
    return private_copy(built, tmp_path_factory, "run") / "reports"


@pytest.fixture(scope="session")
def demo_html(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """The nightly job run on the demo inputs without PDFs (HTML, findings.json, evidence
    packs; the dataset beside it); returns OUT. For tests that read no PDF."""
    built = cached("run-html", _nightly(sample_dir, pdf=False), tmp_path_factory)
    return private_copy(built, tmp_path_factory, "run-html") / "reports"


def copy_sample(sample_dir: Path, target: Path) -> Path:
    """A private copy of the demo inputs a test may modify."""
    shutil.copytree(sample_dir, target)
    return target
