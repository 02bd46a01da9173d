"""`check` and `--repair` on damage of every kind: repair sets aside exactly the files it found
(never a name as a pattern), with their sources' commit records in one step, so ingesting the
inputs again brings every row back; every remedy line is tested by doing what it says; a flipped
bit or a damaged page is caught by the content hash before any figure is computed from it
(docs/reliability.md)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mapreport.app.cli import main
from mapreport.core.errors import DatasetError
from mapreport.dataset.log import LOG
from mapreport.dataset.store import Dataset
from mapreport.run.check import check, repair
from mapreport.run.ingesting import ingest

DAY_US = 86_400_000_000
START_US = 1_795_824_000_000_000  # 2026-11-28T00:00:00Z


def _runtime(path: Path, workload: str, n: int, seed: int) -> Path:
    """A native runtime file of `n` requests of `workload` over two UTC days."""
    lines = []
    for i in range(n):
        arrival = START_US + (i % 2) * DAY_US + i * 1_000_003 + seed
        compute = 500.0 + (i * 37 + seed) % 400
        record = {
            "workload": workload,
            "request_id": f"{workload}-{seed}-{i}",
            "shape": {"batch": 1 + i % 4, "seq": 128},
            "arrival_us": arrival,
            "compute_start_us": arrival + 50 + i % 7,
            "compute_end_us": arrival + 50 + i % 7 + compute,
            "plan_id": "p1",
            "plan_variant": "static",
            "core": i % 2,
        }
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four runtime files of two workloads: 800 requests in all."""
    folder = tmp_path_factory.mktemp("inputs")
    return [
        _runtime(folder / f"{w}-{k}.runtime.jsonl", w, 200, seed=k)
        for k, w in enumerate(("alpha", "alpha", "beta", "beta"))
    ]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, inputs: list[Path]) -> Path:
    """The inputs ingested once; each test damages a copy."""
    ds = tmp_path_factory.mktemp("pristine") / "ds"
    ingest(ds, inputs, night="2026-11-28")
    return ds


def _copy(pristine: Path, tmp_path: Path) -> Path:
    ds = tmp_path / "ds"
    shutil.copytree(pristine, ds)
    return ds


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _rows(ds: Path) -> list[tuple[str, float]]:
    """Every request the dataset serves, by id and latency."""
    con = Dataset(ds).connect()
    return sorted(con.execute("SELECT request_id, compute_end_us FROM request").fetchall())


def _tree(ds: Path, exclude: Callable[[Path], bool] = lambda f: False) -> dict[str, str]:
    """The SHA-256 of every data and record file, by path."""
    return {
        f.relative_to(ds).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
        for table in ("request", "adaptation_event", "environment", "quarantine", LOG)
        if (ds / table).is_dir()
        for f in sorted((ds / table).rglob("*.parquet"))
        if not exclude(f)
    }


def _data_files(ds: Path) -> list[Path]:
    return sorted((ds / "request").rglob("*.parquet"))


def _flip(f: Path, at: float = 0.3, width: int = 64) -> None:
    """Overwrite `width` bytes inside the file's data pages (the footer stays intact)."""
    data = bytearray(f.read_bytes())
    start = max(4, int(len(data) * at))
    data[start : start + width] = bytes((b ^ 0x5A) for b in data[start : start + width])
    f.write_bytes(bytes(data))


def _remedy(output: str) -> str:
    """The remedy of the first damage line: what it says to do, after the last `; `."""
    (line,) = [x for x in output.splitlines() if x.startswith("damaged")][:1]
    return line.rsplit("; ", 1)[1]


def test_a_stray_file_named_like_a_pattern_is_set_aside_alone(
    pristine: Path, tmp_path: Path
) -> None:
    """`*-x.parquet` and `[a]-1.parquet` (unreadable, no commit record): repair moves them and
    nothing else; all 800 rows stay (the repair once globbed `*-*.parquet` and moved every
    data file of every source)."""
    ds = _copy(pristine, tmp_path)
    before = _tree(ds)
    folder = _data_files(ds)[0].parent
    for name in ("*-x.parquet", "[a]-1.parquet", "?-2.parquet"):
        (folder / name).write_bytes(b"not parquet")
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5, res.output
    assert res.output.count("damaged") == 4  # three lines and the summary
    res = _run("check", "--dataset", str(ds), "--repair")
    assert res.exit_code == 0, res.output
    assert "set aside 3 file(s)" in res.output
    assert _tree(ds) == before
    assert len(_rows(ds)) == 800
    assert _run("check", "--dataset", str(ds)).exit_code == 0


