"""What to profile next (analysis/observe.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mapreport.analysis.actions.observe import MOST, profile_next
from mapreport.analysis.base.common import Evidence, Interval, Thresholds
from mapreport.core.kinds import ClassBasis, Collect
from mapreport.core.records import replace

GOLDEN = Path(__file__).parent / "golden"


def test_thin_findings_that_matter_are_listed_by_value(demo_results: Any) -> None:
    """Too few requests for p95, an undecided tail (its CI width ranks it), too few static
    requests; a shape with too little traffic is left out; at most MOST items."""
    th = Thresholds()
    base = next(
        m for m in demo_results["bert-base"].shapes if m.tail is not None and m.tail.material
    )
    assert base.tail is not None
    few = replace(base, shape="few", n=12, traffic_share=0.2)
    undecided = replace(
        base,
        shape="undecided",
        traffic_share=0.3,
        n=500,
        tail=replace(base.tail, unmeasured=()),
        diagnosis=replace(
            base.diagnosis,
            basis=ClassBasis.TIE,
            evidence=Evidence("tail_share.queueing", 0.5, 9, Interval(0.2, 0.8), ()),
        ),
    )
    rare = replace(base, shape="rare", n=3, traffic_share=0.001)
    got = [(i.shape, i.collect, i.need) for i in profile_next([few, undecided, rare], th)]
    assert got == [
        ("few", Collect.MORE_REQUESTS, th.min_samples_p95 - 12),
        ("undecided", Collect.PROFILER_TRACE, None),
    ]
    many = [replace(few, shape=f"s{i}") for i in range(MOST + 3)]
    assert len(profile_next(many, th)) == MOST


def test_the_demo_and_the_real_case_list_what_to_collect() -> None:
    """The demo's third night lists the shapes short of p99 evidence; the real case read from
    its profiler trace alone asks for the requests' arrivals, once for the slice."""
    resnet = json.loads((GOLDEN / "demo" / "expected" / "resnet50-int8__prod.json").read_text())
    assert [(i["shape"], i["collect"], i["need"]) for i in resnet["profile_next"]] == [
        ("batch=32,hw=224", "more_requests", 40)
    ]
    traces = GOLDEN / "torch-serving-traces" / "expected" / "torch-serving.json"
    items = json.loads(traces.read_text())["profile_next"]
    assert [(i["shape"], i["collect"]) for i in items] == [("*", "arrivals")]
