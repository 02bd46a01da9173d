"""Compile cost per shape: what compiling and recompiling for each input shape cost, charged
against what the compiled code then ran (METRICS.md, "compile cost per shape").

A compile event names the shape it was specialised for (TORCH_TRACE: the sizes of the graph's
input tensors). The runtime side is the profiler's "Torch-Compiled Region: <frame>/<compile>"
op, which names the compile it runs, so each compile's runtime calls join by compile id without
guessing; a shape's requests (when the slice has any) add the adaptation gain per request, from
which the requests needed to pay back the compile time follow.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

import msgspec

from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.base.query import SLICE_TABLE
from mapreport.core.connection import Connection
from mapreport.core.kinds import (
    FallbackCause,
    FigureUnit,
    JudgementFamily,
    Status,
    StatusReason,
)
from mapreport.core.shapes import sort_key


class CompileCost(msgspec.Struct, frozen=True):
    """What compiling for one shape cost, and what its compiled code then ran."""

    shape: str | None
    compiles: int
    recompiles: int
    compile_ms: float | None
    """Time compiling, the failed and refused attempts included (they held the worker)."""
    cache_hits: int
    cache_misses: int
    reasons: tuple[str, ...]
    frames: tuple[str, ...]
    runtime_calls: int
    runtime_ms: float | None
    compile_share: float | None
    """compile / (compile + runtime of the compiled region)."""
    saving_per_request_us: float | None
    break_even_requests: float | None
    refused: int = 0
    """Attempts the compiler refused at its recompile limit (not compiles: no graph)."""
    failed: int = 0
    """Attempts that failed (not compiles: no graph)."""


class GraphBreak(msgspec.Struct, frozen=True):
    """One place where dynamo broke a compiled frame's graph: the code after it runs eagerly,
    or in another graph."""

    at: str
    """`file:line` of the user's code."""
    kind: str | None
    """Dynamo's name for the break (`Failed to trace builtin operator`)."""
    explanation: str | None
    code: str | None
    """The line of user code that broke the graph."""
    compiles: int
    """Compiles that broke there."""


_BREAKS = """
    SELECT extra FROM compile_event
    WHERE workload = $w AND slice = $s AND extra LIKE '%"graph_breaks"%'
    ORDER BY source_id, line
"""
"""Compiles that broke their graph, in file order: a place's first explanation is the one
shown (Dynamo's carry each compile's specifics)."""


def graph_breaks(con: Connection, workload: str, slice_: str) -> tuple[GraphBreak, ...]:
    """The slice's graph breaks by place, most compiles first."""
    found: dict[tuple[str, str | None], tuple[GraphBreak, int]] = {}
    for (extra,) in con.execute(_BREAKS, {"w": workload, "s": slice_}).fetchall():
        try:
            breaks = json.loads(extra).get("graph_breaks") or []
        except (ValueError, AttributeError):
            continue
        for b in breaks if isinstance(breaks, list) else []:
            if not isinstance(b, dict) or not isinstance(b.get("at"), str):
                continue
            texts = {
                k: b.get(k) if isinstance(b.get(k), str) else None
                for k in ("kind", "explanation", "code")
            }
            key = (b["at"], texts["kind"])
            first, n = found.get(
                key, (GraphBreak(b["at"], texts["kind"], texts["explanation"], texts["code"], 0), 0)
            )
            found[key] = (first, n + 1)
    return tuple(
        sorted(
            (GraphBreak(g.at, g.kind, g.explanation, g.code, n) for g, n in found.values()),
            key=lambda g: (-g.compiles, g.at, g.kind or ""),
        )
    )


class CompileFailure(msgspec.Struct, frozen=True):
    """One compile attempt that did not compile, as tlparse shows it."""

    compile_id: str
    frame: str | None
    at: str | None
    """The user's `file:line` of the frame (the file's name only: the path is the recording
    machine's)."""
    exception: str | None
    """Dynamo's fail_type (`BackendCompilerFailed`)."""
    reason: str | None
    """The first line of its fail_reason."""
    outcome: str
    """`failed` or `limit_hit` (refused at the recompile limit)."""
    compile_ms: float | None
    later: int
    """Compile events of the same worker after it: the process went on, so the frame ran
    eagerly (dynamo's fallback); 0 with the log ending there: it may have stopped."""

    @property
    def went_on(self) -> bool:
        """The worker went on after it (the frame ran eagerly), as far as the log shows."""
        return self.outcome == "limit_hit" or self.later > 0


