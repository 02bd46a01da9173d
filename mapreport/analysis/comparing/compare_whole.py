"""The whole before the parts (docs/compare.md, "The whole first"): each side's total time (the
device's when the side has device rows, else the host's), B over A with a bootstrap CI, and its
split by op category; the op x shapes of both sides are then each a part of that change."""

from __future__ import annotations

import msgspec
import numpy as np

from mapreport.analysis.comparing.compare import OP_CALLS, OpKey
from mapreport.analysis.device.flops import op_kind
from mapreport.analysis.device.roofline import trace_devices
from mapreport.core.connection import Connection
from mapreport.core.kinds import TimeBasis, TimeCategory

EXACT_RESAMPLING = 200
"""An op x shape of more calls than this draws its resampled mean from its normal limit (mean,
standard error) instead of resampling every call: a trace of a million calls would otherwise
draw 2,000 million indices."""


class SideOps(msgspec.Struct, frozen=True):
    """One side's op x shapes, each with the time of every call, and what its total is of."""

    calls: dict[OpKey, np.ndarray]
    categories: dict[OpKey, TimeCategory]
    basis: TimeBasis
    devices: tuple[str, ...]
    """The devices the side's traces state (`deviceProperties` names); () on the host."""


HOST_OPS = """
    SELECT name AS op, coalesce(shape, '') AS shape,
        CAST(coalesce(json_extract(extra, '$.types'), '[]') AS VARCHAR) AS types,
        source_id || '/' || coalesce(json_extract_string(extra, '$.pid'), '') || '/'
            || coalesce(json_extract_string(extra, '$.tid'), '') AS thread,
        ts_us, dur_us
    FROM op_exec
    WHERE workload = $w AND slice = $s AND category = 'cpu_op' AND ts_us IS NOT NULL
    ORDER BY thread, ts_us, dur_us DESC, line
"""
"""A trace's host-side operators with their thread and span (`host_calls`)."""


def category_of(op: str, transfer: bool, launched: bool) -> TimeCategory:
    """What an op x shape's time is spent on: host-device copies and sets, kernels no operator
    launched, else the op's kind by its name (`flops.op_kind`)."""
    if not launched:
        return TimeCategory.UNATTRIBUTED
    if transfer:
        return TimeCategory.TRANSFER
    if op == "aten::convolution_backward":
        return TimeCategory.CONV
    kind = op_kind(op)
    return TimeCategory.OTHER if kind is None else TimeCategory(kind.value)


def side_ops(con: Connection, workload: str, slice_: str) -> SideOps:
    """A side's op x shapes on its device (`OP_CALLS`), or, when its traces hold no device
    rows, on its host (`host_calls`)."""
    params = {"w": workload, "s": slice_}
    calls: dict[OpKey, list[float]] = {}
    flags: dict[OpKey, tuple[bool, bool]] = {}
    for op, shape, types, dur, _, transfer, launched in con.execute(OP_CALLS, params).fetchall():
        k = (str(op), str(shape), str(types))
        calls.setdefault(k, []).append(float(dur))
        was = flags.get(k, (True, True))
        flags[k] = (was[0] and bool(transfer), was[1] and bool(launched))
    if calls:
        names = tuple(sorted({str(d.get("name")) for d in trace_devices(con, workload, slice_)}))
        return SideOps(
            {k: np.asarray(v, dtype=np.float64) for k, v in calls.items()},
            {k: category_of(k[0], *flags[k]) for k in calls},
            TimeBasis.DEVICE,
            tuple(n for n in names if n != "None"),
        )
    host = host_calls(con, workload, slice_)
    return SideOps(host, {k: category_of(k[0], False, True) for k in host}, TimeBasis.HOST, ())


