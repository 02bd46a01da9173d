"""The Triton autotune-cache reader on files Triton 3.8.0's own `check_disk_cache` wrote
(tests/corpus/triton_autotune, README there: no real file was available, their timings are
made up): every config's row equals a parse of the raw JSON written in this test, the ranking
figures follow from them (to 1e-9), the later versions' stringified key reads the same, and
hostile variants (cut, huge numbers, deep nesting, bad timings, too many configs, too large)
are one-line errors naming the file, the line and the field, never a crash."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.tuning.ranking import tuning_ranking
from mapreport.app.cli import main
from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.core.kinds import Unranked
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from mapreport.ingest import triton_autotune as reader
from mapreport.ingest.base import Head

CORPUS = Path(__file__).resolve().parent / "corpus" / "triton_autotune"
FILES = sorted(CORPUS.rglob("*.autotune.json"))
TH = Thresholds(bootstrap_resamples=500)
CONFIG = {"kwargs": {"BLOCK": 64}, "num_warps": 4, "num_ctas": 1, "num_stages": 3}


def _doc(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))  # Python's json reads Triton's Infinity


def _config_id(config: dict[str, Any]) -> str:
    """A config as the reader identifies it: its set fields, keys sorted."""
    return json.dumps({k: v for k, v in config.items() if v is not None}, sort_keys=True)


def _ingest(tmp_path: Path, files: list[Path], policy: ErrorPolicy = "abort") -> Dataset:
    ds = Dataset(tmp_path / "ds", create=True)
    for f in files:
        assert detect(f).name == "triton-autotune"
        assert ingest_file(ds, f, policy=policy, hints={"workload": "tri"}).rejected == 0
    return ds


def test_the_fixture_files_are_there() -> None:
    assert len(FILES) == 3, FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}")
def test_every_config_equals_a_parse_of_the_raw_json(tmp_path: Path, path: Path) -> None:
    doc = _doc(path)
    con = _ingest(tmp_path, [path]).connect()
    rows = con.execute(
        "SELECT trial, task, task_key, shape, config, costs_us, mean_us, error, extra, line "
        "FROM tuning_trial ORDER BY trial"
    ).fetchall()
    assert len(rows) == len(doc["configs_timings"])
    dims = "x".join(str(v) for v in doc["key"][:3])
    for n, ((config, timings), row) in enumerate(zip(doc["configs_timings"], rows, strict=True)):
        trial, task, task_key, shape, cfg, costs, mean, error, extra, line = row
        assert (trial, task, shape, line) == (n + 1, "matmul_kernel", dims, 1)
        assert task_key == "matmul_kernel | key float16, float16, float16"
        assert json.loads(cfg) == json.loads(_config_id(config))
        if math.isinf(timings[0]):
            assert (costs, mean, error, extra) == (None, None, "inf", None)
            continue
        assert costs == [timings[0] * 1e3]  # the median, ms x 1000, exactly
        assert (mean, error) == (timings[0] * 1e3, None)
        assert json.loads(extra)["timings_ms"] == timings
    ok = [(t, i) for i, (_, t) in enumerate(doc["configs_timings"], 1) if not math.isinf(t[0])]
    deployed = min(ok)  # Triton's min over the timing lists: median first
    (plan,) = con.execute(
        "SELECT op, shape_bucket, predicted_us, extra FROM compile_plan"
    ).fetchall()
    assert plan[:3] == ("matmul_kernel", dims, deployed[0][0] * 1e3)
    selected = con.execute(
        "SELECT trial FROM tuning_trial WHERE json_extract(extra, '$.selected')::BOOLEAN"
    ).fetchall()
    assert selected == [(deployed[1],)]
    (event,) = con.execute("SELECT compile_id, compile_ms, extra FROM compile_event").fetchall()
    assert event[0].startswith(f"autotune:{path.parent.parent.name}:")
    assert event[1] is None
    counts = json.loads(event[2])
    assert (counts["configs"], counts["failed_configs"]) == (6, 1)
    assert counts["key"] == doc["key"]
    assert counts["cache_entry"] == path.parent.name


def test_the_ranking_follows_from_the_raw_timings(tmp_path: Path) -> None:
    """Each file is one run; a config is one candidate across runs, its medians pooled; the
    run's pick is its fastest median, the regret its pooled time over the best pooled."""
    ranking = tuning_ranking(_ingest(tmp_path, FILES).connect(), "tri", "", TH)
    assert ranking is not None
    assert not ranking.one_per_workload
    pooled: dict[tuple[Any, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    own: dict[str, dict[str, float]] = {}
    for f in FILES:
        doc = _doc(f)
        run = {_config_id(c): t[0] * 1e3 for c, t in doc["configs_timings"] if not math.isinf(t[0])}
        own[f.parent.parent.name + str(doc["key"])] = run
        for cid, us in run.items():
            pooled[tuple(doc["key"])][cid].append(us)
    assert len(ranking.choices) == len(FILES)
    for c in ranking.choices:
        key = (*[int(d) for d in (c.shape or "").split("x")], *["torch.float16"] * 3)
        run = own[c.plan_id.split(":")[0] + str(list(key))]
        every = {cid: sum(v) / len(v) for cid, v in pooled[key].items()}
        pick = min(run, key=lambda cid: run[cid])
        assert (c.trials, c.candidates, c.errors) == (6, 5, 1)
        assert c.chosen_us == pytest.approx(every[pick], rel=1e-9)
        assert c.best_us == pytest.approx(min(every.values()), rel=1e-9)
        assert c.regret == pytest.approx(every[pick] / min(every.values()) - 1, abs=1e-9)
        assert c.regret_ci is not None
        assert c.prediction is None  # the cache records no perf_model estimate
        assert c.unscored is Unranked.NO_SCORES
    picks = {
        c.plan_id.split(":")[0]: c.regret for c in ranking.choices if c.shape == "4096x4096x4096"
    }
    assert picks["machine_b"] == 0.0
    assert picks["machine_a"] == pytest.approx((0.1878 + 0.1924) / (0.1912 + 0.1869) - 1)


def test_findings_json_ranks_each_cache_file(tmp_path: Path) -> None:
    """The report reads Triton's trials as it reads TVM's: a ranking row per file."""
    ds = _ingest(tmp_path, FILES)
    out = tmp_path / "out"
    args = ["report", "--dataset", str(ds.root), "--out", str(out), "--no-pdf", "--slice", "tri"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    rows = json.loads((out / "tri" / "findings.json").read_text())["ranking"]
    assert sorted(r["plan_id"].split(":")[0] for r in rows) == [
        "machine_a",
        "machine_a",
        "machine_b",
    ]
    assert {r["workload"] for r in rows} == {"matmul_kernel"}
    assert all(r["candidates"] == 5 and r["errors"] == 1 for r in rows)


def _write(tmp_path: Path, doc: Any, name: str = "k.autotune.json", **dump: Any) -> Path:
    path = tmp_path / "cache" / "HASH" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, **dump))
    return path


def _rows(tmp_path: Path, path: Path, policy: ErrorPolicy = "abort") -> list[Any]:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, policy=policy, fmt="triton-autotune")
    return (
        ds.connect()
        .execute("SELECT trial, shape, task_key, mean_us, error, line FROM tuning_trial ORDER BY 1")
        .fetchall()
    )


