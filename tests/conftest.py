"""Shared fixtures: the demo data generated once per session, ingested, analysed and reported."""

from __future__ import annotations

import os
import re
import shutil
from datetime import date
from pathlib import Path

import pytest
from hypothesis import settings

from mapreport.analysis import SliceResult, Thresholds, analyze_slice, list_slices
from mapreport.dataset.store import Dataset
from mapreport.demo.synth import generate
from mapreport.run.config import load_config
from mapreport.run.ingesting import ingest
from mapreport.run.nightly import run

# CI replays the same examples on every run (a red CI must be reproducible); local runs explore
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
REALDATA = REPO.parent / "shared" / "realdata"
SAMPLE_DATA = REPO / "sample_data"
DEMO_NIGHT = date(2026, 11, 28)
"""The night the generated demo telemetry was captured (`synth.WINDOW_START_US`)."""


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the demo inputs from the seeded generator."""
    out = tmp_path_factory.mktemp("sample")
    generate(out)
    return out


@pytest.fixture(scope="session")
def demo_dataset(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """The demo inputs ingested into a dataset."""
    ds = tmp_path_factory.mktemp("dataset")
    ingest(ds, sorted(sample_dir.iterdir()))
    return ds


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


@pytest.fixture(scope="session")
def demo_reports(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """The nightly job run on the demo inputs (HTML, PDF, findings.json); returns OUT."""
    folder = tmp_path_factory.mktemp("run")
    config = load_config(write_config(folder, sample_dir))
    outcomes = run(config, night=DEMO_NIGHT).outcomes
    assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
    return config.out


@pytest.fixture(scope="session")
def demo_html(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """The nightly job run on the demo inputs without PDFs (HTML, findings.json, evidence
    packs; the dataset beside it); returns OUT. For tests that read no PDF."""
    folder = tmp_path_factory.mktemp("run-html")
    config = load_config(write_config(folder, sample_dir))
    outcomes = run(config, night=DEMO_NIGHT, pdf=False).outcomes
    assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
    return config.out


def copy_sample(sample_dir: Path, target: Path) -> Path:
    """A private copy of the demo inputs a test may modify."""
    shutil.copytree(sample_dir, target)
    return target
