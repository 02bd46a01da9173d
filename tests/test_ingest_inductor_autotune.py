"""The Inductor max-autotune reader on real torch 2.13 records made here
(tests/corpus/inductor_autotune, README there): every choice's times equal a parse of the raw
blocks written in this test, the ranking figures follow from them, and hostile variants
(truncated, huge numbers, deep nesting, long lines, interleaved ranks, too many choices) are
one-line errors or counted rejections, never a crash."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.tuning.ranking import tuning_ranking
from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from mapreport.ingest import inductor_autotune as reader
from mapreport.ingest.records import MAX_LINE_BYTES

CORPUS = Path(__file__).resolve().parent / "corpus" / "inductor_autotune"
RUNS = sorted(CORPUS.glob("*.log"))
TH = Thresholds(bootstrap_resamples=500)

BLOCK = """\
AUTOTUNE mm(64x128, 128x32)
strides: [128, 1], [32, 1]
dtypes: torch.float16, torch.float16
  triton_mm_3 0.0100 ms 100.0% BLOCK_K=32, BLOCK_M=64, num_stages=2, num_warps=4
  mm 0.0125 ms 80.0%
  triton_mm_7 0.0200 ms 50.0% BLOCK_K=64, BLOCK_M=32, num_stages=3, num_warps=4
  triton_mm_9 inf ms 0.0% BLOCK_K=128, BLOCK_M=128, num_stages=5, num_warps=8
SingleProcess AUTOTUNE benchmarking takes 1.5000 seconds and 0.5000 seconds precompiling \
for 4 choices
"""
"""A GPU-style block (Triton configs, a failed choice), written from select_algorithm.py's
format strings."""


def _raw(path: Path) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per workload (its task key as the reader states it: the op, dtypes and strides; its
    sizes) and choice (its kernel less the counter, and description): every time in us,
    straight from the text."""
    out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    head: list[str] | None = None
    for line in path.read_text().splitlines():
        if line.startswith("AUTOTUNE "):
            op, sizes = line.removeprefix("AUTOTUNE ").rstrip(")").split("(")
            head = [op, sizes.replace(", ", ";"), "", ""]
        elif head is not None and line.startswith("dtypes: "):
            head[2] = " | dtypes " + line.removeprefix("dtypes: ").replace("torch.", "")
        elif head is not None and line.startswith("strides: "):
            head[3] = " | strides " + line.removeprefix("strides: ")
        elif head is not None and line.startswith("  "):
            name, ms, _, _, *desc = [*line.split(" ")[2:], ""]
            key = re.sub(r"_\d+$", "", name) + "|" + " ".join(d for d in desc if d)
            if ms != "inf":
                out[(head[0] + head[2] + head[3], head[1])][key].append(float(ms) * 1e3)
        else:
            head = None
    return {k: dict(v) for k, v in out.items()}


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_real_records_equal_a_parse_of_the_raw_blocks(tmp_path: Path, path: Path) -> None:
    assert detect(path).name == "inductor-autotune"
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, path, policy="abort", hints={"workload": "ind"})
    assert res.rejected == 0
    raw = _raw(path)
    con = ds.connect()
    rows = con.execute(
        "SELECT task, shape, config, costs_us, mean_us, error FROM tuning_trial"
    ).fetchall()
    assert len(rows) == sum(len(v) for v in raw.values())
    got = sorted(sorted(r[3]) for r in rows)
    assert got == sorted(sorted(v) for c in raw.values() for v in c.values())  # ms x 1e3, exact
    for task, shape, config, costs, mean, error in rows:
        assert error is None
        assert mean == pytest.approx(sum(costs) / len(costs), rel=1e-12)
        assert task in ("packed_linear", "linear_unary", "bmm")
        assert shape
        assert "x" in shape
        assert '"kernel"' in config
    # every workload autotuned in each of the run's repeats: 3 times per choice
    assert {len(r[3]) for r in rows} == {3}
    plans = con.execute("SELECT op, shape_bucket, predicted_us FROM compile_plan").fetchall()
    assert len(plans) == len(raw)
    for (key, shape), choices in raw.items():
        best = min(sum(v) / len(v) for v in choices.values())
        op = key.split(" | ")[0]
        assert (op, shape, pytest.approx(best, rel=1e-12)) in plans, key


