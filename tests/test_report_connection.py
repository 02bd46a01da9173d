"""A report's connections: a dataset of one workload is analysed on the connection its slices
were listed on (`pipeline.SliceReporter.connection`), with the same findings; a dataset of
several gets one per workload."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mapreport.core.connection import Connection
from mapreport.core.window import EVERYTHING, Window
from mapreport.dataset.store import Dataset
from mapreport.engine.engines import DuckDBEngine
from mapreport.run.config import default_config
from mapreport.run.ingesting import ingest
from mapreport.run.reporting import report


class Counting(DuckDBEngine):
    """DuckDB, counting the connections it opens by the workload each is over."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str | None] = []

    def connect(self, ds: Dataset, workload: str | None, window: Window = EVERYTHING) -> Connection:
        self.opened.append(workload)
        return super().connect(ds, workload, window)


def _findings(out: Path) -> str:
    """The findings.json files below `out`, their run ids and times masked."""
    texts = []
    for f in sorted(out.rglob("findings.json")):
        doc = json.loads(f.read_text())
        text = f.read_text().replace(doc["generated_at"], "<made>")
        texts.append(re.sub(r"\d{8}T\d{6}Z-[0-9a-f]+-\d+", "<run>", text))
    return "\n".join(texts)


@pytest.mark.slow
def test_one_workload_is_analysed_on_the_listing_connection(
    sample_dir: Path, tmp_path: Path
) -> None:
    ds = tmp_path / "ds"
    ingest(ds, sorted(sample_dir.glob("bert-base.*")))
    engine = Counting()
    outcomes = report(ds, tmp_path / "one", default_config(), pdf=False, engine=engine)
    assert [o.error for o in outcomes] == [None]
    assert engine.opened == [None]  # listed and analysed on one connection
    # the workload's own connection gives the same report
    only = Counting()
    config = default_config()
    report(ds, tmp_path / "own", config, only="bert-base", pdf=False, engine=only)
    assert only.opened[0] == "bert-base"  # (the index lists every slice on its own)
    assert _findings(tmp_path / "one") == _findings(tmp_path / "own").replace(
        str(tmp_path / "own"), str(tmp_path / "one")
    )


@pytest.mark.slow
def test_each_of_several_workloads_gets_its_own_connection(
    demo_dataset: Path, tmp_path: Path
) -> None:
    engine = Counting()
    outcomes = report(demo_dataset, tmp_path / "out", default_config(), pdf=False, engine=engine)
    workloads = sorted({o.workload for o in outcomes})
    assert len(workloads) > 1
    assert engine.opened[0] is None
    assert sorted(w for w in engine.opened[1:] if w is not None) == workloads