_FAILURES = """
    SELECT compile_id, frame, outcome, compile_ms, extra,
        count(*) OVER (PARTITION BY coalesce(core, -1)
            ORDER BY coalesce(ts_us, 0), compile_id, source_id, line
            ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS later
    FROM compile_event WHERE workload = $w AND slice = $s
    QUALIFY outcome IN ('failed', 'limit_hit')
    ORDER BY coalesce(ts_us, 0), compile_id, source_id, line
"""


def failures(con: Connection, workload: str, slice_: str) -> tuple[CompileFailure, ...]:
    """The slice's compile attempts that failed or were refused, with where and why."""
    out = []
    rows = con.execute(_FAILURES, {"w": workload, "s": slice_}).fetchall()
    for compile_id, frame, outcome, ms, extra, later in rows:
        try:
            meta = json.loads(extra) if extra else {}
        except ValueError:
            meta = {}
        meta = meta if isinstance(meta, dict) else {}
        filename, line = meta.get("co_filename"), meta.get("co_firstlineno")
        at = (
            f"{str(filename).replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}" if filename else None
        )
        reason = meta.get("fail_reason")
        out.append(
            CompileFailure(
                str(compile_id),
                frame,
                at,
                str(meta["fail_type"]) if meta.get("fail_type") else None,
                str(reason).strip().splitlines()[-1][:300] if reason else None,
                str(outcome),
                None if ms is None else float(ms),
                int(later),
            )
        )
    return tuple(out)


class Compiles(msgspec.Struct, frozen=True):
    """Compile cost per shape of one slice."""

    shapes: tuple[CompileCost, ...]
    compiles: int
    recompiles: int
    compile_ms: float
    shapes_recompiled: int
    runtime_joined: bool
    refused: int = 0
    failed: int = 0
    graph_breaks: tuple[GraphBreak, ...] = ()
    """Where dynamo broke the compiled frames' graphs, and on what (TORCH_TRACE)."""
    failures: tuple[CompileFailure, ...] = ()
    """Every compile attempt that failed or was refused, in the order they happened."""
    frames: tuple[RecompiledFrame, ...] = ()
    """Every compiled frame's attempts, recompiles, failed guards and varying dims, the most
    recompiled first (the compiles judgement and the dynamic-shapes action read these)."""


REGION = "Torch-Compiled Region: "
"""The profiler op PyTorch records around a call of compiled code, followed by its compile id."""

_EVENTS = """
    SELECT coalesce(shape, '') AS shape,
        count(*) FILTER (WHERE coalesce(outcome, 'compiled') = 'compiled') AS compiles,
        count(*) FILTER (WHERE recompile_reason IS NOT NULL
            AND coalesce(outcome, 'compiled') = 'compiled') AS recompiles,
        fsum(compile_ms) AS compile_ms,
        count(*) FILTER (WHERE cache_hit) AS hits, count(*) FILTER (WHERE NOT cache_hit) AS misses,
        list(DISTINCT recompile_reason ORDER BY recompile_reason)
            FILTER (WHERE recompile_reason IS NOT NULL) AS reasons,
        list(DISTINCT frame ORDER BY frame) FILTER (WHERE frame IS NOT NULL) AS frames,
        list(DISTINCT coalesce(CAST(core AS VARCHAR), '') || ':'
            || regexp_extract(compile_id, '^[0-9]+/[0-9]+')) AS ids,
        count(*) FILTER (WHERE outcome = 'limit_hit') AS refused,
        count(*) FILTER (WHERE outcome = 'failed') AS failed
    FROM compile_event WHERE workload = $w AND slice = $s
    GROUP BY 1 ORDER BY 1
"""
"""Per compile shape; a compile is keyed by its process and id (`core:0/4`): ids are per
process, so two workers' `0/4` are two graphs."""
_REGIONS = f"""
    SELECT coalesce(CAST(core AS VARCHAR), '') AS core, substr(name, {len(REGION) + 1}) AS id,
        count(*) AS calls, fsum(dur_us) AS total_us
    FROM op_exec WHERE workload = $w AND slice = $s AND starts_with(name, '{REGION}')
    GROUP BY 1, 2
"""


