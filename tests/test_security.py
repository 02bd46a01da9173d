"""A dataset is data, never code (docs/reliability.md, "What a dataset may contain"): names
become literals, never SQL; `explain` runs only the SQL mapreport builds; every DuckDB
connection is confined to its folders; links in a dataset are not followed for writing."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import duckdb
import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from mapreport.analysis.actions.actions import SLICE_WIDE
from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.packs import (
    KINDS,
    PACK_ROWS,
    HeadroomParams,
    NoParams,
    Pack,
    QueueParams,
    RegressionParams,
    SampleParams,
    SourceParams,
    TailParams,
    TuningParams,
)
from mapreport.analysis.base.query import inline, literal
from mapreport.analysis.steps.packs import figure_sql, pack_sql
from mapreport.app.cli import main
from mapreport.core.kinds import Driver, Reduction
from mapreport.core.records import as_dict
from mapreport.dataset.store import Dataset
from mapreport.dataset.views import duckdb_connection
from mapreport.run.evidence import explain

FRAGMENTS = [
    "'",
    "''",
    '"',
    "$w",
    "$s",
    "$shape",
    "$metrics",
    "$ids",
    "$1",
    "?",
    ";",
    "--",
    "/*",
    "*/",
    "\\",
    "'); COPY (SELECT 42) TO '/tmp/mapreport-pwned.csv'; --",
    "' || (SELECT content FROM read_text('/etc/hostname')) || '",
    "SELECT",
    "DROP TABLE request",
    "{w}",
    "%s",
    "é",
    "名",
    " ",
]
"""What a hostile name is made of: quotes, dollar signs, our own placeholders, SQL keywords and
statements, comment openers and other engines' parameter marks."""

names = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), min_size=1, max_size=6).map(
    "".join
)


@given(a=names, b=names)
@example(a="a$s", b="') UNION SELECT content FROM read_text('/etc/passwd') --")
def test_inline_writes_each_value_once_as_a_literal(a: str, b: str) -> None:
    """`inline` writes every parameter as one literal in one pass: the values come back as they
    went in, and the text is one statement."""
    sql = inline("SELECT $a AS a, $b AS b, '$a' AS kept", {"a": a, "b": b})
    assert len(duckdb.extract_statements(sql)) == 1
    assert duckdb.sql(sql).fetchall() == [(a, b, "$a")]
    assert duckdb.sql(f"SELECT {literal(a)}").fetchall() == [(a,)]


def _params(reduction: Reduction, shape: str) -> object:
    kind = KINDS[reduction].params
    if kind is TailParams:
        return TailParams(Driver.QUEUEING, [shape, "x"], {shape: 1.5e6})
    if kind is SampleParams:
        return SampleParams(covered=True, predicted_us=10.0, baseline=0.1)
    if kind is QueueParams:
        return QueueParams("Triton", 0.0, 1e15)
    if kind is SourceParams:
        return SourceParams([shape, "0123"])
    if kind is HeadroomParams:  # every selection field a hostile name too
        return HeadroomParams(shape, "kernel", shape, shape, shape, 1.0, [shape, shape, shape])
    if kind is TuningParams:  # the run, task, target and shape all hostile names
        return TuningParams(shape, shape, shape, shape)
    if kind is RegressionParams:
        return RegressionParams([float(q) for q in range(101)], 100)
    return NoParams()