def test_a_missing_data_file_comes_back_by_doing_what_check_says(
    pristine: Path, inputs: list[Path], tmp_path: Path
) -> None:
    """A data file deleted by hand: check's remedy is `ingest <input> again`; doing exactly
    that (no --repair first) brings its rows back (it did nothing: the record said the
    content was in)."""
    ds = _copy(pristine, tmp_path)
    before = _rows(ds)
    _data_files(ds)[0].unlink()
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5, res.output
    remedy = _remedy(res.output)
    assert remedy.startswith("ingest "), remedy
    assert remedy.endswith(" again"), remedy
    res = _run("ingest", "--dataset", str(ds), "--date", "2026-11-28", remedy[7:-6])
    assert res.exit_code == 0, res.output
    assert "ingested" in res.output
    assert _rows(ds) == before
    assert _run("check", "--dataset", str(ds)).exit_code == 0


@pytest.mark.parametrize("damage", ["bit_rot", "page_header", "newer_retyped", "retyped"])
def test_damaged_bytes_never_reach_a_figure(
    pristine: Path, inputs: list[Path], tmp_path: Path, damage: str
) -> None:
    """64 bytes flipped inside a data page (footer intact), a damaged page header, a file
    rewritten as schema 99 with a retyped column, or with a column of another type: check
    names the file (exit 5); every read refuses it naming it (exit 5) before any query; the
    remedy, done as written, restores every row."""
    ds = _copy(pristine, tmp_path)
    before = _rows(ds)
    victim = _data_files(ds)[1]
    if damage == "bit_rot":
        _flip(victim)
    elif damage == "page_header":
        _flip(victim, at=0.0, width=16)  # the first page's header follows the magic bytes
    else:
        table = pq.read_table(victim)
        i = table.schema.get_field_index("compute_end_us")
        table = table.set_column(i, "compute_end_us", pc.cast(table[i], pa.string()))
        if damage == "newer_retyped":
            meta = {**(table.schema.metadata or {}), b"mapreport.schema_version": b"99"}
            table = table.replace_schema_metadata(meta)
        pq.write_table(table, victim)
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5, res.output
    assert f"damaged   {victim}" in res.output
    with pytest.raises(DatasetError, match=str(victim)):
        Dataset(ds).connect()
    res = _run("report", "--dataset", str(ds), "--out", str(tmp_path / "o"), "--no-pdf")
    assert res.exit_code == 5, res.output
    assert str(victim) in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    remedy = _remedy(_run("check", "--dataset", str(ds)).output)
    assert remedy.startswith("run `mapreport check --dataset"), remedy
    assert _run("check", "--dataset", str(ds), "--repair").exit_code == 0
    source = remedy.split(", then ingest ", 1)[1].removesuffix(" again")
    res = _run("ingest", "--dataset", str(ds), "--date", "2026-11-28", source)
    assert res.exit_code == 0, res.output
    assert _rows(ds) == before
    assert _run("check", "--dataset", str(ds)).exit_code == 0


def test_a_dataset_written_before_hashes_is_checked_by_full_read(
    pristine: Path, tmp_path: Path
) -> None:
    """Commit records without file hashes (written before): the dataset reads as before; a
    damaged page is found by reading every page (check), `--quick` reads footers only."""
    ds = _copy(pristine, tmp_path)
    for record in (ds / LOG).glob("*.parquet"):
        table = pq.read_table(record)
        pq.write_table(table.drop_columns(["files"]), record)
    assert len(_rows(ds)) == 800
    assert _run("check", "--dataset", str(ds)).exit_code == 0
    victim = _data_files(ds)[0]
    _flip(victim, at=0.0, width=16)
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5, res.output
    assert f"damaged   {victim}: a damaged page" in res.output
    assert _run("check", "--dataset", str(ds), "--quick").exit_code == 0


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("rows", pa.array(["[1, 2]"]), "'rows' is a list, not a JSON dict"),
        ("rows", pa.array(["{not json"]), "'rows' is not JSON"),
        ("rows", pa.array(['{"request": "many"}']), "'rows' holds a value that is not a count"),
        ("supersedes", pa.array([7], pa.int64()), "'supersedes' is a number, not text"),
        ("size_bytes", pa.array(["big"]), "'size_bytes' is text, not a count"),
        ("files", pa.array(['{"../../etc/passwd": "00"}']), "'files' names '../../etc/passwd'"),
    ],
)
def test_a_commit_record_field_of_the_wrong_type_is_named(
    pristine: Path, inputs: list[Path], tmp_path: Path, field: str, value: pa.Array, says: str
) -> None:
    """A commit record with a field of the wrong type: every command that reads the log says
    which file and field (exit 5), never a traceback; repair sets it aside with its source,
    and ingesting the inputs again brings its rows back."""
    ds = _copy(pristine, tmp_path)
    before = _rows(ds)
    record = sorted((ds / LOG).glob("*.parquet"))[0]
    table = pq.read_table(record)
    i = table.schema.get_field_index(field)
    pq.write_table(table.set_column(i, field, value), record)
    for args in (
        ["report", "--dataset", str(ds), "--out", str(tmp_path / "o"), "--no-pdf"],
        ["check", "--dataset", str(ds)],
    ):
        res = _run(*args)
        assert res.exit_code == 5, res.output
        assert str(record) in res.output, res.output
        assert says in res.output, res.output
        assert "Traceback" not in res.output
    assert _run("check", "--dataset", str(ds), "--repair").exit_code == 0
    res = _run("ingest", "--dataset", str(ds), "--date", "2026-11-28", *map(str, inputs))
    assert res.exit_code == 0, res.output
    assert _rows(ds) == before


