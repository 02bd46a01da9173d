"""Where a device's time went, from a profiler trace's device rows (as HTA's temporal and
overlap breakdowns read it): computing, communicating, copying, setting memory, or idle between
the first and the last thing it ran; and the communication no computation hid (exposed).

Busy time is the union of intervals (streams overlap): a category's time is the length of its
own union, and idle is the span less the union of everything.
"""

from __future__ import annotations

import msgspec
import numpy as np

from mapreport.core.connection import Connection
from mapreport.core.kinds import DeviceActivity
from mapreport.core.records import replace


class Timeline(msgspec.Struct, frozen=True):
    """Shares of the devices' span (summed over devices) per activity; the shares of the
    busy categories overlap where streams ran at once, idle does not."""

    devices: int
    """Distinct devices (a device traced in two files is one device with two spans)."""
    span_us: float
    shares: dict[DeviceActivity, float]
    exposed_communication: float
    """Share of the span spent communicating while nothing computed."""
    kernels: int
    median_kernel_us: float | None
    """The median compute kernel's duration (a launch-bound trace runs short kernels)."""
    windows: tuple[tuple[float, float], ...] = ()
    """(idle, width) of WINDOWS equal windows of each device's span: the blocks the idle
    share's CI resamples (`idle_interval`)."""
    capture_only: bool = False
    """Every trace of the slice is a graph capture (the server's start-up: kernels run once
    each while the graphs are recorded), so its idle time is not serving idle."""


WINDOWS = 20
"""Equal time windows per device whose idle time the idle share's bootstrap resamples (a
block bootstrap over time: idle gaps cluster, so single gaps are not independent)."""


def _busy_before(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Busy time of disjoint intervals before each time in `t`."""
    ends = np.cumsum(e - s)
    at = np.searchsorted(s, t, side="right") - 1  # the last interval started by t
    done = np.where(at > 0, ends[np.maximum(at - 1, 0)], 0.0)
    inside = np.where(at >= 0, np.minimum(t, e[np.maximum(at, 0)]) - s[np.maximum(at, 0)], 0.0)
    return np.where(at >= 0, done + np.maximum(inside, 0.0), 0.0)


def idle_interval(t: Timeline, resamples: int, seed: int) -> tuple[float, float] | None:
    """The 95% bootstrap CI of the idle share, resampling the timeline's windows (the share
    is their idle time over their width)."""
    if len(t.windows) < 2:
        return None
    w = np.array(t.windows, float)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(w), size=(resamples, len(w)))
    shares = w[pick, 0].sum(axis=1) / w[pick, 1].sum(axis=1)
    lo, hi = np.quantile(shares, [0.025, 0.975])
    return float(lo), float(hi)


ROWS = """
    WITH traces AS (
        SELECT DISTINCT source_id FROM op_exec
        WHERE workload = $w AND slice = $s AND category = 'kernel'
    ),
    captures AS (
        SELECT DISTINCT source_id FROM op_exec
        WHERE workload = $w AND slice = $s AND category = 'runtime'
            AND name LIKE '%StreamBeginCapture%'
    )
    SELECT coalesce(CAST(device AS VARCHAR), json_extract_string(extra, '$.pid'), '') AS dev,
        source_id AS trace,
        CASE WHEN category = 'kernel' AND regexp_matches(lower(name), $comm)
             THEN 'communication'
             WHEN category = 'kernel' THEN 'compute' ELSE category END AS activity,
        ts_us, ts_us + dur_us AS end_us, source_id, line
    FROM op_exec
    WHERE workload = $w AND slice = $s AND category IN ('kernel', 'memcpy', 'memset')
        AND ts_us IS NOT NULL
        -- a graph-capture trace is the server's start-up, not its serving: left out when
        -- the slice has a trace that serves
        AND (source_id NOT IN (SELECT source_id FROM captures)
             OR NOT EXISTS (SELECT 1 FROM traces WHERE source_id NOT IN (SELECT * FROM captures)))
    ORDER BY trace, dev, ts_us, line
