"""CUDA and HIP graphs as a mapping (docs/metrics.md, "Graph buckets"): the sizes a server
captured are its compile-time buckets; each step at runtime replays the graph of the smallest
captured size that holds its batch, padded up to it, or runs eagerly when none does.

From a profiler trace: captures (`capture_<size>_<mode>` annotations, as vLLM's and SGLang's
capture harnesses and TraceLens write them), steps (vLLM's `execute_<tokens>_...` and SGLang's
`step[... bs=<n>]` annotations) and graph launches (`cudaGraphLaunch`, `hipGraphLaunch`) with
the kernels they replay (same correlation id). The graph mode the harnesses record beside the
capture trace (table `graph_capture`) names a captured size's mode where there is one.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping

import msgspec

from mapreport.analysis.base.common import Evidence, Interval, Thresholds
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.base.stats import bootstrap_mean, seed_for
from mapreport.core.connection import Connection
from mapreport.core.kinds import FigureUnit, JudgementFamily, Status, StatusReason
from mapreport.core.records import replace

CAPTURE = re.compile(r"^capture_(\d+)_([A-Za-z_]+)$")
"""A capture annotation: the captured size and the mode (FULL, PIECEWISE, DECODE)."""
PADDING_MATERIAL = 0.1
"""Padding waste is a finding from this share of the replays' device time."""
PROPOSED_SIZES = 3
"""Capture sizes a padding action proposes, at most."""
STEP = (re.compile(r"^execute_(\d+)_"), re.compile(r"\bbs=(\d+)\]?"))
"""A step annotation and its real batch: vLLM's scheduled tokens, SGLang's batch size."""


class GraphStep(msgspec.Struct, frozen=True):
    """One step of the server: its real batch, and how it ran."""

    batch: int
    source_id: str
    launches: int
    """Graph launches inside the step (a piecewise graph launches one per piece)."""
    graph_us: float
    """Device time of the kernels the launches replayed."""
    eager_us: float
    """Device time of the kernels launched one by one inside the step."""


class GraphBucket(msgspec.Struct, frozen=True):
    """One captured size (or, `size` None, the steps no captured size holds: eager)."""

    size: int | None
    mode: str | None
    """The graph mode its capture harness recorded (`graph_capture`, from vLLM's and SGLang's
    execution_details.json), else its capture annotation's word: vLLM's graph mode, SGLang's
    forward mode (DECODE, where its harness records FULL)."""
    captured: bool
    """The trace holds its capture (else the size is only known from the steps' batches)."""
    capture_us: float | None
    steps: int
    launches: int
    real: int
    """The steps' real batch summed (tokens or sequences)."""
    padded: int
    """What ran: the size times the steps (the real batch for eager steps)."""
    graph_us: float
    eager_us: float
    padding_waste_us: float | None
    """(padded - real) x the measured device time per unit of batch of its replays."""


class PaddingFinding(msgspec.Struct, frozen=True):
    """Padding waste that is material, with its evidence, and the sizes that would cut it."""

    evidence: Evidence
    """metric `padding_waste_us`: the waste over the steps, n steps, its bootstrap CI."""
    share: float
    """Of the replays' device time."""
    sizes: tuple[tuple[int, float], ...]
    """(real batch to capture, the waste its steps would no longer pay), most first."""
    capture_us: float | None
    """What one more capture costs: the mean capture time of those in the trace."""


class Graphs(msgspec.Struct, frozen=True):
    """A slice's graph buckets and the steps behind them."""

    buckets: tuple[GraphBucket, ...]
    steps: tuple[GraphStep, ...]
    launches: int
    graph_us: float
    padding_waste_us: float
    finding: PaddingFinding | None = None

    @property
    def waste_share(self) -> float | None:
        """Padding waste over the device time of the replays."""
        return self.padding_waste_us / self.graph_us if self.graph_us else None


