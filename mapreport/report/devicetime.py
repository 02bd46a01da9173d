"""The device's words, which the roofline and timeline sections, the summary and the packet
share: the device a roofline was held to (or the key to set when none is known), the records
that cannot be real, the timeline's activities, and where a trace's device time went."""

from __future__ import annotations

from mapreport.analysis.device.roofline import OpShape, Roofline
from mapreport.analysis.device.timeline import Timeline
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import Bound, DeviceActivity, OpKind, Suspect
from mapreport.report.filters import duration, pct

ACTIVITY_WORDS = {
    DeviceActivity.COMPUTE: "computing",
    DeviceActivity.COMMUNICATION: "communicating",
    DeviceActivity.MEMCPY: "copying memory",
    DeviceActivity.MEMSET: "setting memory",
    DeviceActivity.IDLE: "idle",
}
BOUND_WORDS = {Bound.COMPUTE: "compute", Bound.MEMORY: "memory"}
KIND_WORDS = {
    OpKind.GEMM: "GEMM",
    OpKind.CONV: "convolution",
    OpKind.ATTENTION: "attention",
    OpKind.ELEMENTWISE: "elementwise",
    OpKind.REDUCTION: "reduction",
    OpKind.NORM: "normalisation",
    OpKind.COPY: "copy",
}
SUSPECT_WORDS = {
    Suspect.FASTER_THAN_DEVICE: "ran faster than the device can do its work",
    Suspect.ABSURD_WORK: "has dims whose FLOPs or bytes no device could hold",
}
COUNTED_LOW = 0.5
"""Below this share of device time with counted work, the summary says how much is counted."""
DEVICE_KEY = "[device] name (or memory_gbps and vector_tflops) in the run configuration"
"""What to set for a roofline when the trace's device is not in the table."""


def device_line(rf: Roofline) -> str:
    """Which limits the roofline used and where they come from, or why there are none."""
    d = rf.device
    if d is None:
        seen = ", ".join(rf.device_names) or "no device name"
        return (
            f"No roofline: the trace's device ({seen}) is not in the table of known devices; "
            f"set {DEVICE_KEY} to add one. Times, counts, FLOPs and bytes stand without it."
        )
    peaks = ", ".join(f"{k} {v:,.0f}" for k, v in d.matrix_tflops.items())
    how = f", recognised by {d.recognised_by}" if d.recognised_by else ""
    return (
        f"{d.name}{how}: memory {d.memory_gbps:,.0f} GB/s, matrix TFLOP/s {peaks}, vector "
        f"{d.vector_tflops:,.1f} TFLOP/s (dense; {d.source})."
    )


def suspect_words(x: OpShape) -> str:
    """A suspect op x shape in one line: which calls, and why they cannot be real."""
    if x.suspect is None:
        return ""
    why = SUSPECT_WORDS[x.suspect]
    if x.suspect == Suspect.ABSURD_WORK:
        return f"{x.label}: {why} ({x.calls:,} call{'s' if x.calls != 1 else ''})"
    # a broken record's time can be far below what `duration` shows (0.001 us, not 0.00 us)
    fastest = duration(x.min_us) if x.min_us >= 0.01 else f"{x.min_us:.2g} µs"
    return (
        f"{x.label}: {x.suspect_calls:,} of {x.calls:,} calls {why} (fastest "
        f"{fastest}; it needs at least {duration(x.floor_us)})"
    )


def suspect_line(rf: Roofline) -> str:
    """How many op x shapes and calls are left out of the roofline as suspect ("" if none)."""
    rows = rf.suspects
    if not rows:
        return ""
    ops = f"{len(rows):,} op x shape{'s' if len(rows) != 1 else ''}"
    calls = f"{rf.suspect_calls:,} call{'s' if rf.suspect_calls != 1 else ''}"
    verb = "cannot be real and is" if len(rows) == 1 else "cannot be real and are"
    return f"{ops} ({calls}) {verb} left out of throughput and headroom"


def timeline_shares(t: Timeline | None) -> tuple[tuple[str, float], ...]:
    """The timeline's activities in words with their shares (those that took any time)."""
    if t is None:
        return ()
    return tuple((ACTIVITY_WORDS[a], v) for a, v in t.shares.items() if v > 0)


DEVICE_CATEGORIES = ("kernel", "memcpy", "memset")


def without_device(r: SliceResult) -> str | None:
    """What a profiler trace holds when no row is device time (None without a trace, or
    with device rows)."""
    rows = r.device.trace_rows
    if not rows or any(c in rows for c in DEVICE_CATEGORIES):
        return None
    held = ", ".join(f"{n:,} {c}" for c, n in list(rows.items())[:4])
    return (
        f"the profiler trace holds no kernel, copy or set ({held} rows): no device time to "
        "break down (a trace with CUDA or HIP activities adds it; other devices' event "
        "categories are kept, not read as device time)"
    )


def _no_roofline(rf: Roofline, x: OpShape) -> str:
    """Why an op x shape has no roofline figure, in a few words."""
    if x.suspect is not None:
        return "its records are suspect"
    return DEVICE_KEY if rf.device is None else "its work is not counted"


def summary(r: SliceResult) -> str | None:
    """Where a trace's device time went, in one sentence: busy and idle, and the op x shape
    with the most time above its roofline (or the most time, without a roofline)."""
    rf, t = r.device.roofline, r.device.timeline
    if rf is None:
        return without_device(r)
    parts = []
    if t is not None:
        idle = t.shares[DeviceActivity.IDLE]
        parts.append(
            f"the device was idle {pct(idle)} of its {duration(t.span_us)} span "
            f"(computing {pct(t.shares[DeviceActivity.COMPUTE])}"
            + (
                f", communicating {pct(t.shares[DeviceActivity.COMMUNICATION])} of which "
                f"{pct(t.exposed_communication)} exposed"
                if t.shares[DeviceActivity.COMMUNICATION]
                else ""
            )
            + ")"
        )
    top = rf.rows[0] if rf.rows else None
    if top is not None and top.headroom_us is not None and top.roofline_pct is not None:
        bound = f"{BOUND_WORDS[top.bound]}-bound " if top.bound else ""
        parts.append(
            f"the most time above the roofline is {top.label}: {pct(top.roofline_pct)} of "
            f"its {bound}roofline over {top.calls:,} calls, {duration(top.headroom_us)} above "
            f"it ({pct(top.headroom_share)} of device time)"
        )
    elif top is not None:
        parts.append(
            f"the largest op is {top.label} ({pct(top.gpu_share)} of device time; no "
            f"roofline: {_no_roofline(rf, top)})"
        )
    if rf.suspects:
        parts.append(suspect_line(rf))
    if rf.counted_share < COUNTED_LOW and top is not None and top.roofline_pct is not None:
        parts.append(
            f"FLOPs and bytes are counted for {pct(rf.counted_share)} of device time (the rest "
            "ran in ops the roofline table does not count, or in kernels no recorded op "
            "launched)"
        )
    g = r.device.graphs
    if g is not None and g.launches:
        sizes = ", ".join(f"{b.size:,}" for b in g.buckets if b.size is not None and b.steps)
        parts.append(
            f"{g.launches:,} graph launches replayed {duration(g.graph_us)} over "
            f"{len(g.steps):,} steps at captured size {sizes or 'none'}, padding "
            f"{pct(g.waste_share)} of it"
        )
    return "; ".join(parts) if parts else None
