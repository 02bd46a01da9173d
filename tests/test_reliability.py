"""Reliability and security: a corpus of malformed inputs, property and fuzz tests of the
readers, kill -9 in the middle of an ingest, chart-export failure, hostile report content."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from mapreport.report import export
from mapreport.report.pdf import write_pdf
from mapreport.run.config import default_config
from mapreport.run.ingesting import ingest
from mapreport.run.reporting import report
from tests.conftest import REALDATA, REPO

CORPUS = Path(__file__).parent / "corpus" / "native"

# file -> (line, field, reason, quarantined rows kept and rejected, or None: unreadable file)
CASES: dict[str, tuple[int | None, str | None, str, tuple[int, int] | None]] = {
    "truncated_json.jsonl": (2, None, "invalid JSON", (2, 1)),
    "truncated.jsonl.gz": (1980, None, "truncated or corrupt gzip", (1979, 1)),
    "wrong_types.jsonl": (2, "arrival_us", "expected a number", (2, 2)),
    "missing_required.jsonl": (2, "compute_end_us", "required field is missing", (2, 1)),
    "negative_duration.jsonl": (2, "compute_end_us", "before compute_start_us", (2, 1)),
    "reversed_timestamps.jsonl": (2, "compute_start_us", "before arrival_us", (2, 1)),
    "queue_after_start.jsonl": (2, "queue_start_us", "after compute_start_us", (2, 1)),
    "nan_literal.jsonl": (2, None, "invalid JSON", (2, 1)),
    "infinity_literal.jsonl": (2, None, "invalid JSON", (2, 1)),
    "nan_inf.csv": (3, "arrival_us", "finite number", (2, 2)),
    "duplicate_ids.jsonl": (3, "request_id", "duplicate request_id 'r1'", (3, 1)),
    "unknown_variant.jsonl": (2, "plan_variant", "one of static, adapted, fallback", (2, 1)),
    "negative_dim.jsonl": (2, "shape", "non-negative", (2, 1)),
    "fractional_dim.jsonl": (2, "shape", "integer", (2, 1)),
    "string_dim.jsonl": (2, "shape", "integer", (2, 1)),
    "bool_number.jsonl": (2, "batch_size", "expected a number", (2, 1)),
    "not_an_object.jsonl": (2, None, "not a JSON object", (2, 1)),
    "bad_event.jsonl": (2, "event", "must be one of", (2, 1)),
    "negative_event_duration.jsonl": (2, "dur_us", ">= 0", (2, 1)),
    "bad_environment.jsonl": (1, "environment", "must be an object", (2, 1)),
    "mixed_encoding.jsonl": (2, None, "UTF-8", (2, 1)),
    "mixed_encoding.csv": (3, None, "not UTF-8", (1, 1)),
    "missing_column.csv": (2, "compute_end_us", "required field is missing", (0, 2)),
    "ragged.csv": (3, None, "row has 5 cells", (2, 1)),
    "bad_shape_string.csv": (3, "shape", "bad dimension", (1, 1)),
    "wrong_type.parquet": (1, "arrival_us", "expected a number", (0, 3)),
    "truncated.parquet": (None, None, "unreadable Parquet", None),
    "compile_empty_range.jsonl": (2, "shape_bucket", "empty", (1, 1)),
    "compile_negative_prediction.jsonl": (2, "predicted_us", ">= 0", (1, 1)),
    "compile_bucket_not_object.jsonl": (2, "shape_bucket", "object", (1, 1)),
    "compile_missing_op.jsonl": (2, "op", "required", (1, 1)),
    "quality_missing_value.jsonl": (2, "value", "required", (1, 1)),
    "quality_wrong_type.jsonl": (2, "max_drop", "expected a number", (1, 1)),
    "empty.jsonl": (None, None, "empty", None),
    "whitespace_only.jsonl": (None, None, "empty", None),
    "zero_byte.jsonl.gz": (None, None, "empty", None),
    "empty_stream.jsonl.gz": (None, None, "empty", None),
    "binary_garbage.jsonl": (None, None, "not recognised", None),
}
DATA_TABLES = ("request", "adaptation_event", "compile_plan", "quality", "environment")


def abort_then_quarantine(
    tmp_path: Path, f: Path, reason: str, line: int | None, kept: int, fmt: str | None = None
) -> InputError:
    """Under abort the file stops at `line` with `reason` and nothing of it is committed;
    under quarantine `kept` rows of its main table stay and one record is rejected."""
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError, match=reason) as err:
        ingest_file(ds, f, fmt=fmt)
    assert err.value.line == line
    assert ds.live() == {}
    res = ingest_file(ds, f, policy="quarantine", fmt=fmt)
    table = "op_exec" if fmt == "kineto" else "request"
    assert (res.rows[table], res.rejected) == (kept, 1)
    return err.value


def test_corpus_is_complete() -> None:
    assert {p.name for p in CORPUS.iterdir()} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_input_names_file_line_and_field(tmp_path: Path, name: str) -> None:
    line, field, reason, _ = CASES[name]
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as err:
        ingest_file(ds, CORPUS / name)
    e = err.value
    assert (e.line, e.field) == (line, field)
    assert reason in e.reason
    assert e.message().startswith(str((CORPUS / name).resolve()))
    assert ds.live() == {}  # nothing of a rejected file is committed


@pytest.mark.parametrize("name", sorted(CASES))
def test_quarantine_loses_nothing(tmp_path: Path, name: str) -> None:
    _, _, reason, expected = CASES[name]
    ds = Dataset(tmp_path / "ds", create=True)
    if expected is None:
        with pytest.raises(InputError, match=reason):
            ingest_file(ds, CORPUS / name, policy="quarantine")
        return
    res = ingest_file(ds, CORPUS / name, policy="quarantine")
    kept = sum(n for t, n in res.rows.items() if t in DATA_TABLES and t != "environment")
    assert (kept, res.rejected) == expected
    con = ds.connect()
    assert con.execute("SELECT count(*) FROM quarantine").fetchone() == (res.rejected,)
    (entry,) = ds.live().values()
    assert entry.rejected == res.rejected


def test_quarantine_skips_unreadable_files_and_keeps_the_rest(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    shutil.copy(CORPUS / "duplicate_ids.jsonl", good)
    with pytest.raises(InputError, match="2 file"):
        ingest(
            tmp_path / "ds",
            [CORPUS / "empty.jsonl", good, CORPUS / "binary_garbage.jsonl"],
            policy="quarantine",
        )
    assert len(Dataset(tmp_path / "ds").live()) == 1


def test_line_over_the_size_limit_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "huge.jsonl"
    rec = json.loads((CORPUS / "duplicate_ids.jsonl").read_text().splitlines()[0])
    with open(f, "w") as fh:
        fh.write(json.dumps(rec) + "\n")
        fh.write(json.dumps({**rec, "request_id": "big", "pad": "x" * (5 << 20)}) + "\n")
        fh.write(json.dumps({**rec, "request_id": "after"}) + "\n")
    abort_then_quarantine(tmp_path, f, "longer than", 2, 2)


def test_thousands_of_dims_rejected(tmp_path: Path) -> None:
    rec = json.loads((CORPUS / "duplicate_ids.jsonl").read_text().splitlines()[0])
    f = tmp_path / "dims.jsonl"
    f.write_text(json.dumps({**rec, "shape": {f"d{i}": 1 for i in range(5000)}}) + "\n")
    with pytest.raises(InputError, match="more than 64") as err:
        ingest_file(Dataset(tmp_path / "ds", create=True), f)
    assert err.value.field == "shape"


# -- property and fuzz tests -----------------------------------------------------------------

number = st.one_of(
    st.integers(-10, 10**16),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.booleans(),
    st.none(),
)
request = st.fixed_dictionaries(
    {
        "workload": st.one_of(st.text(max_size=8), st.integers()),
        "request_id": st.text(max_size=4),
        "shape": st.one_of(
            st.dictionaries(st.text(max_size=4), number, max_size=3),
            st.lists(st.lists(number, max_size=3), max_size=3),
            number,
        ),
        "arrival_us": number,
        "compute_start_us": number,
        "compute_end_us": number,
    },
    optional={
        "plan_variant": st.one_of(st.sampled_from(["static", "adapted", "x"]), number),
        "core": number,
        "batch_size": number,
        "queue_start_us": number,
    },
)


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(request, min_size=1, max_size=5))
def test_records_at_the_edges_are_accepted_or_named(
    tmp_path_factory: pytest.TempPathFactory, recs: list[dict[str, Any]]
) -> None:
    folder = tmp_path_factory.mktemp("prop")
    f = folder / "p.jsonl"
    f.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in recs))
    ds = Dataset(folder / "ds", create=True)
    try:
        res = ingest_file(ds, f, policy="quarantine")
    except InputError as e:
        # either outcome is allowed; only whole-file problems may escape quarantine
        assert e.line is None, e.message()  # noqa: PT017
        return
    got = (
        ds.connect()
        .execute("SELECT arrival_us, compute_start_us, compute_end_us, queue_start_us FROM request")
        .fetchall()
    )
    for a, s, e, q in got:
        assert a <= s <= e
        assert q <= s
    assert res.rows.get("request", 0) + res.rejected == len(recs)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random corruption: flip, drop, duplicate or truncate bytes."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not b:
            break
        i = rng.randrange(len(b))
        op = rng.randrange(4)
        if op == 0:
            b[i] = rng.randrange(256)
        elif op == 1:
            del b[i : i + rng.randint(1, 64)]
        elif op == 2:
            b[i:i] = b[i : i + rng.randint(1, 64)]
        else:
            del b[i:]
    return bytes(b)


FUZZ_SECONDS = float(os.environ.get("MAPREPORT_FUZZ_SECONDS", "6"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "fmt"),
    [
        ("sample_data/plans/resnet50-int8.compile.jsonl", None),
        ("sample_data/nights/2026-11-28/llama-decode.runtime.csv.gz", None),
        ("sample_data/nights/2026-11-28/bert-base.runtime.jsonl.gz", None),  # the fast path
        ("sample_data/quality.jsonl", None),
        ("realdata/hta/triton_example/triton_example.json.gz", "kineto"),
        (
            "realdata/tensorrt/trex/pytorch/resnet/A100/fp16/resnet.onnx.engine.profile.json",
            "trtexec",
        ),
        (
            "realdata/tensorrt/trex/pytorch/resnet/A100/fp16/resnet.onnx.engine.graph.json",
            "trtexec",
        ),
        ("realdata/tvm/apache-tvm/ci_logs/conv2d.json", "tvm"),
        ("realdata/tlparse/inputs/cache_hit_miss.log", "torch-trace"),
        ("realdata/serving/triton_trace/docs_trace_timestamps_example.json", "triton-trace"),
        ("realdata/triton/model_analyzer/tests/common/single-model-ckpt/0.ckpt", "model-analyzer"),
    ],
)
def test_fuzz_readers_raise_only_input_errors(tmp_path: Path, source: str, fmt: str | None) -> None:
    """Mutated copies of a native sample or of a real third-party file (bytes flipped, cut,
    repeated, truncated), read by its reader under both policies: an InputError or rows,
    never another exception."""
    path = (
        (REPO / source) if source.startswith("sample_data") else REALDATA / source.split("/", 1)[1]
    )
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    raw = path.read_bytes()
    raw = gzip.compress(gzip.decompress(raw)[:200000]) if source.endswith(".gz") else raw[:200000]
    rng = random.Random(source)
    deadline = time.monotonic() + (FUZZ_SECONDS if fmt is None else FUZZ_SECONDS / 2)
    runs = errors = 0
    while time.monotonic() < deadline:
        runs += 1
        folder = tmp_path / f"m{runs}"
        folder.mkdir()
        f = folder / path.name  # the name, which some readers look at, stays
        f.write_bytes(mutate(raw, rng))
        ds = Dataset(tmp_path / f"ds{runs}", create=True)
        for policy in ("abort", "quarantine"):
            try:
                ingest_file(ds, f, policy=policy, fmt=fmt)  # type: ignore[arg-type]
            except InputError:
                errors += 1
        shutil.rmtree(tmp_path / f"ds{runs}")
        shutil.rmtree(folder)
    assert runs >= 5
    print(f"fuzz {source}: {runs} mutated files, {2 * runs} ingests, {errors} InputErrors")


# -- faults --------------------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_mid_ingest_leaves_a_readable_dataset(tmp_path: Path) -> None:
    from mapreport.demo import synth

    inputs = synth.generate(tmp_path / "in", scale=8)
    big = max(inputs, key=lambda p: p.stat().st_size)
    clean = tmp_path / "clean"
    ingest(clean, [big])
    want = Dataset(clean).connect().execute("SELECT count(*) FROM request").fetchone()
    outcomes = []
    for trial in range(4):
        ds_dir = tmp_path / f"ds{trial}"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mapreport.app.cli",
                "ingest",
                "--dataset",
                str(ds_dir),
                "-q",
                str(big),
            ],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.8 + 0.5 * trial)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (ds_dir / "ingest_log").is_dir():
            ds = Dataset(ds_dir)
            n = ds.connect().execute("SELECT count(*) FROM request").fetchone()
            assert n in ((0,), want)  # all of the file or nothing of it
            outcomes.append("committed" if n == want else "nothing")
        else:
            outcomes.append("not started")
        ingest(ds_dir, [big])  # re-running completes it
        ds = Dataset(ds_dir)
        assert ds.connect().execute("SELECT count(*) FROM request").fetchone() == want
        assert not list((ds_dir / ".staging").rglob("*.parquet"))
        assert len(list((ds_dir / "request").rglob("*.parquet"))) >= 1
        assert len(ds.live()) == 1
    print("kill -9 trials:", outcomes)


@pytest.mark.slow
def test_chart_export_failure_keeps_html_and_findings(
    tmp_path: Path, demo_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "CHROMIUM_NAMES", ("no-such-browser",))
    outcomes = report(demo_dataset, tmp_path / "out", default_config(), only="bert-base")
    assert [o.error for o in outcomes] == [None]
    folder = tmp_path / "out" / "bert-base"
    assert (folder / "report.html").stat().st_size > 1_000_000
    assert json.loads((folder / "findings.json").read_text())["workload"] == "bert-base"
    text = subprocess.run(
        ["pdftotext", str(folder / "report.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert "Charts are missing from this PDF because chart export failed" in text
    assert "no Chromium found" in text


# -- hostile content -------------------------------------------------------------------------

HOSTILE = [
    '<script>console.log("XSS-SCRIPT")</script>',
    '"><img src=x onerror=console.log("XSS-IMG")>',
    '<img src="file:///etc/passwd">',
    '<link rel=stylesheet href="http://198.51.100.7/x.css">',
]


def hostile_dataset(tmp_path: Path) -> Path:
    rows = []
    for i, name in enumerate(HOSTILE):
        for j in range(30):
            rows.append(
                {
                    "workload": "evil",
                    "slice": name,
                    "request_id": f"{i}-{j}",
                    "shape": {"batch": 1},
                    "arrival_us": 1.0 + j,
                    "compute_start_us": 2.0 + j,
                    "compute_end_us": 50.0 + j,
                    "stream": name,
                    "plan_id": name,
                    "plan_variant": "static",
                }
            )
    rows.append(
        {
            "event": "retune",
            "workload": "evil",
            "slice": HOSTILE[0],
            "ts_us": 1.0,
            "detail": HOSTILE[1],
        }
    )
    plan = {
        "workload": "evil",
        "plan_id": HOSTILE[0],
        "shape_bucket": {"batch": [1, 2]},
        "op": HOSTILE[1],
        "predicted_us": 40.0,
        "kernel": HOSTILE[2],
    }
    f = tmp_path / "evil.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = tmp_path / "evil.compile.jsonl"
    c.write_text(
        json.dumps({"environment": {"hardware": HOSTILE[3]}}) + "\n" + json.dumps(plan) + "\n"
    )
    ingest(tmp_path / "ds", [f, c])
    return tmp_path / "ds"


@pytest.mark.slow
def test_hostile_names_render_as_text(tmp_path: Path) -> None:
    ds = hostile_dataset(tmp_path)
    out = tmp_path / "out"
    outcomes = report(ds, out, default_config())
    assert len(outcomes) == len(HOSTILE)
    assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
    written = list(out.rglob("report.html"))
    assert all(p.resolve().is_relative_to(out.resolve()) for p in out.rglob("*"))
    chromium = shutil.which("chromium")
    for html in written:
        source = html.read_text()
        assert "<script>console.log" not in source
        assert "<img src=x" not in source
        assert '<img src="file:' not in source
        if chromium is None:
            continue
        res = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=4000",
                "--dump-dom",
                html.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "XSS" not in "\n".join(x for x in res.stderr.splitlines() if "CONSOLE" in x)
        assert "console.log" in res.stdout  # the text is there, shown literally
    for pdf in out.rglob("report.pdf"):
        text = subprocess.run(
            ["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True
        ).stdout
        assert "<" in text  # names are printed as text, not interpreted


def test_pdf_fetcher_allows_only_package_assets(tmp_path: Path) -> None:
    page = (
        '<html><body><p>x</p><img src="file:///etc/passwd">'
        '<link rel="stylesheet" href="http://198.51.100.7/x.css">'
        '<img src="https://198.51.100.7/y.png"></body></html>'
    )
    blocked = write_pdf(page, tmp_path / "x.pdf")
    assert sorted(blocked) == sorted(
        ["file:///etc/passwd", "http://198.51.100.7/x.css", "https://198.51.100.7/y.png"]
    )
    assert (tmp_path / "x.pdf").stat().st_size > 0


def test_a_failed_background_write_fails_the_file(tmp_path: Path, monkeypatch: Any) -> None:
    """Staged Parquet files are written by a background thread: a write that fails (a full
    disk) fails the file with that error, nothing of it stays staged or committed, and the
    next file ingests normally."""
    from mapreport.dataset.store import STAGING, Dataset
    from mapreport.demo import synth
    from mapreport.ingest import sink as sink_module

    files = synth.generate(tmp_path / "in", scale=0.05, seed=5)
    runtime = next(f for f in files if ".runtime." in f.name)
    real = sink_module.write_parquet
    calls = {"n": 0}

    def failing(table: Any, path: Path) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        real(table, path)

    monkeypatch.setattr(sink_module, "write_parquet", failing)
    monkeypatch.setattr(sink_module, "FLUSH_ROWS", 50)
    import mapreport.ingest.fast as fast

    monkeypatch.setattr(fast, "BATCH", 50)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(OSError, match="No space left"):
        ingest_file(ds, runtime)
    assert not list((tmp_path / "ds").rglob("*.parquet"))
    assert not any((tmp_path / "ds" / STAGING).glob("*"))
    monkeypatch.setattr(sink_module, "write_parquet", real)
    res = ingest_file(ds, runtime)
    assert res.rows["request"] > 0


@pytest.mark.parametrize("width", [131_073, 1 << 20, 5 << 20])
def test_csv_cell_over_the_field_limit_loses_no_row_after_it(tmp_path: Path, width: int) -> None:
    """A cell over the csv module's field limit (128 KiB), or a line over MAX_LINE_BYTES, is
    one rejected row; the rows after it are read (kept + rejected = rows of the file)."""
    lines = (CORPUS / "ragged.csv").read_text().splitlines()
    header, good = lines[0], lines[1]
    rid = header.split(",").index("request_id")

    def row(i: int) -> str:
        cells = good.split(",")
        cells[rid] = f"r{i}"
        return ",".join(cells)

    rows = [row(i) for i in range(3)]
    wide = good.split(",")
    wide[rid] = "x" * width
    rows += [",".join(wide)] + [row(i) for i in range(3, 10)]
    f = tmp_path / "wide.runtime.csv"
    f.write_text("\n".join([header, *rows]) + "\n")
    abort_then_quarantine(tmp_path, f, "field limit|longer than", 5, 10)


BROKEN_ON_PURPOSE = {
    "simple_corrupted_json.log",
    "triton_docs_histogram_example_malformed.txt",
}
"""Real files broken as their project publishes them: corrupted on purpose for its own tests
(tlparse), malformed in the documentation (Triton's first-response histogram example)."""


@pytest.mark.slow
@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is not beside the repo")
def test_every_real_file_reads_under_abort(tmp_path: Path) -> None:
    """What the producing tool writes is valid input: every real file a reader recognises is
    read under `abort` without a rejection (what tlparse, HTA, trex and Triton's tools read,
    mapreport reads)."""
    read = 0
    for i, f in enumerate(sorted(p for p in REALDATA.rglob("*") if p.is_file())):
        try:
            detect(f)
        except InputError:
            continue  # a format no reader knows yet
        if f.name in BROKEN_ON_PURPOSE:
            continue
        res = ingest_file(Dataset(tmp_path / str(i), create=True), f, policy="abort")
        assert res.rejected == 0, f
        read += 1
    assert read >= 90


@pytest.mark.parametrize("value", [1e300, -1.7e308, 2.0**53 + 2, 1.7e308])
@pytest.mark.parametrize(
    "field", ["arrival_us", "queue_start_us", "compute_start_us", "compute_end_us"]
)
def test_numbers_beyond_two_to_the_53_are_rejected_at_ingest(
    tmp_path: Path, field: str, value: float
) -> None:
    """Valid JSON but not a time: refused at ingest by line and field (before, 1e300 passed
    ingest and failed the report; +-1.7e308 put Infinity into findings.json)."""
    good = json.loads((CORPUS / "duplicate_ids.jsonl").read_text().splitlines()[0])
    lines = [{**good, "request_id": f"r{i}"} for i in range(4)]
    lines[2][field] = value
    f = tmp_path / "times.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    abort_then_quarantine(tmp_path, f, "out of range", 3, 3)


def test_every_reader_stages_only_numbers_in_range(tmp_path: Path) -> None:
    """A third-party reader's numbers pass the same bound in the sink: a Kineto event at
    ts 1e300 is rejected by its line, the others are kept."""
    events = [
        {"ph": "X", "name": f"aten::mm{i}", "cat": "cpu_op", "ts": t, "dur": 5, "pid": 1, "tid": 1}
        for i, t in enumerate([10.0, 1e300, 30.0])
    ]
    f = tmp_path / "trace.json"
    f.write_text(json.dumps({"traceEvents": events}, indent=0))
    err = abort_then_quarantine(tmp_path, f, "out of range", 2, 2, fmt="kineto")  # event 2
    assert err.field == "ts_us"


def test_findings_are_strict_json() -> None:
    from mapreport.report.findings import strict

    doc = {"a": float("inf"), "b": [float("nan"), 1.5, -float("inf")], "c": {"d": 2}}
    assert json.dumps(strict(doc), allow_nan=False) == (
        '{"a": null, "b": [null, 1.5, null], "c": {"d": 2}}'
    )


DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested 100,000 levels: valid JSON, deeper than Python's recursion allows."""
HUGE = "1" + "0" * 400
"""An integer beyond float range, as a JSON file may write it."""


def _run(i: int, arrival: str, extra: str) -> str:
    return (
        f'{{"workload":"w","request_id":"r{i}","shape":{{"b":1}},"arrival_us":{arrival},'
        f'"compute_start_us":2,"compute_end_us":3{extra}}}'
    )


def _torch(i: int, start: str, extra: str) -> str:
    return (
        "V1206 15:18:16.845000 1 torch/_dynamo/utils.py:1] "
        f'{{"compilation_metrics": {{"compile_id": "0/{i}", "co_name": "f", '
        f'"start_time": {start}{extra}}}}}'
    )


def _hostile(kind: str, value: str) -> tuple[str, str, str]:
    """(file name, content, --format) of one reader's input with `value` in a number field
    (HUGE) or an extra field (DEEP) of its second record."""
    extra = f',"x":{value}' if value == DEEP else ""
    num = value if value == HUGE else "1"
    if kind == "native-runtime":
        return "r.jsonl", "\n".join([_run(0, "1", ""), _run(1, num, extra)]), kind
    if kind == "native-event":
        ev = f'{{"event":"retune","workload":"w","ts_us":{num},"dur_us":2{extra}}}'
        return "e.jsonl", "\n".join([_run(0, "1", ""), ev]), "native-runtime"
    if kind == "native-compile":
        head = '{"workload":"w","plan_id":"p","shape_bucket":{"b":[1,4]},'
        recs = [
            f'{head}"op":"o0","predicted_us":1}}',
            f'{head}"op":"o1","predicted_us":{num}{extra}}}',
        ]
        return "c.jsonl", "\n".join(recs), kind
    if kind == "native-quality":
        head = '{"workload":"w","precision":"int8",'
        recs = [
            f'{head}"metric":"m0","baseline":1,"value":0.5}}',
            f'{head}"metric":"m1","baseline":{num},"value":0.5{extra}}}',
        ]
        return "q.jsonl", "\n".join(recs), kind
    if kind == "torch-trace":
        return "t.log", "\n".join([_torch(0, "1", ""), _torch(1, num, extra)]), kind
    if kind == "triton-trace":
        stamps = f'[{{"name":"COMPUTE_START","ns":{num}}},{{"name":"COMPUTE_END","ns":9}}]'
        frags = [
            f'{{"id":1,"model_name":"m","model_version":1{extra}}}',
            f'{{"id":1,"timestamps":{stamps}}}',
        ]
        return "tr.json", "[\n" + ",\n".join(frags) + "\n]", kind
    ev = '{{"ph":"X","name":"aten::mm","cat":"cpu_op","ts":{},"dur":2,"pid":1,"tid":1{}}}'
    return "k.json", f'{{"traceEvents":[{ev.format("1", "")},{ev.format(num, extra)}]}}', "kineto"


@pytest.mark.parametrize("value", ["DEEP", "HUGE"])
@pytest.mark.parametrize(
    "kind",
    [
        "native-runtime",
        "native-event",
        "native-compile",
        "native-quality",
        "torch-trace",
        "triton-trace",
        "kineto",
    ],
)
def test_deep_nesting_and_huge_integers_are_input_errors(
    tmp_path: Path, kind: str, value: str
) -> None:
    """Before: RecursionError or OverflowError, an internal error (exit 1) that also stopped
    a quarantine run. Now a file:line error, or under quarantine one rejected record."""
    name, text, fmt = _hostile(kind, DEEP if value == "DEEP" else HUGE)
    f = tmp_path / name
    f.write_text(text + "\n")
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as err:
        ingest_file(ds, f, policy="abort", fmt=fmt)
    assert err.value.line in (None, 1, 2, 3)
    if "nested too deeply" in err.value.reason and err.value.line is None:
        # a one-document file nested too deeply cannot be read at all: named, exit 3
        with pytest.raises(InputError, match="nested too deeply"):
            ingest_file(ds, f, policy="quarantine", fmt=fmt)
        return
    assert ingest_file(ds, f, policy="quarantine", fmt=fmt).rejected >= 1


def test_parquet_uint64_beyond_int64_is_named(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = tmp_path / "u.parquet"
    cols = {"workload": ["w", "w"], "request_id": ["a", "b"], "shape": ["b=1", "b=1"]}
    times = {
        k: [v, v]
        for k, v in (("arrival_us", 1.0), ("compute_start_us", 2.0), ("compute_end_us", 3.0))
    }
    pq.write_table(pa.table({**cols, **times, "core": pa.array([1, 2**64 - 1], pa.uint64())}), f)
    assert abort_then_quarantine(tmp_path, f, "out of range", 2, 1).field == "core"


def test_kineto_event_without_pid_or_tid(tmp_path: Path) -> None:
    f = tmp_path / "one.json"
    f.write_text(
        json.dumps(
            {"traceEvents": [{"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": 1, "dur": 2}]}
        )
    )
    res = ingest_file(Dataset(tmp_path / "ds", create=True), f, policy="abort")
    assert (res.rows["op_exec"], res.rejected) == (1, 0)


def _runtime_file(path: Path, prefix: str, n: int) -> Path:
    good = json.loads((CORPUS / "duplicate_ids.jsonl").read_text().splitlines()[0])
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({**good, "request_id": f"{prefix}{i}"}) + "\n")
    return path


@pytest.mark.slow
def test_two_writers_on_one_dataset_lose_no_row(tmp_path: Path) -> None:
    """Two `ingest` processes at once on one dataset (a nightly run and an ad-hoc ingest):
    the second waits for the first's lock, and every logged row is on disk (before: the
    second removed the first's staged files; 300,000 rows logged, 200,000 on disk)."""
    ds = tmp_path / "ds"
    files = [_runtime_file(tmp_path / f"{p}.jsonl", p, 60_000) for p in ("a", "b", "c")]
    cmd = [sys.executable, "-m", "mapreport.app.cli", "ingest", "-q", "--dataset", str(ds)]
    first = subprocess.Popen([*cmd, str(files[0]), str(files[1])], stderr=subprocess.PIPE)
    time.sleep(0.3)
    second = subprocess.run([*cmd, str(files[2])], capture_output=True, text=True, timeout=300)
    assert first.wait(timeout=300) == 0
    assert second.returncode == 0, second.stderr
    con = Dataset(ds).connect()
    logged = sum(e.rows.get("request", 0) for e in Dataset(ds).live().values())
    assert con.execute("SELECT count(*) FROM request").fetchone() == (logged,)
    assert logged == 180_000


@pytest.mark.slow
def test_a_second_writer_waits_or_fails_at_once(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    Dataset(ds, create=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from mapreport.dataset.store import Dataset\n"
            "with Dataset(Path(sys.argv[1])).writing():\n"
            "    print('held', flush=True); sys.stdin.readline()",
            str(ds),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    f = _runtime_file(tmp_path / "r.jsonl", "r", 10)
    cmd = [sys.executable, "-m", "mapreport.app.cli", "ingest", "-q", "--dataset", str(ds), str(f)]
    refused = subprocess.run([*cmd, "--no-wait"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 5
    assert f"being written by another mapreport (pid {holder.pid})" in refused.stderr
    assert Dataset(ds).live() == {}
    waiting = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    assert waiting.stderr is not None
    assert "waiting for the other writer" in waiting.stderr.readline()  # it waits...
    assert waiting.poll() is None
    assert Dataset(ds).live() == {}
    holder.stdin.write("release\n")  # ...until the holder lets go, however long that takes
    holder.stdin.close()
    assert holder.wait(timeout=60) == 0
    assert waiting.wait(timeout=120) == 0, waiting.stderr.read()
    assert len(Dataset(ds).live()) == 1


@pytest.mark.parametrize("value", ["2147483648", "2147483648.0"])
def test_an_integer_beyond_its_int32_column_is_named_not_an_internal_error(
    tmp_path: Path, value: str
) -> None:
    """batch_size and core are int32 columns: 2^31 was an internal error (ArrowInvalid) on both
    the columnar and the per-record path; it is the record's line and field."""
    from click.testing import CliRunner

    from mapreport.app.cli import main

    f = tmp_path / "w.runtime.jsonl"
    f.write_text(
        '{"workload":"w","request_id":"a","shape":{"b":1},"arrival_us":0,"queue_start_us":0,'
        f'"compute_start_us":0,"compute_end_us":5,"batch_size":{value}}}\n'
    )
    got = CliRunner().invoke(main, ["ingest", "--dataset", str(tmp_path / "ds"), str(f)])
    assert got.exit_code == 3
    assert f"{f}:1: field 'batch_size': must be <= 2147483647" in got.output


def test_the_sink_range_check_reads_nulls_and_sliced_chunks() -> None:
    """The sink's bound in numpy: NaN, infinities and values beyond MAX_MAGNITUDE are out of
    range, a null is not, in chunks that start part-way into their buffers."""
    import pyarrow as pa

    from mapreport.ingest.sink import beyond_range
    from mapreport.ingest.spec import MAX_MAGNITUDE

    values = [1.0, None, float("nan"), float("inf"), -MAX_MAGNITUDE, -MAX_MAGNITUDE * 2, None, 0.0]
    whole = pa.array(values, pa.float64())
    column = pa.chunked_array([whole.slice(1, 4), whole.slice(5), pa.array([], pa.float64())])
    assert beyond_range(column).tolist() == [False, True, True, False, True, False, False]
    assert beyond_range(pa.chunked_array([], pa.float64())).tolist() == []