@pytest.mark.parametrize("kind", ["fifo", "socket", "link_out"])
def test_what_no_command_reads_check_names_and_no_command_opens(
    pristine: Path, tmp_path: Path, kind: str
) -> None:
    """A FIFO or a socket named `*.parquet` inside a table, and a table folder linked outside
    the dataset: check and report agree (exit 5 naming it; neither blocks on the FIFO);
    repair removes the FIFO and socket (no bytes on disk) and leaves the link to its owner."""
    ds = _copy(pristine, tmp_path)
    folder = _data_files(ds)[0].parent
    odd = folder / "0123-0.parquet"
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "socket":
        short = Path(f"/tmp/mr-{os.getpid()}.sock")  # AF_UNIX paths are short
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(short))
        os.replace(short, odd)
    else:
        outside = tmp_path / "elsewhere"
        shutil.move(str(ds / "request"), outside)
        odd = ds / "request"
        odd.symlink_to(outside, target_is_directory=True)
    for args in (
        ["check", "--dataset", str(ds)],
        ["report", "--dataset", str(ds), "--out", str(tmp_path / "o"), "--no-pdf"],
    ):
        res = _run(*args)
        assert res.exit_code == 5, (args, res.output)
        assert str(odd) in res.output
    res = _run("check", "--dataset", str(ds), "--repair")
    if kind == "link_out":
        assert res.exit_code == 5, res.output
        assert "left as they are" in res.output
        assert odd.is_symlink()
    else:
        assert res.exit_code == 0, res.output
        assert "removed   1" in res.output
        assert not os.path.lexists(odd)
        assert len(_rows(ds)) == 800