_CAPTURES = """
    SELECT name, max(dur_us) AS dur, min(source_id) AS source_id, min(line) AS line
    FROM op_exec
    WHERE workload = $w AND slice = $s AND category = 'annotation'
        AND regexp_matches(name, '^capture_[0-9]+_[A-Za-z_]+$')
    GROUP BY name
    ORDER BY name
"""
_RECORDED = """
    SELECT DISTINCT batch_size, graph_mode FROM graph_capture WHERE workload = $w AND slice = $s
"""
_STEPS = """
    WITH steps AS (
        SELECT name, ts_us, ts_us + dur_us AS end_us, source_id, line,
            json_extract_string(extra, '$.pid') AS pid, json_extract_string(extra, '$.tid') AS tid
        FROM op_exec
        WHERE workload = $w AND slice = $s AND category = 'annotation'
            AND (regexp_matches(name, '^execute_[0-9]+_') OR regexp_matches(name, 'bs=[0-9]+'))
    ),
    launches AS (
        SELECT name, correlation, ts_us, source_id,
            json_extract_string(extra, '$.pid') AS pid, json_extract_string(extra, '$.tid') AS tid
        FROM op_exec
        WHERE workload = $w AND slice = $s AND category = 'runtime' AND correlation IS NOT NULL
    ),
    kernels AS (
        SELECT correlation, source_id, fsum(dur_us) AS dur FROM op_exec
        WHERE workload = $w AND slice = $s AND category = 'kernel' AND correlation IS NOT NULL
        GROUP BY correlation, source_id
    )
    SELECT s.name, s.ts_us, s.source_id, s.line,
        count(*) FILTER (WHERE l.name LIKE '%GraphLaunch%') AS launches,
        coalesce(fsum(k.dur) FILTER (WHERE l.name LIKE '%GraphLaunch%'), 0) AS graph_us,
        coalesce(fsum(k.dur) FILTER (WHERE l.name NOT LIKE '%GraphLaunch%'), 0) AS eager_us
    FROM steps s
    LEFT JOIN launches l ON l.source_id = s.source_id AND l.pid = s.pid AND l.tid = s.tid
        AND l.ts_us >= s.ts_us AND l.ts_us <= s.end_us
    LEFT JOIN kernels k ON k.correlation = l.correlation AND k.source_id = l.source_id
    WHERE NOT EXISTS (  -- a step annotation inside another (SGLang's within vLLM-style) is one
        SELECT 1 FROM steps o
        WHERE o.source_id = s.source_id AND o.pid = s.pid AND o.tid = s.tid
            AND o.ts_us <= s.ts_us AND o.end_us >= s.end_us
            AND (o.ts_us < s.ts_us OR o.end_us > s.end_us))
    GROUP BY s.name, s.ts_us, s.source_id, s.line
    ORDER BY s.source_id, s.ts_us
"""
PACK = f"""
    WITH captured AS ({_CAPTURES}), stepped AS ({_STEPS})
    SELECT 'capture' AS kind, name, NULL AS launches, NULL AS graph_us, NULL AS eager_us,
        dur AS capture_us, source_id, line FROM captured
    UNION ALL
    SELECT 'step', name, launches, graph_us, eager_us, NULL, source_id, line FROM stepped
    ORDER BY kind, source_id, line
"""
"""The captures and steps of a slice in one table (a padding finding's evidence pack)."""


def step_batch(name: str) -> int | None:
    """The real batch a step annotation names (None when it names none)."""
    for pattern in STEP:
        m = pattern.search(name)
        if m:
            return int(m.group(1))
    return None


def steps_of(rows: list[tuple[str, str, int, float, float]]) -> list[GraphStep]:
    """The steps (outermost step annotations: name, source, launches, replayed and eager
    device time) whose annotation names their batch."""
    return [
        GraphStep(batch, str(source), int(launches), float(graph_us), float(eager_us))
        for name, source, launches, graph_us, eager_us in rows
        if (batch := step_batch(name)) is not None
    ]


def captures_of(rows: list[tuple[str, float]]) -> dict[int, tuple[str, float]]:
    """Captured size -> (mode, capture time) of capture annotations (name, duration). A size
    captured under several modes (vLLM's FULL_AND_PIECEWISE captures each size twice) names
    them all in name order and costs their captures together, whatever order the rows come
    in: the last row's mode and time alone were the engine's pick of the day."""
    found: dict[int, dict[str, float]] = {}
    for name, dur in rows:
        m = CAPTURE.match(name)
        if m:
            # one size and mode under two names (capture_8_FULL, capture_08_FULL): the longer,
            # as one name's repeats are (`_CAPTURES`)
            modes = found.setdefault(int(m.group(1)), {})
            modes[m.group(2)] = max(modes.get(m.group(2), 0.0), float(dur))
    return {
        size: (", ".join(sorted(modes)), math.fsum(modes[k] for k in sorted(modes)))
        for size, modes in found.items()
    }


def recorded_modes(rows: Iterable[tuple[int, str]]) -> dict[int, str]:
    """Captured size -> the graph mode its capture harness recorded (batch size, mode rows of
    `graph_capture`); sizes recorded under several modes name them all, in order."""
    modes: dict[int, set[str]] = {}
    for size, mode in rows:
        modes.setdefault(int(size), set()).add(str(mode))
    return {size: ", ".join(sorted(found)) for size, found in modes.items()}


def _size_of(s: GraphStep, sizes: list[int]) -> int | None:
    """The captured size a step ran at: the smallest that holds its batch (None: eager)."""
    at = bisect_left(sizes, s.batch)
    return sizes[at] if s.launches and at < len(sizes) else None


