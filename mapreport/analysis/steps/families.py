"""The families over their own tables, beside the request telemetry, each one result a
`SliceResult` nests as it is: the device (a profiler trace's per-op rows: the join with a
compile plan, the op x shape roofline, the timeline, graph buckets), the compiled (compile
events and tuning records), the serving (the model server's own metrics, token timing, load
sweeps and MLPerf runs) and the plans (versions in force and their drift)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mapreport.analysis.base.common import Review, Thresholds
from mapreport.analysis.base.query import SLICE_TABLE, ShapeRow
from mapreport.analysis.base.slicestats import SliceTotals
from mapreport.analysis.device.graphs import Graphs, graphs
from mapreport.analysis.device.operators import Operators, operators, plan_compute_p50
from mapreport.analysis.device.roofline import Roofline, roofline
from mapreport.analysis.device.timeline import Timeline, timeline
from mapreport.analysis.mapping.consistency import QueueCheck, queue_check
from mapreport.analysis.mapping.coverage import PlanVersion
from mapreport.analysis.mapping.loadgen import LoadgenRun
from mapreport.analysis.mapping.presence import EVERY_TABLE, Presence
from mapreport.analysis.mapping.sweep import LoadSweep, load_sweep
from mapreport.analysis.mapping.telemetry import Telemetry, telemetry
from mapreport.analysis.mapping.tokens import TokenRate, TokenTiming, token_rate, token_timing
from mapreport.analysis.serving.compiles import Compiles, compiles
from mapreport.analysis.serving.drift import OpDrift, ShapeDrift
from mapreport.analysis.tuning.ranking import Ranking, tuning_ranking
from mapreport.analysis.tuning.transfer import TransferGap, transfer_gaps
from mapreport.core.connection import Connection


class DeviceFound(msgspec.Struct, frozen=True):
    """What a profiler trace's per-op rows hold: the per-op join with the compile plan, the
    op x shape roofline, where the devices' time went and the graph buckets."""

    operators: Operators | None = None
    roofline: Roofline | None = None
    """A profiler trace's device time per op x shape against the device's roofline."""
    timeline: Timeline | None = None
    """Where the devices' time went: compute, communication, copies, idle."""
    graphs: Graphs | None = None
    """CUDA/HIP graph buckets: captured sizes, the steps padded to them, eager steps."""
    trace_rows: dict[str, int] = msgspec.field(default_factory=dict)
    """Profiler rows per category, most first (a trace without device time says what it
    holds)."""


class CompiledFound(msgspec.Struct, frozen=True):
    """What the slice's compile events and tuning records hold."""

    compiles: Compiles | None = None
    ranking: Ranking | None = None
    """Did the compiler choose well: regret and ranking quality per tuning run and workload
    (None without tuning records that keep every trial)."""
    transfer: tuple[TransferGap, ...] = ()
    """Did the tuned time hold at runtime: each run's deployed kernel that the slice's per-op
    rows show at its tuned shape, its runtime per call over its tuned time."""


def device_found(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    review: Review,
    present: Presence = EVERY_TABLE,
) -> DeviceFound:
    """The device families over the slice's per-op rows (none without them: `present`)."""
    if not present.has("op_exec"):
        return DeviceFound()
    return DeviceFound(
        operators(con, workload, slice_, th, plan_compute_p50(con)),
        roofline(con, workload, slice_, th, review.device),
        timeline(con, workload, slice_),
        graphs(con, workload, slice_, th),
        trace_rows(con, workload, slice_),
    )


def compiled_found(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    savings: dict[str, float],
    present: Presence = EVERY_TABLE,
) -> CompiledFound:
    """The compiles (`savings`: each shape's adaptation saving, which a recompile's cost is
    weighed against) and the tuning records' ranking, over the slice's compile events."""
    if not present.has("compile_event"):
        return CompiledFound()
    # a tuning log's trials come with its compile events (ingest/tvm.py)
    ranking = tuning_ranking(con, workload, slice_, th)
    ran = present.has("op_exec")  # the runtime side of the transfer gap: a profiler trace
    return CompiledFound(
        compiles(con, workload, slice_, savings),
        ranking,
        transfer_gaps(con, workload, slice_, ranking, th) if ran else (),
    )


def trace_rows(con: Connection, workload: str, slice_: str) -> dict[str, int]:
    """Profiler rows per category, most first."""
    rows = con.execute(
        """SELECT coalesce(category, 'none'), count(*) FROM op_exec
           WHERE workload = $w AND slice = $s GROUP BY 1 ORDER BY 2 DESC, 1""",
        {"w": workload, "s": slice_},
    ).fetchall()
    return {str(c): int(n) for c, n in rows}


class ServingFound(msgspec.Struct, frozen=True):
    """The server's own metrics, their agreement with the records, token timing, and the
    load generator's runs and sweeps."""

    telemetry: Telemetry | None = None
    """The model server's own metrics (None without them)."""
    queue_check: QueueCheck | None = None
    """Mean queue wait of the records against the server's counters, where both exist."""
    tokens: tuple[TokenTiming, ...] = ()
    """Per shape, time to first token and inter-token latency."""
    token_rate: TokenRate | None = None
    """Output tokens per second of a served LLM slice."""
    sweep: LoadSweep | None = None
    """Latency against offered load, where a sweep was recorded."""
    loadgen: tuple[LoadgenRun, ...] = ()
    """The slice's MLPerf runs."""


def served(
    con: Connection,
    workload: str,
    slice_: str,
    scope: tuple[Thresholds, Review],
    totals: SliceTotals,
    rows: Sequence[ShapeRow],
    runs: tuple[LoadgenRun, ...] = (),
    present: Presence = EVERY_TABLE,
) -> ServingFound:
    """The model server's own metrics, their agreement with the slice's records (loaded as
    `query.SLICE_TABLE`), token timing, the token rate (of the slice's `totals`), a load
    sweep and the MLPerf `runs` (read first: they can set the SLA)."""
    th, review = scope
    server = telemetry(con, workload, slice_) if present.has("metric_sample") else None
    sweep = load_sweep(con, workload, slice_, review) if present.has("load_sweep") else None
    return ServingFound(
        server,
        queue_check(con, server, th.min_samples_p95, SLICE_TABLE),
        token_timing(rows),
        token_rate(totals),
        sweep,
        runs,
    )


class PlansFound(msgspec.Struct, frozen=True):
    """The plan versions in force and each shape's and planned op's signed error across the
    nights of its version."""

    versions: tuple[PlanVersion, ...] = ()
    """Every version of the slice's plans, the one in force at the window's end marked."""
    drifts: tuple[ShapeDrift, ...] = ()
    """Per shape, its signed error across the nights of its plan version."""
    op_drifts: tuple[OpDrift, ...] = ()
    """Per planned op with per-op times, its signed error across nights."""