def test_real_runs_rank_every_workload(tmp_path: Path) -> None:
    """In a slice of every run, each run's pick (its fastest choice by mean over its repeats)
    against the best choice, each choice timed by every repeat any run measured of it."""
    ds = Dataset(tmp_path / "ds", create=True)
    for path in RUNS:
        ingest_file(ds, path, hints={"workload": "ind"})
    r = tuning_ranking(ds.connect(), "ind", "", TH)
    assert r is not None
    assert not r.one_per_workload
    raw = {p.name.removesuffix(".log"): _raw(p) for p in RUNS}
    pooled: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for workloads in raw.values():
        for w, choices in workloads.items():
            for k, v in choices.items():
                pooled[w][k] += v
    assert len(r.choices) == sum(len(w) for w in raw.values())
    for c in r.choices:
        assert c.shape is not None
        w = (c.task_key, c.shape)
        own = {k: sum(v) / len(v) for k, v in raw[c.plan_id][w].items()}
        every = {k: sum(v) / len(v) for k, v in pooled[w].items()}
        pick = min(own, key=lambda k: own[k])
        assert c.candidates == len(own) >= 2
        assert c.chosen_us == pytest.approx(every[pick], rel=1e-12)
        assert c.best_us == pytest.approx(min(every.values()), rel=1e-12)
        assert c.regret == pytest.approx(every[pick] / min(every.values()) - 1, abs=1e-9)
        assert c.regret_ci is not None
        assert c.repeats == min(
            len(pooled[w][pick]), len(pooled[w][min(every, key=lambda k: every[k])])
        )


def _write(tmp_path: Path, text: str | bytes, name: str = "stderr.log") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _rows(tmp_path: Path, text: str, policy: ErrorPolicy = "quarantine") -> list[Any]:
    """The trials of a log read as this format (a block beyond the first 64 KiB is not
    detected: the format is named, as `--format inductor-autotune` does)."""
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, _write(tmp_path, text), policy=policy, fmt="inductor-autotune")
    return (
        ds.connect()
        .execute("SELECT trial, config, costs_us, error, extra FROM tuning_trial ORDER BY trial")
        .fetchall()
    )


def test_a_gpu_block_with_a_failed_choice(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    path = _write(tmp_path, "warming up\n" + BLOCK + BLOCK.replace("0.0100", "0.0110"))
    res = ingest_file(ds, path, policy="abort")
    assert res.rows["tuning_trial"] == 4
    con = ds.connect()
    rows = con.execute(
        "SELECT trial, config, costs_us, error, shape, task_key FROM tuning_trial ORDER BY trial"
    ).fetchall()
    assert [r[3] for r in rows] == [None, None, None, "inf"]
    assert rows[0][1] == (
        '{"kernel":"triton_mm","description":"BLOCK_K=32, BLOCK_M=64, num_stages=2, num_warps=4"}'
    )
    assert rows[0][2] == pytest.approx([10.0, 11.0])
    assert rows[1][2] == pytest.approx([12.5, 12.5])
    assert rows[0][4] == "64x128;128x32"
    assert rows[0][5] == "mm | dtypes float16, float16 | strides [128, 1], [32, 1]"
    (ms,) = con.execute("SELECT compile_ms FROM compile_event").fetchone() or (None,)
    assert ms == pytest.approx(4000.0)


def test_torch_2_1_blocks_and_torchrun_prefixes(tmp_path: Path) -> None:
    """torch 2.1 wrote no strides, dtypes or descriptions and "AUTOTUNE takes"; torchrun
    prefixes each rank's lines, and two ranks' blocks interleave."""
    text = (
        "[rank0]:AUTOTUNE mm(8x8, 8x8)\n"
        "[rank1]:AUTOTUNE mm(16x8, 8x8)\n"
        "[rank0]:  mm 0.0050 ms 100.0%\n"
        "[rank1]:  mm 0.0060 ms 100.0%\n"
        "[rank0]:  triton_mm_1 0.0100 ms 50.0%\n"
        "[rank1]:  triton_mm_2 0.0070 ms 85.7%\n"
        "[rank0]:SingleProcess AUTOTUNE takes 0.2000 seconds\n"
        "[rank1]:SingleProcess AUTOTUNE takes 0.3000 seconds\n"
    )
    ds = Dataset(tmp_path / "ds", create=True)
    assert detect(_write(tmp_path, text)).name == "inductor-autotune"
    ingest_file(ds, tmp_path / "stderr.log", policy="abort")
    rows = (
        ds.connect()
        .execute(
            "SELECT shape, list(mean_us ORDER BY trial) FROM tuning_trial GROUP BY 1 ORDER BY 1"
        )
        .fetchall()
    )
    assert rows == [
        ("16x8;8x8", pytest.approx([6.0, 7.0])),
        ("8x8;8x8", pytest.approx([5.0, 10.0])),
    ]


def test_a_log_without_a_block_is_not_this_format(tmp_path: Path) -> None:
    path = _write(tmp_path, "AUTOTUNE is mentioned here\nbut no block follows\n")
    with pytest.raises(InputError):
        detect(path)


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        ("  mm 1e400 ms 100.0%", "time_ms", "must be milliseconds or inf"),
        ("  mm " + "9" * 400 + ".0000 ms 100.0%", "time_ms", "expected a finite number"),
        ("  mm 99999999999999.0000 ms 100.0%", "time_ms", "must be <="),
        ("  mm -1.0000 ms 100.0%", "time_ms", "must be milliseconds or inf"),
        ("  mm nan ms 100.0%", "time_ms", "must be milliseconds or inf"),
        ("  mm 0.01", "name", "a choice line is"),
    ],
    ids=["exponent", "400-digits", "beyond-2^53-us", "negative", "nan", "cut"],
)
def test_a_bad_choice_line_names_its_file_line_and_field(
    tmp_path: Path, line: str, field: str, reason: str
) -> None:
    text = BLOCK.splitlines()
    text.insert(4, line)
    path = _write(tmp_path, "\n".join(text) + "\n")
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, path, policy="abort")
    message = e.value.message()
    assert f"stderr.log:5: field '{field}': {reason}" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("sizes", "reason"),
    [
        (f"{2**60}x8, 8x8", "beyond 2^53"),
        (", ".join(["2x2"] * 40), "more than 64"),
        ("s0x8, 8x8", "must be sizes like 64x256"),
    ],
    ids=["huge-dim", "too-many-dims", "symbolic"],
)
def test_bad_sizes_are_refused_by_field(tmp_path: Path, sizes: str, reason: str) -> None:
    text = BLOCK.replace("64x128, 128x32", sizes)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, _write(tmp_path, text), policy="abort", fmt="inductor-autotune")
    assert "stderr.log:1: field 'sizes': " in e.value.message()
    assert reason in e.value.message()


