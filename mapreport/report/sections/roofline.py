"""Device time per op and shape: each op x input shape of a profiler trace against the
device's roofline, the device it was held to, and the records that cannot be real."""

from __future__ import annotations

import msgspec

from mapreport.analysis.device.roofline import OpShape, Roofline, ShapeHeadroom
from mapreport.core.kinds import JudgementFamily
from mapreport.report.devicetime import (
    BOUND_WORDS,
    KIND_WORDS,
    device_line,
    suspect_line,
    suspect_words,
)
from mapreport.report.sections.unit import Facts, Section

SHOWN_ROWS = 25
"""Op x shape rows the report prints (findings.json lists every one)."""
SHOWN_SUSPECTS = 10
"""Suspect op x shapes the roofline section names (findings.json lists every one)."""


class OpLine(msgspec.Struct, frozen=True):
    """One printed op x shape row."""

    row: OpShape
    label: str
    kind: str
    bound: str


class RooflineView(msgspec.Struct, frozen=True):
    """The op x shape table, the device it was held to, and the suspect records."""

    rf: Roofline
    lines: tuple[OpLine, ...]
    rows_total: int
    device_line: str
    suspects: tuple[str, ...] = ()
    """One line per suspect op x shape (at most SHOWN_SUSPECTS): what it is and why."""
    suspect_line: str = ""
    """How many op x shapes and calls were left out as suspect ("" when none)."""


class Op(msgspec.Struct):
    """One op x shape of findings.json `ops` (`OpShape`; `count` is its calls)."""

    op: str
    shape: str
    label: str
    dtype: str | None
    category: str
    kind: str | None
    count: int
    kernels: int
    total_us: float
    mean_us: float
    p50_us: float
    p95_us: float
    gpu_share: float
    flops: float | None
    bytes: float | None
    gemm_mnk: tuple[int, int, int] | None
    gemm_batch: int | None
    tflops: float | None
    gbps: float | None
    intensity: float | None
    bound: str | None
    roofline_pct: float | None
    roof_us: float | None
    headroom_us: float | None
    headroom_share: float | None
    min_us: float
    floor_us: float | None
    suspect: str | None
    suspect_calls: int


class Limits(msgspec.Struct):
    """The device limits the roofline used (`DeviceLimits`)."""

    name: str
    memory_gbps: float
    vector_tflops: float
    matrix_tflops: dict[str, float]
    source: str
    recognised_by: str


class Device(msgspec.Struct):
    """findings.json `device`: the device the trace ran on and its time."""

    limits: Limits | None
    names: tuple[str, ...]
    text: str
    gpu_time_us: float
    headroom_us: float
    counted_share: float
    by_request_shape: tuple[ShapeHeadroom, ...]
    suspect_ops: int
    suspect_calls: int


class Fragment(msgspec.Struct):
    """findings.json `ops` (empty without device time) and `device` (null without it)."""

    ops: tuple[Op, ...]
    device: Device | None


def read(f: Facts) -> Roofline | None:
    """The trace's device time per op x shape."""
    return f.r.device.roofline


def view(rf: Roofline | None) -> RooflineView | None:
    """The rows with the most headroom, in words; None without device time."""
    if rf is None:
        return None
    lines = tuple(
        OpLine(
            x,
            x.label,
            KIND_WORDS[x.kind] if x.kind else x.category,
            BOUND_WORDS[x.bound] if x.bound else "–",
        )
        for x in rf.top(SHOWN_ROWS)
    )
    return RooflineView(
        rf,
        lines,
        len(rf.rows),
        device_line(rf),
        tuple(suspect_words(x) for x in rf.suspects[:SHOWN_SUSPECTS]),
        suspect_line(rf),
    )


def _op(x: OpShape) -> Op:
    return Op(
        op=x.op,
        shape=x.shape,
        label=x.label,
        dtype=x.dtype,
        category=x.category,
        kind=x.kind.value if x.kind else None,
        count=x.calls,
        kernels=x.kernels,
        total_us=x.total_us,
        mean_us=x.mean_us,
        p50_us=x.p50_us,
        p95_us=x.p95_us,
        gpu_share=x.gpu_share,
        flops=x.flops,
        bytes=x.bytes,
        gemm_mnk=x.gemm,
        gemm_batch=x.gemm_batch if x.gemm else None,
        tflops=x.tflops,
        gbps=x.gbps,
        intensity=x.intensity,
        bound=x.bound.value if x.bound else None,
        roofline_pct=x.roofline_pct,
        roof_us=x.roof_us,
        headroom_us=x.headroom_us,
        headroom_share=x.headroom_share,
        min_us=x.min_us,
        floor_us=x.floor_us,
        suspect=x.suspect.value if x.suspect else None,
        suspect_calls=x.suspect_calls,
    )


def fragment(v: RooflineView | None) -> Fragment:
    """Every op x shape, and the device with its limits and time."""
    if v is None:
        return Fragment((), None)
    rf, d = v.rf, v.rf.device
    limits = None
    if d is not None:
        matrix = {str(k): x for k, x in d.matrix_tflops.items()}
        limits = Limits(d.name, d.memory_gbps, d.vector_tflops, matrix, d.source, d.recognised_by)
    device = Device(
        limits=limits,
        names=rf.device_names,
        text=v.device_line,
        gpu_time_us=rf.gpu_time_us,
        headroom_us=rf.headroom_us,
        counted_share=rf.counted_share,
        by_request_shape=rf.by_request_shape,
        suspect_ops=len(rf.suspects),
        suspect_calls=rf.suspect_calls,
    )
    return Fragment(tuple(_op(x) for x in rf.rows), device)


SECTION = Section(
    "roofline",
    "Device time per op and shape",
    read,
    view,
    fragment,
    has=lambda v: v is not None,
    missing="no device time; a PyTorch profiler trace with CUDA or HIP activities adds it "
    "(record_shapes on gives each op its input shapes, FLOPs and bytes)",
    family=JudgementFamily.ROOFLINE,
)
