"""Evidence packs and `mapreport explain` (mapreport/evidence.py); every golden case's packs
are rerun in tests/test_golden.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from mapreport.cli import main
from mapreport.evidence import explain


def test_explain_says_when_a_figure_is_not_reproduced(demo_reports: Path, tmp_path: Path) -> None:
    """A pack whose stated figure the dataset no longer gives is reported as not reproduced
    (the CLI exits 5); an unknown id is a usage error naming where packs are."""
    dataset = tmp_path / "dataset"
    shutil.copytree(demo_reports.parent / "dataset", dataset)
    doc = json.loads((demo_reports / "bert-base" / "findings.json").read_text())
    pid = doc["actions"][0]["id"]
    spec_path = dataset / "evidence" / f"{pid}.json"
    spec = json.loads(spec_path.read_text())
    spec["figure"] = (spec["figure"] or 0.0) + 0.01
    spec_path.write_text(json.dumps(spec))
    lines, ok = explain(dataset, pid)
    assert not ok
    assert lines[2].startswith("NOT reproduced")
    res = CliRunner().invoke(main, ["explain", pid, "--dataset", str(dataset)])
    assert res.exit_code == 5, res.output
    res = CliRunner().invoke(main, ["explain", "0123456789ab", "--dataset", str(dataset)])
    assert res.exit_code == 2
    assert "no evidence pack '0123456789ab'" in res.output
