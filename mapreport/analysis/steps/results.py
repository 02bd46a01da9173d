"""The finished analysis of one slice: what the report renders.

Each metric family declares its own result type in its module; `SliceResult` nests them, and
each shape's in `shape.ShapeMetrics`.
"""

from __future__ import annotations

import msgspec

from mapreport.analysis.actions.actions import Action
from mapreport.analysis.actions.checklist import ChecklistItem, Pitfall, PrecisionCheck
from mapreport.analysis.actions.observe import ProfileItem
from mapreport.analysis.base.common import Percentiles, Review, SlaCheck, SourceFile, Thresholds
from mapreport.analysis.loop.history import History
from mapreport.analysis.mapping.accuracy import Accuracy
from mapreport.analysis.mapping.coverage import Coverage
from mapreport.analysis.mapping.environment import EnvironmentCheck
from mapreport.analysis.serving.blocking import Blocking
from mapreport.analysis.serving.classify import ShapeClass
from mapreport.analysis.serving.scheduling import Scheduling
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.analysis.serving.sla import OverSla
from mapreport.analysis.serving.tail import TailDrivers
from mapreport.analysis.steps.families import CompiledFound, DeviceFound, PlansFound, ServingFound
from mapreport.analysis.steps.status import SliceStatus
from mapreport.core.kinds import BottleneckClass, Decision
from mapreport.core.window import Window


class SliceResult(msgspec.Struct, frozen=True):
    """The analysis of one workload slice, history included: the input of every renderer."""

    workload: str
    slice: str
    thresholds: Thresholds
    review: Review
    period: Window
    """The time window the report covers (the data's first and last times are `window_*`)."""
    requests: int
    failed: int
    window_start_us: float | None
    window_end_us: float | None
    latency: Percentiles
    over_sla: OverSla | None
    """The requests over the SLA target of the headline quantile, by shape (no target: None)."""
    shapes: tuple[ShapeMetrics, ...]
    coverage: Coverage
    accuracy: Accuracy
    environment: EnvironmentCheck
    sources: tuple[SourceFile, ...]
    tail: TailDrivers | None
    scheduling: Scheduling | None
    precision: PrecisionCheck
    actions: tuple[Action, ...]
    checklist: tuple[ChecklistItem, ...]
    pitfalls: tuple[Pitfall, ...]
    latency_quantiles: dict[str, tuple[float, ...]]
    """Per shape: latency at 0%, 1%, ..., 100% (kept in the history for later comparisons)."""
    history: History | None
    blocking: Blocking
    """Requests blocked behind adapting ones on their worker (analysis/blocking.py)."""
    device: DeviceFound
    """A profiler trace's per-op rows: the join with the plan, roofline, timeline, graphs."""
    compiled: CompiledFound
    """The compile events and the tuning records' ranking."""
    serving: ServingFound
    """The model server's own metrics, token timing, load sweeps and MLPerf runs."""
    plan: PlansFound
    """The plan versions in force and their drift across nights."""
    budgets: dict[str, float] = msgspec.field(default_factory=dict)
    """Per shape, the memory budget its plan states (the memory-burst driver's bound)."""
    profile_next: tuple[ProfileItem, ...] = ()
    """What to collect next to settle thin findings that matter (analysis/observe.py)."""
    tail_class: ShapeClass | None = None
    """The slice's pooled tail read by the shapes' rule (None when immaterial or unread): a
    `blocked_behind_adaptation` class here is the blocking finding."""
    sla: tuple[SlaCheck, ...] = ()
    """p95 and p99 against their targets, judged once (`common.sla_checks`): the headline,
    the verdict, the index's state and the rollback bounds read these."""
    status: SliceStatus | None = None
    """Failing, at risk or healthy, and what decided it (`status.slice_status`)."""

    @property
    def blocking_drives_tail(self) -> bool:
        """Blocking behind adaptation decides the slice's tail (the blocking finding)."""
        return (
            self.tail_class is not None
            and self.tail_class.cls == BottleneckClass.BLOCKED_BEHIND_ADAPTATION
        )

    @property
    def failures_or_restarts(self) -> bool:
        """A compile attempt failed or was refused, or the model server restarted."""
        compiled, server = self.compiled.compiles, self.serving.telemetry
        failed = compiled is not None and bool(compiled.failures)
        return failed or (server is not None and bool(server.resets))

    @property
    def scheduling_measured(self) -> bool:
        """The scheduling section has something to show."""
        return self.scheduling is not None and self.scheduling.measured

    @property
    def name(self) -> str:
        """`workload` or `workload/slice`."""
        return f"{self.workload}/{self.slice}" if self.slice else self.workload

    @property
    def ok_requests(self) -> int:
        """Requests that completed (latency is measured over these)."""
        return self.latency.n

    def decided(self, d: Decision) -> tuple[ShapeMetrics, ...]:
        """The shapes that got decision `d`."""
        return tuple(m for m in self.shapes if m.decision == d)