@pytest.fixture(scope="module")
def empty_dataset(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    """The views of an empty dataset: every canonical table, typed, without rows."""
    return Dataset(tmp_path_factory.mktemp("empty"), create=True).connect()


def _pack_queries(workload: str, slice_: str, shape: str) -> Iterator[tuple[str, str, str]]:
    """(pack SQL, its figure's SELECT, the figure's name) of every kind of pack, at the shape
    and slice-wide, for these names."""
    for reduction in Reduction:
        for where in (shape, SLICE_WIDE):
            params = _params(reduction, where)
            sql = pack_sql(reduction, workload, slice_, where, params)
            metric = f"quality.{shape}"
            p = Pack(
                "0" * 12, "action", workload, slice_, where, metric, reduction, sql,
                msgspec.to_builtins(params), None, 0, None, {}, as_dict(Thresholds()),
            )  # fmt: skip
            yield sql, figure_sql(p), metric


HOSTILE = {"workload": "a$s", "slice_": "') TO '/tmp/x' --", "shape": "$metrics"}


@settings(max_examples=40, deadline=None)
@given(workload=names, slice_=names, shape=names)
@example(**HOSTILE)
def test_every_pack_query_is_one_select_whatever_the_names(
    workload: str, slice_: str, shape: str
) -> None:
    """Every kind of evidence pack, for any workload, slice and shape names, is one SELECT
    statement (the names stay inside their literals); so is the SELECT of its figure over its
    rows."""
    for sql, figure, _ in _pack_queries(workload, slice_, shape):
        statements = duckdb.extract_statements(sql)
        assert len(statements) == 1, sql
        assert statements[0].type == duckdb.StatementType.SELECT
        statements = duckdb.extract_statements(figure)
        assert [s.type for s in statements] == [duckdb.StatementType.SELECT], figure


@pytest.mark.slow
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(workload=names, slice_=names, shape=names)
@example(**HOSTILE)
def test_every_pack_query_runs_whatever_the_names(
    empty_dataset: duckdb.DuckDBPyConnection, workload: str, slice_: str, shape: str
) -> None:
    """Each pack's query runs on a dataset, and its figure's SELECT prints the figure's name
    (a name from the dataset too: `quality.<precision>`) as it is. Fewer examples than the
    parse above: a run is 30 statements of about 25 ms, and what a name can do to the
    statement is what the parse holds."""
    for sql, figure, metric in _pack_queries(workload, slice_, shape):
        empty_dataset.sql(sql).fetchall()
        empty_dataset.execute(f"CREATE OR REPLACE TEMP VIEW {PACK_ROWS} AS {sql}")
        ((name, *_),) = empty_dataset.sql(figure).fetchall()
        assert name == metric


def test_an_analysis_connection_reaches_no_file_outside_its_dataset(tmp_path: Path) -> None:
    """A dataset's connection reads its own files, but neither reads nor writes a file outside
    the dataset, nor changes its own settings, nor loads an extension."""
    ds = Dataset(tmp_path / "ds", create=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    con = ds.connect()
    con.execute("SELECT count(*) FROM request").fetchall()
    refused = [
        f"SELECT content FROM read_text('{secret}')",
        "SELECT content FROM read_text('/etc/passwd')",
        f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
        f"SELECT * FROM read_parquet('{ds.root}/../secret.txt')",
        f"ATTACH '{tmp_path / 'other.db'}'",
        "SET enable_external_access = true",
        "SET allowed_directories = ['/']",
        "LOAD httpfs",
        "INSTALL httpfs",
    ]
    for statement in refused:
        with pytest.raises(duckdb.Error):
            con.execute(statement)
    assert not (tmp_path / "out.csv").exists()
    assert not (tmp_path / "other.db").exists()


@pytest.mark.slow
def test_a_sandboxed_connection_still_spills_to_disk(tmp_path: Path) -> None:
    """The sandbox leaves DuckDB its own spill folder: a sort larger than the memory limit still
    completes."""
    con = duckdb_connection([tmp_path], memory_limit="100MB")
    with pytest.raises(duckdb.Error):  # the configuration is locked
        con.execute("SET memory_limit = '4GB'")
    spill = Path(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
    rows = con.execute(
        "SELECT max(rn) FROM (SELECT row_number() OVER (ORDER BY m) AS rn "
        "FROM (SELECT md5(range::VARCHAR) AS m FROM range(4000000)))"
    ).fetchall()
    assert rows == [(4000000,)]
    assert spill.is_dir()  # it did spill, into its own folder


HOSTILE_WORKLOAD = "bert'$s$w\"; DROP TABLE request; -- <img src=x onerror=alert(1)> `x` |"
HOSTILE_SLICE = "') UNION SELECT content FROM read_text('/etc/passwd') -- $shape $metrics"


def _hostile_inputs(sample_dir: Path, folder: Path) -> Path:
    """The demo's bert-base plan and part of its first night, renamed to hostile workload and
    slice names (escaped as JSON, as any producing tool would write them)."""
    import gzip

    folder.mkdir()
    name = json.dumps(HOSTILE_WORKLOAD)
    slice_ = json.dumps(HOSTILE_SLICE)
    plan = (sample_dir / "bert-base.compile.jsonl").read_text().splitlines()
    night = sorted(sample_dir.glob("bert-base*.runtime.*"))[0]
    opener = gzip.open if night.suffix == ".gz" else open
    with opener(night, "rt") as fh:
        runtime = [line for _, line in zip(range(1500), fh, strict=False)]
    for path, lines in (("plan.compile.jsonl", plan), ("night.runtime.jsonl", runtime)):
        renamed = [
            line.strip().replace('"workload":"bert-base"', f'"workload":{name},"slice":{slice_}')
            for line in lines
        ]
        (folder / path).write_text("\n".join(renamed) + "\n")
    return folder


@pytest.mark.slow
def test_hostile_names_stay_data_through_report_and_explain(
    sample_dir: Path, tmp_path: Path
) -> None:
    """Workload and slice names made of quotes, placeholders and SQL go through ingest, the
    analysis, every evidence pack and `explain` as names: every pack reproduces, its SQL is
    one SELECT, nothing is written outside the output folders, and the ticket escapes them."""
    inputs = _hostile_inputs(sample_dir, tmp_path / "in")
    dataset, out = tmp_path / "ds", tmp_path / "out"
    runner = CliRunner()
    res = runner.invoke(main, ["ingest", "--dataset", str(dataset), "-q", str(inputs)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["report", "--dataset", str(dataset), "--out", str(out), "--no-pdf"])
    assert res.exit_code == 0, res.output
    (doc_path,) = out.rglob("findings.json")
    doc = json.loads(doc_path.read_text())
    assert (doc["workload"], doc["slice"]) == (HOSTILE_WORKLOAD, HOSTILE_SLICE)
    packs = sorted((doc_path.parent / "evidence").glob("*.json"))
    assert packs
    for spec in packs:
        sql = (spec.parent / f"{spec.stem}.sql").read_text()
        # the views' statements, then one SELECT: no name ends a comment or a literal
        *views, query = duckdb.extract_statements(sql)
        assert {v.type for v in views} <= {duckdb.StatementType.CREATE}, spec.stem
        assert query.type == duckdb.StatementType.SELECT, spec.stem
        lines, ok = explain(dataset, spec.stem)
        assert ok, lines
    html = (doc_path.parent / "report.html").read_text()
    assert "<img src=x" not in html
    tickets = re.findall(r'<div class="ticket.*?<pre>(.*?)</pre>', html, re.S)
    assert len(tickets) == len(doc["actions"]) > 0
    for text in map(unescape, tickets):
        rendered = MarkdownIt("commonmark").enable("table").render(text)
        assert "<img" not in rendered
        assert "<code>" in rendered
        assert HOSTILE_WORKLOAD in unescape(rendered)  # as text, whole
    assert not Path("/tmp/mapreport-pwned.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "in", "out"]


def _small_dataset(tmp_path: Path, sample_dir: Path) -> Path:
    dataset = tmp_path / "ds"
    plan = sample_dir / "bert-base.compile.jsonl"
    res = CliRunner().invoke(main, ["ingest", "--dataset", str(dataset), "-q", str(plan)])
    assert res.exit_code == 0, res.output
    return dataset


def test_a_lock_that_is_a_link_is_never_written_through(tmp_path: Path, sample_dir: Path) -> None:
    """`<dataset>/.lock` as a link to another file: every writer refuses (exit 5) and the file
    it points to keeps its content."""
    dataset = _small_dataset(tmp_path, sample_dir)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (dataset / ".lock").unlink(missing_ok=True)
    (dataset / ".lock").symlink_to(victim)
    plan = sample_dir / "llama-decode.compile.jsonl"
    res = CliRunner().invoke(main, ["ingest", "--dataset", str(dataset), str(plan)])
    assert res.exit_code == 5, res.output
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("link", ["history", "compile_plan", "evidence", "ingest_log"])
def test_a_dataset_with_a_folder_linked_outside_is_refused_before_any_write(
    tmp_path: Path, sample_dir: Path, link: str
) -> None:
    """A dataset folder that is a link to a folder outside the dataset: ingest and report
    refuse the dataset (exit 5, naming the link) and nothing is written where it points."""
    dataset = _small_dataset(tmp_path, sample_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if (dataset / link).exists():
        shutil.rmtree(dataset / link)
    (dataset / link).symlink_to(elsewhere, target_is_directory=True)
    runner = CliRunner()
    plan = sample_dir / "llama-decode.compile.jsonl"
    for args in (
        ["ingest", "--dataset", str(dataset), str(plan)],
        ["report", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--no-pdf"],
    ):
        res = runner.invoke(main, args)
        assert res.exit_code == 5, (args, res.output)
        assert f"{dataset / link} is a link" in res.output
    assert list(elsewhere.iterdir()) == []


def test_links_inside_the_dataset_are_allowed(tmp_path: Path, sample_dir: Path) -> None:
    """A link that stays inside the dataset is no escape: the dataset is used as it is."""
    dataset = _small_dataset(tmp_path, sample_dir)
    (dataset / "notes").symlink_to(dataset / "ingest_log", target_is_directory=True)
    plan = sample_dir / "llama-decode.compile.jsonl"
    res = CliRunner().invoke(main, ["ingest", "--dataset", str(dataset), "-q", str(plan)])
    assert res.exit_code == 0, res.output


KILLER = """
import os, signal, sys
from pathlib import Path

if "--multiprocessing-fork" in sys.argv:  # a reader process, not the command
    import mapreport.ingest as ingest

    staged = ingest.Reading.stage

    def stage(self, dataset, path):
        marker = Path(os.environ["KILL_MARKER"])
        if Path(path).name == os.environ["KILL_FILE"] and (
            os.environ["KILL_ALWAYS"] == "1" or not marker.exists()
        ):
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer does
        return staged(self, dataset, path)

    ingest.Reading.stage = stage
"""


@pytest.mark.slow
@pytest.mark.parametrize("always", [False, True])
def test_a_killed_reader_loses_no_finished_work(
    tmp_path: Path, sample_dir: Path, always: bool
) -> None:
    """`ingest --jobs 2` where the process reading one file is killed (SIGKILL, as by the
    out-of-memory killer): the other files are committed; the killed file is retried once in a
    fresh process and goes in when it reads there, else it is named in one line, exit 3."""
    import subprocess
    import sys

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(KILLER)
    inputs = sorted(sample_dir.glob("*.compile.jsonl"))
    assert len(inputs) >= 3
    victim = inputs[1]
    env = dict(
        os.environ,
        PYTHONPATH=str(hooks),
        KILL_FILE=victim.name,
        KILL_MARKER=str(tmp_path / "killed"),
        KILL_ALWAYS="1" if always else "0",
    )
    dataset = tmp_path / "ds"
    args = ["ingest", "--dataset", str(dataset), "--jobs", "2", *map(str, inputs)]
    cmd = [sys.executable, "-m", "mapreport", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert (tmp_path / "killed").exists()  # the hook ran
    assert "Traceback" not in done.stderr + done.stdout
    committed = {e.path for e in Dataset(dataset).log()}
    others = {str(p) for p in inputs if p != victim}
    assert others <= committed
    if always:
        assert done.returncode == 3, done.stderr
        assert str(victim) not in committed
        (line,) = [x for x in done.stderr.splitlines() if str(victim) in x]
        assert "killed" in line
    else:
        assert done.returncode == 0, done.stderr
        assert str(victim) in committed


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the direct children of `pid` (this test's own processes)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append((int(entry), cmd))
    return found


@pytest.mark.slow
def test_a_killed_resource_tracker_prints_no_traceback(tmp_path: Path, sample_dir: Path) -> None:
    """`ingest --jobs 2` whose multiprocessing resource tracker is killed mid-run: the files go
    in, exit 0, and stderr says so in one warning line instead of Python tracebacks."""
    import signal
    import subprocess
    import sys
    import time

    files = sorted(str(p) for p in sample_dir.rglob("*") if p.is_file())
    cmd = [sys.executable, "-m", "mapreport", "ingest", "--dataset", str(tmp_path / "ds")]
    proc = subprocess.Popen(
        [*cmd, "--jobs", "2", *files], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    killed = False
    while not killed and proc.poll() is None:
        for pid, line in _children(proc.pid):
            if "resource_tracker" in line:
                os.kill(pid, signal.SIGKILL)
                killed = True
        time.sleep(0.01)  # a polling interval, not a wait for an event
    _out, err = proc.communicate(timeout=600)
    assert killed
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "resource tracker" in err
    assert len(Dataset(tmp_path / "ds").live()) == len(files)


def test_a_name_in_a_pack_comment_never_ends_the_comment() -> None:
    """A workload named with a newline and a statement stays inside its `--` comment line: the
    pack file still holds the statements mapreport wrote and nothing else."""
    from mapreport.analysis.base.query import comment

    name = "bert\nDROP TABLE request;\r\n-- x\x00\x7f"
    line = comment(f"mapreport evidence pack abc: action of {name}")
    assert line.startswith("-- ")
    assert line.count("\n") == 1
    assert line.endswith("\n")
    script = line + "SELECT 1 AS one;\n"
    assert [s.type for s in duckdb.extract_statements(script)] == [duckdb.StatementType.SELECT]


def test_a_trace_event_without_a_category_is_read(tmp_path: Path) -> None:
    """`cat` is optional in the Chrome trace format: a complete event without one is an
    op_exec row with no category, beside a launched kernel; the launch linking had failed on
    it with an internal error (a review's hostile-input pass, 2026-12-06)."""
    trace = tmp_path / "nocat.json"
    trace.write_text(
        '{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 5},'
        ' {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 3,'
        ' "args": {"correlation": 9}}]}'
    )
    res = CliRunner().invoke(main, ["ingest", "--dataset", str(tmp_path / "ds"), str(trace)])
    assert res.exit_code == 0, res.output
    assert "op_exec 2" in res.output
