"""The command line end to end: ingest, report, run, --slice, errors and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mapreport.app.cli import main
from mapreport.run import ingesting, pipeline
from tests.conftest import REALDATA, REPO, write_config

MAPREPORT = [sys.executable, "-m", "mapreport.app.cli"]


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run the real entry point in a subprocess."""
    return subprocess.run(
        [*MAPREPORT, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_help_documents_every_command() -> None:
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0
    for cmd in ("ingest", "report", "run", "formats"):
        assert cmd in top.output
        sub = runner.invoke(main, [cmd, "--help"])
        assert sub.exit_code == 0, cmd
        assert "Usage:" in sub.output
    assert "Exit codes" in top.output
    assert "--slice" in runner.invoke(main, ["report", "--help"]).output
    assert "--on-error" in runner.invoke(main, ["ingest", "--help"]).output


def test_formats_lists_readers() -> None:
    out = CliRunner().invoke(main, ["formats"]).output
    for name in ("native-compile", "native-runtime", "native-quality"):
        assert name in out
    lines = out.splitlines()
    # Model Analyzer's authors deprecated it (2025): said under its entry, with what replaces it
    at = next(i for i, line in enumerate(lines) if line.startswith("model-analyzer "))
    assert "DEPRECATED" in lines[at + 2]
    assert "perf_analyzer" in lines[at + 2]
    assert "AIPerf" in lines[at + 2]
    assert sum("DEPRECATED" in line for line in lines) == 1


@pytest.mark.slow
def test_ingest_then_report_then_slice(tmp_path: Path, sample_dir: Path) -> None:
    ds, out = tmp_path / "ds", tmp_path / "out"
    first = cli("ingest", "--dataset", ds, sample_dir)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("ingested") == 7
    again = cli("ingest", "--dataset", ds, *sorted(sample_dir.iterdir()))
    assert again.returncode == 0
    assert again.stdout.count("unchanged") == 7

    one = cli("report", "--dataset", ds, "--out", out, "--slice", "resnet50-int8/prod", "--no-pdf")
    assert one.returncode == 0, one.stderr
    assert (out / "resnet50-int8" / "prod" / "findings.json").is_file()
    assert not (out / "bert-base").exists()  # --slice touches only that slice
    index = (out / "index.html").read_text()
    assert "resnet50-int8/prod" in index
    assert "not reported yet" in index  # the other slices are listed, not hidden

    before = (out / "resnet50-int8" / "prod" / "findings.json").stat().st_mtime_ns
    every = cli("report", "--dataset", ds, "--out", out, "--no-pdf")
    assert every.returncode == 0, every.stderr
    assert (out / "bert-base" / "report.html").is_file()
    assert (out / "llama-decode" / "chat" / "findings.json").is_file()
    # same inputs as the report already there: left as it is, and said so
    assert (out / "resnet50-int8" / "prod" / "findings.json").stat().st_mtime_ns == before
    assert "unchanged resnet50-int8/prod" in every.stdout
    assert "not reported yet" not in (out / "index.html").read_text()
    forced = cli("report", "--dataset", ds, "--out", out, "--no-pdf", "-q", "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout == ""
    assert (out / "resnet50-int8" / "prod" / "findings.json").stat().st_mtime_ns > before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["report", "--dataset", "/nonexistent/ds", "--out", "/tmp/x"],
            5,
            "not a mapreport dataset",
        ),
        (["run", "/nonexistent/config.toml"], 4, "no such config file"),
        (["ingest", "--dataset", "DS", "--format", "nope", "README.md"], 2, "Invalid value"),
    ],
)
def test_errors_are_one_line_with_exit_code(args: list[str], code: int, message: str) -> None:
    res = cli(*args)
    assert res.returncode == code
    assert message in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.slow
def test_bad_input_names_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"workload":"w","request_id":"a","shape":{"b":1},"arrival_us":1,'
        '"compute_start_us":2,"compute_end_us":3}\n'
        '{"workload":"w","request_id":"b","shape":{"b":1},"arrival_us":"x",'
        '"compute_start_us":2,"compute_end_us":3}\n'
    )
    res = cli("ingest", "--dataset", tmp_path / "ds", bad)
    assert res.returncode == 3
    assert res.stderr.strip().splitlines() == [
        f"mapreport: {bad}:2: field 'arrival_us': expected a number, got 'x'"
    ]
    ok = cli("ingest", "--dataset", tmp_path / "ds", "--on-error", "quarantine", bad)
    assert ok.returncode == 0
    assert "1 rejected" in ok.stdout