def test_later_versions_stringified_key_reads_the_same(tmp_path: Path) -> None:
    """Triton's main (009401737888) writes `[str(k) for k in tuning_key]`: the same workload."""
    doc = _doc(FILES[0])
    as_text = {**doc, "key": [str(k) for k in doc["key"]]}
    a = _rows(tmp_path / "a", _write(tmp_path / "a", doc))
    b = _rows(tmp_path / "b", _write(tmp_path / "b", as_text))
    assert a == b
    mixed = {
        "key": [8, True, None, 2.5, "torch.bfloat16"],
        "configs_timings": doc["configs_timings"],
    }
    text = {**mixed, "key": [str(k) for k in mixed["key"]]}
    c = _rows(tmp_path / "c", _write(tmp_path / "c", mixed))
    d = _rows(tmp_path / "d", _write(tmp_path / "d", text))
    assert c == d
    assert c[0][1:3] == ("8", "k | key True, None, 2.5, bfloat16")


def test_a_pretty_printed_file_names_each_configs_line(tmp_path: Path) -> None:
    """`jq .` (as the pull request that added the cache shows it) lays one value a line: each
    trial's line is where its entry starts."""
    doc = _doc(FILES[0])
    path = _write(tmp_path, doc, indent=2)
    rows = _rows(tmp_path, path)
    text = path.read_text().splitlines()
    for r in rows:
        assert text[r[5] - 1].strip() == "[", r  # the entry's opening bracket
        assert '"kwargs"' in text[r[5] + 1], r
    assert len({r[5] for r in rows}) == len(rows)