"""
"""The device rows of a slice with their activity (a timeline's rows: an evidence pack's
query)."""
COMMUNICATION_KERNELS = r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|c10d"
"""Kernel names that are collective communication (NCCL, RCCL and their ops)."""


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint intervals covering the given ones (sorted by start)."""
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def covered(s: np.ndarray, e: np.ndarray) -> float:
    """Total length of disjoint intervals."""
    return float((e - s).sum())


def overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two sets of disjoint intervals."""
    (sa, ea), (sb, eb) = a, b
    i = j = 0
    total = 0.0
    while i < len(sa) and j < len(sb):
        lo, hi = max(sa[i], sb[j]), min(ea[i], eb[j])
        if hi > lo:
            total += hi - lo
        if ea[i] < eb[j]:
            i += 1
        else:
            j += 1
    return total


CAPTURE_ONLY = """
    SELECT count(DISTINCT source_id) FILTER (WHERE category = 'runtime'
            AND name LIKE '%StreamBeginCapture%') > 0
        AND count(DISTINCT source_id) FILTER (WHERE category = 'runtime'
            AND name LIKE '%StreamBeginCapture%')
            = count(DISTINCT source_id) FILTER (WHERE category = 'kernel')
    FROM op_exec WHERE workload = $w AND slice = $s
"""
"""Whether every trace of the slice with kernels is a graph capture."""


def timeline(con: Connection, workload: str, slice_: str) -> Timeline | None:
    """The slice's device timeline; None when its traces hold no device rows."""
    rows = con.execute(ROWS, {"w": workload, "s": slice_, "comm": COMMUNICATION_KERNELS}).fetchall()
    if not rows:
        return None
    found = con.execute(CAPTURE_ONLY, {"w": workload, "s": slice_}).fetchone()
    capture_only = bool(found and found[0])
    return replace(
        of_rows(
            [str(r[0]) for r in rows],
            [str(r[1]) for r in rows],
            [str(r[2]) for r in rows],
            [float(r[3]) for r in rows],
            [float(r[4]) for r in rows],
        ),
        capture_only=capture_only,
    )


def of_rows(
    devices: list[str],
    traces: list[str],
    activities: list[str],
    starts: list[float],
    ends: list[float],
) -> Timeline:
    """The timeline of device rows (`ROWS`'s columns): per device of each trace file, each
    activity's union over its span, idle the span less the union of everything (two files
    of one device are two spans: the time between them is not the device's idle time)."""
    dev = np.array([f"{t}\x1f{d}" for t, d in zip(traces, devices, strict=True)], object)
    act = np.array(activities, object)
    ts = np.array(starts, float)
    end = np.array(ends, float)
    totals = dict.fromkeys(DeviceActivity, 0.0)
    span = exposed = 0.0
    windows: list[tuple[float, float]] = []
    for d in sorted(set(dev.tolist())):
        mine = dev == d
        s, e = ts[mine], end[mine]
        width = float(e.max() - s.min())
        span += width
        busy = union(s, e)
        totals[DeviceActivity.IDLE] += width - covered(*busy)
        edges = np.linspace(float(s.min()), float(e.max()), WINDOWS + 1)
        before = _busy_before(*busy, edges)
        windows += [
            (float(wd - b), float(wd))
            for wd, b in zip(np.diff(edges), np.diff(before), strict=True)
        ]
        parts = {}
        for a in (
            DeviceActivity.COMPUTE,
            DeviceActivity.COMMUNICATION,
            DeviceActivity.MEMCPY,
            DeviceActivity.MEMSET,
        ):
            sel = act[mine] == a.value
            parts[a] = union(s[sel], e[sel])
            totals[a] += covered(*parts[a])
        comm = parts[DeviceActivity.COMMUNICATION]
        exposed += covered(*comm) - overlap(comm, parts[DeviceActivity.COMPUTE])
    shares = {a: (v / span if span else 0.0) for a, v in totals.items()}
    durations = (end - ts)[act == "compute"]
    return Timeline(
        devices=len(set(devices)),
        span_us=span,
        shares=shares,
        exposed_communication=float(exposed / span) if span else 0.0,
        kernels=int((act == "compute").sum() + (act == "communication").sum()),
        median_kernel_us=float(np.median(durations)) if len(durations) else None,
        windows=tuple(windows),
    )