def _region_runtime(rows: list[tuple[str, str, int, float]]) -> dict[str, tuple[int, float]]:
    """(calls, total µs) of the compiled regions per compile key (`core:id`). Regions of a
    process also keyed by id alone (`:id`, summed over processes), which is how a compile whose
    process ran no region in the slice joins: its log and the trace were captured from
    different processes of one program."""
    calls: dict[str, int] = {}
    totals: dict[str, list[float]] = {}
    for core, id_, n, total in rows:
        # a region without a core has one key, not two (its row counted once)
        for key in dict.fromkeys((f"{core}:{id_}", f":{id_}")):
            calls[key] = calls.get(key, 0) + int(n)
            totals.setdefault(key, []).append(float(total))
    # exact sums (fsum): the rows come in the engine's order
    return {key: (calls[key], math.fsum(totals[key])) for key in calls}


def compiles(
    con: Connection,
    workload: str,
    slice_: str,
    saving_us: Mapping[str, float],
) -> Compiles | None:
    """Compile cost per shape of one slice, or None when the slice records no compiles.

    `saving_us` maps a shape to the median compute time adaptation saves per request (from the
    shape's significant gain); with it, `break_even_requests` = compile time / saving.
    """
    p = {"w": workload, "s": slice_}
    events = con.execute(_EVENTS, p).fetchall()
    if not events:
        return None
    found = con.execute(_REGIONS, p).fetchall()
    regions = _region_runtime(found)
    ran = {str(core) for core, *_ in found}
    rows = []
    for shape, n, recompiles, ms, hits, misses, reasons, frames, ids, refused, failed in events:
        keys = [i if i.split(":")[0] in ran else ":" + i.split(":", 1)[1] for i in ids or []]
        runtime = [regions[k] for k in keys if k in regions]
        calls = sum(c for c, _ in runtime)
        run_us = math.fsum(t for _, t in runtime)
        compile_ms = None if ms is None else float(ms)
        saving = saving_us.get(shape) if shape else None
        rows.append(
            CompileCost(
                shape=shape or None,
                compiles=int(n),
                recompiles=int(recompiles),
                refused=int(refused),
                failed=int(failed),
                compile_ms=compile_ms,
                cache_hits=int(hits),
                cache_misses=int(misses),
                reasons=tuple(str(x) for x in reasons or ()),
                frames=tuple(str(x) for x in frames or ()),
                runtime_calls=calls,
                runtime_ms=run_us / 1e3 if runtime else None,
                compile_share=(
                    compile_ms / (compile_ms + run_us / 1e3)
                    if runtime and compile_ms is not None and compile_ms + run_us > 0
                    else None
                ),
                saving_per_request_us=saving,
                break_even_requests=(
                    compile_ms * 1e3 / saving
                    if saving and saving > 0 and compile_ms is not None
                    else None
                ),
            )
        )
    rows.sort(key=lambda r: sort_key(r.shape or ""))
    total_ms = math.fsum(r.compile_ms or 0.0 for r in rows)
    return Compiles(
        shapes=tuple(rows),
        compiles=sum(r.compiles for r in rows),
        recompiles=sum(r.recompiles for r in rows),
        compile_ms=total_ms,
        shapes_recompiled=sum(1 for r in rows if r.recompiles),
        runtime_joined=any(r.runtime_calls for r in rows),
        refused=sum(r.refused for r in rows),
        failed=sum(r.failed for r in rows),
        graph_breaks=graph_breaks(con, workload, slice_),
        frames=recompiled_frames(con, workload, slice_),
        failures=failures(con, workload, slice_)
        if any(r.failed or r.refused for r in rows)
        else (),
    )


class VaryingDim(msgspec.Struct, frozen=True):
    """One dim of one compiled input whose size changes made the compiler recompile while
    serving (dynamo's `size mismatch` reasons)."""

    tensor: str
    dim: int
    low: int
    high: int
    """The smallest and largest sizes the reasons name."""
    recompiles: int


_SERVING_COMPILES = """
    SELECT c.extra FROM compile_event c
    WHERE c.workload = $w AND c.slice = $s AND c.extra IS NOT NULL
        AND coalesce(c.outcome, 'compiled') IN ('compiled', 'limit_hit')
        AND c.ts_us >= (
            SELECT min(r.compute_start_us) FROM request r
            WHERE r.workload = $w AND r.slice = $s
                AND (r.core IS NULL OR c.core IS NULL OR r.core = c.core)
        )
"""
"""The extra of each compile (or refused one) that started once its worker served requests."""


