"""The MLPerf system-description reader on three published submissions' systems: the
environment row against the file; the workload it joins; broken descriptions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from tests.conftest import REALDATA

MLPERF = REALDATA / "serving" / "mlperf"
SYSTEMS = sorted(MLPERF.glob("*_system.json"))
pytestmark = pytest.mark.skipif(not MLPERF.is_dir(), reason="../shared/realdata is missing")


def _env(tmp_path: Path, path: Path, **kw: object) -> tuple[object, ...]:
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, path, **kw)  # type: ignore[arg-type]
    rows = (
        ds.connect()
        .execute("SELECT side, hardware, runtime, driver, host, workload, extra FROM environment")
        .fetchall()
    )
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize("path", SYSTEMS, ids=lambda p: p.stem)
def test_system(tmp_path: Path, path: Path) -> None:
    assert detect(path).name == "mlperf-system"
    doc = json.loads(path.read_text())
    side, hardware, runtime, _, host, workload, extra = _env(tmp_path, path)
    assert side == "runtime"
    assert doc["accelerator_model_name"] in str(hardware)
    assert str(hardware).startswith(f"{doc['accelerators_per_node']} x ")
    assert runtime == doc["framework"]
    assert host == doc["system_name"].strip()
    assert workload is None
    assert json.loads(str(extra))["submitter"] == doc["submitter"]


def test_gb200_driver_and_nodes(tmp_path: Path) -> None:
    row = _env(tmp_path, MLPERF / "nvidia_gb200_system.json", hints={"workload": "llama3.1-405b"})
    assert row[1] == "4 x NVIDIA GB200 x 18 nodes"
    assert row[3] == "570.148"
    assert row[5] == "llama3.1-405b"


def test_broken_description(tmp_path: Path) -> None:
    doc = json.loads(SYSTEMS[0].read_text())
    doc["accelerator_model_name"] = ""
    path = tmp_path / "system.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as e:
        _env(tmp_path, path, fmt="mlperf-system")
    assert e.value.field == "accelerator_model_name"
