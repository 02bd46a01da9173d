"""Names from input files as path components: unique by construction, bounded, decodable."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mapreport.core.names import RESERVED, folder_name, partition_name
from mapreport.dataset.store import Dataset
from mapreport.run.config import default_config
from mapreport.run.ingesting import ingest
from mapreport.run.pipeline import slice_dir
from mapreport.run.reporting import report

NAMES = st.text(min_size=1, max_size=1000) | st.sampled_from(
    ["a b", "a_b", ".", "..", "index.html", "INDEX.HTML", "report.html", "~", "a~b", "🚀" * 40]
)


@given(st.lists(NAMES, min_size=2, max_size=8, unique=True))
def test_folder_and_partition_names_never_collide(names: list[str]) -> None:
    folders = [folder_name(n) for n in names]
    partitions = [partition_name(n) for n in names]
    assert len(set(folders)) == len(names)
    assert len(set(partitions)) == len(names)


@given(NAMES)
def test_folder_names_are_safe_bounded_path_components(name: str) -> None:
    f = folder_name(name)
    assert 0 < len(f.encode("utf-8", "surrogatepass")) <= 100
    assert "/" not in f
    assert "\0" not in f
    assert f not in {".", ".."}
    assert not f.startswith(".")  # temp files and the report's own dot files
    assert f.lower() not in RESERVED


@given(NAMES)
def test_partition_names_decode_whole(name: str) -> None:
    p = partition_name(name)
    assert len(p) <= 140
    unquote(p, errors="strict")  # never cut inside an escape or a code point
    if "~" not in p:
        assert unquote(p.removeprefix("workload=")) == name


def test_forged_sanitised_form_gets_its_own_folder() -> None:
    forged = "a_b-" + hashlib.sha256(b"a b").hexdigest()[:8]
    assert folder_name("a b") != folder_name(forged)
    assert folder_name("A" * 300) != folder_name("A" * 301)


@pytest.mark.slow
def test_names_from_anywhere_report_each_in_its_own_folder(tmp_path: Path) -> None:
    """CJK, Cyrillic, emoji, RTL, 1,000 characters, a forged sanitised form, names of files
    mapreport writes: every slice is reported, in its own folder, under its real name, and
    `--slice` finds each as written (before: one CJK name stopped every report)."""
    names = [
        ("中文名字测试工作负载名称很长的名字", ""),
        ("Ж" * 31, ""),
        ("A" * 1000, ""),
        ("a b", ""),
        ("a_b-" + hashlib.sha256(b"a b").hexdigest()[:8], ""),
        ("index.html", ""),
        ("مرحبا\u202ebad", ""),
        ("🚀" * 40, "prod"),
        ("w", ""),
        ("w", "report.html"),
        ("team/model", "x/y"),
    ]
    rec = {"shape": {"b": 1}, "arrival_us": 1, "compute_start_us": 2, "compute_end_us": 3}
    f = tmp_path / "names.jsonl"
    f.write_text(
        "\n".join(
            json.dumps({**rec, "workload": w, "slice": s, "request_id": f"r{i}"})
            for i, (w, s) in enumerate(names)
        )
        + "\n"
    )
    ingest(tmp_path / "ds", [f])
    out = tmp_path / "out"
    outcomes = report(tmp_path / "ds", out, default_config(), pdf=False)
    assert [o.error for o in outcomes] == [None] * len(names)
    folders = {o.folder for o in outcomes}
    assert len(folders) == len(names)
    for w, s in names:
        doc = json.loads((slice_dir(out, w, s) / "findings.json").read_text())
        assert (doc["workload"], doc["slice"]) == (w, s)
        only = f"{w}/{s}" if s else w
        picked = report(tmp_path / "ds", tmp_path / "one", default_config(), only=only, pdf=False)
        assert [(o.workload, o.slice) for o in picked] in (
            [(w, s)],
            [(w, ""), (w, "report.html")],  # "w": every slice of w
        )
    assert (out / "index.html").is_file()
    assert Dataset(tmp_path / "ds").live()


@pytest.mark.slow
def test_cjk_and_emoji_names_print_with_real_glyphs(tmp_path: Path) -> None:
    """A workload named in Chinese with an emoji prints in the PDF with fonts that have those
    glyphs (`make` installs fonts-wqy-zenhei and fonts-noto-color-emoji), not as boxes."""
    import subprocess

    name = "推荐模型 🚀 ранжирование"
    rec = {"shape": {"b": 1}, "arrival_us": 1, "compute_start_us": 2, "compute_end_us": 3}
    f = tmp_path / "cjk.jsonl"
    f.write_text(json.dumps({**rec, "workload": name, "request_id": "r0"}) + "\n")
    ingest(tmp_path / "ds", [f])
    out = tmp_path / "out"
    (outcome,) = report(tmp_path / "ds", out, default_config(), pdf=True)
    assert outcome.error is None
    pdf = slice_dir(out, name, "") / "report.pdf"
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True)
    assert "WenQuanYi" in fonts.stdout
    assert "Emoji" in fonts.stdout
    text = subprocess.run(
        ["pdftotext", "-f", "1", "-l", "1", str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert name in text