def test_a_gzipped_file_and_a_bare_number_timing(tmp_path: Path) -> None:
    """A custom `do_bench` may return one number, not do_bench's three quantiles."""
    doc = {"key": [64], "configs_timings": [[CONFIG, 0.5], [{**CONFIG, "num_warps": 8}, 0.25]]}
    path = tmp_path / "k.autotune.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert detect(path).name == "triton-autotune"
    rows = _rows(tmp_path, path)
    assert [(r[0], r[3], r[4]) for r in rows] == [(1, 500.0, None), (2, 250.0, None)]


def test_a_zero_time_and_an_all_failed_file(tmp_path: Path) -> None:
    inf = float("inf")
    doc = {"key": [64], "configs_timings": [[CONFIG, [0.0, 0.0, 0.0]], [CONFIG, [inf] * 3]]}
    rows = _rows(tmp_path / "a", _write(tmp_path / "a", doc))
    assert [r[4] for r in rows] == ["zero_time", "inf"]
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, _write(tmp_path, doc), hints={"workload": "tri"})
    assert ds.connect().execute("SELECT count(*) FROM compile_plan").fetchone() == (0,)
    r = tuning_ranking(ds.connect(), "tri", "", TH)
    assert r is not None
    assert r.choices[0].unranked is Unranked.NO_SUCCESS


@pytest.mark.parametrize(
    ("text", "ours"),
    [
        ('{"key": [1], "configs_timings": [[{"kwargs": {}}, [0.1]]]}', True),
        ('{\n  "configs_timings": [],\n  "key": []\n}', True),
        ('{"traceEvents": [], "configs_timings": []}', False),
        ('[{"key": [1], "configs_timings": []}]', False),
        ('{"key": [1], "configs": []}', False),
    ],
    ids=["dumps", "reordered", "other-object", "array", "no-timings"],
)
def test_sniffing_by_content(tmp_path: Path, text: str, ours: bool) -> None:
    path = _write(tmp_path, text, "any.json")
    assert reader.TritonAutotuneReader().sniff(Head(path, text.encode())) is ours


GOOD = [[CONFIG, [0.5, 0.4, 0.6]], [{**CONFIG, "num_warps": 8}, [0.25, 0.2, 0.3]]]


def _keyed(key: str) -> str:
    """A file whose tuning key is `key` (JSON text)."""
    return '{"key": ' + key + ', "configs_timings": []}'


def _one(timing: str, config: str = '{"kwargs": {}}') -> str:
    """A file of one config (JSON text) and its timing (JSON text)."""
    return '{"key": [1], "configs_timings": [[' + config + ", " + timing + "]]}"


