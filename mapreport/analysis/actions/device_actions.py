"""The actions a profiler trace's device time calls for, with or without a compile plan: an op x
shape far above its roofline bound (the compiler's: fusion, layout, kernel choice) and a device
that sat idle (the runtime's: launch and scheduling)."""

from __future__ import annotations

from mapreport.analysis.actions.action_params import ActionParams, Impact, owners
from mapreport.analysis.actions.actions import (
    NO_ROLLBACK,
    ROLLBACK_MARGIN,
    ROLLBACK_RUNS,
    SLICE_WIDE,
    Action,
    RollbackTrigger,
    Scope,
    ValidationRow,
    make_action,
)
from mapreport.analysis.base.common import Evidence, Interval, Thresholds
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.device.graphs import Graphs
from mapreport.analysis.device.roofline import HeadroomFinding, OpShape, Roofline
from mapreport.analysis.device.timeline import Timeline, idle_interval
from mapreport.core.kinds import (
    ActionKind,
    Bound,
    Criterion,
    DeviceActivity,
    FigureUnit,
    HeadroomRemedy,
    ImpactUnit,
    JudgementFamily,
    OwnerRole,
    Status,
    StatusReason,
)
from mapreport.core.records import replace


class Headroom(ActionParams, frozen=True):
    """An op x shape far from its roofline: what it is, how far, and how much time that is."""

    OWNERS = owners({ActionKind.ROOFLINE_HEADROOM: OwnerRole.COMPILER_LEAD})

    op: str
    label: str
    kind: str | None
    bound: str | None
    roofline_pct: float | None
    calls: int
    mean_us: float
    roof_us: float | None
    headroom_us: float | None
    share: float | None
    """Headroom over the trace's device time."""
    remedy: HeadroomRemedy

    def impact(self) -> Impact:
        """The time above the roofline bound, and its share of the trace's device time."""
        return Impact(ImpactUnit.DEVICE_US, self.headroom_us, self.share)


class Idle(ActionParams, frozen=True):
    """The device idle for a material share of its span."""

    OWNERS = owners({ActionKind.DEVICE_IDLE: OwnerRole.RUNTIME_LEAD})

    idle_share: float
    span_us: float
    kernels: int
    median_kernel_us: float | None
    launch_bound: bool
    """Kernels too short to hide their launch: the host cannot keep the device fed."""
    replays_graphs: bool = False
    """The steps already replay CUDA/HIP graphs: the gaps are between them."""
    eager_steps: int = 0
    """Steps of a graph-replaying trace that no captured size held (they ran eagerly)."""

    def impact(self) -> Impact:
        """The share of the devices' span idle."""
        return Impact(ImpactUnit.DEVICE_SHARE, self.idle_share)


class Padding(ActionParams, frozen=True):
    """Steps padded up to captured graph sizes: the waste, and the sizes that would cut it."""

    OWNERS = owners({ActionKind.GRAPH_PADDING: OwnerRole.MODEL_SERVING_ARCHITECT})

    share: float
    waste_us: float
    steps: int
    sizes: tuple[int, ...]
    saved_us: tuple[float, ...]
    capture_us: float | None

    def impact(self) -> Impact:
        """The device time the padded rows waste."""
        return Impact(ImpactUnit.DEVICE_US, self.waste_us)


IDLE_MATERIAL = 0.3
"""A device idle for this share of its span is a finding (HTA's idle-time breakdown reads
the same span)."""
LAUNCH_BOUND_US = 10.0
"""A call (or a median kernel) shorter than this does not hide its launch and scheduling
(a few microseconds each on current GPUs and runtimes)."""
SMALL_ROOF_US = 1.0
"""A call whose roofline bound is under this is too small to fill the device."""


def remedy(x: OpShape) -> HeadroomRemedy:
    """What keeps an op x shape from its roofline, and so what brings it closer."""
    if x.mean_us < LAUNCH_BOUND_US and (x.roof_us or 0.0) < SMALL_ROOF_US:
        return HeadroomRemedy.FUSE_OR_BATCH
    if x.bound == Bound.COMPUTE:
        return HeadroomRemedy.TUNE_KERNEL
    return HeadroomRemedy.FUSE_OR_LAYOUT


def headroom_action(s: Scope, f: HeadroomFinding, device_us: float) -> Action:
    """Bring an op x shape toward its roofline: the validation halves its headroom without
    adding device time elsewhere."""
    x = f.row
    rows = (
        ValidationRow(x.label, "headroom_us", x.headroom_us, Criterion.HALVED),
        ValidationRow(SLICE_WIDE, "device_time_us", device_us, Criterion.NO_WORSE),
    )
    rollback = RollbackTrigger(
        "op_device_time_us", x.total_us * (1 + ROLLBACK_MARGIN), ROLLBACK_RUNS, x.total_us
    )
    return make_action(
        s,
        x.label,
        ActionKind.ROOFLINE_HEADROOM,
        f.evidence,
        rollback,
        rows,
        x.headroom_share or 0.0,
        Headroom(
            x.op,
            x.label,
            x.kind.value if x.kind else None,
            x.bound.value if x.bound else None,
            x.roofline_pct,
            x.calls,
            x.mean_us,
            x.roof_us,
            x.headroom_us,
            x.headroom_share,
            remedy(x),
        ),
    )


