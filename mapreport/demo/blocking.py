"""The demo's planted head-of-line blocking: a shape the server has not compiled recompiles on
the serving path, holding its worker for 1.2-1.7 s, while requests of another shape queue
behind it.

The generator draws every other request first; the stalls are then placed where their worker
is idle from shortly before the stall to well after it, so no other shape's request waits
behind them (the other planted results stay as they are). Its own random stream, seeded by
the night, leaves the other shapes' draws untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from mapreport.demo.truth import ShapeTruth, WorkloadTruth

TRIGGER = "trigger"
VICTIM = "victim"
"""A shape's role in the plant (`ShapeTruth.blocking`)."""
STALLS = 3
"""Serving-time recompiles a night: the trigger shape's first request on three workers."""
STALL_US = (1.2e6, 1.7e6)
VICTIMS_PER_STALL = (5, 8)
"""Requests of the victim shape that arrive during each stall."""
QUIET_BEFORE_US = 100_000.0
QUIET_AFTER_US = 1_500_000.0
"""Idle time around a stall on its worker (the victims' queue drains inside it)."""
HOUR_US = 3.6e9
CORES = 4
TRIES = 10_000
"""Draws of a place before one is taken as it is: a fleet-sized benchmark night (hundreds of
times the demo's requests) has no idle second on any worker, so there a stall holds a busy
worker and what arrives behind it waits, as it would in a fleet. The demo finds its places
within a few draws."""


class _Busy:
    """Per core, the (arrival, compute end) intervals its requests hold: those drawn before,
    sorted by arrival with a running maximum of their ends (an overlap test in O(log n), so a
    fleet-sized benchmark night places its few planted requests as fast as the demo's), and
    the few placed here since."""

    def __init__(self, rows: Sequence[dict[str, Any]]):
        drawn: dict[int, list[tuple[float, float]]] = {}
        for r in rows:
            if "arrival_us" in r:
                drawn.setdefault(r["core"], []).append((r["arrival_us"], r["compute_end_us"]))
        self.drawn = {}
        for core, spans in drawn.items():
            a, e = np.asarray(sorted(spans)).T
            self.drawn[core] = (a, np.maximum.accumulate(e))
        self.placed: dict[int, list[tuple[float, float]]] = {}

    def free(self, core: int, start: float, end: float) -> bool:
        """No interval on the core overlaps [start, end]."""
        if core in self.drawn:
            arrivals, ends = self.drawn[core]
            k = int(np.searchsorted(arrivals, end, side="right"))  # those arriving by `end`
            if k and ends[k - 1] >= start:
                return False
        return all(e < start or a > end for a, e in self.placed.get(core, []))

    def add(self, core: int, start: float, end: float) -> None:
        """Hold [start, end] on the core."""
        self.placed.setdefault(core, []).append((start, end))


def planted_rows(
    w: WorkloadTruth,
    shapes: Sequence[tuple[int, ShapeTruth]],
    rows: Sequence[dict[str, Any]],
    start_us: float,
) -> list[dict[str, Any]]:
    """The trigger's and the victim's requests (and the recompile events) for one night."""
    from mapreport.demo.truth import MEM_PER_US, request_row

    by_role = {s.blocking: (si, s) for si, s in shapes}
    (ti, trigger), (vi, victim) = by_role[TRIGGER], by_role[VICTIM]
    rng = np.random.default_rng([int(start_us // 1e6), ti, vi])
    busy = _Busy(rows)
    out: list[dict[str, Any]] = []
    stalls: list[tuple[int, float, float]] = []
    for core in range(STALLS):
        stall = rng.uniform(*STALL_US)
        for _ in range(TRIES):
            t = start_us + rng.uniform(0.05, 0.95) * HOUR_US
            if busy.free(core, t - QUIET_BEFORE_US, t + stall + QUIET_AFTER_US):
                break
        stalls.append((core, t, stall))
        busy.add(core, t - QUIET_BEFORE_US, t + stall + QUIET_AFTER_US)

    def row(si: int, i: int, s: ShapeTruth, times: tuple[float, ...], core: int) -> None:
        a, q, c, e = times
        variant = "adapted" if s is trigger else "static"
        mem = int(s.static_us * MEM_PER_US)
        rid = f"{w.workload[:4]}-{si:02d}-{i:06d}"
        out.append(
            request_row(w, rid, s, (a, q, c, e), w.plan_id, variant, core, "interactive", mem, "ok")
        )

    n_blocked = 0
    for k, (core, t, stall) in enumerate(stalls):
        begin = t + 200.0
        row(ti, k, trigger, (t, t + 15.0, begin, begin + stall), core)
        out.append(
            {
                "event": "recompile",
                "workload": w.workload,
                **({"slice": w.slice} if w.slice else {}),
                "ts_us": round(begin, 1),
                "dur_us": round(stall - trigger.static_us, 1),
                "shape": trigger.dims,
                "plan_id": w.plan_id,
                "detail": "shape not compiled in warm-up",
            }
        )
        free_at = begin + stall
        arrivals = np.sort(rng.uniform(t + 1e3, t + stall, rng.integers(*VICTIMS_PER_STALL)))
        for a in arrivals:  # FIFO: each waits for the one before it
            compute = victim.static_us * rng.lognormal(0.0, 0.08)
            row(vi, n_blocked, victim, (a, a + 15.0, free_at, free_at + compute), core)
            free_at += compute
            n_blocked += 1
    # after its compile a worker serves the trigger shape like any other; before it, never
    compiled = {core: t + stall + QUIET_AFTER_US for core, t, stall in stalls}
    for i in range(len(stalls), trigger.requests):
        _unblocked(
            rng,
            busy,
            compiled,
            start_us + HOUR_US,
            trigger,
            lambda *x, i=i: row(ti, i, trigger, *x),
        )
    anywhere = dict.fromkeys(range(CORES), start_us)
    for i in range(n_blocked, victim.requests):
        _unblocked(
            rng, busy, anywhere, start_us + HOUR_US, victim, lambda *x, i=i: row(vi, i, victim, *x)
        )
    return out


def _unblocked(
    rng: np.random.Generator,
    busy: _Busy,
    after: dict[int, float],
    end_us: float,
    s: ShapeTruth,
    emit: Any,
) -> None:
    """One ordinary request of `s` on one of the workers of `after`, arriving after its time
    there and before `end_us`, on a worker idle from its arrival to its end (so it
    waits behind nothing and nothing waits behind it; `TRIES`)."""
    cores = sorted(after)
    for _ in range(TRIES):
        core = cores[int(rng.integers(0, len(cores)))]
        a = rng.uniform(after[core], end_us)
        queue = rng.lognormal(np.log(180.0), 0.5)
        compute = s.static_us * rng.lognormal(0.0, 0.08)
        end = a + 15.0 + queue + compute
        if busy.free(core, a, end):
            break
    busy.add(core, a, end)
    emit((a, a + 15.0, a + 15.0 + queue, end), core)
