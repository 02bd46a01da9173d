"""Templates are compiled once for every process: the compiled code is kept between runs and
gives the pages a fresh compilation gives; where it cannot be kept, pages render all the same."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from mapreport.report import html


def _environment(cache: jinja2.BytecodeCache | None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(html.TEMPLATES_DIR), bytecode_cache=cache, **html.OPTIONS
    )
    env.filters.update(html.environment().filters)
    return env


def _kept(folder: Path) -> html._CompiledTemplates:
    cache = html.compiled_templates()
    assert isinstance(cache, html._CompiledTemplates)
    cache.directory = str(folder)
    return cache


def test_the_environment_keeps_compiled_templates() -> None:
    assert isinstance(html.environment().bytecode_cache, html._CompiledTemplates)


def test_kept_templates_give_what_a_fresh_compilation_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = _environment(None).get_template("index.html.j2")
    _environment(_kept(tmp_path)).get_template("index.html.j2")  # compiles and keeps it
    kept = list(tmp_path.iterdir())
    assert len(kept) == 1
    assert kept[0].name.startswith("mapreport-")
    second = _environment(_kept(tmp_path))

    def compiled(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(second, "compile", compiled)
    loaded = second.get_template("index.html.j2")  # loaded, not compiled again
    assert loaded.root_render_func.__code__.co_code == fresh.root_render_func.__code__.co_code


def test_a_folder_that_cannot_be_written_costs_only_the_compilation(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes to any folder")
    tmp_path.chmod(0o500)
    try:
        env = _environment(_kept(tmp_path))
        assert env.get_template("index.html.j2") is not None
        assert list(tmp_path.iterdir()) == []
    finally:
        tmp_path.chmod(0o700)


def test_the_kept_code_is_named_by_the_options_it_was_compiled_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = html.compiled_templates()
    monkeypatch.setitem(html.OPTIONS, "trim_blocks", False)
    after = html.compiled_templates()
    assert isinstance(before, jinja2.FileSystemBytecodeCache)
    assert isinstance(after, jinja2.FileSystemBytecodeCache)
    assert before.pattern != after.pattern
