"""A run folder ingested as it was recorded: the files no reader reads that tools write beside
their telemetry (READMEs, Model Analyzer's CSVs, PyTorch execution traces) are listed as
skipped, exit 0 (vLLM/SGLang's `execution_details.json` is read: `capture-details`); a file
nobody knows is still a one-line error; an ingest stopped by a bad file says what it had
committed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mapreport.app.cli import main
from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import READERS, detect, identify
from mapreport.ingest.sidecars import SIDECARS, Sidecar
from tests.conftest import REALDATA

INFERENCE = REALDATA / "tracelens" / "inference"
TRACE = REALDATA / "hta" / "triton_example" / "triton_example.json.gz"
needs_realdata = pytest.mark.skipif(
    not TRACE.is_file() or not INFERENCE.is_dir(), reason="../shared/realdata is missing"
)


def _ingest(*args: str | Path) -> tuple[int, list[str], list[str]]:
    """Exit code, stdout lines and stderr lines of `mapreport ingest ARGS`."""
    r = CliRunner().invoke(main, ["ingest", *map(str, args)])
    return r.exit_code, r.stdout.splitlines(), r.stderr.splitlines()


def _run_folder(tmp_path: Path, engine: str = "vllm_decode_full") -> Path:
    """A small run folder laid out as vLLM records one: a capture trace with its
    `execution_details.json` in `capture_traces/`, the execution trace beside it."""
    run = tmp_path / engine
    (run / "capture_traces").mkdir(parents=True)
    shutil.copy(
        INFERENCE / engine / "capture_traces" / "execution_details.json", run / "capture_traces"
    )
    shutil.copy(TRACE, run / "capture_traces" / "graph_capture_rank_0.json.gz")
    shutil.copy(TRACE, run / "graph_execution.json.gz")  # the same bytes: found unchanged
    return run


@needs_realdata
@pytest.mark.parametrize("policy", [[], ["--on-error", "quarantine"], ["--on-error", "abort"]])
def test_a_vllm_run_folder_ingests_as_recorded(tmp_path: Path, policy: list[str]) -> None:
    run = _run_folder(tmp_path)
    code, out, err = _ingest("--dataset", tmp_path / "ds", *policy, "--workload", "vllm", run)
    assert (code, err) == (0, [])
    details = (run / "capture_traces" / "execution_details.json").resolve()
    assert out[0] == f"ingested  capture-details {details} (graph_capture 1)"
    assert out[1].startswith("ingested  kineto")
    assert out[2].startswith("unchanged kineto")  # the same bytes as the capture trace
    assert len(Dataset(tmp_path / "ds").live()) == 2


@needs_realdata
@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(p.name for p in INFERENCE.glob("*")))
def test_every_real_serving_run_folder_ingests_with_exit_0(tmp_path: Path, engine: str) -> None:
    """vLLM full and piecewise graphs and SGLang decode, each folder as published: its two
    traces and its capture record read, nothing skipped."""
    code, out, err = _ingest("--dataset", tmp_path / "ds", INFERENCE / engine)
    assert (code, err) == (0, [])
    assert [line.split()[0] for line in out].count("skipped") == 0
    assert sum(line.startswith("ingested  kineto") for line in out) == 2
    assert sum(line.startswith("ingested  capture-details") for line in out) == 1


@needs_realdata
def test_every_real_file_is_read_or_known_as_not_telemetry() -> None:
    """Every file of ../shared/realdata and of the tuning runs made here (tests/corpus/
    tvm_tuned: what MetaSchedule wrote) is claimed by a reader or by a kind of sidecar, and each
    kind of sidecar stands for a real file of its own."""
    kinds: set[str] = set()
    made_here = Path(__file__).parent / "corpus" / "tvm_tuned"
    files = [*REALDATA.rglob("*"), *made_here.rglob("database_*")]
    for f in sorted(p for p in files if p.is_file()):
        found = identify(f)
        if isinstance(found, Sidecar):
            kinds.add(found.name)
        else:
            assert found.name in READERS
    assert kinds == {s.name for s in SIDECARS}


def test_a_file_nobody_knows_is_still_a_one_line_error(tmp_path: Path) -> None:
    """A name a sidecar has but content it has not (an `execution_details.json` that is
    something else) and a file of no known kind: each the one-line error, exit 3."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "execution_details.json").write_text('{"hello": "world"}\n')
    code, out, err = _ingest("--dataset", tmp_path / "ds", folder)
    assert (code, out) == (3, [])
    f = (folder / "execution_details.json").resolve()
    assert err == [f"mapreport: {f}: format not recognised (known: {', '.join(READERS)})"]
    with pytest.raises(InputError, match="format not recognised"):
        identify(f)