def test_files_quarantined_whole_are_listed_one_per_line(tmp_path: Path) -> None:
    """Each unreadable file on a line of its own; a line break in a name stays escaped."""
    (tmp_path / "a\nb").mkdir()
    odd, plain = tmp_path / "a\nb" / "x.txt", tmp_path / "y.txt"
    for f in (odd, plain):
        f.write_text("not a trace\n")
    res = cli("ingest", "--dataset", tmp_path / "ds", "--on-error", "quarantine", odd, plain)
    assert res.returncode == 3
    assert res.stderr.strip().splitlines() == [
        "mapreport: 2 file(s) could not be read:",
        f"  {tmp_path}/a\\nb/x.txt: format not recognised",
        f"  {plain}: format not recognised",
        res.stderr.strip().splitlines()[-1],
    ]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("known formats: ")
    assert "kineto, " in last


def test_unknown_slice_lists_known_ones(demo_dataset: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(
        main, ["report", "--dataset", str(demo_dataset), "--out", str(tmp_path), "--slice", "gpt"]
    )
    assert res.exit_code == 5
    assert "no slice 'gpt'" in res.output
    assert "bert-base" in res.output


@pytest.mark.slow
def test_bad_config_names_key(tmp_path: Path, sample_dir: Path) -> None:
    cfg = write_config(tmp_path, sample_dir, "\n[extra_section]\nx = 1\n")
    res = cli("run", cfg)
    assert res.returncode == 4
    assert "extra_section" in res.stderr
    cfg = write_config(tmp_path, sample_dir)
    cfg.write_text(cfg.read_text().replace("tolerance = 0.15", 'tolerance = "wide"'))
    res = cli("run", cfg)
    assert res.returncode == 4
    assert "tolerance" in res.stderr
    cfg = write_config(tmp_path, sample_dir)
    cfg.write_text(cfg.read_text().replace('on_error = "abort"', 'on_error = "abort"\njobs = 0'))
    res = cli("run", cfg)
    assert res.returncode == 4
    assert res.stderr.strip() == f'mapreport: {cfg}: run.jobs must be in 1..64 or "auto", got 0'
    res = cli("run", "--jobs", "0", cfg)
    assert res.returncode == 2
    assert "--jobs" in res.stderr


@pytest.mark.slow
def test_run_continues_past_a_failing_slice(
    tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pipeline.analyze_slice

    def flaky(con, workload, slice_, *rest):  # type: ignore[no-untyped-def]
        if workload == "llama-decode":
            raise RuntimeError("simulated analysis failure")
        return real(con, workload, slice_, *rest)

    monkeypatch.setattr(pipeline, "analyze_slice", flaky)
    cfg = write_config(tmp_path, sample_dir)
    res = CliRunner().invoke(
        main,
        ["report", "--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "out"), "--no-pdf"],
    )
    assert res.exit_code == 5  # no dataset yet
    ingesting.ingest(tmp_path / "ds", [sample_dir])
    res = CliRunner().invoke(
        main,
        [
            "report",
            "--dataset",
            str(tmp_path / "ds"),
            "--out",
            str(tmp_path / "out"),
            "--no-pdf",
            "--config",
            str(cfg),
        ],
    )
    assert res.exit_code == 6
    assert "llama-decode/chat: RuntimeError: simulated analysis failure" in res.output
    assert (tmp_path / "out" / "bert-base" / "report.html").is_file()
    assert (tmp_path / "out" / "resnet50-int8" / "prod" / "findings.json").is_file()
    index = (tmp_path / "out" / "index.html").read_text()
    assert "simulated analysis failure" in index


@pytest.mark.slow
def test_hostile_workload_names_stay_inside_out(tmp_path: Path) -> None:
    rec = {
        "request_id": "r",
        "shape": {"b": 1},
        "arrival_us": 1,
        "compute_start_us": 2,
        "compute_end_us": 3,
    }
    f = tmp_path / "evil.jsonl"
    f.write_text(
        "\n".join(
            json.dumps({**rec, "workload": w, "slice": s, "request_id": f"r{i}"})
            for i, (w, s) in enumerate([("../../etc", "../x"), ("/abs/path", ""), ("..", ".")])
        )
        + "\n"
    )
    ingesting.ingest(tmp_path / "ds", [f])
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main, ["report", "--dataset", str(tmp_path / "ds"), "--out", str(out), "--no-pdf"]
    )
    assert res.exit_code == 0, res.output
    written = list(tmp_path.rglob("findings.json"))
    assert len(written) == 3
    assert all(p.resolve().is_relative_to(out.resolve()) for p in written)


def test_a_bug_ends_in_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("something unforeseen\nsecond line")

    monkeypatch.setattr("mapreport.run.reporting.report", broken)
    res = CliRunner().invoke(main, ["report", "--dataset", str(tmp_path), "--out", str(tmp_path)])
    assert res.exit_code == 1
    assert res.output.strip() == (
        "mapreport: internal error: RuntimeError: something unforeseen "
        "(run with -v for the traceback; please report it)"
    )
    assert "Traceback" not in res.output


def test_a_full_disk_is_a_system_error_not_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device", str(tmp_path / "ds"))

    monkeypatch.setattr("mapreport.run.reporting.report", full)
    res = CliRunner().invoke(main, ["report", "--dataset", str(tmp_path), "--out", str(tmp_path)])
    assert res.exit_code == 7
    assert res.output.strip() == (
        f"mapreport: system error: No space left on device ({tmp_path / 'ds'})"
    )


@pytest.mark.slow
def test_no_pdf_report_names_only_what_it_wrote(demo_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["report", "--dataset", str(demo_dataset), "--out", str(out), "--no-pdf"]
    res = CliRunner().invoke(main, [*args, "--slice", "bert-base"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("report"))
    assert line.endswith("report.html, findings.json")
    assert not (out / "bert-base" / "report.pdf").exists()
    index = (out / "index.html").read_text()
    assert 'href="bert-base/report.html"' in index
    assert "report.pdf" not in index


@pytest.mark.slow
def test_a_one_night_no_pdf_report_loads_no_library_it_does_not_use(
    demo_dataset: Path, tmp_path: Path
) -> None:
    """Issue 53: a slice with fewer nights than a change point needs never imports ruptures
    (and scipy with it), and a report without a PDF neither WeasyPrint nor kaleido (1.8 s of
    imports together, measured; benchmarks/startup.py --trace); the command's process never
    imports pandas, which no command reads and pyarrow would import on its first array."""
    args = ["report", "--dataset", str(demo_dataset), "--out", str(tmp_path), "--no-pdf"]
    probe = (
        "import atexit, sys; atexit.register(lambda: print(*sys.modules, file=sys.stderr)); "
        f"from mapreport.app.entry import run; run({[*args, '--slice', 'bert-base']!r})"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr
    heavy = ("ruptures", "scipy", "weasyprint", "kaleido", "pyspark", "xprof", "jsonschema")
    heavy += ("pandas",)
    assert [m for m in res.stderr.split() if m.split(".")[0] in heavy] == []


def test_python_dash_m_runs_the_cli_and_names_every_exit_code() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "mapreport", "--help"], capture_output=True, text=True, cwd=REPO
    )
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    for code in ("0 ok", "2 usage", "3 bad input", "4 bad config", "5 dataset", "6 a slice"):
        assert code in text
    assert "7 system error" in text


@pytest.mark.slow
def test_config_without_sources_is_a_config_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[run]\nsources = []\n")
    res = cli("run", cfg)
    assert (res.returncode, res.stderr.strip()) == (
        4,
        f"mapreport: {cfg}: run.sources lists no input files",
    )


@pytest.mark.slow
def test_ingest_with_report_writes_what_report_writes(tmp_path: Path) -> None:
    """`ingest --report OUT` reports the dataset's slices in the ingest's process: the same
    report.html and findings.json as `report --no-pdf` run after it (apart from the time and
    the run id each was made with), and nothing is reported when the ingest fails."""
    trace = REALDATA / "tracelens" / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
    if not trace.is_file():
        pytest.skip(f"{trace} is absent (../shared/realdata)")
    ds, one, two = tmp_path / "ds", tmp_path / "one", tmp_path / "two"
    res = cli("ingest", "--dataset", ds, "--workload", "bert", "--report", one, trace)
    assert res.returncode == 0, res.stderr
    assert "ingested  kineto" in res.stdout
    assert f"report    bert -> {one / 'bert'}/report.html, findings.json" in res.stdout
    assert not (one / "bert" / "report.pdf").exists()
    res = cli("report", "--dataset", ds, "--out", two, "--no-pdf")
    assert res.returncode == 0, res.stderr

    def made(out: Path, name: str) -> str:
        text = (out / "bert" / name).read_text()
        stamp = json.loads((out / "bert" / "findings.json").read_text())["generated_at"]
        text = text.replace(stamp, "<made>").replace(str(out), "<out>")
        return re.sub(r"\d{8}T\d{6}Z-[0-9a-f]+-\d+", "<run>", text)  # each run's id

    for name in ("findings.json", "report.html"):
        assert made(one, name) == made(two, name), name
    # a trace's page draws no chart, so it carries no plotly.js (3.6 MB a page)
    page = (one / "bert" / "report.html").read_text()
    assert "Plotly" not in page
    assert len(page) < 500_000
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": "soon"}]}')
    res = cli("ingest", "--dataset", tmp_path / "ds2", "--report", tmp_path / "three", bad)
    assert res.returncode == 3, res.stdout
    assert not (tmp_path / "three").exists()


@pytest.mark.slow
def test_ingest_refuses_the_dataset_as_its_own_source(tmp_path: Path, sample_dir: Path) -> None:
    ds = tmp_path / "ds"
    assert cli("ingest", "-q", "--dataset", ds, sample_dir / "quality.jsonl").returncode == 0
    res = cli("ingest", "--dataset", ds, ds)
    assert res.returncode == 3
    assert "is inside the dataset" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    again = cli("ingest", "-q", "--dataset", ds, sample_dir / "quality.jsonl")
    assert again.returncode == 0  # nothing was added: the same file is unchanged


@pytest.mark.slow
def test_a_failed_slice_is_one_line_without_a_traceback(tmp_path: Path, sample_dir: Path) -> None:
    ds, out = tmp_path / "ds", tmp_path / "out"
    runtime = sample_dir / "bert-base.runtime.jsonl.gz"
    assert cli("ingest", "-q", "--dataset", ds, runtime).returncode == 0
    (out / "bert-base" / "report.html").mkdir(parents=True)  # where the report file goes
    res = cli("report", "--dataset", ds, "--out", out, "--no-pdf", "-q")
    assert res.returncode == 7  # the system refused the write
    assert "Traceback" not in res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("mapreport: 1 of 1 slice report(s) failed: bert-base: IsADirectoryError")
    verbose = cli("report", "--dataset", ds, "--out", out, "--no-pdf", "-q", "-v")
    assert "Traceback" in verbose.stderr  # -v keeps it


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["symlink_out", "symlink_in", "file"])
def test_a_refused_slice_folder_fails_that_slice_only(
    tmp_path: Path, sample_dir: Path, kind: str
) -> None:
    """OUT/<workload> as a symbolic link (outside OUT, or onto another slice's folder) or as
    a file: that slice fails with one line, the others and the index are written, exit 6
    (before: the whole run stopped, exit 1)."""
    ds, out = tmp_path / "ds", tmp_path / "out"
    files = [sample_dir / "bert-base.runtime.jsonl.gz", sample_dir / "resnet50-int8.runtime.jsonl"]
    assert cli("ingest", "-q", "--dataset", ds, *files).returncode == 0
    (out / "resnet50-int8").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "symlink_out":
        (out / "bert-base").symlink_to(elsewhere)
    elif kind == "symlink_in":
        (out / "bert-base").symlink_to(out / "resnet50-int8")
    else:
        (out / "bert-base").write_text("x")
    res = cli("report", "--dataset", ds, "--out", out, "--no-pdf", "-q")
    assert res.returncode == 6
    assert "bert-base: refusing to write" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert (out / "resnet50-int8" / "prod" / "findings.json").is_file()
    assert (out / "index.html").is_file()
    assert list(elsewhere.iterdir()) == []
    assert not (out / "resnet50-int8" / "findings.json").exists()


@pytest.mark.slow
def test_names_from_files_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """ESC sequences in a workload name and a newline in a file name reach stdout escaped:
    no title change, no forged `mapreport:` line."""
    rec = {"request_id": "r", "shape": {"b": 1}, "arrival_us": 1, "compute_start_us": 2}
    evil = "w\x1b]0;owned\x07\x1b[2J\u202e"
    f = tmp_path / "a\nmapreport: all good.jsonl"
    f.write_text(json.dumps({**rec, "workload": evil, "compute_end_us": 3}) + "\n")
    ds = tmp_path / "ds"
    res = cli("ingest", "--dataset", ds, f)
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout
    assert len(res.stdout.strip().splitlines()) == 1
    assert "a\\nmapreport: all good.jsonl" in res.stdout
    rep = cli("report", "--dataset", ds, "--out", tmp_path / "out", "--no-pdf")
    assert rep.returncode == 0, rep.stderr
    assert "\x1b" not in rep.stdout + rep.stderr
    assert "\u202e" not in rep.stdout
    assert "w\\x1b]0;owned\\x07\\x1b[2J\\u202e" in rep.stdout
    bad = tmp_path / "b\x1b[31m.jsonl"
    bad.write_text(json.dumps({**rec, "workload": "w", "compute_end_us": "x\x1b[2J"}) + "\n")
    err = cli("ingest", "--dataset", ds, bad)
    assert err.returncode == 3
    assert "\x1b" not in err.stderr
    assert len(err.stderr.strip().splitlines()) == 1


def test_a_full_disk_leaves_no_temp_file_and_names_the_path(
    tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC in the middle of writing a report file: exit 7 naming the file, and no temp
    file left to keep the disk full on every rerun (before: exit 7 or 1, temps left)."""
    ds, out = tmp_path / "ds", tmp_path / "out"
    ingesting.ingest(ds, [sample_dir / "resnet50-int8.runtime.jsonl"])
    real = Path.write_bytes

    def full(self: Path, data: bytes) -> int:
        real(self, data[: len(data) // 2])
        raise OSError(28, "No space left on device")  # the system names no file

    monkeypatch.setattr(Path, "write_bytes", full)
    res = CliRunner().invoke(
        main, ["report", "-q", "--dataset", str(ds), "--out", str(out), "--no-pdf"]
    )
    assert res.exit_code == 7
    assert "No space left on device" in res.output
    assert f"({out}/" in res.output  # the file it could not write
    assert [p for p in out.rglob("*") if ".tmp" in p.name] == []


def test_a_read_only_out_is_a_system_error(
    tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OUT on a read-only filesystem: exit 7 naming it (was exit 1)."""
    ds, out = tmp_path / "ds", tmp_path / "ro" / "out"
    ingesting.ingest(ds, [sample_dir / "resnet50-int8.runtime.jsonl"])
    real = Path.mkdir

    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        if self.is_relative_to(tmp_path / "ro"):
            raise OSError(30, "Read-only file system", str(self))
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", read_only)
    args = ["report", "-q", "--dataset", str(ds), "--out", str(out), "--no-pdf"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 7
    assert res.output.strip() == f"mapreport: system error: Read-only file system ({out})"


def test_the_command_process_refuses_pandas_as_not_installed() -> None:
    """`app/entry.py`: pandas and its submodules are refused as a missing package is (what an
    optional import of it expects); every other module is left to the next finder."""
    from mapreport.app.entry import Unused

    finder = Unused()
    for name in ("pandas", "pandas.core.api"):
        with pytest.raises(ModuleNotFoundError, match="not used by the mapreport command"):
            finder.find_spec(name)
    assert finder.find_spec("pandasql") is None
    assert finder.find_spec("pyarrow") is None
