"""What the demo generators plant: the truth of each workload and shape, the memory model, and
one native request record (shared by `synth` and the planted blocking of `blocking`)."""

from __future__ import annotations

from typing import Any

import msgspec

MEM_PER_US = 4096
"""Peak bytes per microsecond of static compute: the generator's stand-in memory model."""


class ShapeTruth(msgspec.Struct, frozen=True):
    """One runtime shape and the effects planted on it."""

    dims: dict[str, int]
    requests: int
    static_us: float
    predicted_ratio: float = 1.0
    """predicted / measured static compute: 1.0 is a perfect cost model."""
    static_share: float = 1.0
    adapted_share: float = 0.0
    fallback_share: float = 0.0
    adapted_gain: float = 0.0
    """1 - adapted / baseline median compute."""
    fallback_slowdown: float = 1.8
    adaptation_cost_us: float = 0.0
    """Summed duration of the adaptation events for this shape."""
    expect: str = ""
    """The accuracy-versus-gain decision the analysis must reach."""
    queue_burst: float = 0.0
    """Share of requests caught in a queueing burst (8-20 ms extra queue wait)."""
    slow_core: float = 1.0
    """Compute factor of this shape's requests on core 3 (a slow or contended core)."""
    mem_burst: float = 0.0
    """Share of requests whose peak memory exceeds the bucket budget (and run 1.9x slower)."""
    unfused_share: float = 0.0
    """Share of requests served by the workload's unfused plan (fusion off, 12% slower, 10%
    less peak memory): what the fusion-effect comparison needs."""
    expect_class: str = "none"
    """The bottleneck class the analysis must reach."""
    actions: tuple[str, ...] = ()
    """The action kinds the analysis must propose for this shape, and no others."""
    blocking: str = ""
    """Its role in the planted head-of-line blocking (`synth_blocking`): trigger, victim or
    none (""); the two planted shapes are drawn by that module."""


class WorkloadTruth(msgspec.Struct, frozen=True):
    """One workload slice: its plan, buckets, shapes, environment and precision."""

    workload: str
    slice: str
    plan_id: str
    precision: str
    buckets: tuple[dict[str, Any], ...]
    shapes: tuple[ShapeTruth, ...]
    compile_env: dict[str, str]
    runtime_env: dict[str, str]
    runtime_file: str
    ops: tuple[tuple[str, float], ...] = (("model", 1.0),)
    totals: bool = True
    """Write a `__total__` line per bucket; else the prediction is the sum of its ops."""
    synthetic_only: tuple[dict[str, Any], ...] = ()
    unfused_plan: str = ""
    """A second build of the plan with operator fusion off, serving `unfused_share` requests."""
    slice_actions: tuple[str, ...] = ()
    """Slice-wide action kinds the analysis must propose (environment, telemetry, quality)."""


def request_row(
    w: WorkloadTruth,
    request_id: str,
    s: ShapeTruth,
    times: tuple[float, float, float, float],
    plan_id: str,
    variant: str,
    core: int,
    stream: str,
    mem: int,
    status: str,
) -> dict[str, Any]:
    """One native request record; `times` are arrival, queue start, compute start and end."""
    arrival, queued, start, end = (round(float(t), 1) for t in times)
    return {
        "workload": w.workload,
        **({"slice": w.slice} if w.slice else {}),
        "request_id": request_id,
        "shape": s.dims,
        "arrival_us": arrival,
        "queue_start_us": queued,
        "compute_start_us": start,
        "compute_end_us": end,
        "plan_id": plan_id,
        "plan_variant": variant,
        "core": core,
        "stream": stream,
        "batch_size": s.dims["batch"],
        "mem_peak_bytes": mem,
        "precision": w.precision,
        "status": status,
    }
