"""Per op x input shape, from a profiler trace: how far the mapping that ran is from what the
hardware allows (METRICS.md and docs/metrics.md, "Roofline").

Device time belongs to the op that launched it (the reader links kernels to their operator by
correlation id): an op call's time is the sum of its kernels', and the op x shape row holds
the distribution over calls. With the op's FLOPs and bytes (`flops`) and the device's limits
(`devices`), each row gets achieved TFLOP/s and GB/s, arithmetic intensity, its bound class,
the share of the roofline it reached, and its headroom: the time above the roofline bound.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import msgspec

from mapreport.analysis.base.common import Evidence, Interval, Thresholds
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.base.stats import bootstrap_mean, seed_for
from mapreport.analysis.device.flops import Work, parse_dims, work
from mapreport.core.connection import Connection
from mapreport.core.devices import (
    UNKNOWN_DEVICE,
    DeviceConfig,
    DeviceLimits,
    configured,
    recognise,
)
from mapreport.core.kinds import (
    Bound,
    FigureUnit,
    JudgementFamily,
    OpKind,
    Status,
    StatusReason,
    Suspect,
)
from mapreport.core.records import replace


class OpShape(msgspec.Struct, frozen=True):
    """One op x input shape x dtype, measured on the device."""

    op: str
    category: str
    """kernel, memcpy or memset."""
    shape: str
    dtype: str | None
    kind: OpKind | None
    calls: int
    kernels: int
    total_us: float
    mean_us: float
    p50_us: float
    p95_us: float
    gpu_share: float
    """Share of the trace's device time (kernels, copies, sets)."""
    flops: float | None
    """Per call."""
    bytes: float | None
    """Per call."""
    gemm: tuple[int, int, int] | None
    """(M, N, K) of each GEMM of a call."""
    tflops: float | None
    gbps: float | None
    intensity: float | None
    """FLOPs per byte."""
    bound: Bound | None
    roofline_pct: float | None
    """The roofline bound time over the measured mean time (1.0: at the roof)."""
    headroom_us: float | None
    """Total time above the roofline bound, over every call."""
    headroom_share: float | None
    """Headroom over the trace's device time."""
    roof_us: float | None
    """The roofline bound of one call."""
    gemm_batch: int = 1
    """GEMMs per call (a bmm's batch)."""
    kernel_name: str | None = None
    """The kernel's own name where no operator launched it (`op` is that name then)."""
    types: str = "[]"
    """The launching op's `Input type` (JSON text): with op, shape and `concrete`, the row's
    selection (its evidence pack's)."""
    concrete: str = "[]"
    min_us: float = 0.0
    """The fastest call."""
    floor_us: float | None = None
    """The least time one call's work can take on the device (`floor_us`): what `suspect`
    holds the fastest call to."""
    suspect: Suspect | None = None
    """Why the row's records cannot be real (its throughput, roofline share and headroom are
    then None); None for a credible row."""
    suspect_calls: int = 0
    """Calls faster than the device allows (every call, when the work itself is absurd)."""

    @property
    def label(self) -> str:
        """The op x shape as a reader names it: `aten::addmm M=141 N=512 K=512 bf16` (a GEMM
        by its M, N, K; other ops by their tensor inputs' dims: `aten::add 1x141x512,
        1x141x512 bf16`)."""
        if self.gemm is not None:
            m, n, k = self.gemm
            batch = f"B={self.gemm_batch} " if self.gemm_batch > 1 else ""
            dims = f"{batch}M={m} N={n} K={k}"
        else:  # the tensor inputs' dims; scalars and absent tensors (`()`) say nothing
            dims = ", ".join(d for d in self.shape.split(";") if d not in ("", "()"))
        if self.op == self.kernel_name:
            return kernel_label(self.op)
        what = f" ({self.category})" if self.category != "kernel" else ""
        dtype = f" {self.dtype}" if self.dtype else ""
        return f"{self.op}{what}" + (f" {dims}" if dims else "") + dtype

    @property
    def selection(self) -> tuple[str, str, str, str, str]:
        """(op, category, shape, types, concrete): what selects this row's calls."""
        return self.op, self.category, self.shape, self.types, self.concrete