def buckets_of(
    captures: dict[int, tuple[str, float]],
    steps: list[GraphStep],
    th: Thresholds | None = None,
    seed: int = 0,
    modes: Mapping[int, str] | None = None,
) -> Graphs:
    """Each step placed in the smallest captured size that holds its batch (a replayed step
    with no capture in the trace is its own size); padding waste per bucket, and with `th`
    the padding finding; `modes`: the graph mode recorded per size (`recorded_modes`), which
    names a bucket's mode before its capture annotation does."""
    sizes = sorted(set(captures) | {s.batch for s in steps if s.launches and not captures})
    groups: dict[int | None, list[GraphStep]] = {}
    for s in steps:
        groups.setdefault(_size_of(s, sizes), []).append(s)
    buckets = []
    for size in [*sizes, None]:
        mine = groups.get(size, [])
        if size is None and not mine:
            continue
        graph_us = math.fsum(s.graph_us for s in mine)
        real = sum(s.batch for s in mine)
        padded = size * len(mine) if size is not None else real
        per_unit = graph_us / padded if padded and graph_us else None
        waste = (padded - real) * per_unit if per_unit is not None else None
        mode, capture_us = captures.get(size, (None, None)) if size is not None else (None, None)
        if size is not None and modes and size in modes:
            mode = modes[size]
        buckets.append(
            GraphBucket(
                size=size,
                mode=mode,
                captured=size in captures,
                capture_us=capture_us,
                steps=len(mine),
                launches=sum(s.launches for s in mine),
                real=real,
                padded=padded,
                graph_us=graph_us,
                eager_us=math.fsum(s.eager_us for s in mine),
                padding_waste_us=waste,
            )
        )
    g = Graphs(
        buckets=tuple(buckets),
        steps=tuple(steps),
        launches=sum(s.launches for s in steps),
        graph_us=math.fsum(s.graph_us for s in steps),
        padding_waste_us=math.fsum(b.padding_waste_us or 0.0 for b in buckets),
    )
    return g if th is None else replace(g, finding=padding_finding(g, captures, th, seed))


def padding_finding(
    g: Graphs, captures: dict[int, tuple[str, float]], th: Thresholds, seed: int
) -> PaddingFinding | None:
    """The padding waste as a finding: material (PADDING_MATERIAL of the replays' time), over
    at least `min_samples` replayed steps, its bootstrap CI (resampling steps) above zero."""
    share = g.waste_share
    if share is None or share < PADDING_MATERIAL:
        return None
    per_unit = {b.size: b.graph_us / b.padded for b in g.buckets if b.size and b.padded}
    sizes = sorted(b.size for b in g.buckets if b.size is not None)
    waste: list[float] = []
    saved: dict[int, float] = {}
    for s in g.steps:
        size = _size_of(s, sizes)
        w = (size - s.batch) * per_unit[size] if size is not None and size in per_unit else 0.0
        if size is not None:
            waste.append(w)
            saved[s.batch] = saved.get(s.batch, 0.0) + w
    if len(waste) < th.min_samples:
        return None
    lo, hi = bootstrap_mean(waste, th.bootstrap_resamples, seed)
    n = len(waste)
    if lo <= 0:
        return None
    best = sorted(((b, v) for b, v in saved.items() if v > 0), key=lambda x: (-x[1], x[0]))
    costs = [c for _, c in captures.values()]
    return PaddingFinding(
        Evidence(
            "padding_waste_us",
            math.fsum(waste),
            n,
            Interval(lo * n, hi * n),
            tuple(sorted({s.source_id for s in g.steps})),
        ),
        share,
        tuple(best[:PROPOSED_SIZES]),
        math.fsum(costs) / len(costs) if costs else None,
    )


def padding_seed(th: Thresholds, workload: str, slice_: str) -> int:
    """The bootstrap seed of a slice's padding waste."""
    return seed_for(th.seed, workload, slice_, "graph_padding")


def graphs(con: Connection, workload: str, slice_: str, th: Thresholds) -> Graphs | None:
    """The slice's graph buckets; None when its traces hold no capture and no graph launch."""
    p = {"w": workload, "s": slice_}
    captures = captures_of([(r[0], r[1]) for r in con.execute(_CAPTURES, p).fetchall()])
    rows = con.execute(_STEPS, p).fetchall()
    steps = steps_of([(r[0], r[2], r[4], r[5], r[6]) for r in rows])
    if not captures and not any(s.launches for s in steps):
        return None
    modes = recorded_modes((r[0], r[1]) for r in con.execute(_RECORDED, p).fetchall())
    return buckets_of(captures, steps, th, padding_seed(th, workload, slice_), modes)


def judge(g: Graphs | None) -> Judgement | None:
    """Captured graphs: at risk when their padding waste is a finding (material, CI clear of
    it: where the padding action stands), healthy when graphs replayed without it (None: no
    graph replayed)."""
    family = JudgementFamily.CUDA_GRAPHS
    if g is None or not g.launches:
        return None
    f = g.finding
    if f is not None:
        per = 1 / g.graph_us if g.graph_us else 0.0
        ci = (f.evidence.ci.low * per, f.evidence.ci.high * per) if f.evidence.ci else None
        return Judgement(
            family,
            Status.AT_RISK,
            StatusReason.PADDING_WASTE,
            f.share,
            FigureUnit.SHARE,
            PADDING_MATERIAL,
            f.evidence.n,
            ci,
        )
    return Judgement(
        family,
        Status.HEALTHY,
        StatusReason.GRAPHS_REPLAYED,
        g.waste_share,
        FigureUnit.SHARE,
        PADDING_MATERIAL,
        len(g.steps),
    )
