"""The demo's three nights: the generator's workloads with changes planted between nights, in
dated folders as a fleet writes them, so the closed loop has something to close; beside them
each night, a served LLM's AIPerf export and /metrics scrapes (`synth_serving`).

Planted: the bert-base queueing burst at batch=8,seq=200 is fixed from the second night (its
action is verified); from the second night 8% of resnet50-int8 batch=4,hw=224's requests queue
8-20 ms behind a change (a tail regression whose rollback trigger, on the shape's specialise
action, holds on the second and third nights: rolled back on the third); bert-base's plan
is rebuilt before the third night with the batch=16,seq=64 prediction corrected (captured
2026-11-30 01:00 UTC: in force from that night on, not before); from the third night
llama-decode batch=3,ctx=1024 computes 23% slower under the same plan (cost-model drift).
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from mapreport.core.records import replace
from mapreport.demo import synth
from mapreport.demo.serving import generate_serving
from mapreport.demo.truth import WorkloadTruth

NIGHTS = (date(2026, 11, 28), date(2026, 11, 29), date(2026, 11, 30))
US_PER_DAY = 86_400_000_000
FIXED = ("bert-base", "batch=8,seq=200")
"""The shape whose queueing burst is gone from the second night."""
REGRESSED = ("resnet50-int8", "batch=4,hw=224")
"""The shape whose tail regresses from the second night."""
REGRESSION_BURST = 0.08
"""Its share of requests caught in a queueing burst from then on."""
REBUILT = ("bert-base", "batch=16,seq=64")
"""The shape whose prediction the rebuilt plan corrects."""
REBUILT_AT = "2026-11-30T01:00:00Z"
DRIFTED = ("llama-decode", "batch=3,ctx=1024")
"""The shape whose compute grows from the third night, under the same plan: its signed error
moves from +12% to -9%, a drift beyond tolerance while its APE stays within it."""
DRIFTED_FROM = 2
DRIFTED_STATIC_US = 14_450.0


def _changed(w: WorkloadTruth, shape: str, **changes: Any) -> WorkloadTruth:
    shapes = tuple(
        replace(s, **changes) if synth.shape_key(s.dims) == shape else s for s in w.shapes
    )
    return replace(w, shapes=shapes)


def night_truth(i: int) -> tuple[WorkloadTruth, ...]:
    """The workloads as they run on night `i` (0, 1, 2)."""
    out = []
    for w in synth.WORKLOADS:
        if i >= 1 and w.workload == FIXED[0]:
            w = _changed(w, FIXED[1], queue_burst=0.0)
        if i >= 1 and w.workload == REGRESSED[0]:
            w = _changed(w, REGRESSED[1], queue_burst=REGRESSION_BURST)
        if i >= DRIFTED_FROM and w.workload == DRIFTED[0]:
            w = _changed(w, DRIFTED[1], static_us=DRIFTED_STATIC_US)
        day = NIGHTS[i].isoformat()
        out.append(replace(w, runtime_env=dict(w.runtime_env, captured_at=f"{day}T02:00:00Z")))
    return tuple(out)


def rebuilt_plan() -> WorkloadTruth:
    """bert-base's plan as rebuilt before the third night: the batch=16,seq=64 bucket's
    prediction corrected (the shapes' true costs are the first night's)."""
    w = next(w for w in synth.WORKLOADS if w.workload == REBUILT[0])
    w = _changed(w, REBUILT[1], predicted_ratio=1.0)
    return replace(w, compile_env=dict(w.compile_env, captured_at=REBUILT_AT))


def runtime_name(w: WorkloadTruth) -> str:
    """The night's runtime file of a workload: its demo format, gzip compressed."""
    return w.runtime_file if w.runtime_file.endswith(".gz") else w.runtime_file + ".gz"


def generate_nights(out: Path, nights: Sequence[int] = (0, 1, 2)) -> list[Path]:
    """Write the demo's plans, quality records and the nights' runtime telemetry below `out`:
    plans/, quality.jsonl, nights/<date>/."""
    written = []
    (out / "plans").mkdir(parents=True, exist_ok=True)
    for w in synth.WORKLOADS:
        written.append(out / "plans" / f"{w.workload}.compile.jsonl")
        written[-1].write_bytes(synth.jsonl(synth.compile_records(w)))
    rebuilt = out / "plans" / f"{REBUILT[0]}.rebuilt-{REBUILT_AT[:10]}.compile.jsonl"
    rebuilt.write_bytes(synth.jsonl(synth.compile_records(rebuilt_plan())))
    written.append(rebuilt)
    written.append(out / "quality.jsonl")
    written[-1].write_bytes(synth.jsonl(iter(synth.QUALITY)))
    for i in nights:
        folder = out / "nights" / NIGHTS[i].isoformat()
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(synth.SEED + i)
        start = synth.WINDOW_START_US + i * US_PER_DAY
        for w in night_truth(i):
            records = synth.runtime_records(w, 1.0, rng, start)
            data = (
                synth.csv_rows(records).encode()
                if ".csv" in w.runtime_file
                else synth.jsonl(records)
            )
            path = folder / runtime_name(w)
            with gzip.GzipFile(path, "wb", mtime=0) as fh:
                fh.write(data)
            written.append(path)
        written += generate_serving(folder, i, NIGHTS[i])
    return written