class HeadroomFinding(msgspec.Struct, frozen=True):
    """An op x shape whose time above the roofline is material and whose per-call mean is
    above its roof beyond the bootstrap CI (METRICS.md evidence rules)."""

    row: OpShape
    evidence: Evidence
    """metric `headroom_us`: the total above the roof, n calls, the CI of that total."""


class ShapeHeadroom(msgspec.Struct, frozen=True):
    """The device time and headroom of the op calls made inside one request shape's spans."""

    shape: str
    calls: int
    device_us: float
    headroom_us: float
    """Over the calls whose op x shape has a roofline."""
    share: float
    """Headroom over the trace's device time."""


class Roofline(msgspec.Struct, frozen=True):
    """The op x shape table of a slice's profiler traces, with the device it was held to."""

    rows: tuple[OpShape, ...]
    """Ranked by headroom (rows without a roofline by total time, after)."""
    device: DeviceLimits | None
    device_names: tuple[str, ...]
    """The device names the traces recorded (for the message when none is recognised)."""
    gpu_time_us: float
    headroom_us: float
    """Sum over rows with a roofline."""
    counted_share: float
    """Share of device time in ops whose work is counted (FLOPs and bytes known)."""
    findings: tuple[HeadroomFinding, ...] = ()
    """The op x shapes whose headroom is a finding, most first (at most FINDINGS)."""
    by_request_shape: tuple[ShapeHeadroom, ...] = ()
    """Where the trace annotates requests: the headroom rolled up per request shape, most
    first."""
    suspect_calls: int = 0
    """Calls of suspect rows that ran faster than the device allows (or whose work is
    absurd), over every row."""

    @property
    def suspects(self) -> tuple[OpShape, ...]:
        """The rows left out of the roofline as suspect, in the table's order."""
        return tuple(r for r in self.rows if r.suspect is not None)

    def top(self, n: int) -> tuple[OpShape, ...]:
        """The `n` rows with the most headroom (or time, where no roofline)."""
        return self.rows[:n]


