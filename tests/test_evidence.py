"""Evidence packs and `mapreport explain` (analysis/steps/packs.py, run/evidence.py); every
golden case's packs are rerun in tests/test_golden.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mapreport.app.cli import main
from mapreport.core.records import as_dict, field_names, replace
from mapreport.run.evidence import explain
from tests.pack_sql import check_pack_sql, stated_evidence


def test_every_reduction_has_its_parameters_and_one_family_declares_its_pack() -> None:
    """Each reduction's query, recompute function and parameters type is declared by exactly
    one family's or kind's module (`declare` refuses a second), and every reduction has one."""
    from mapreport.analysis.actions import device_packs
    from mapreport.analysis.base.packs import KINDS, declare
    from mapreport.analysis.loop import packs as loop_packs
    from mapreport.analysis.serving import packs as serving_packs
    from mapreport.analysis.steps import packs  # noqa: F401 - declares every family's kinds
    from mapreport.analysis.tuning import packs as tuning_packs
    from mapreport.core.kinds import Reduction

    families = [serving_packs.KINDS, loop_packs.KINDS, device_packs.KINDS, tuning_packs.KINDS]
    assert sum(len(f) for f in families) == len(KINDS) == len(Reduction)
    assert set(KINDS) == set(Reduction)
    assert all(isinstance(field_names(kind.params), tuple) for kind in KINDS.values())  # records
    again = replace(KINDS[Reduction.REGRET])
    with pytest.raises(ValueError, match="declared twice"):
        declare({Reduction.REGRET: again})


def test_explain_says_when_a_figure_is_not_reproduced(demo_html: Path, tmp_path: Path) -> None:
    """A pack whose stated figure the dataset no longer gives is reported as not reproduced
    (the CLI exits 5); an unknown id is a usage error naming where packs are."""
    dataset = tmp_path / "dataset"
    shutil.copytree(demo_html.parent / "dataset", dataset)
    doc = json.loads((demo_html / "bert-base" / "findings.json").read_text())
    pid = doc["actions"][0]["id"]
    spec_path = dataset / "evidence" / f"{pid}.json"
    spec = json.loads(spec_path.read_text())
    spec["figure"] = (spec["figure"] or 0.0) + 0.01
    spec_path.write_text(json.dumps(spec))
    lines, ok = explain(dataset, pid)
    assert not ok
    assert lines[2].startswith("NOT reproduced")
    res = CliRunner().invoke(main, ["explain", pid, "--dataset", str(dataset)])
    assert res.exit_code == 5, res.output
    res = CliRunner().invoke(main, ["explain", "0123456789ab", "--dataset", str(dataset)])
    assert res.exit_code == 2
    assert "no evidence pack '0123456789ab'" in res.output


def _pack_copy(demo_html: Path, tmp_path: Path) -> tuple[Path, str, Path]:
    """A copy of the demo's dataset, an action's pack id and the path of its spec."""
    dataset = tmp_path / "dataset"
    shutil.copytree(demo_html.parent / "dataset", dataset)
    doc = json.loads((demo_html / "bert-base" / "findings.json").read_text())
    pid = doc["actions"][0]["id"]
    return dataset, pid, dataset / "evidence" / f"{pid}.json"


def test_explain_never_runs_sql_a_dataset_holds(demo_html: Path, tmp_path: Path) -> None:
    """A pack spec whose SQL was replaced (here: a query that would write a file outside the
    dataset) is reported as tampered with, exit 5, and nothing runs; the SQL `explain` runs is
    rebuilt from the spec's parameters."""
    dataset, pid, spec_path = _pack_copy(demo_html, tmp_path)
    target = tmp_path / "pwned.csv"
    spec = json.loads(spec_path.read_text())
    spec["sql"] = f"COPY (SELECT 42 AS source_id) TO '{target}'; SELECT 42 AS source_id"
    spec_path.write_text(json.dumps(spec))
    res = CliRunner().invoke(main, ["explain", pid, "--dataset", str(dataset)])
    assert res.exit_code == 5, res.output
    assert "tampered" in res.output
    assert str(spec_path) in res.output
    assert not target.exists()
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "pid", ["../../etc/passwd", "../evidence/0123456789ab", "0123456789AB", "0123", "x" * 12, ""]
)
def test_an_explain_id_is_checked_before_any_file_is_opened(
    demo_html: Path, tmp_path: Path, pid: str
) -> None:
    """An id that is not 12 lowercase hex digits is a usage error naming the form (exit 2),
    whatever file its text would reach."""
    outside = tmp_path / "0123456789ab.json"
    outside.write_text("{}")
    res = CliRunner().invoke(main, ["explain", pid, "--dataset", str(demo_html.parent / "dataset")])
    assert res.exit_code == 2, res.output
    assert "not an evidence pack id" in res.output


