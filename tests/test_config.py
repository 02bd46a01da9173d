"""The run configuration: defaults, path resolution and errors that name the key."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from mapreport.core.errors import ConfigError
from mapreport.run.config import default_config, load_config
from tests.conftest import SAMPLE_DATA


def test_sample_config_loads_with_paths_relative_to_it() -> None:
    cfg = load_config(SAMPLE_DATA / "mapreport.toml")
    assert cfg.dataset == (SAMPLE_DATA.parent / "demo" / "dataset").resolve()
    assert cfg.thresholds.tolerance == 0.15
    assert cfg.thresholds.bootstrap_resamples >= 1000
    assert set(cfg.owners) == {
        "compiler_lead",
        "runtime_lead",
        "observability_engineer",
        "model_serving_architect",
    }
    assert set(cfg.signoffs) == {"compiler_lead", "runtime_lead"}
    files = cfg.source_files(date(2026, 11, 29))
    # 4 plan files, quality, the night's 3 runtime files, qwen-chat's 3 (AIPerf, /metrics, trace)
    assert len(files) == 11
    assert all(f.is_file() for f in files)
    assert {f.parent.name for f in files if ".runtime." in f.name} == {"2026-11-29"}
    assert (cfg.window, cfg.timezone, cfg.retain_days) == ("day", "UTC", None)
    bert = cfg.slice_config("bert-base", "")
    assert bert is not None
    assert bert.sla_p99_us == 12000
    assert cfg.slice_config("resnet50-int8", "canary") is None
    assert cfg.slice_config("nope", "") is None


def test_date_placeholders_fill_in_the_night(tmp_path: Path) -> None:
    night = tmp_path / "telemetry" / "2026" / "11" / "29"
    night.mkdir(parents=True)
    (night / "a.jsonl").write_text("{}")
    (tmp_path / "telemetry" / "2026-11-29.jsonl").write_text("{}")
    p = tmp_path / "c.toml"
    p.write_text(
        '[run]\nsources = ["telemetry/{yyyy}/{mm}/{dd}/*.jsonl", "telemetry/{date}.jsonl"]\n'
    )
    cfg = load_config(p)
    files = cfg.source_files(date(2026, 11, 29))
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "telemetry/2026/11/29/a.jsonl",
        "telemetry/2026-11-29.jsonl",
    ]
    with pytest.raises(ConfigError, match=r"matches no file"):
        cfg.source_files(date(2026, 11, 30))
    with pytest.raises(ConfigError, match=r"needs a night \(--date\)"):
        cfg.source_files()
    p.write_text('[run]\nsources = ["telemetry/{night}.jsonl"]\n')
    with pytest.raises(ConfigError, match=r"unknown placeholder \{night\} \(known: \{date\}"):
        load_config(p).source_files(date(2026, 11, 29))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('window = "5x"', r"run.window: window '5x': not day, all or a duration"),
        ('window = "0h"', r"run.window: .*longer than zero"),
        ('timezone = "Mars/Olympus"', r"run.timezone: unknown time zone 'Mars/Olympus'"),
        ("retain_days = 0", r"run.retain_days must be >= 1"),
    ],
)
def test_bad_window_keys_name_the_key(tmp_path: Path, line: str, message: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(f"[run]\n{line}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(p)


def test_workload_sla_applies_to_its_slices(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text('[[slices]]\nworkload = "w"\nsla_p99_us = 5\n')
    cfg = load_config(p)
    found = cfg.slice_config("w", "eu")
    assert found is not None
    assert found.sla_p99_us == 5


def test_defaults() -> None:
    cfg = default_config()
    assert cfg.thresholds.min_samples_p95 == 20
    assert cfg.thresholds.min_samples_p99 == 100
    assert cfg.owners == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[run]\nsources = 3\n", "run.sources"),
        ("[thresholds]\ntolerance = 'x'\n", "thresholds.tolerance"),
        ("[thresholds]\nbootstrap_resamples = 100\n", "bootstrap_resamples must be >= 1000"),
        ("[thresholds]\ntolerance = -1\n", "tolerance must be in"),
        ("[owners]\nceo = 'me'\n", "ceo"),
        ("[run]\non_error = 'ignore'\n", "on_error"),
        ("[[slices]]\nslice = 'x'\n", "workload"),
        ("not toml = = =", "invalid TOML"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert message in str(err.value)
    assert str(p) in str(err.value)


def test_source_glob_matching_nothing(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text('[run]\nsources = ["missing/*.jsonl"]\n')
    with pytest.raises(ConfigError, match="matches no file"):
        load_config(p).source_files()


@pytest.mark.parametrize(("glob", "key"), [("dataset/**/*", "dataset"), ("reports/*", "out")])
def test_sources_inside_the_dataset_or_out_are_refused(tmp_path: Path, glob: str, key: str) -> None:
    """A glob that reaches the dataset (or OUT) would feed the dataset its own rows again
    every night."""
    (tmp_path / "dataset" / "request").mkdir(parents=True)
    (tmp_path / "dataset" / "request" / "x.parquet").write_bytes(b"PAR1")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "findings.json").write_text("{}")
    (tmp_path / "a.jsonl").write_text("{}\n")
    p = tmp_path / "c.toml"
    p.write_text(f'[run]\nsources = ["*.jsonl", "{glob}"]\n')
    with pytest.raises(ConfigError, match=f"inside run.{key}"):
        load_config(p).source_files()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('name = "MI325X"', r"device.name 'MI325X' is not in the table .*memory_gbps"),
        ("matrix_tflops = { bf17 = 3.0 }", r"unknown data type 'bf17' \(known: fp64, fp32"),
        ("memory_gbps = -1", r"device.memory_gbps must be within \[10, 100,000\] GB/s, got -1$"),
        ("vector_tflops = inf", r"device.vector_tflops must be within \[0.1, 1,000\] TFLOP/s"),
        ("matrix_tflops = { bf16 = nan }", r"device.matrix_tflops.bf16 must be within \[1, "),
        # issue 49: 1e-300 GB/s put every op at 1e302 times its roof
        ("memory_gbps = 1e-300", r"device.memory_gbps must be within .* got 1e-300$"),
        ("memory_gbps = 3.35", r"device.memory_gbps .* got 3.35$"),  # an H100's, in TB/s
        ("memory_gbps = 1e6", r"device.memory_gbps must be within \[10, 100,000\] GB/s"),
        ("vector_tflops = 0.067", r"device.vector_tflops must be within \[0.1, 1,000\]"),
        (
            "matrix_tflops = { fp8 = 1e9 }",
            r"device.matrix_tflops.fp8 must be within \[1, 100,000\]",
        ),
        ("nam = 1", r"unknown field `nam`"),
    ],
)
def test_bad_device_keys_name_the_key(tmp_path: Path, body: str, message: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(f"[device]\n{body}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(p)


def test_an_implausible_device_figure_exits_4_with_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mapreport.app.cli import main

    p = tmp_path / "c.toml"
    p.write_text('[device]\nname = "H100"\nmemory_gbps = 1e-300\n')
    res = CliRunner().invoke(main, ["run", str(p), "--date", "2026-11-28", "-q"])
    assert res.exit_code == 4, res.output
    said = [line for line in res.output.splitlines() if line.strip()]
    assert len(said) == 1
    assert "device.memory_gbps must be within [10, 100,000] GB/s, got 1e-300" in said[0]


def test_the_edges_of_the_plausible_ranges_load(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text(
        "[device]\nname = 'x'\nmemory_gbps = 10\nvector_tflops = 1000\n"
        "matrix_tflops = { bf16 = 1, fp8 = 100000 }\n"
    )
    device = load_config(p).device
    assert device is not None
    assert (device.memory_gbps, device.vector_tflops) == (10.0, 1000.0)


def test_a_device_the_table_lacks_is_configured_by_its_figures(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text(
        '[device]\nname = "MI325X"\nmemory_gbps = 6000\nvector_tflops = 163.4\n'
        "matrix_tflops = { bf16 = 1307.4 }\n"
    )
    device = load_config(p).device
    assert device is not None
    assert (device.name, device.memory_gbps, dict(device.matrix_tflops)) == (
        "MI325X",
        6000.0,
        {"bf16": 1307.4},
    )


def test_jobs_auto_is_a_worker_per_core_as_memory_allows(tmp_path: Path) -> None:
    from mapreport.app.options import Jobs
    from mapreport.run.config import MAX_JOBS, WORKER_BYTES, auto_jobs

    n = auto_jobs()
    cores = len(os.sched_getaffinity(0))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert n == max(1, min(cores, memory // WORKER_BYTES, MAX_JOBS))
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\njobs = "auto"\n')
    assert load_config(cfg).jobs == n
    cfg.write_text('[run]\njobs = "many"\n')
    with pytest.raises(ConfigError, match=r"run\.jobs"):
        load_config(cfg)
    assert Jobs().convert("auto", None, None) == n
    assert Jobs().convert("3", None, None) == 3
