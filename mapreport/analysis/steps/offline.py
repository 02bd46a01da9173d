"""The families over their own tables, beside the request telemetry: the per-op join with a
compile plan, the compiles, a load sweep, a profiler trace's device time (op x shape roofline,
timeline), and the model server's own metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mapreport.analysis.base.common import Review, Thresholds
from mapreport.analysis.base.query import SLICE_TABLE, ShapeRow
from mapreport.analysis.base.slicestats import SliceTotals
from mapreport.analysis.device.graphs import Graphs, graphs
from mapreport.analysis.device.operators import Operators, operators, plan_compute_p50
from mapreport.analysis.device.roofline import Roofline, roofline
from mapreport.analysis.device.timeline import Timeline, timeline
from mapreport.analysis.mapping.consistency import QueueCheck, queue_check
from mapreport.analysis.mapping.presence import EVERY_TABLE, Presence
from mapreport.analysis.mapping.sweep import LoadSweep, load_sweep
from mapreport.analysis.mapping.telemetry import Telemetry, telemetry
from mapreport.analysis.mapping.tokens import TokenRate, TokenTiming, token_rate, token_timing
from mapreport.analysis.serving.compiles import Compiles, compiles
from mapreport.analysis.tuning.ranking import Ranking, tuning_ranking
from mapreport.core.connection import Connection


@dataclass(frozen=True)
class Offline:
    """What a slice's compile logs, per-op profiles, sweeps and traces hold."""

    operators: Operators | None
    compiles: Compiles | None
    sweep: LoadSweep | None
    roofline: Roofline | None
    timeline: Timeline | None
    graphs: Graphs | None
    trace_rows: dict[str, int]
    """The slice's profiler rows per category (what a trace without device time holds)."""
    ranking: Ranking | None = None
    """Regret and ranking quality from tuning records that keep every trial."""


def offline(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    review: Review,
    savings: dict[str, float],
    present: Presence = EVERY_TABLE,
) -> Offline:
    """Each family over its own tables (`savings`: each shape's adaptation saving, which a
    recompile's cost is weighed against); those whose table holds none of the slice's rows
    (`present`) are not asked."""
    has = present.has
    compiled = compiles(con, workload, slice_, savings) if has("compile_event") else None
    sweep = load_sweep(con, workload, slice_, review) if has("load_sweep") else None
    # a tuning log's trials come with its compile events (ingest/tvm.py)
    ranked = tuning_ranking(con, workload, slice_, th) if has("compile_event") else None
    if not has("op_exec"):
        return Offline(None, compiled, sweep, None, None, None, {}, ranked)
    return Offline(
        operators(con, workload, slice_, th, plan_compute_p50(con)),
        compiled,
        sweep,
        roofline(con, workload, slice_, th, review.device),
        timeline(con, workload, slice_),
        graphs(con, workload, slice_, th),
        trace_rows(con, workload, slice_),
        ranked,
    )


def trace_rows(con: Connection, workload: str, slice_: str) -> dict[str, int]:
    """Profiler rows per category, most first."""
    rows = con.execute(
        """SELECT coalesce(category, 'none'), count(*) FROM op_exec
           WHERE workload = $w AND slice = $s GROUP BY 1 ORDER BY 2 DESC, 1""",
        {"w": workload, "s": slice_},
    ).fetchall()
    return {str(c): int(n) for c, n in rows}


@dataclass(frozen=True)
class Serving:
    """The server's own metrics, their agreement with the records, token timing."""

    telemetry: Telemetry | None
    queue_check: QueueCheck | None
    tokens: tuple[TokenTiming, ...]
    token_rate: TokenRate | None


def served(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    totals: SliceTotals,
    rows: Sequence[ShapeRow],
    present: Presence = EVERY_TABLE,
) -> Serving:
    """The model server's own metrics, their agreement with the slice's records (loaded as
    `query.SLICE_TABLE`), token timing and the token rate (of the slice's `totals`)."""
    server = telemetry(con, workload, slice_) if present.has("metric_sample") else None
    check = queue_check(con, server, th.min_samples_p95, SLICE_TABLE)
    return Serving(server, check, token_timing(rows), token_rate(totals))
