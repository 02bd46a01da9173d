"""Device timeline: where the devices' span went (computing, communicating, copying, idle),
and the communication no computation hid (a profiler trace with device activities)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.device.timeline import Timeline
from mapreport.core.kinds import DeviceActivity, JudgementFamily
from mapreport.report.devicetime import timeline_shares
from mapreport.report.sections.unit import Facts, Section


class TimelineView(msgspec.Struct, frozen=True):
    """The timeline and its activities in words with their shares (those seen)."""

    t: Timeline
    shares: tuple[tuple[str, float], ...]


class Activities(msgspec.Struct):
    """findings.json `timeline`: shares of the devices' span per activity."""

    devices: int
    span_us: float
    shares: dict[DeviceActivity, float]
    exposed_communication: float
    kernels: int
    median_kernel_us: float | None


class Fragment(msgspec.Struct):
    """findings.json `timeline` (null without device time)."""

    timeline: Activities | None


def read(f: Facts) -> Timeline | None:
    """The devices' timeline."""
    return f.r.device.timeline


def view(t: Timeline | None) -> TimelineView | None:
    """The activities in words; None without a timeline."""
    return None if t is None else TimelineView(t, timeline_shares(t))


def fragment(v: TimelineView | None) -> Fragment:
    """The shares of the span."""
    if v is None:
        return Fragment(None)
    t = v.t
    return Fragment(
        Activities(
            t.devices, t.span_us, t.shares, t.exposed_communication, t.kernels, t.median_kernel_us
        )
    )


SECTION = Section(
    "timeline",
    "Device timeline",
    read,
    view,
    fragment,
    has=lambda v: v is not None,
    missing="no device time; a PyTorch profiler trace with CUDA or HIP activities adds it "
    "(record_shapes on gives each op its input shapes, FLOPs and bytes)",
    family=JudgementFamily.DEVICE,
)