def varying_dims(con: Connection, workload: str, slice_: str) -> tuple[VaryingDim, ...]:
    """The input dims whose size changes caused the serving-time compiles, most first."""
    rows = con.execute(_SERVING_COMPILES, {"w": workload, "s": slice_}).fetchall()
    return mismatched_dims(extra for (extra,) in rows)


def mismatched_dims(extras: Iterable[str]) -> tuple[VaryingDim, ...]:
    """The input dims dynamo's `size mismatch` guards name in compile events' extras, with the
    sizes they took and how many recompiles named each, most first."""
    seen: dict[tuple[str, int], tuple[set[int], int]] = {}
    for extra in extras:
        try:
            found = json.loads(extra).get("mismatch") or []
        except (ValueError, AttributeError):
            continue  # extra is ours, but an old or foreign dataset may hold anything
        for m in found if isinstance(found, list) else []:
            if not isinstance(m, dict) or not isinstance(m.get("tensor"), str):
                continue
            if not all(isinstance(m.get(k), int) for k in ("dim", "expected", "actual")):
                continue
            sizes, n = seen.get((m["tensor"], m["dim"]), (set(), 0))
            seen[(m["tensor"], m["dim"])] = (sizes | {m["expected"], m["actual"]}, n + 1)
    return tuple(
        sorted(
            (VaryingDim(t, d, min(sz), max(sz), n) for (t, d), (sz, n) in seen.items()),
            key=lambda v: (-v.recompiles, v.tensor, v.dim),
        )
    )


_FALLBACK_CAUSES = f"""
    WITH refused AS (
        SELECT core, min(ts_us) AS limit_us FROM compile_event
        WHERE workload = $w AND slice = $s AND outcome = 'limit_hit'
        GROUP BY core
    ), failing AS (
        SELECT DISTINCT r.source_id, r.line
        FROM {SLICE_TABLE} r JOIN compile_event c
            ON c.core = r.core AND c.ts_us >= r.compute_end_us - r.compute_us
                AND c.ts_us <= r.compute_end_us
        WHERE c.workload = $w AND c.slice = $s AND c.outcome = 'failed'
            AND r.variant = 'fallback'
    )
    SELECT r.shape, count(*) AS n,
        count(*) FILTER (WHERE f.limit_us <= r.compute_end_us) AS limited,
        count(x.line) AS failed,
        (SELECT count(*) FROM compile_event WHERE workload = $w AND slice = $s) AS logged
    FROM {SLICE_TABLE} r LEFT JOIN refused f ON f.core = r.core
        LEFT JOIN failing x ON x.source_id = r.source_id AND x.line = r.line
    WHERE r.variant = 'fallback'
    GROUP BY r.shape
"""
"""Per shape: its fallback requests, how many ran after their worker's compiler refused a
compile at the recompile limit, and how many a compile that failed ran inside (compile ids
and limits are per process: the request's `core` and the compile's are the process id)."""


def fallback_causes(con: Connection, workload: str, slice_: str) -> dict[str, FallbackCause]:
    """Why each shape with fallback requests ran eagerly (over the slice view of
    `query.load_slice`): most of them after their worker's recompile limit; else one of them
    failing to compile; else unstated. None at all without a compile log to explain them."""
    out = {}
    for shape, n, limited, failed, logged in con.execute(
        _FALLBACK_CAUSES, {"w": workload, "s": slice_}
    ).fetchall():
        if not logged:
            break
        if 2 * int(limited) > int(n):
            out[str(shape)] = FallbackCause.RECOMPILE_LIMIT
        elif int(failed):
            out[str(shape)] = FallbackCause.COMPILE_FAILED
        else:
            out[str(shape)] = FallbackCause.UNSTATED
    return out


RECOMPILE_LIMIT = 8
"""Recompiles of one frame from which it is at risk: torch.compile's default
`recompile_limit` (8), past which the frame runs eagerly."""