def idle_evidence(t: Timeline, th: Thresholds, seed: int) -> Evidence:
    """The idle share with its block-bootstrap CI over the timeline's windows (n: windows)."""
    ci = idle_interval(t, th.bootstrap_resamples, seed)
    interval = Interval(*ci) if ci else None
    return Evidence(
        "device_idle_share", t.shares[DeviceActivity.IDLE], len(t.windows), interval, ()
    )


def idle_action(
    s: Scope,
    t: Timeline,
    sources: tuple[str, ...],
    replays_graphs: bool = False,
    eager_steps: int = 0,
) -> Action | None:
    """Keep the device fed when it sat idle for a material share of its span, its CI above
    the materiality bound."""
    idle = t.shares[DeviceActivity.IDLE]
    if t.capture_only:  # idle while graphs are recorded is not idle while serving
        return None
    seed = seed_for(s.thresholds.seed, s.workload, s.slice, "device_idle")
    ev = replace(idle_evidence(t, s.thresholds, seed), sources=sources)
    if idle < IDLE_MATERIAL or ev.ci is None or ev.ci.low < IDLE_MATERIAL:
        return None
    row = ValidationRow(SLICE_WIDE, "device_idle_share", idle, Criterion.HALVED)
    median = t.median_kernel_us
    params = Idle(
        idle,
        t.span_us,
        t.kernels,
        median,
        median is not None and median < LAUNCH_BOUND_US,
        replays_graphs,
        eager_steps,
    )
    return make_action(s, SLICE_WIDE, ActionKind.DEVICE_IDLE, ev, NO_ROLLBACK, (row,), idle, params)


IDLE_FAILING = 0.5
"""Idle over half the devices' span (its CI's low end above it): the device waits more than
it works, failing; between IDLE_MATERIAL and this it is at risk (and an action stands)."""


def judge_idle(t: Timeline | None, th: Thresholds, workload: str, slice_: str) -> Judgement | None:
    """The devices' idle share with its CI (the idle action's evidence, same seed): failing
    when the CI's low end is at least IDLE_FAILING, at risk when it is at least
    IDLE_MATERIAL (where the idle action stands), else healthy; not judged when every trace is
    a graph capture (the server's start-up) (None: no device rows)."""
    if t is None or not t.kernels:
        return None
    if t.capture_only:  # the start-up's graph capture: no serving step ran to keep fed
        return Judgement(
            JudgementFamily.DEVICE, Status.NOT_JUDGED, StatusReason.DEVICE_CAPTURE, n=t.kernels
        )
    ev = idle_evidence(t, th, seed_for(th.seed, workload, slice_, "device_idle"))
    idle = t.shares[DeviceActivity.IDLE]
    low = ev.ci.low if ev.ci is not None else idle
    if low >= IDLE_FAILING:
        state, bound = Status.FAILING, IDLE_FAILING
    elif idle >= IDLE_MATERIAL and low >= IDLE_MATERIAL:
        state, bound = Status.AT_RISK, IDLE_MATERIAL
    else:
        state, bound = Status.HEALTHY, IDLE_MATERIAL
    reason = StatusReason.DEVICE_BUSY if state is Status.HEALTHY else StatusReason.DEVICE_IDLE
    ci = (ev.ci.low, ev.ci.high) if ev.ci is not None else None
    return Judgement(
        JudgementFamily.DEVICE, state, reason, idle, FigureUnit.SHARE, bound, t.kernels, ci
    )


def padding_action(s: Scope, g: Graphs) -> Action | None:
    """Capture the batch sizes whose steps pay the most padding."""
    f = g.finding
    if f is None:
        return None
    waste = f.evidence.value
    rows = (
        ValidationRow(SLICE_WIDE, "padding_waste_us", waste, Criterion.HALVED),
        ValidationRow(SLICE_WIDE, "graph_device_time_us", g.graph_us, Criterion.NO_WORSE),
    )
    rollback = RollbackTrigger(
        "graph_device_time_us", g.graph_us * (1 + ROLLBACK_MARGIN), ROLLBACK_RUNS, g.graph_us
    )
    params = Padding(
        f.share,
        waste or 0.0,
        f.evidence.n,
        tuple(b for b, _ in f.sizes),
        tuple(v for _, v in f.sizes),
        f.capture_us,
    )
    kind = ActionKind.GRAPH_PADDING
    return make_action(s, SLICE_WIDE, kind, f.evidence, rollback, rows, f.share, params)


def device_actions(
    s: Scope,
    rf: Roofline | None,
    t: Timeline | None,
    sources: tuple[str, ...],
    g: Graphs | None = None,
) -> list[Action]:
    """Every action of a slice's device time."""
    out = [headroom_action(s, f, rf.gpu_time_us) for f in rf.findings] if rf else []
    replays = g is not None and g.launches > 0
    # the steps no captured size holds ran eagerly: the only ones a capture could still help
    eager = sum(b.steps for b in g.buckets if b.size is None) if g is not None else 0
    idle = idle_action(s, t, sources, replays, eager) if t is not None else None
    padding = padding_action(s, g) if g is not None else None
    return out + [a for a in (idle, padding) if a is not None]
