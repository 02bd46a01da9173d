"""An evidence pack's `.sql` run as a user runs it: plain DuckDB from the pack's folder, the
figure it prints checked against the report's and the pack's rows (tests/test_evidence.py on
the demo, tests/test_golden.py on every golden case)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from mapreport.analysis.base.packs import PACK_ROWS, Pack
from mapreport.analysis.steps.packs import recompute

ORDERED = ("net_gain", "ape", "drift", "blocked_share")
"""The reductions whose query orders every row (the others' rows compare as sets)."""


def same(a: float | None, b: float | None) -> bool:
    """Equal to 1e-9 relative (both None counts too)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


def stated_evidence(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The evidence a findings.json states, by pack id: each action's and each shape's class."""
    out = {a["id"]: a["evidence"] for a in doc["actions"] if a.get("evidence")}
    for s in doc["shapes"]:
        if s.get("class_pack") and s.get("class_evidence"):
            out[s["class_pack"]] = s["class_evidence"]
    return out


def check_pack_sql(
    sql: Path, stated: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> str:
    """Run a pack's `.sql` in a plain DuckDB connection from its folder: it prints one row,
    the figure under its findings.json name with the value (to 1e-9) and n that the spec and
    findings.json (`stated`, where it holds the pack) state and the rows recompute; its view
    of the rows holds the rows of the pack's Parquet. Returns the pack's reduction."""
    text = sql.read_text()
    assert "read_parquet(['/" not in text, sql.name
    spec = Pack.from_spec(sql.with_suffix(".json").read_bytes())
    monkeypatch.chdir(sql.parent)
    con = duckdb.connect()
    try:
        got = con.sql(text)
        assert got.columns[:2] == ["figure", "value"], sql.name
        ((name, value, *n),) = got.fetchall()
        want = pq.read_table(sql.with_suffix(".parquet"))
        x = recompute(spec, want)
        assert name == spec.metric, sql.name
        assert same(value, spec.figure), (sql.name, value, spec.figure)
        assert same(value, x.figure), (sql.name, value, x)
        assert n in ([], [spec.n]), (sql.name, n, spec.n)
        if spec.id in stated:
            assert stated[spec.id]["metric"] == name, sql.name
            assert same(value, stated[spec.id]["value"]), sql.name
            assert n in ([], [stated[spec.id]["n"]]), sql.name
        rows = con.sql(f"SELECT * FROM {PACK_ROWS}").to_arrow_table()
        assert rows.column_names == want.column_names, sql.name
        assert sorted(map(str, rows.to_pylist())) == sorted(map(str, want.to_pylist())), sql.name
        if spec.reduction in ORDERED:
            assert rows.equals(want), sql.name
    finally:
        con.close()
    return str(spec.reduction)


def check_compare_pack_sql(sql: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a comparison pack's `.sql` in a plain DuckDB connection from its folder (it names
    the datasets' files by their path from there): it prints one row, the ratio of the figure
    its spec names with the value (to 1e-9) and each side's n the spec states (compare.json's),
    and its tables of each side's rows hold the side's Parquet. Returns the figure's kind."""
    from mapreport.analysis.comparing.packs import SIDE_ROWS
    from mapreport.run.compare_packs import load

    p = load(sql.parent.parent, sql.name.split(".")[0])
    text = sql.read_text()
    assert "read_parquet(['/" not in text, sql.name
    monkeypatch.chdir(sql.parent)
    con = duckdb.connect()
    try:
        ((figure, of, ratio, n_a, n_b),) = con.sql(text).fetchall()
        assert (figure, of, n_a, n_b) == ("ratio", p.subject, p.n_a, p.n_b), sql.name
        assert same(ratio, p.ratio), (sql.name, ratio, p.ratio)
        for name, table in SIDE_ROWS.items():
            rows = con.sql(f"SELECT * FROM {table}").to_arrow_table()
            assert rows.equals(pq.read_table(sql.parent / f"{p.id}.{name}.parquet")), sql.name
    finally:
        con.close()
    return str(p.figure)