_CALLS_CTE = """
    WITH calls AS (
        SELECT coalesce(json_extract_string(extra, '$.op'), name) AS op,
            json_extract_string(extra, '$.op') IS NOT NULL AS launched,
            category, coalesce(shape, '') AS shape,
            coalesce(json_extract(extra, '$.types'), '[]') AS types,
            coalesce(json_extract(extra, '$.concrete'), '[]') AS concrete,
            coalesce(json_extract_string(extra, '$.external_id'),
                     CAST(correlation AS VARCHAR), CAST(ts_us AS VARCHAR)) AS call,
            source_id, count(*) AS kernels, fsum(dur_us) AS dur, min(line) AS line
        FROM op_exec
        WHERE workload = $w AND slice = $s AND category IN ('kernel', 'memcpy', 'memset')
        GROUP BY ALL
    )
"""
"""One row per op call: its launching op (or the kernel's own name when no op launched it),
inputs, and device time summed over its kernels. A call is keyed within its trace file (two
workers' traces reuse external ids)."""
_DEVICE_TIME = (
    _CALLS_CTE
    + """
    SELECT op, launched, category, shape, CAST(types AS VARCHAR), CAST(concrete AS VARCHAR),
        count(*) AS calls, sum(kernels) AS kernels, fsum(dur) AS total,
        quantile_cont(dur, 0.5) AS p50, quantile_cont(dur, 0.95) AS p95, min(dur) AS fastest
    FROM calls GROUP BY op, launched, category, shape, types, concrete
    ORDER BY op, launched, category, shape, CAST(types AS VARCHAR), CAST(concrete AS VARCHAR)
"""
)
"""Per op x shape x types the device time; in the order of its key, so the table's sort by
headroom keeps rows it ties (one op and shape under two categories or dtypes, whole-microsecond
totals) in one order."""
HEADROOM_MATERIAL = 0.05
"""An op x shape's headroom is material from this share of the device time."""
FINDINGS = 3
"""Headroom findings a slice gets, at most (the largest)."""
CALLS = (
    _CALLS_CTE
    + """
    SELECT dur, source_id, line FROM calls
    WHERE op = $op AND category = $category AND shape = $shape
        AND CAST(types AS VARCHAR) = $types AND CAST(concrete AS VARCHAR) = $concrete
    ORDER BY dur, source_id, line
"""
)
"""The calls of one op x shape (its headroom's rows: an evidence pack's query)."""
_BY_REQUEST = """
    WITH kernels AS (
        SELECT json_extract_string(extra, '$.op') AS op, category, coalesce(shape, '') AS shape,
            coalesce(json_extract(extra, '$.types'), '[]') AS types,
            coalesce(json_extract(extra, '$.concrete'), '[]') AS concrete,
            json_extract_string(extra, '$.external_id') AS ext, source_id, dur_us
        FROM op_exec
        WHERE workload = $w AND slice = $s AND category IN ('kernel', 'memcpy', 'memset')
            AND json_extract_string(extra, '$.op') IS NOT NULL
    ),
    ops AS (
        SELECT json_extract_string(extra, '$.external_id') AS ext, source_id,
            min(ts_us) AS ts_us, min(core) AS core
        FROM op_exec
        WHERE workload = $w AND slice = $s AND category = 'cpu_op'
            AND json_extract_string(extra, '$.external_id') IS NOT NULL
        GROUP BY ALL
    ),
    spans AS (
        SELECT shape AS request_shape, compute_start_us AS s, compute_end_us AS e, core,
            source_id
        FROM request WHERE workload = $w AND slice = $s
    )
    SELECT r.request_shape, k.op, k.category, k.shape, CAST(k.types AS VARCHAR),
        CAST(k.concrete AS VARCHAR), count(DISTINCT k.ext), fsum(k.dur_us)
    FROM kernels k
    JOIN ops o ON o.ext = k.ext AND o.source_id = k.source_id
    JOIN spans r ON r.source_id = o.source_id AND (r.core IS NULL OR r.core = o.core)
        AND o.ts_us >= r.s AND o.ts_us <= r.e
    GROUP BY ALL
"""
"""Per request shape and op x shape: the calls launched inside that shape's request spans (a
trace's `request <id> <shape>` annotations), and their device time."""
_DEVICES = """
    SELECT DISTINCT extra FROM environment
    WHERE extra LIKE '%device_properties%' AND source_id IN (
        SELECT DISTINCT source_id FROM op_exec WHERE workload = $w AND slice = $s)
    ORDER BY extra
"""
"""The device properties of the slice's traces, in one order: where every name maps to one
device, the first names how it was recognised."""


KERNEL_LABEL = 80
"""Characters of a kernel's name a label keeps (C++ template names run to thousands)."""


def kernel_label(name: str) -> str:
    """A kernel's name as a label: without its argument list (`void f<...>(args)` -> `f<...>`),
    cut to KERNEL_LABEL characters."""
    head = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    depth = 0
    for i, ch in enumerate(head):  # the `(` of the argument list is outside every template
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0 and i:
            head = head[:i]
            break
    return head if len(head) <= KERNEL_LABEL else head[: KERNEL_LABEL - 1] + "…"


def _json_list(text: str | None) -> list[Any]:
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def trace_devices(con: Connection, workload: str, slice_: str) -> list[dict[str, Any]]:
    """The `deviceProperties` entries the slice's traces recorded (first device of each)."""
    out = []
    for (extra,) in con.execute(_DEVICES, {"w": workload, "s": slice_}).fetchall():
        try:
            props = json.loads(extra).get("device_properties")
        except (ValueError, AttributeError):
            continue  # extra is ours, but an old or foreign dataset may hold anything
        if isinstance(props, dict):
            out.append(props)
    return out