def _truncated(spec: dict[str, Any], text: str) -> str:
    return text[: len(text) // 2]


def _missing(spec: dict[str, Any], text: str) -> str:
    del spec["reduction"]
    return json.dumps(spec)


def _unknown_kind(spec: dict[str, Any], text: str) -> str:
    return json.dumps(dict(spec, reduction="exfiltrate"))


def _mistyped(spec: dict[str, Any], text: str) -> str:
    return json.dumps(dict(spec, n="many"))


def _bad_params(spec: dict[str, Any], text: str) -> str:
    return json.dumps(dict(spec, params={"unexpected": [1, 2]}))


def _bad_window(spec: dict[str, Any], text: str) -> str:
    return json.dumps(dict(spec, window=dict(spec["window"], kind="forever")))


def _not_an_object(spec: dict[str, Any], text: str) -> str:
    return "[1, 2, 3]"


@pytest.mark.parametrize(
    "damage",
    [_truncated, _missing, _unknown_kind, _mistyped, _bad_params, _bad_window, _not_an_object],
)
def test_explain_on_a_corrupt_spec_names_it(
    demo_html: Path, tmp_path: Path, damage: Callable[[dict[str, Any], str], str]
) -> None:
    """A truncated spec, one with a field missing or mistyped, or of an unknown kind is exit 5
    naming the spec and what is wrong, in one line."""
    dataset, pid, spec_path = _pack_copy(demo_html, tmp_path)
    text = spec_path.read_text()
    spec_path.write_text(damage(json.loads(text), text))
    res = CliRunner().invoke(main, ["explain", pid, "--dataset", str(dataset)])
    assert res.exit_code == 5, res.output
    assert str(spec_path) in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_fuzzed_specs_end_in_a_clear_line(demo_html: Path, tmp_path: Path, data: Any) -> None:
    """A spec whose bytes are cut or flipped, or one of whose fields is replaced by any JSON
    value: `explain` reproduces, refuses (exit 5) or says it is not reproduced, each in its own
    words, never an internal error (exit 1)."""
    dataset = demo_html.parent / "dataset"
    pid = sorted(p.stem for p in (dataset / "evidence").glob("*.json"))[0]
    original = (dataset / "evidence" / f"{pid}.json").read_bytes()
    spec = json.loads(original)
    if data.draw(st.booleans(), label="bytes"):
        cut = data.draw(st.integers(0, len(original)), label="cut")
        flip = data.draw(st.integers(0, max(0, cut - 1)), label="flip")
        damaged = bytearray(original[:cut])
        if damaged:
            damaged[flip] = data.draw(st.integers(0, 255), label="byte")
        text = bytes(damaged)
    else:
        key = data.draw(st.sampled_from(sorted(spec)), label="key")
        text = json.dumps({**spec, key: data.draw(json_values, label="value")}).encode()
    if data.draw(st.booleans(), label="unharmed"):
        text = original  # the copy still reproduces: the refusals above are the damage's
    copy = tmp_path / "ds"  # one copy for every example (tmp_path is the test's)
    if not copy.exists():
        shutil.copytree(dataset, copy)
    (copy / "evidence" / f"{pid}.json").write_bytes(text)
    res = CliRunner().invoke(main, ["explain", pid, "--dataset", str(copy)])
    assert res.exit_code in (0, 5), res.output
    assert "internal error" not in res.output
    if text == original:
        assert res.exit_code == 0, res.output


@pytest.mark.slow
def test_every_pack_sql_runs_in_plain_duckdb_and_prints_the_reports_figure(
    demo_html: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack's `.sql` is self-contained: a plain DuckDB connection (no mapreport, no views
    made for it), run from the pack's folder, runs the file and prints one row, the figure
    under its findings.json name with the value (to 1e-9) and n the report states and the
    pack's rows recompute; its view of the rows holds the rows of the pack's Parquet, in its
    columns. It names the dataset's files by their path from that folder."""
    packs = sorted(demo_html.glob("**/evidence/*.sql"))  # every demo slice's
    assert len({sql.parent for sql in packs}) >= 3
    stated: dict[str, dict[str, Any]] = {}
    for findings in demo_html.glob("**/findings.json"):
        stated |= stated_evidence(json.loads(findings.read_text()))
    checked = {check_pack_sql(sql, stated, monkeypatch) for sql in packs}
    assert {"tail_share", "net_gain", "ape", "environment", "records"} <= checked, checked


@pytest.mark.parametrize("reduction", ["net_gain", "ape", "drift"])
@pytest.mark.parametrize("covered", [True, False])
def test_a_sample_packs_figure_in_sql_is_its_recomputed_figure(
    reduction: str, covered: bool
) -> None:
    """The SQL of a compute-sample pack's figure (the medians by variant, the events' time per
    adapted request, the drift's baseline) gives what the analysis's functions give from the
    same rows, to 1e-9, n included; and none where the samples are too few."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    from mapreport.analysis.base.common import Thresholds
    from mapreport.analysis.base.packs import PACK_ROWS, Pack, SampleParams
    from mapreport.analysis.steps.packs import figure_sql, recompute
    from mapreport.core.kinds import Reduction
    from tests.pack_sql import same

    rng = np.random.default_rng(7)
    rows = [("sample", "s", v, float(x), "f", i) for i, (v, n, mu) in enumerate(
        [("static", 41, 100.0), ("adapted", 38, 80.0), ("fallback", 23, 130.0)]
    ) for x in rng.lognormal(np.log(mu), 0.2, n)]  # fmt: skip
    rows += [("event", "s", "compile", 900.0 + i, "f", 1000 + i) for i in range(3)]
    columns = zip(*rows, strict=True)
    names = ["kind", "shape", "what", "value", "source_id", "line"]
    table = pa.table(dict(zip(names, columns, strict=True)))
    params = SampleParams(covered=covered, predicted_us=90.0, baseline=-0.04)
    for th in (Thresholds(), Thresholds(min_samples=30)):  # fallback's 23: too few at 30
        p = Pack(
            "0" * 12, "class x", "w", "", "s", reduction, Reduction(reduction), "",
            msgspec.to_builtins(params), None, 0, None, {}, as_dict(th),
        )  # fmt: skip
        x = recompute(p, table)
        con = duckdb.connect()
        con.register(PACK_ROWS, table)
        ((name, value, n),) = con.sql(figure_sql(p)).fetchall()
        assert name == reduction
        assert same(value, x.figure), (value, x)
        assert n == x.n