def test_a_truncated_log_keeps_what_came_before_the_cut(tmp_path: Path) -> None:
    cut = BLOCK + BLOCK[: BLOCK.index("  mm 0.0125") + 8]  # the second block's 2nd line cut
    rows = _rows(tmp_path, cut)
    assert [r[2] for r in rows[:2]] == [pytest.approx([10.0, 10.0]), pytest.approx([12.5])]
    ds = Dataset(tmp_path / "ds2", create=True)
    res = ingest_file(ds, tmp_path / "stderr.log")
    assert res.rejected == 1  # quarantined: a cut log is routine, counted and said


def test_deep_nesting_is_text_not_structure(tmp_path: Path) -> None:
    """Nothing of a block is parsed as nested data: a description of 100,000 brackets is kept as
    written, and a stats line of deep JSON between blocks is passed over."""
    deep = "[" * 100_000 + "]" * 100_000
    text = (
        "Autotune Choices Stats:\n" + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "\n"
    ) + BLOCK.replace("num_warps=4\n", f"num_warps=4 {deep}\n", 1)
    rows = _rows(tmp_path, text, policy="abort")
    assert deep in str(rows[0][1])
    assert len(rows) == 4


def test_a_long_line_is_refused_inside_a_block_and_passed_over_outside(tmp_path: Path) -> None:
    long = "x" * (MAX_LINE_BYTES + 10)
    rows = _rows(tmp_path, long + "\n" + BLOCK, policy="abort")
    assert len(rows) == 4
    text = BLOCK.replace("  mm 0.0125 ms 80.0%\n", f"  mm 0.0125 ms 80.0% {long}\n")
    ds = Dataset(tmp_path / "ds2", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, _write(tmp_path, text, "long.log"), "abort", "inductor-autotune")
    assert "long.log:5: line longer than" in e.value.message()


def test_too_many_choices_in_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_CHOICES", 3)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, _write(tmp_path, BLOCK), policy="abort")
    assert "stderr.log:7: field 'name': more than 3 distinct choices in one file" in (
        e.value.message()
    )


def test_fewer_listed_than_benchmarked_is_said(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    text = BLOCK.replace("for 4 choices", "for 24 choices")
    res = ingest_file(ds, _write(tmp_path, text), policy="abort")
    assert any("20 benchmarked choices were not listed" in n for n in res.notes)