@pytest.mark.parametrize(
    ("text", "line", "field", "reason"),
    [
        ('{"key": [1], "configs_timings": [\n[{"kwargs": {}}, [0.1]]', 2, None, "invalid JSON"),
        ('{"key": [1], "configs_timings": {}}', 1, "configs_timings", "required: a list"),
        ('{"configs_timings": []}', 1, "key", "required field is missing"),
        (_keyed("[[1, 2]]"), 1, "key", "a number or a string"),
        (_keyed("[1e400]"), 1, "key", "a number or a string"),
        (_keyed("[" + "9" * 5000 + "]"), None, None, "invalid JSON"),
        (_keyed("[" + "1, " * 64 + "1]"), 1, "key", "more than 64"),
        (_keyed(f"[{2**60}]"), 1, "key", "beyond 2^53"),
        (_keyed('["' + "x" * 300 + '"]'), 1, "key", "short printable"),
        ('{"key": [1], "configs_timings": [[{}]]}', 1, "configs_timings", "config 1: an entry"),
        (_one("[0.1]", "1"), 1, "config", "Config's fields"),
        (_one("[0.1]", '{"kwargs": 3}'), 1, "kwargs", "meta-parameters"),
        (_one("[NaN, 0.1, 0.2]"), 1, "timings", "milliseconds or Infinity"),
        (_one("[-Infinity]"), 1, "timings", "milliseconds or Infinity"),
        (_one("[-0.5]"), 1, "timings", "milliseconds or Infinity"),
        (_one('["fast"]'), 1, "timings", "milliseconds or Infinity"),
        (_one("[true]"), 1, "timings", "milliseconds or Infinity"),
        (_one("[1e400]"), 1, "timings", "milliseconds or Infinity"),
        (_one("[1e13]"), 1, "timings", "must be <="),
        (_one("[]"), 1, "timings", "must be 1 to 64"),
        (_one("[0.1, Infinity]"), 1, "timings", "mixes Infinity"),
        ("[1, 2]", 1, None, "a JSON object"),
    ],
    ids=[
        "cut", "not-a-list", "no-key", "nested-key", "huge-key-float", "5000-digit-int",
        "long-key", "huge-dim", "long-label", "half-entry", "config-not-object",
        "kwargs-not-object", "nan", "minus-inf", "negative", "text",
        "bool", "1e400", "beyond-2^53-us", "empty-timing", "mixed-inf", "array",
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_file_line_and_field(
    tmp_path: Path, text: str, line: int | None, field: str | None, reason: str
) -> None:
    path = _write(tmp_path, text)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, path, policy="abort", fmt="triton-autotune")
    message = e.value.message()
    where = f"k.autotune.json:{line}: " if line is not None else "k.autotune.json: "
    what = f"field '{field}': " if field else ""
    assert where + what in message, message
    assert reason in message, message
    assert "\n" not in message
    assert len(message) < 600


def test_deep_nesting_is_an_error_not_a_crash(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for text in (
        deep,
        '{"key": [1], "configs_timings": [[{"kwargs": {"a": ' + deep + "}}, [0.1]]]}",
    ):
        path = _write(tmp_path, text)
        ds = Dataset(tmp_path / "ds", create=True)
        with pytest.raises(InputError) as e:
            ingest_file(ds, path, policy="abort", fmt="triton-autotune")
        assert "nested too deeply" in e.value.message() or "JSON object" in e.value.message()


def test_a_bad_entry_is_quarantined_and_the_others_keep_their_order(tmp_path: Path) -> None:
    doc = {"key": [64], "configs_timings": [GOOD[0], [CONFIG, ["slow"]], GOOD[1]]}
    ds = Dataset(tmp_path / "ds", create=True)
    res = ingest_file(ds, _write(tmp_path, doc), policy="quarantine")
    assert res.rejected == 1
    rows = ds.connect().execute("SELECT trial, mean_us FROM tuning_trial ORDER BY 1").fetchall()
    assert rows == [(1, 500.0), (3, 250.0)]  # the order benchmarked, the bad one's place kept


def test_limits_while_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"key": [64], "configs_timings": GOOD * 3}
    monkeypatch.setattr(reader, "MAX_CONFIGS", 5)
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, _write(tmp_path, doc), policy="abort")
    assert "k.autotune.json:1: field 'configs_timings': more than 5 configs" in e.value.message()
    monkeypatch.setattr(reader, "MAX_BYTES", 100)
    with pytest.raises(InputError) as e:
        ingest_file(ds, _write(tmp_path, doc), policy="abort")
    assert e.value.message().endswith("k.autotune.json: document larger than 100 bytes")
    monkeypatch.setattr(reader, "MAX_BYTES", 1 << 20)
    path = _write(tmp_path, doc)
    path.write_bytes(path.read_bytes().replace(b'"key"', b'"key\xff"', 1) + b"\n")
    with pytest.raises(InputError) as e:
        ingest_file(ds, path, policy="abort", fmt="triton-autotune")
    assert "k.autotune.json:1: not UTF-8 text" in e.value.message()