def judge(c: Compiles | None) -> Judgement | None:
    """Compile attempts: failing when any failed (what ran instead is not what was compiled);
    at risk when the compiler refused one at its recompile limit or a frame recompiled
    RECOMPILE_LIMIT times or more; healthy when every attempt compiled (None: no compile log)."""
    family = JudgementFamily.COMPILES
    if c is None:
        return None
    attempts = c.compiles + c.failed + c.refused
    if not attempts:
        return None
    if c.failed:
        return Judgement(
            family, Status.FAILING, StatusReason.COMPILE_FAILED, float(c.failed), n=attempts
        )
    if c.refused:
        return Judgement(
            family, Status.AT_RISK, StatusReason.RECOMPILE_LIMIT, float(c.refused), n=attempts
        )
    if not c.frames and not c.recompiles:  # ahead of time (TVM, TensorRT): no frame recompiles
        return Judgement(
            family, Status.HEALTHY, StatusReason.ALL_COMPILED, float(attempts), n=attempts
        )
    top = max(c.frames, key=lambda f: (f.recompiles, f.frame)) if c.frames else None
    frame, most = (top.frame, top.recompiles) if top else ("", c.recompiles)
    if top is not None and top.processes > 1:  # the limit is per process
        frame = f"{frame} (in the most recompiling of its {top.processes} processes)"
    if most >= RECOMPILE_LIMIT:
        return Judgement(
            family,
            Status.AT_RISK,
            StatusReason.MANY_RECOMPILES,
            float(most),
            FigureUnit.COUNT,
            RECOMPILE_LIMIT,
            attempts,
            subject=frame,
        )
    return Judgement(
        family,
        Status.HEALTHY,
        StatusReason.COMPILED,
        float(most),
        FigureUnit.COUNT,
        RECOMPILE_LIMIT,
        attempts,
        subject=frame,
    )


def judge_breaks(c: Compiles | None) -> Judgement | None:
    """Graph breaks: at risk when a compiled frame broke (the code between its pieces ran
    eagerly), healthy when frames compiled whole (None: no compile log)."""
    family = JudgementFamily.GRAPH_BREAKS
    if c is None or not c.compiles:
        return None
    if c.graph_breaks:
        return Judgement(
            family,
            Status.AT_RISK,
            StatusReason.GRAPH_BREAKS,
            float(len(c.graph_breaks)),
            n=c.compiles,
            subject=c.graph_breaks[0].at,
        )
    return Judgement(family, Status.HEALTHY, StatusReason.NO_GRAPH_BREAKS, 0.0, n=c.compiles)


class RecompiledFrame(msgspec.Struct, frozen=True):
    """One compiled frame's attempts across the slice's compile logs. Each process keeps its
    own compiled graphs and its own recompile limit, so the recompiles are its most recompiled
    process's (two workers that each recompiled 7 times did not recompile 14 times)."""

    frame: str
    recompiles: int
    refused: int
    """Attempts refused at the limit, in every process."""
    attempts: int
    """Compile attempts, in every process."""
    reasons: tuple[str, ...]
    """Its distinct recompile reasons (the guards that failed), in the order they came."""
    dims: tuple[VaryingDim, ...]
    processes: int = 1
    """The processes that compiled it."""


_FRAMES = """
    SELECT coalesce(frame, '') AS frame, coalesce(core, -1) AS process,
        count(*) FILTER (WHERE recompile_reason IS NOT NULL
            AND coalesce(outcome, 'compiled') = 'compiled') AS recompiles,
        count(*) FILTER (WHERE outcome = 'limit_hit') AS refused,
        count(*) AS attempts,
        list(recompile_reason ORDER BY coalesce(ts_us, 0), compile_id, source_id, line)
            FILTER (WHERE recompile_reason IS NOT NULL) AS reasons,
        list(extra) FILTER (WHERE extra IS NOT NULL) AS extras
    FROM compile_event WHERE workload = $w AND slice = $s
    GROUP BY 1, 2 ORDER BY 1, 2
"""


def recompiled_frames(con: Connection, workload: str, slice_: str) -> tuple[RecompiledFrame, ...]:
    """Every compiled frame with its recompiles (its most recompiled process's), refusals,
    guards and varying dims, the most recompiled first."""
    per_frame: dict[str, list[tuple[int, int, int, list[str], list[str]]]] = {}
    for frame, _, recompiles, refused, attempts, reasons, extras in con.execute(
        _FRAMES, {"w": workload, "s": slice_}
    ).fetchall():
        per_frame.setdefault(str(frame), []).append(
            (int(recompiles), int(refused), int(attempts), reasons or [], extras or [])
        )
    out = [
        RecompiledFrame(
            frame,
            max(p[0] for p in processes),
            sum(p[1] for p in processes),
            sum(p[2] for p in processes),
            tuple(dict.fromkeys(str(r) for p in processes for r in p[3])),
            mismatched_dims(str(e) for p in processes for e in p[4]),
            len(processes),
        )
        for frame, processes in per_frame.items()
    ]
    return tuple(sorted(out, key=lambda f: (-(f.recompiles + f.refused), f.frame)))