def test_a_repair_cut_short_is_finished_before_anything_is_collected(
    pristine: Path, inputs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repair killed after moving the commit record but before the data files: the next
    writer finishes the moves before it removes uncommitted files, so nothing is deleted."""
    ds = _copy(pristine, tmp_path)
    victim = _data_files(ds)[0]
    _flip(victim)
    found = check(Dataset(ds))
    moves = 0
    real = os.replace

    def dies_after_two(a: object, b: object) -> None:
        nonlocal moves
        if str(b).endswith("moves.json") or ".tmp" in str(a):
            return real(a, b)  # type: ignore[arg-type]
        moves += 1
        if moves > 2:
            raise KeyboardInterrupt
        return real(a, b)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        repair(Dataset(ds), found)
    monkeypatch.setattr(os, "replace", real)
    (aside,) = (ds / "damaged").iterdir()
    listed = json.loads((aside / "moves.json").read_bytes())["moves"]
    assert listed[0].startswith(f"{LOG}/")  # the commit record goes first
    ingest(ds, [inputs[0]], night="2026-11-28")  # recover() runs first
    assert all((aside / name).is_file() for name in listed)
    assert json.loads((aside / "moves.json").read_bytes())["done"] is True


def test_retention_is_not_damage_and_is_not_read_back(
    pristine: Path, inputs: list[Path], tmp_path: Path
) -> None:
    """After retention removed the first day, the files commit records name there are gone by
    design: check is clean, and ingesting the same inputs again reads nothing back."""
    ds = _copy(pristine, tmp_path)
    res = _run("retain", "--dataset", str(ds), "--days", "1", "--date", "2026-11-29")
    assert res.exit_code == 0, res.output
    kept = _rows(ds)
    assert 0 < len(kept) < 800
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 0, res.output
    res = _run("ingest", "--dataset", str(ds), "--date", "2026-11-28", *map(str, inputs))
    assert res.exit_code == 0, res.output
    assert _rows(ds) == kept


DAMAGES = ("flip", "truncate", "delete", "stray", "record", "fifo")


@pytest.mark.slow
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    picks=st.lists(
        st.tuples(st.sampled_from(DAMAGES), st.integers(0, 50), st.text("*?[]-x", max_size=4)),
        min_size=1,
        max_size=4,
    )
)
def test_any_damage_repaired_and_reingested_loses_no_row(
    pristine: Path,
    inputs: list[Path],
    tmp_path_factory: pytest.TempPathFactory,
    picks: list[tuple[str, int, str]],
) -> None:
    """Any set of damaged and stray files: check, repair, ingest the inputs again: every row
    is back, and no file of a source nothing happened to changed (tree hash)."""
    ds = _copy(pristine, tmp_path_factory.mktemp("prop"))
    before_rows = _rows(ds)
    before_tree = _tree(ds)  # taken before any damage: strays planted later are not in it
    touched: set[str] = set()
    for kind, index, name in picks:
        files = [f for f in _data_files(ds) if f.is_file()]
        records = sorted((ds / LOG).glob("*.parquet"))
        if not files or not records:
            break
        victim = files[index % len(files)]
        if kind == "flip":
            _flip(victim, at=0.2 + (index % 5) / 10)
        elif kind == "truncate":
            victim.write_bytes(victim.read_bytes()[: max(8, index)])
        elif kind == "delete":
            victim.unlink()
        elif kind == "stray":
            (victim.parent / f"{name or '*'}-{index}.parquet").write_bytes(b"stray")
            continue
        elif kind == "fifo":
            fifo = victim.parent / f"{name or '?'}-fifo{index}.parquet"
            if not os.path.lexists(fifo):
                os.mkfifo(fifo)
            continue
        else:
            victim = records[index % len(records)]
            table = pq.read_table(victim)
            i = table.schema.get_field_index("rows")
            pq.write_table(table.set_column(i, "rows", pa.array(["[]"])), victim)
        touched.add(victim.name.split("-", 1)[0].removesuffix(".parquet"))
    untouched = {
        k: v
        for k, v in before_tree.items()
        if k.rsplit("/", 1)[-1].split("-", 1)[0].split(".")[0] not in touched
    }
    found = check(Dataset(ds))
    repair(Dataset(ds), found)
    ingest(ds, inputs, night="2026-11-28")
    assert _rows(ds) == before_rows
    after = _tree(ds)
    assert {k: after.get(k) for k in untouched} == untouched
    assert not check(Dataset(ds)).damage


def test_an_uncommitted_file_goes_with_the_next_ingest_as_check_says(
    pristine: Path, inputs: list[Path], tmp_path: Path
) -> None:
    """An unreadable file no commit record owns: check says the next ingest removes it; an
    ingest of inputs already in (all unchanged) does, and loses no row."""
    ds = _copy(pristine, tmp_path)
    stray = _data_files(ds)[0].parent / "0123456789abcdef0123-0.parquet"
    stray.write_bytes(b"left by a writer that died")
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5, res.output
    assert _remedy(res.output).endswith(": the next ingest removes it")
    res = _run("ingest", "--dataset", str(ds), "--date", "2026-11-28", str(inputs[0]))
    assert res.exit_code == 0, res.output
    assert "unchanged" in res.output
    assert not stray.exists()
    assert len(_rows(ds)) == 800
    assert _run("check", "--dataset", str(ds)).exit_code == 0


def test_a_file_its_record_does_not_name_is_set_aside_alone(pristine: Path, tmp_path: Path) -> None:
    """A copy of a source's data file under another number (copied in by hand): every read
    refuses it (its rows would count twice); check says repair sets it aside alone, and after
    that the source's own files and rows are as they were."""
    ds = _copy(pristine, tmp_path)
    before = _tree(ds)
    original = _data_files(ds)[0]
    copy = original.with_name(original.name.split("-", 1)[0] + "-99999.parquet")
    shutil.copyfile(original, copy)
    with pytest.raises(DatasetError, match="does not name"):
        Dataset(ds).connect()
    res = _run("check", "--dataset", str(ds))
    assert res.exit_code == 5, res.output
    assert _remedy(res.output) == "--repair sets it aside alone"
    res = _run("check", "--dataset", str(ds), "--repair")
    assert res.exit_code == 0, res.output
    assert "set aside 1 file(s)" in res.output
    assert _tree(ds) == before
    assert len(_rows(ds)) == 800
