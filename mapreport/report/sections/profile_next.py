"""What to profile next: the collections that would settle thin findings on shapes that
matter, most valuable first, each with why."""

from __future__ import annotations

import msgspec

from mapreport.analysis.actions.actions import SLICE_WIDE
from mapreport.analysis.actions.observe import MATERIAL_TRAFFIC, ProfileItem
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import Collect
from mapreport.report.filters import pct
from mapreport.report.sections.unit import Facts, Section, same

COLLECT: dict[Collect, str] = {
    Collect.MORE_REQUESTS: "{need} more requests: its {q} needs {min}, it has {n}",
    Collect.PROFILER_TRACE: "a profiler trace of its tail requests: the tail split is "
    "undecided ({basis}; CI width {width})",
    Collect.CORE_TELEMETRY: "the core of each request: core imbalance cannot be measured",
    Collect.MEMORY: "each request's peak memory: memory bursts cannot be measured",
    Collect.SERVER_TIMING: "the server's queue and compute time per request (a Triton trace "
    "or OpenTelemetry spans, beside the client-side export): queueing, blocking and fallback "
    "cannot be told apart from client-side latency alone",
    Collect.ARRIVALS: "each request's arrival (a native request log, or the arrival in the "
    "request annotation): latency and queue wait are not measured",
    Collect.STATIC_REQUESTS: "{need} more requests on the static plan: its accuracy needs {min}",
}
"""What to collect next, and why (the profiling list)."""


def collect(i: ProfileItem, r: SliceResult) -> str:
    """One item of the profiling list in words."""
    th = r.thresholds
    if i.shape == SLICE_WIDE:
        return COLLECT[i.collect]
    m = next(x for x in r.shapes if x.shape == i.shape)
    p99 = m.n >= th.min_samples_p95
    least = th.min_samples if i.collect == Collect.STATIC_REQUESTS else None
    return COLLECT[i.collect].format(
        need=i.need,
        q="p99" if p99 else "p95",
        min=least or (th.min_samples_p99 if p99 else th.min_samples_p95),
        n=m.n,
        basis=m.diagnosis.basis.value.replace("_", " "),
        width=pct(i.ci_width, 0),
    )


class ProfileView(msgspec.Struct, frozen=True):
    """The profiling list with each item's words."""

    items: tuple[tuple[ProfileItem, str], ...]
    material_traffic: float
    """The traffic share from which a shape's thin finding matters."""


class ProfileLine(msgspec.Struct):
    """One item of findings.json `profile_next` (`ProfileItem`, with its words)."""

    shape: str
    collect: Collect
    traffic_share: float
    need: int | None
    ci_width: float | None
    score: float
    text: str


class Fragment(msgspec.Struct):
    """findings.json `profile_next`."""

    profile_next: tuple[ProfileLine, ...]


def read(f: Facts) -> ProfileView:
    """The profiling list, each item worded from its shape's figures."""
    r = f.r
    return ProfileView(tuple((i, collect(i, r)) for i in r.profile_next), MATERIAL_TRAFFIC)


def fragment(v: ProfileView) -> Fragment:
    """Each item with its words."""
    return Fragment(
        tuple(
            ProfileLine(i.shape, i.collect, i.traffic_share, i.need, i.ci_width, i.score, text)
            for i, text in v.items
        )
    )


SECTION = Section("profile_next", "What to profile next", read, same, fragment, needs_requests=True)
