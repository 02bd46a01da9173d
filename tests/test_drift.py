"""Cost-model drift across nights (analysis/drift.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.serving.drift import FIRST_NIGHTS, shape_drift
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.core.records import replace

GOLDEN = Path(__file__).parent / "golden" / "demo" / "expected"


def night(day: str, e: float, version: str = "v1") -> dict[str, Any]:
    return {
        "shape": "s",
        "plan_id": "p",
        "plan_version": version,
        "signed_error": e,
        "signed_error_lo": e - 0.02,
        "signed_error_hi": e + 0.02,
        "run_date": day,
    }


def tonight(demo_shape: ShapeMetrics, e: float, ci: tuple[float, float]) -> ShapeMetrics:
    acc = replace(demo_shape.accuracy, signed_error=e, signed_error_ci=Interval(*ci))
    return replace(demo_shape, shape="s", plan_id="p", accuracy=acc)


def test_drift_needs_the_move_and_its_interval_beyond_tolerance(demo_results: Any) -> None:
    """+12% on the plan's first nights, -9% tonight with its CI below the band: drifting; the
    same move with a CI reaching the band, a move within tolerance, a new plan version, or a
    first night: not."""
    m = next(s for s in demo_results["bert-base"].shapes if s.accuracy.signed_error is not None)
    th = Thresholds()
    stored = [night("2026-11-28", 0.12), night("2026-11-29", 0.12)]
    d = shape_drift(tonight(m, -0.09, (-0.11, -0.06)), "v1", stored, "2026-11-30", th)
    assert d is not None
    assert d.drifting
    assert d.baseline == 0.12
    assert d.drift is not None
    assert abs(d.drift + 0.21) < 1e-12
    assert [p.run_date for p in d.points] == ["2026-11-28", "2026-11-29", "2026-11-30"]
    wide = shape_drift(tonight(m, -0.09, (-0.2, -0.02)), "v1", stored, "2026-11-30", th)
    assert wide is not None
    assert not wide.drifting  # its CI reaches 12% - 15%
    small = shape_drift(tonight(m, 0.0, (-0.01, 0.01)), "v1", stored, "2026-11-30", th)
    assert small is not None
    assert not small.drifting
    rebuilt = shape_drift(tonight(m, -0.09, (-0.11, -0.06)), "v2", stored, "2026-11-30", th)
    assert rebuilt is not None
    assert (rebuilt.baseline, rebuilt.drifting) == (None, False)
    many = [night(f"2026-11-{d:02d}", 0.12 if d < 20 else -0.5) for d in range(10, 29)]
    later = shape_drift(tonight(m, -0.09, (-0.11, -0.06)), "v1", many, "2026-11-30", th)
    assert later is not None
    assert later.baseline_nights == FIRST_NIGHTS
    assert later.baseline == 0.12  # the plan's first nights, not its latest


def test_the_demo_third_night_finds_the_planted_drift_only() -> None:
    """llama-decode batch=3,ctx=1024 computes 23% slower on the third night under the same plan:
    its drift is found, and its one action is the regression's (issue 50: one cause has one
    owner, and no action re-fits the cost model to a regressed latency); bert-base
    batch=16,seq=64's error changes more, but its plan was rebuilt (a new version has no
    earlier nights to drift from)."""
    llama = json.loads((GOLDEN / "llama-decode__chat.json").read_text())
    drifting = [d["shape"] for d in llama["drift"] if d["drifting"]]
    assert drifting == ["batch=3,ctx=1024"]
    assert not [a for a in llama["actions"] if a["class"] == "cost_model_drift"]
    (a,) = [a for a in llama["actions"] if a["shape"] == "batch=3,ctx=1024"]
    assert a["class"] == "latency_regression"
    assert a["owner_role"] == "runtime_lead"
    bert = json.loads((GOLDEN / "bert-base.json").read_text())
    rebuilt = next(d for d in bert["drift"] if d["shape"] == "batch=16,seq=64")
    assert len(rebuilt["points"]) == 1
    assert rebuilt["baseline"] is None
    assert not any(a["class"] == "cost_model_drift" for a in bert["actions"])