SUSPECT_MARGIN = 1.5
"""A call is suspect below 1/SUSPECT_MARGIN of its floor (`floor_us`). The table's peaks are
datasheet maxima at boost clock, which no kernel beats, but a trace's device may be read as a
sibling part (an H100 NVL taken for an SXM has 1.16x its bandwidth) and a profiler's clock can
cut a kernel short: 1.5 leaves room for both, while a broken record misses by orders of
magnitude (a 4096^3 GEMM in 0.001 us is 1e5 times too fast)."""
CACHE_SPEEDUP = 5.0
"""How much faster than HBM the floor lets a call move its bytes. Bytes are the compulsory
traffic, but a tensor read right after another kernel wrote it can come from on-chip cache:
A100's L2 reads 5,120 B/clk (7.2 TB/s at 1.41 GHz), 4.6x the 40GB part's HBM; MI300X's
Infinity Cache (17.2 TB/s) is 3.2x its HBM."""
FEWER_FLOPS: Mapping[OpKind, float] = {OpKind.CONV: 4.0, OpKind.ATTENTION: 2.0}
"""How much less arithmetic than the counted FLOPs a library may do. Convolutions: Winograd
F(4x4, 3x3), which cuDNN and MIOpen pick for 3x3 kernels, multiplies 4x less than the direct
count; attention: a causal or windowed mask the recorded arguments do not state (the
efficient kernel's mask type) halves the work."""
MAX_BYTES = 2.0**44
"""16 TiB: no call's inputs and output can be larger (the largest accelerators hold 288 GB,
a Grace Hopper module 576 GB with its host memory); dims that add up to more are broken."""
TIMER_US = 1.0
"""What a whole-microsecond duration (older Kineto traces write no fractions) may miss per
kernel; a call whose fastest time is fractional was timed finer and gets no allowance."""


def floor_us(w: Work, device: DeviceLimits | None) -> float:
    """The least time one call of `w` can take on `device` (without one: on the fastest device
    `[device]` may declare): its FLOPs at the fastest peak its type may run at, less what a
    library may skip (FEWER_FLOPS), or its bytes at CACHE_SPEEDUP times the bandwidth."""
    d = device or UNKNOWN_DEVICE
    peak = d.fastest_tflops(w.dtype, w.kind.matrix)
    compute = w.flops / FEWER_FLOPS.get(w.kind, 1.0) / (peak * 1e6)
    return max(compute, w.bytes / (CACHE_SPEEDUP * d.memory_gbps * 1e3))


def suspect(
    flops: float, nbytes: float, floor: float, dur_us: float, kernels: int
) -> Suspect | None:
    """Why a call of `flops` and `nbytes`, timed at `dur_us` over `kernels` kernels, cannot be
    real, or None: a count beyond float range or bytes beyond MAX_BYTES, or a time under
    1/SUSPECT_MARGIN of the call's floor even with TIMER_US more per kernel where the time is
    whole microseconds."""
    if not (math.isfinite(flops) and math.isfinite(nbytes)) or nbytes > MAX_BYTES:
        return Suspect.ABSURD_WORK
    timer = TIMER_US * kernels if float(dur_us).is_integer() else 0.0
    if (dur_us + timer) * SUSPECT_MARGIN < floor:
        return Suspect.FASTER_THAN_DEVICE
    return None


def _row(
    key: tuple[Any, ...], stats: tuple[Any, ...], gpu: float, device: DeviceLimits | None
) -> OpShape:
    op, launched, category, shape, types, concrete = key
    calls, kernels, total, p50, p95, fastest = stats
    total, calls, fastest = float(total), int(calls), float(fastest)
    mean = total / calls
    w: Work | None = None
    if launched and category == "kernel":  # a copy to or from the host is not held to HBM
        w = work(op, parse_dims(shape), _json_list(types), _json_list(concrete))
    floor = floor_us(w, device) if w is not None else None
    per_call = math.ceil(int(kernels) / calls)
    # the fastest call decides: a row whose mean holds an impossible time has no figure
    why = suspect(w.flops, w.bytes, floor, fastest, per_call) if w and floor is not None else None
    tflops = gbps = intensity = pct = headroom = roof = None
    bound = None
    if why == Suspect.ABSURD_WORK:
        floor = None  # dims that add up to no real count: no FLOPs, bytes or figure from them
    elif w is not None and mean > 0:
        intensity = w.flops / w.bytes if w.bytes else None
        peak = device.peak_tflops(w.dtype, w.kind.matrix) if device else None
        if device is not None and peak and w.bytes:
            compute_us = w.flops / (peak * 1e6)
            memory_us = w.bytes / (device.memory_gbps * 1e3)
            bound = Bound.COMPUTE if compute_us >= memory_us else Bound.MEMORY
            roof = max(compute_us, memory_us)
        if why is None:  # a suspect row's time gives no throughput and no headroom
            tflops, gbps = w.flops / mean / 1e6, w.bytes / mean / 1e3
            if roof is not None:
                pct, headroom = roof / mean, max(0.0, mean - roof) * calls
        else:
            roof = None
    counted = w if why != Suspect.ABSURD_WORK else None
    return OpShape(
        op=op,
        category=category,
        shape=shape,
        dtype=str(w.dtype) if w and w.dtype else None,
        kind=w.kind if w else None,
        calls=calls,
        kernels=int(kernels),
        total_us=total,
        mean_us=mean,
        p50_us=float(p50),
        p95_us=float(p95),
        gpu_share=total / gpu if gpu else 0.0,
        flops=counted.flops if counted else None,
        bytes=counted.bytes if counted else None,
        gemm=w.gemm if w else None,
        tflops=tflops,
        gbps=gbps,
        intensity=intensity,
        bound=bound,
        roofline_pct=pct,
        headroom_us=headroom,
        headroom_share=headroom / gpu if headroom is not None and gpu else None,
        roof_us=roof,
        gemm_batch=w.batch if w else 1,
        kernel_name=None if launched else op,
        types=types,
        concrete=concrete,
        min_us=fastest,
        floor_us=floor,
        suspect=why,
        suspect_calls=calls if why == Suspect.ABSURD_WORK else 0,
    )