def host_calls(con: Connection, workload: str, slice_: str) -> dict[OpKey, np.ndarray]:
    """Per host-side op x shape: each call's self time (its span less the spans of the ops it
    called on its thread), so that a side's calls add up to the time its threads spent in
    operators, each microsecond counted once."""
    rows = con.execute(HOST_OPS, {"w": workload, "s": slice_}).fetchall()
    own = np.array([float(r[5]) for r in rows], dtype=np.float64)
    stack: list[int] = []
    thread = None
    for i, (_, _, _, t, ts, dur) in enumerate(rows):
        if t != thread:
            stack, thread = [], t
        end = float(ts) + float(dur)
        while stack and float(rows[stack[-1]][4]) + float(rows[stack[-1]][5]) <= float(ts):
            stack.pop()
        if stack:
            top = stack[-1]
            own[top] -= min(end, float(rows[top][4]) + float(rows[top][5])) - float(ts)
        stack.append(i)
    out: dict[OpKey, list[float]] = {}
    for r, t in zip(rows, own, strict=True):
        out.setdefault((str(r[0]), str(r[1]), str(r[2])), []).append(max(float(t), 0.0))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


class CategoryTotal(msgspec.Struct, frozen=True):
    """One category's time on both sides and its part of the change of the whole."""

    category: TimeCategory
    a_us: float
    b_us: float
    calls_a: int
    calls_b: int
    contribution: float | None
    """(B - A) over the change of the whole (None when the whole did not change)."""

    @property
    def ratio(self) -> float | None:
        """B over A (None where A spent nothing)."""
        return self.b_us / self.a_us if self.a_us else None


class TotalComparison(msgspec.Struct, frozen=True):
    """The whole: each side's total time, B over A with its CI, and its split by category."""

    basis_a: TimeBasis
    basis_b: TimeBasis
    devices_a: tuple[str, ...]
    devices_b: tuple[str, ...]
    a_us: float
    b_us: float
    calls_a: int
    calls_b: int
    ratio: float
    ci: tuple[float, float]
    """95% bootstrap CI: each op x shape's calls resampled within it, its count held."""
    moved: bool
    """The CI excludes 1."""
    categories: tuple[CategoryTotal, ...]
    """Largest |B - A| first."""

    @property
    def delta_us(self) -> float:
        """B's total minus A's."""
        return self.b_us - self.a_us


def resampled_totals(
    calls: dict[OpKey, np.ndarray], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """`resamples` bootstrap totals of a side: each op x shape's calls resampled within it (its
    count held: the program ran that many), summed. One call resamples to itself."""
    out = np.zeros(resamples, dtype=np.float64)
    for k in sorted(calls):
        x = calls[k]
        n = len(x)
        if n == 1:
            out += x[0]
        elif n <= EXACT_RESAMPLING:
            out += x[rng.integers(0, n, size=(resamples, n))].sum(axis=1)
        else:
            out += n * rng.normal(x.mean(), x.std() / np.sqrt(n), size=resamples)
    return out


def compare_total(a: SideOps, b: SideOps, resamples: int, seed: int) -> TotalComparison | None:
    """The whole of two sides' op x shapes (None when either side holds none): totals, B over
    A, its percentile bootstrap 95% CI, and each category's time and part of the change."""
    if not a.calls or not b.calls:
        return None
    rng = np.random.default_rng(seed)
    ta = float(sum(float(v.sum()) for v in a.calls.values()))
    tb = float(sum(float(v.sum()) for v in b.calls.values()))
    ra = resampled_totals(a.calls, resamples, rng)
    rb = resampled_totals(b.calls, resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = rb / ra
    ratios = ratios[np.isfinite(ratios)]
    lo, hi = (float(x) for x in np.quantile(ratios, [0.025, 0.975]))
    change = tb - ta
    cats = []
    for cat in TimeCategory:
        sa = [v for k, v in a.calls.items() if a.categories[k] == cat]
        sb = [v for k, v in b.calls.items() if b.categories[k] == cat]
        if not sa and not sb:
            continue
        ua, ub = float(sum(v.sum() for v in sa)), float(sum(v.sum() for v in sb))
        part = (ub - ua) / change if change else None
        cats.append(CategoryTotal(cat, ua, ub, sum(map(len, sa)), sum(map(len, sb)), part))
    cats.sort(key=lambda c: (-abs(c.b_us - c.a_us), c.category.value))
    return TotalComparison(
        a.basis, b.basis, a.devices, b.devices, ta, tb,
        sum(map(len, a.calls.values())), sum(map(len, b.calls.values())),
        tb / ta if ta else float("nan"), (lo, hi), not lo <= 1.0 <= hi, tuple(cats),
    )  # fmt: skip
