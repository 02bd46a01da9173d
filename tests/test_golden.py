"""Golden cases: findings.json of known inputs compared within tolerance (never HTML or PDF
bytes). Regenerate with MAPREPORT_UPDATE_GOLDEN=1 after an intended change, and review the diff.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from mapreport import synth
from tests.conftest import SAMPLE_DATA

GOLDEN = Path(__file__).parent / "golden" / "demo" / "expected"
IGNORED = {"generated_at", "generator", "path", "run_id", "run_date", "first_run_id"}
"""Keys that legitimately differ between runs (time, version, absolute input paths)."""
REL, ABS, CI_ABS = 1e-6, 1e-9, 0.005
"""Bootstrap intervals get an absolute tolerance: they depend on numpy's random streams."""


def compare(got: Any, want: Any, where: str = "$") -> list[str]:
    """Differences between two findings documents beyond the tolerances."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{where}: expected an object"]
        diffs = []
        for k in sorted(set(want) | set(got)):
            if k in IGNORED:
                continue
            if k not in got or k not in want:
                diffs.append(f"{where}.{k}: {'missing' if k not in got else 'unexpected'}")
                continue
            diffs += compare(got[k], want[k], f"{where}.{k}")
        return diffs
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{where}: expected a list of {len(want)}"]
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in compare(g, w, f"{where}[{i}]")
        ]
    if isinstance(want, float) and isinstance(got, int | float) and not isinstance(got, bool):
        tol = CI_ABS if "_ci" in where else max(ABS, REL * abs(want))
        return [] if math.isclose(got, want, abs_tol=tol) else [f"{where}: {got} != {want}"]
    return [] if got == want else [f"{where}: {got!r} != {want!r}"]


def test_committed_sample_data_is_the_generator_output(sample_dir: Path) -> None:
    for f in sorted(sample_dir.iterdir()):
        committed = SAMPLE_DATA / f.name
        assert committed.read_bytes() == f.read_bytes(), f"{f.name}: run `make sample`"
    names = {w.runtime_file for w in synth.WORKLOADS}
    assert names <= {p.name for p in SAMPLE_DATA.iterdir()}


@pytest.mark.parametrize("name", ["bert-base", "resnet50-int8/prod", "llama-decode/chat"])
def test_findings_match_golden(demo_reports: Path, name: str) -> None:
    got = json.loads((demo_reports / name / "findings.json").read_text())
    expected = GOLDEN / (name.replace("/", "__") + ".json")
    if os.environ.get("MAPREPORT_UPDATE_GOLDEN"):
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(expected.read_text())
    diffs = compare(got, want)
    assert diffs == [], "\n".join(diffs[:20])


def test_compare_tolerances() -> None:
    assert (
        compare(
            {"a": 1.0, "gain_p50_ci": [0.1, 0.2]}, {"a": 1.0 + 1e-9, "gain_p50_ci": [0.102, 0.2]}
        )
        == []
    )
    assert compare({"a": 1.1}, {"a": 1.0}) == ["$.a: 1.1 != 1.0"]
    assert compare({"a": [1]}, {"a": [1, 2]}) == ["$.a: expected a list of 2"]