def _suspect_calls(con: Connection, workload: str, slice_: str, row: OpShape) -> OpShape:
    """A row faster than the device with its number of calls that `suspect` flags."""
    if row.suspect != Suspect.FASTER_THAN_DEVICE or row.floor_us is None:
        return row
    flops, nbytes, floor = row.flops or 0.0, row.bytes or 0.0, row.floor_us
    per_call = math.ceil(row.kernels / row.calls)
    calls = con.execute(CALLS, calls_params(workload, slice_, row)).fetchall()
    fast = [d for d, _, _ in calls if suspect(flops, nbytes, floor, float(d), per_call)]
    return replace(row, suspect_calls=len(fast))


def calls_params(workload: str, slice_: str, row: OpShape) -> dict[str, str]:
    """The bound parameters of `CALLS` for one op x shape."""
    op, category, shape, types, concrete = row.selection
    return {
        "w": workload,
        "s": slice_,
        "op": op,
        "category": category,
        "shape": shape,
        "types": types,
        "concrete": concrete,
    }


def headroom_of(
    durations: list[float], roof_us: float, th: Thresholds, seed: int
) -> tuple[float, int, Interval]:
    """(headroom, calls, 95% CI of the headroom) of an op x shape's call durations: the
    calls' mean time above the roof times their count, its CI by bootstrapping the mean."""
    n = len(durations)
    mean = math.fsum(durations) / n
    lo, hi = bootstrap_mean(durations, th.bootstrap_resamples, seed)
    return max(0.0, mean - roof_us) * n, n, Interval((lo - roof_us) * n, (hi - roof_us) * n)


def headroom_seed(th: Thresholds, workload: str, slice_: str, row: OpShape) -> int:
    """The bootstrap seed of an op x shape's headroom."""
    return seed_for(th.seed, workload, slice_, row.op, row.shape, row.types, "headroom")


def _finding(
    con: Connection, workload: str, slice_: str, row: OpShape, th: Thresholds
) -> HeadroomFinding | None:
    """The row's headroom as a finding, when its calls are enough and the CI of their mean
    lies above the roof."""
    if row.roof_us is None or row.headroom_share is None or row.calls < th.min_samples:
        return None
    calls = con.execute(CALLS, calls_params(workload, slice_, row)).fetchall()
    durations = [float(d) for d, _, _ in calls]
    value, n, ci = headroom_of(durations, row.roof_us, th, headroom_seed(th, workload, slice_, row))
    if ci.low <= 0:
        return None
    sources = tuple(sorted({str(s) for _, s, _ in calls}))
    return HeadroomFinding(row, Evidence("headroom_us", value, n, ci, sources))


