"""Coverage: which compiled bucket holds each runtime shape, and what traffic no bucket holds."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence

import msgspec

from mapreport.analysis.base.query import ShapeRow
from mapreport.core.connection import Connection
from mapreport.core.kinds import PredictionGap
from mapreport.core.shapes import Bucket, ShapeError, parse_bucket, tightest


class UncoveredShape(msgspec.Struct, frozen=True):
    """A runtime shape that no compile bucket holds."""

    shape: str
    n: int
    traffic_share: float


class SyntheticBucket(msgspec.Struct, frozen=True):
    """A compiled bucket that no production shape fell in."""

    plan_id: str
    bucket: str
    predicted_us: float | None


class Coverage(msgspec.Struct, frozen=True):
    """How much production traffic the compile plan covered."""

    covered_traffic_share: float | None
    """None when the slice served no requests."""
    uncovered_shapes: tuple[UncoveredShape, ...]
    synthetic_only_buckets: tuple[SyntheticBucket, ...]
    plans: tuple[str, ...]
    buckets: int


class Placement(msgspec.Struct, frozen=True):
    """The plan that served a shape and the tightest bucket of that plan holding it."""

    plan_id: str | None
    bucket: BucketRow | None


def place(rows: Sequence[ShapeRow], buckets: Sequence[BucketRow]) -> dict[str, Placement]:
    """Resolve every shape to its bucket: the plan that served it decides which buckets count
    (all of the slice's plans when requests name none); among those the tightest wins."""
    by_plan: dict[str, list[BucketRow]] = {}
    for b in buckets:
        by_plan.setdefault(b.plan_id, []).append(b)
    parsed = {}
    for b in buckets:
        try:
            parsed[(b.plan_id, b.bucket)] = parse_bucket(b.bucket)
        except ShapeError:
            continue
    out: dict[str, Placement] = {}
    for row in rows:
        plan = row.plan
        candidates = by_plan.get(plan, []) if plan is not None else list(buckets)
        keyed = {
            parsed[(b.plan_id, b.bucket)]: b for b in candidates if (b.plan_id, b.bucket) in parsed
        }
        best = tightest(row.shape, keyed)
        if best is None and plan is not None and 2 * row.n_ran_plan > row.n:
            # most of its requests ran a graph its source says was built before serving (a
            # torch.compile warm-up graph): that graph is its bucket, whatever notation the
            # graph's own shape is written in
            out[row.shape] = Placement(plan, _graph_bucket(plan, row.shape, by_plan.get(plan)))
            continue
        out[row.shape] = Placement(
            plan if plan else (keyed[best].plan_id if best else None), keyed[best] if best else None
        )
    return out


def _graph_bucket(plan: str, shape: str, exported: list[BucketRow] | None) -> BucketRow:
    """The bucket of a plan's graph that ran a shape: the one the compiler exported for that
    graph (with its prediction), else the shape itself without a prediction."""
    if exported and len(exported) == 1:
        return exported[0]
    return BucketRow(plan, shape, None, False, 0, (), (), exported=False)


def coverage(
    rows: Sequence[ShapeRow],
    buckets: Sequence[BucketRow],
    placements: dict[str, Placement],
) -> Coverage:
    """Covered traffic share, uncovered shapes and compiled buckets production never used."""
    total = sum(r.n_total for r in rows)
    covered = sum(r.n_total for r in rows if placements[r.shape].bucket is not None)
    uncovered = tuple(
        UncoveredShape(r.shape, r.n_total, r.n_total / total if total else 0.0)
        for r in sorted(rows, key=lambda r: -r.n_total)
        if placements[r.shape].bucket is None
    )
    used = {(p.bucket.plan_id, p.bucket.bucket) for p in placements.values() if p.bucket}
    # a plan that served a shape without being its primary plan still used its own bucket
    by_plan: dict[str, dict[Bucket, BucketRow]] = {}
    for b in buckets:
        with contextlib.suppress(ShapeError):
            by_plan.setdefault(b.plan_id, {})[parse_bucket(b.bucket)] = b
    for r in rows:
        for plan in r.plans:
            best = tightest(r.shape, by_plan.get(plan or "", {}))
            if plan is not None and best is not None:
                used.add((plan, by_plan[plan][best].bucket))
    served_plans = {p for r in rows for p in r.plans if p is not None} or {
        p.plan_id for p in placements.values() if p.plan_id
    }
    synthetic = tuple(
        SyntheticBucket(b.plan_id, b.bucket, b.predicted_us)
        for b in buckets
        if (b.plan_id, b.bucket) not in used and (not served_plans or b.plan_id in served_plans)
    )
    return Coverage(
        covered_traffic_share=covered / total if total else None,
        uncovered_shapes=uncovered,
        synthetic_only_buckets=synthetic,
        # a graph that ran a shape is a plan too, exported or not
        plans=tuple(
            sorted(
                {b.plan_id for b in buckets}
                | {p.bucket.plan_id for p in placements.values() if p.bucket}
            )
        ),
        buckets=len(buckets),
    )


class BucketRow(msgspec.Struct, frozen=True):
    """One compiled bucket of one plan with its whole-model prediction."""

    plan_id: str
    bucket: str
    predicted_us: float | None
    from_total: bool
    ops: int
    precisions: tuple[str, ...]
    """Every precision its ops run, by name (a QAT engine's int8 and fp32 layers: one of
    them, picked by the engine, made the precision check come and go between runs)."""
    sources: tuple[str, ...]
    mem_budget_bytes: float | None = None
    fusion_groups: tuple[tuple[str, int], ...] = ()
    """(fusion group, ops in it) of the bucket's plan entries."""
    graph: bool = False
    """A compiled graph whose compiles are logged (`compile_event.plan_id`): its estimates are
    its compiler's to log."""
    exported: bool = True
    """False: no compile plan row exists; the bucket is the graph that ran the shape."""

    @property
    def prediction_gap(self) -> PredictionGap:
        """Why this bucket would have no prediction."""
        if not self.exported:
            return PredictionGap.PLAN_NOT_EXPORTED
        if self.graph:
            return PredictionGap.COMPILER_LOGGED_NONE
        return PredictionGap.PLAN_STATES_NONE


def bucket_rows(con: Connection, workload: str, slice_: str) -> list[BucketRow]:
    """Compiled buckets of the slice's plans; a slice-specific entry wins over a generic one.

    The prediction is the `__total__` line, else the sum of the bucket's op predictions (an op
    listed twice counts once, at its largest prediction).
    """
    rows = con.execute(
        """
        WITH scoped AS (
            SELECT *, rank() OVER (PARTITION BY plan_id, shape_bucket
                                   ORDER BY (slice = $s) DESC) AS pick
            FROM compile_plan WHERE workload = $w AND (slice = $s OR slice = '')
        ), ops AS (
            SELECT plan_id, shape_bucket, op, max(predicted_us) AS predicted_us,
                list(DISTINCT precision) AS precisions, list(DISTINCT source_id) AS sources,
                max(mem_budget_bytes) AS budget, min(fusion_group) AS fusion_group
            FROM scoped WHERE pick = 1 GROUP BY plan_id, shape_bucket, op
        )
        SELECT plan_id, shape_bucket,
            max(predicted_us) FILTER (WHERE op = '__total__') AS total,
            fsum(predicted_us) FILTER (WHERE op <> '__total__') AS ops_sum,
            count(*) FILTER (WHERE op <> '__total__') AS n_ops,
            flatten(list(precisions)) AS precisions,
            flatten(list(sources)) AS sources,
            coalesce(max(budget) FILTER (WHERE op = '__total__'), max(budget)) AS budget,
            list(fusion_group) FILTER (WHERE fusion_group IS NOT NULL) AS groups,
            plan_id IN (
                SELECT plan_id FROM compile_event WHERE workload = $w AND plan_id IS NOT NULL
            ) AS graph
        FROM ops GROUP BY plan_id, shape_bucket ORDER BY plan_id, shape_bucket
        """,
        {"w": workload, "s": slice_},
    ).fetchall()
    return [
        BucketRow(
            plan_id=plan,
            bucket=bucket,
            predicted_us=float(total)
            if total is not None
            else (float(ops_sum) if ops_sum is not None else None),
            from_total=total is not None,
            ops=int(n_ops),
            precisions=tuple(sorted({p for p in precisions if p})),
            sources=tuple(sorted(set(sources))),
            mem_budget_bytes=None if budget is None else float(budget),
            fusion_groups=tuple(sorted(Counter(groups or []).items())),
            graph=bool(graph),
        )
        for plan, bucket, total, ops_sum, n_ops, precisions, sources, budget, groups, graph in rows
    ]


class PlanVersion(msgspec.Struct, frozen=True):
    """One version (source file) of a compile plan the slice's profiles hold."""

    plan_id: str
    source_id: str
    path: str
    captured_us: float | None
    captured_by: str
    """What dates it: `captured_at` (the environment record), `night` (the night its file was
    ingested for) or `ingested_at`."""
    in_force: bool
    """The version the window's predictions come from: the latest captured before the
    window's end (else the earliest)."""
    before_end: bool
    """Captured before the window's end (False: no version was, and this earliest one is used)."""
    versions: int
    """How many versions of this plan the dataset holds."""


def plan_versions(con: Connection, workload: str, slice_: str) -> tuple[PlanVersion, ...]:
    """Every version of the slice's compile plans (its own and its workload's generic ones),
    the one in force first per plan, then newest first."""
    rows = con.execute(
        """
        SELECT plan_id, source_id, path, captured_us, captured_by, in_force, before_end, versions
        FROM plan_version WHERE workload = $w AND (slice = $s OR slice = '')
        ORDER BY plan_id, in_force DESC, captured_us DESC, source_id
        """,
        {"w": workload, "s": slice_},
    ).fetchall()
    return tuple(
        PlanVersion(
            str(plan),
            str(source),
            str(path or ""),
            None if captured is None else float(captured),
            str(by),
            bool(in_force),
            bool(before),
            int(n),
        )
        for plan, source, path, captured, by, in_force, before, n in rows
    )
