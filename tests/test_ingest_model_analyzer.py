"""The Model Analyzer reader on real checkpoints, checked against the CSVs Model Analyzer
itself generated from them; the batch-policy summary; broken checkpoints."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mapreport.analysis import Review, Thresholds, analyze_slice
from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

MA = REALDATA / "triton" / "model_analyzer"
CKPTS = sorted(MA.rglob("*.ckpt"))
pytestmark = pytest.mark.skipif(not MA.is_dir(), reason="../shared/realdata is missing")


def test_every_checkpoint_is_read(tmp_path: Path) -> None:
    counts = {}
    for path in CKPTS:
        assert detect(path).name == "model-analyzer", path
        ds = Dataset(tmp_path / path.parent.name, create=True)
        res = ingest_file(ds, path)
        assert res.rejected == 0
        counts[path.parent.name] = res.rows["load_sweep"]
        # independently: one row per model per measurement in the checkpoint
        doc = json.loads(path.read_text())["ResultManager.results"]["_results"]
        expected = sum(
            len(m["_model_config_measurements"])
            for configs in doc.values()
            for entry in configs.values()
            for m in entry[1].values()
        )
        assert res.rows["load_sweep"] == expected
    assert counts == {
        "resnet50_libtorch": 1012,
        "bls-ckpt": 53,
        "ensemble-ckpt": 21,
        "multi-model-ckpt": 24,
        "request-rate-ckpt": 34,
        "single-model-ckpt": 16,
    }


@pytest.mark.parametrize("name", ["single-model-ckpt", "bls-ckpt", "ensemble-ckpt"])
def test_values_match_model_analyzers_own_csv(tmp_path: Path, name: str) -> None:
    folder = MA / "tests" / "common" / name
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, folder / "0.ckpt")
    rows = ds.connect().execute(
        "SELECT config, batch_size, concurrency, throughput_per_s, latency_p99_us, "
        "max_batch_size FROM load_sweep"
    )
    got: dict[tuple[object, ...], list[tuple[object, ...]]] = {}
    for r in rows.fetchall():  # a BLS model is measured twice at one load (two PA runs)
        got.setdefault(r[:3], []).append(r[3:])
    with open(folder / "golden-metrics-model-inference.csv", newline="") as fh:
        golden = list(csv.DictReader(fh))
    assert golden
    for g in golden:
        config = g["Model Config Path"].split(":")[0]  # ensembles add composing configs
        key = (config, int(g["Batch"]), int(g["Concurrency"]))
        # the CSV rounds to one decimal
        match = [
            (t, p99, mb)
            for t, p99, mb in got[key]
            if abs(float(t) - float(g["Throughput (infer/sec)"])) <= 0.051  # type: ignore[arg-type]
            and abs(float(p99) / 1e3 - float(g["p99 Latency (ms)"])) <= 0.051  # type: ignore[arg-type]
        ]
        assert match, (key, got[key], g)
        if g["Max Batch Size"].isdigit() and g["Max Batch Size"] != "0":
            assert match[0][2] == int(g["Max Batch Size"])


def test_queue_grows_with_concurrency_and_sweep_summary(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, MA / "experiments" / "data" / "resnet50_libtorch" / "0.ckpt")
    con = ds.connect()
    lo, hi = con.execute(
        "SELECT max(server_queue_us) FILTER (WHERE concurrency = 1 AND "
        "config = 'resnet50_libtorch_config_default'), max(server_queue_us) FROM load_sweep "
        "WHERE workload = 'resnet50_libtorch'"
    ).fetchone()
    assert lo == pytest.approx(20.0)  # 0.02 ms at concurrency 1
    assert hi > 1e6  # seconds at concurrency 1024
    r = analyze_slice(con, "resnet50_libtorch", "", Thresholds(), Review(sla_p99_us=20_000))
    sweep = r.serving.sweep
    assert sweep is not None
    assert sweep.configs_total == 46
    assert sweep.points == 506
    best = con.execute(
        "SELECT config, max(throughput_per_s) AS t FROM load_sweep "
        "WHERE workload = 'resnet50_libtorch' AND latency_p99_us <= 20000 "
        "GROUP BY config ORDER BY t DESC, config LIMIT 1"
    ).fetchone()
    assert sweep.best == best[0]
    assert sweep.configs[0].best_throughput_per_s == pytest.approx(best[1])
    assert r.requests == 0
    assert r.device.operators is None


def test_broken_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "0.ckpt"
    path.write_text(
        '{"ResultManager.results": {"_results": {"m": {"m_config_0": [{}, {"k": 1}]}}}}'
    )
    ds = Dataset(tmp_path / "ds", create=True)
    with pytest.raises(InputError) as e:
        ingest_file(ds, path)
    assert "_results.m.m_config_0['k']" in str(e.value.field)
    path.write_text('{"ResultManager.results": {"_results": ')
    with pytest.raises(InputError, match="invalid JSON"):
        ingest_file(ds, path)


def test_a_config_name_two_runs_reused_is_two_configs(tmp_path: Path) -> None:
    """Every checkpoint of the folder in one dataset: two Model Analyzer runs of resnet50 each
    number their configs from 0, so `resnet50_libtorch_config_5` names two configurations.
    Each is its own config, with its own points and attributes, and the summary is the same
    on every analysis (it depended on the order rows tied in)."""
    ds = Dataset(tmp_path / "ds", create=True)
    for path in CKPTS:
        ingest_file(ds, path)
    con = ds.connect()
    keyed = con.execute(
        "SELECT config, max_batch_size, instance_count, instance_kind, dynamic_batching, "
        "count(*) FROM load_sweep WHERE workload = 'resnet50_libtorch' GROUP BY ALL"
    ).fetchall()
    names = [k[0] for k in keyed]
    assert len(names) > len(set(names))  # some name holds two configurations
    runs = [
        analyze_slice(con, "resnet50_libtorch", "", Thresholds(), Review()).serving.sweep
        for _ in range(2)
    ]
    assert runs[0] is not None
    assert runs[0] == runs[1]
    assert runs[0].configs_total == len(keyed)
    points = {tuple(k[:5]): k[5] for k in keyed}
    for c in runs[0].configs:
        key = (c.config, c.max_batch_size, c.instance_count, c.instance_kind, c.dynamic_batching)
        assert c.points == points[key]
    for p in runs[0].curves:
        assert (p.config, p.max_batch_size, p.dynamic_batching) in {
            (c.config, c.max_batch_size, c.dynamic_batching) for c in runs[0].configs
        }


def test_a_reused_config_name_draws_one_line_per_configuration() -> None:
    """Two checkpoints' `m_config_5`, told apart by their instances alone, are two lines, each
    named by what it is (the name with its max batch alone named both alike)."""
    from mapreport.analysis.mapping.sweep import LoadSweep, SweepPoint
    from mapreport.report.sections.batch_policy import sweep_curves

    def point(count: int, concurrency: int) -> SweepPoint:
        return SweepPoint(
            "m", "m_config_5", 8, count, "KIND_GPU", True, 1, concurrency, None,
            100.0 * concurrency * count, 1000.0 * concurrency, None, None,
        )  # fmt: skip

    curves = tuple(point(count, c) for count in (1, 2) for c in (1, 2))
    sweep = LoadSweep((), 2, 4, None, None, None, curves)
    fig = sweep_curves(sweep)
    assert fig is not None
    names = [t.name for t in fig.data]
    assert names == [
        "m_config_5, max batch 8, 1x KIND_GPU, dynamic (batch 1)",
        "m_config_5, max batch 8, 2x KIND_GPU, dynamic (batch 1)",
    ]