def _by_request_shape(
    con: Connection, p: dict[str, str], rows: list[OpShape], gpu: float
) -> tuple[ShapeHeadroom, ...]:
    """The op calls inside each request shape's spans, with the headroom of those whose op x
    shape has a roofline: its bound per call times their number, below their device time."""
    roofs = {r.selection: r.roof_us for r in rows}
    # summed exactly (fsum): the groups come in the engine's order, and a running float sum
    # would differ in its last digits from run to run
    totals: dict[str, tuple[list[int], list[float], list[float]]] = {}
    for shape, op, category, op_shape, types, concrete, n, dur in con.execute(
        _BY_REQUEST, p
    ).fetchall():
        calls, device, above = totals.setdefault(str(shape), ([], [], []))
        calls.append(int(n))
        device.append(float(dur))
        roof = roofs.get((op, category, op_shape, types, concrete))
        if roof is not None:
            above.append(max(0.0, float(dur) - int(n) * roof))
    out = []
    for shape, (calls, device, above) in totals.items():
        head = math.fsum(above)
        out.append(
            ShapeHeadroom(shape, sum(calls), math.fsum(device), head, head / gpu if gpu else 0.0)
        )
    return tuple(sorted(out, key=lambda x: (-x.headroom_us, x.shape)))


def roofline(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    cfg: DeviceConfig | None = None,
) -> Roofline | None:
    """The op x shape table of a slice's device time; None when it has no device rows."""
    p = {"w": workload, "s": slice_}
    measured = con.execute(_DEVICE_TIME, p).fetchall()
    if not measured:
        return None
    props = trace_devices(con, workload, slice_)
    names = tuple(sorted({str(x.get("name") or "") for x in props} - {""}))
    seen = [d for x in props if (d := recognise(x)) is not None]
    recognised = seen[0] if seen and all(d.name == seen[0].name for d in seen) else None
    device = configured(recognised, cfg or DeviceConfig())
    gpu = math.fsum(float(r[8]) for r in measured)
    rows = [_row(tuple(r[:6]), tuple(r[6:]), gpu, device) for r in measured]
    rows = [_suspect_calls(con, workload, slice_, r) for r in rows]
    rows.sort(key=lambda r: (r.headroom_us is None, -(r.headroom_us or r.total_us), r.op, r.shape))
    counted = math.fsum(r.total_us for r in rows if r.flops is not None)
    by_shape = _by_request_shape(con, p, rows, gpu)
    material = [r for r in rows if (r.headroom_share or 0.0) >= HEADROOM_MATERIAL]
    found = [f for r in material if (f := _finding(con, workload, slice_, r, th)) is not None]
    return Roofline(
        rows=tuple(rows),
        device=device,
        device_names=names,
        gpu_time_us=gpu,
        headroom_us=math.fsum(r.headroom_us or 0.0 for r in rows),
        counted_share=counted / gpu if gpu else 0.0,
        findings=tuple(found[:FINDINGS]),
        by_request_shape=by_shape,
        suspect_calls=sum(r.suspect_calls for r in rows),
    )


def judge(rf: Roofline | None) -> Judgement | None:
    """Device time above the roofline: at risk when an op x shape's headroom is a finding
    (at least HEADROOM_MATERIAL of device time, CI clear of it: where a headroom action
    stands), healthy when none is; not judged without the device's limits (None: no trace)."""
    family = JudgementFamily.ROOFLINE
    if rf is None or not rf.rows:
        return None
    if rf.device is None:
        return Judgement(family, Status.NOT_JUDGED, StatusReason.NO_DEVICE_LIMITS)
    share = rf.headroom_us / rf.gpu_time_us if rf.gpu_time_us else 0.0
    calls = sum(r.calls for r in rf.rows)
    if rf.findings:
        top = rf.findings[0]  # its evidence is the headroom in us: as shares of device time
        per = 1 / rf.gpu_time_us if rf.gpu_time_us else 0.0
        ci = (top.evidence.ci.low * per, top.evidence.ci.high * per) if top.evidence.ci else None
        return Judgement(
            family,
            Status.AT_RISK,
            StatusReason.ROOFLINE_HEADROOM,
            top.row.headroom_share,
            FigureUnit.SHARE,
            HEADROOM_MATERIAL,
            top.evidence.n,
            ci,
            subject=top.row.label,
        )
    return Judgement(
        family,
        Status.HEALTHY,
        StatusReason.NEAR_ROOFLINE,
        share,
        FigureUnit.SHARE,
        HEADROOM_MATERIAL,
        calls,
    )