def test_detect_refuses_a_sidecar_by_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# notes\n")
    with pytest.raises(InputError, match="not a telemetry file: documentation or a licence"):
        detect(tmp_path / "README.md")
    empty = tmp_path / "LICENSE"
    empty.write_text("")  # an empty licence is still a licence, not an empty trace
    found = identify(empty)
    assert isinstance(found, Sidecar)
    assert found.name == "documentation"


@needs_realdata
def test_an_aborted_ingest_says_what_it_committed(tmp_path: Path) -> None:
    """Under abort a bad file stops the command: its one line, then a line that counts the
    files committed before it (they stay in the dataset) and those after it, not read; the
    committed file is listed on stdout as usual."""
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(TRACE, folder / "a.json.gz")
    (folder / "b.bin").write_bytes(bytes(range(256)))
    shutil.copy(TRACE, folder / "c.json.gz")
    (folder / "notes.md").write_text("notes\n")
    code, out, err = _ingest("--dataset", tmp_path / "ds", "--workload", "w", folder)
    bad = (folder / "b.bin").resolve()
    assert code == 3
    assert err == [
        f"mapreport: {bad}: format not recognised (known: {', '.join(READERS)})",
        "ingest stopped at this file: 1 committed before it (they stay in the dataset); "
        "2 after it not read",
    ]
    assert len(out) == 1
    assert out[0].startswith(f"ingested  kineto          {(folder / 'a.json.gz').resolve()} (")
    assert len(Dataset(tmp_path / "ds").live()) == 1
    again = _ingest("--dataset", tmp_path / "ds", "--workload", "w", "-q", folder)
    assert again[0] == 3
    assert again[1] == []
    assert again[2][1] == (
        "ingest stopped at this file: 1 already in the dataset; 2 after it not read"
    )


def test_formats_lists_the_files_it_skips() -> None:
    out = CliRunner().invoke(main, ["formats"]).output.splitlines()
    head = out.index("Skipped when a folder is ingested (not telemetry; listed, exit 0):")
    listed = [line.split()[0] for line in out[head + 1 :] if not line.startswith(" ")]
    assert listed == [s.name for s in SIDECARS]


@needs_realdata
def test_the_nightly_job_stopped_by_a_bad_file_says_what_it_committed(tmp_path: Path) -> None:
    """`mapreport run` under abort: no report is written, and the error says which of the
    night's files stay committed; the sidecar beside them is listed as skipped."""
    night = tmp_path / "night"
    night.mkdir()
    shutil.copy(TRACE, night / "a.json.gz")
    (night / "README").write_text("how this night was recorded\n")
    (night / "b.bin").write_bytes(bytes(range(256)))
    config = tmp_path / "mapreport.toml"
    config.write_text('[run]\ndataset = "ds"\nout = "out"\nsources = ["night/*"]\n')
    r = CliRunner().invoke(main, ["run", str(config), "--date", "2026-11-30"])
    assert r.exit_code == 3
    assert r.stderr.splitlines()[1] == (
        "ingest stopped at this file: 1 committed before it (they stay in the dataset), "
        "1 skipped (not telemetry); 0 after it not read"
    )
    assert [line.split()[0] for line in r.stdout.splitlines()[3:]] == ["skipped", "ingested"]
    assert not (tmp_path / "out").exists()


def test_a_metaschedule_work_folder_ingests_as_the_tuner_left_it(tmp_path: Path) -> None:
    """A MetaSchedule database folder (tests/corpus/tvm_tuned) ingests whole with exit 0: the
    tuning records are read (their cost-model scores with them), the workload database and the
    scores file are listed as skipped. The workload database had failed the folder (exit 3,
    `format not recognised`)."""
    run = Path(__file__).parent / "corpus" / "tvm_tuned" / "matmul_128_xgb"
    code, lines, errors = _ingest("--dataset", tmp_path / "ds", "--workload", "mm", run)
    assert code == 0, errors
    kinds = sorted(
        line.split()[:2][1] for line in lines if line.split()[0] in ("ingested", "skipped")
    )
    assert kinds == ["tuning-scores", "tvm", "tvm-workloads"]
    assert "(compile_event 1, compile_plan 1, tuning_trial 96)" in "\n".join(lines)
