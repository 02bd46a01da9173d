"""Two runs compared per request shape (docs/compare.md): the B/A ratio of each latency
quantile with a two-sample bootstrap CI (fixed seed), a verdict per shape, and the false
discovery rate held across shapes (Benjamini-Hochberg).

A side is any set of requests: a slice of one dataset, of another, of another night. The
functions here take the latency samples of each side by shape; `side_samples` reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from mapreport.analysis.common import Thresholds
from mapreport.analysis.stats import SortedArray, quantile, resampled_quantile, seed_for
from mapreport.core.connection import Connection
from mapreport.core.devices import dtype_of
from mapreport.core.kinds import CompareVerdict as Verdict
from mapreport.core.kinds import ShipReason, TimeCategory

FDR = 0.05
"""The false discovery rate held across a comparison's shapes."""


@dataclass(frozen=True)
class ShapeComparison:
    """One request shape on both sides."""

    shape: str
    n_a: int
    n_b: int
    p50_a_us: float | None
    p50_b_us: float | None
    p95_a_us: float | None
    p95_b_us: float | None
    ratio_p50: float | None
    ratio_p95: float | None
    ci_p95: tuple[float, float] | None
    """95% bootstrap CI of `ratio_p95`."""
    p_value: float | None
    """Two-sided bootstrap p-value of `ratio_p95` against 1."""
    verdict: Verdict
    traffic_a: float
    traffic_b: float

    @property
    def impact(self) -> float:
        """Traffic x effect: the larger side's share of requests times |log ratio_p95| (how
        much of the slice's time the move shifts; 0 without a ratio)."""
        r = self.ratio_p95
        return 0.0 if not r or r <= 0 else max(self.traffic_a, self.traffic_b) * abs(np.log(r))


@dataclass(frozen=True)
class OpComparison:
    """One op x input shape x dtype of two traces: mean device time per call, B over A."""

    op: str
    shape: str
    dtype: str | None
    count_a: int
    count_b: int
    mean_us_a: float
    mean_us_b: float
    ratio: float
    ci: tuple[float, float] | None
    """95% bootstrap CI of `ratio`, resampling each side's calls (None: too few calls)."""
    p_value: float | None
    verdict: Verdict
    share: float = 0.0
    """The larger side's share of its trace's device time spent in this op x shape."""
    types: str = ""
    """The input types as the trace states them (JSON): part of what aligns the two sides."""
    category: TimeCategory = TimeCategory.OTHER
    contribution: float | None = None
    """`delta_us` over the change of the whole (every op x shape of both sides; None when the
    whole did not change)."""

    @property
    def delta_us(self) -> float:
        """B's time in this op x shape minus A's (its part of the change of the whole)."""
        return self.mean_us_b * self.count_b - self.mean_us_a * self.count_a

    @property
    def recorded(self) -> bool:
        """The trace recorded the op's input dims (`();()`: none of its inputs has any, so calls
        of different sizes may be pooled in one row)."""
        return shape_recorded(self.shape, self.types)

    @property
    def impact(self) -> float:
        """Device-time share x |log ratio| (0 without a positive ratio)."""
        r = self.ratio
        return 0.0 if not r > 0 or not np.isfinite(r) else self.share * abs(np.log(r))


@dataclass(frozen=True)
class OpOnly:
    """An op x shape one side's trace ran and the other's did not, with its time."""

    op: str
    shape: str
    types: str
    in_b: bool
    """Which side ran it: B (else A)."""
    count: int
    total_us: float
    share: float
    """Its share of its side's whole time."""
    category: TimeCategory
    contribution: float | None
    """Its part of the change of the whole (A's own: minus its time), over that change."""

    @property
    def delta_us(self) -> float:
        """Its part of the change of the whole: B's time, or minus A's."""
        return self.total_us if self.in_b else -self.total_us

    @property
    def recorded(self) -> bool:
        """The trace recorded the op's input dims (`shape_recorded`)."""
        return shape_recorded(self.shape, self.types)

    @property
    def dtype(self) -> str | None:
        """The first tensor input's element type."""
        return _dtype(self.types)


def shape_recorded(shape: str, types: str = "[]") -> bool:
    """Whether an op's input dims say anything: some input has a dimension, or is a tensor
    (of 0 dims: `.item()`'s `()`); `();()` over lists and scalars, or '', says nothing."""
    return any(part not in ("", "()") for part in shape.split(";")) or _dtype(types) is not None


@dataclass(frozen=True)
class QuantileComparison:
    """One tail quantile of the whole slice (every shape pooled), A against B."""

    quantile: str
    """`p50`, `p95` or `p99`."""
    n_a: int
    n_b: int
    a_us: float
    b_us: float
    ratio: float
    ci: tuple[float, float]
    moved: bool
    """The CI excludes 1."""


@dataclass(frozen=True)
class Comparison:
    """Every shape of either side, compared where both have it."""

    shapes: tuple[ShapeComparison, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    fdr: float
    tested: int
    """Shapes with enough requests on both sides to test."""
    tail: tuple[QuantileComparison, ...] = ()
    """The slice's p50 and p95 (and p99 with `min_samples_p99` requests a side), every shape
    pooled."""
    ops: tuple[OpComparison, ...] = ()
    """Op x shapes both sides' traces ran, by the launching op (kernels differ by vendor)."""
    ops_only_a: tuple[OpOnly, ...] = ()
    ops_only_b: tuple[OpOnly, ...] = ()

    def decided(self, v: Verdict) -> tuple[ShapeComparison, ...]:
        """The shapes with verdict `v`, most impact first."""
        return tuple(sorted((s for s in self.shapes if s.verdict == v), key=_by_impact))

    def moved_most(self, k: int = 5) -> tuple[ShapeComparison, ...]:
        """The `k` shapes that moved (faster or slower) with the most traffic x effect."""
        moved = (s for s in self.shapes if s.verdict in (Verdict.FASTER, Verdict.SLOWER))
        return tuple(sorted(moved, key=_by_impact)[:k])

    def ops_moved_most(self, k: int = 5) -> tuple[OpComparison, ...]:
        """The `k` op x shapes that moved with the most device-time share x effect."""
        moved = (o for o in self.ops if o.verdict in (Verdict.FASTER, Verdict.SLOWER))
        return tuple(sorted(moved, key=_by_impact)[:k])

    def ops_by_contribution(self, k: int = 5) -> tuple[OpComparison | OpOnly, ...]:
        """The `k` op x shapes of either side (compared, or one side's own) whose time changed
        most: largest |B - A| first."""
        rows: list[OpComparison | OpOnly] = [*self.ops, *self.ops_only_a, *self.ops_only_b]
        return tuple(sorted(rows, key=lambda o: (-abs(o.delta_us), o.op, o.shape))[:k])


def _by_impact(x: ShapeComparison | OpComparison) -> tuple[float, str]:
    return -x.impact, x.shape


ANCHORS = ("aten::convolution", "aten::convolution_backward", "aten::batch_norm")
"""Ops whose kernels are charged to them wherever below them they were launched, as TraceLens
aligns them: cuDNN's `aten::cudnn_convolution` (with the bias `aten::add_` that follows it) and
MIOpen's `aten::miopen_convolution` (bias inside) are both one `aten::convolution` call."""
OP_CALLS = f"""
    WITH dev AS (
        SELECT json_extract_string(extra, '$.op') AS op, name, shape, extra, dur_us,
            category IN ('memcpy', 'memset') AS transfer,
            json_extract_string(extra, '$.external_id') AS ext, correlation, source_id, line
        FROM op_exec
        WHERE workload = $w AND slice = $s AND category IN ('kernel', 'memcpy', 'memset')
    ),
    launcher AS (
        SELECT source_id, json_extract_string(extra, '$.external_id') AS ext,
            json_extract_string(extra, '$.pid') AS pid, json_extract_string(extra, '$.tid') AS tid,
            min(ts_us) AS ts, max(ts_us + dur_us) AS te
        FROM op_exec
        WHERE workload = $w AND slice = $s AND category = 'cpu_op'
            AND json_extract_string(extra, '$.external_id') IN (SELECT ext FROM dev)
        GROUP BY ALL
    ),
    anchor AS (
        SELECT source_id, json_extract_string(extra, '$.pid') AS pid,
            json_extract_string(extra, '$.tid') AS tid, ts_us AS ts, ts_us + dur_us AS te,
            name AS op, coalesce(shape, '') AS shape,
            CAST(coalesce(json_extract(extra, '$.types'), '[]') AS VARCHAR) AS types,
            'a' || coalesce(json_extract_string(extra, '$.external_id'), CAST(line AS VARCHAR))
                AS call
        FROM op_exec
        WHERE workload = $w AND slice = $s AND category = 'cpu_op' AND name IN {ANCHORS!r}
    ),
    placed AS (
        SELECT d.*, l.pid, l.tid, l.ts, l.te FROM dev d
        LEFT JOIN launcher l ON l.source_id = d.source_id AND l.ext = d.ext
    ),
    anchored AS (
        SELECT p.*, a.op AS a_op, a.shape AS a_shape, a.types AS a_types, a.call AS a_call
        FROM placed p
        LEFT JOIN anchor a ON a.source_id = p.source_id AND a.pid = p.pid AND a.tid = p.tid
            AND a.ts <= p.ts AND a.te >= p.te
        QUALIFY row_number() OVER (PARTITION BY p.source_id, p.line ORDER BY a.ts DESC) = 1
    )
    SELECT op, shape, types, fsum(dur) AS dur, source_id, bool_and(transfer) AS transfer,
        bool_and(launched) AS launched
    FROM (
        SELECT coalesce(a_op, op, name) AS op,
            CASE WHEN a_op IS NOT NULL THEN a_shape ELSE coalesce(shape, '') END AS shape,
            CASE WHEN a_op IS NOT NULL THEN a_types WHEN op IS NULL THEN '[]'
                 ELSE CAST(coalesce(json_extract(extra, '$.types'), '[]') AS VARCHAR) END
                AS types,
            coalesce(a_call, CASE WHEN op IS NOT NULL
                THEN coalesce(ext, CAST(correlation AS VARCHAR)) END,
                'k' || CAST(line AS VARCHAR)) AS call,
            source_id, dur_us AS dur, transfer, op IS NOT NULL AS launched
        FROM anchored
    )
    GROUP BY op, shape, types, call, source_id
    ORDER BY op, shape, types, dur, source_id
"""
"""A trace's device time per call of each op x shape (`op_samples`; a comparison's evidence
packs select from it): every kernel, host-device copy and memset, charged to the operator that
launched it, or to the `ANCHORS` op above that one; a kernel no recorded operator launched
(a graph replay) is a call of its own, named by the kernel (`launched` false); `transfer`: the
call's device rows are all copies and sets."""
SAMPLES = """
    SELECT shape, compute_end_us - arrival_us AS latency_us, source_id, line FROM request
    WHERE workload = $w AND slice = $s AND status = 'ok' AND arrival_known IS NOT FALSE
        AND ($start IS NULL OR arrival_us >= $start) AND ($end IS NULL OR arrival_us < $end)
    ORDER BY shape, latency_us, source_id, line
"""
"""A side's ok requests with their arrival: what a shape's and the slice's quantiles are of
(`side_samples`; a comparison's evidence packs select from it)."""


_PARTS = """
    WITH r AS (
        SELECT shape, compute_end_us - arrival_us AS latency,
            CASE WHEN arrival_known IS NOT FALSE AND queue_known IS NOT FALSE
                 THEN compute_start_us - queue_start_us END AS queue,
            CASE WHEN queue_known IS NOT FALSE THEN compute_end_us - compute_start_us END
                AS compute,
            arrival_known IS NOT FALSE AS timed
        FROM request
        WHERE workload = $w AND slice = $s AND status = 'ok'
            AND ($start IS NULL OR arrival_us >= $start) AND ($end IS NULL OR arrival_us < $end)
    )
    SELECT shape,
        quantile_cont(latency, [0.5, 0.95, 0.99]) FILTER (WHERE timed),
        quantile_cont(queue, [0.5, 0.95, 0.99]),
        quantile_cont(compute, [0.5, 0.95, 0.99])
    FROM r GROUP BY shape
"""
PARTS = ("latency", "queue", "compute")
"""What a request's time splits into, each with its p50, p95 and p99 per side."""


def side_params(
    workload: str, slice_: str, start_us: float | None, end_us: float | None
) -> dict[str, str | float | None]:
    """The bound parameters of a side's selection (`SAMPLES`): its slice and arrival window."""
    return {"w": workload, "s": slice_, "start": start_us, "end": end_us}


def side_parts(
    con: Connection,
    workload: str,
    slice_: str,
    start_us: float | None = None,
    end_us: float | None = None,
) -> dict[str, dict[str, tuple[float, float, float] | None]]:
    """Per shape: latency, queue wait and compute p50/p95/p99 of ok requests (None where the
    records do not measure it: client-side timing has no queue or compute)."""
    rows = con.execute(_PARTS, side_params(workload, slice_, start_us, end_us)).fetchall()
    return {
        str(shape): {
            part: None if q is None else (float(q[0]), float(q[1]), float(q[2]))
            for part, q in zip(PARTS, quantiles, strict=True)
        }
        for shape, *quantiles in rows
    }


def side_samples(
    con: Connection,
    workload: str,
    slice_: str,
    start_us: float | None = None,
    end_us: float | None = None,
) -> dict[str, np.ndarray]:
    """Each shape's end-to-end latencies of ok requests (arrivals in [start, end) when given),
    sorted."""
    rows = con.execute(SAMPLES, side_params(workload, slice_, start_us, end_us)).fetchall()
    out: dict[str, list[float]] = {}
    for shape, latency, _, _ in rows:
        out.setdefault(str(shape), []).append(float(latency))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def ratio_interval(
    a: np.ndarray, b: np.ndarray, q: float, resamples: int, seed: int
) -> tuple[float, tuple[float, float], float]:
    """Q_q(B) / Q_q(A), its percentile bootstrap 95% CI (each side resampled on its own), and
    the two-sided bootstrap p-value of the ratio against 1 (twice the smaller share of
    resampled ratios on either side of 1, with the +1 correction)."""
    sa, sb = SortedArray(np.sort(a)), SortedArray(np.sort(b))
    rng = np.random.default_rng(seed)
    ra = resampled_quantile(sa, q, resamples, rng)
    rb = resampled_quantile(sb, q, resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = rb / ra
    ratios = ratios[np.isfinite(ratios)]
    point = quantile(sb, q) / quantile(sa, q)
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    below = (np.sum(ratios <= 1.0) + 1) / (len(ratios) + 1)
    above = (np.sum(ratios >= 1.0) + 1) / (len(ratios) + 1)
    return float(point), (float(lo), float(hi)), float(min(1.0, 2 * min(below, above)))


def benjamini_hochberg(p_values: list[float], q: float) -> list[bool]:
    """Which hypotheses are discoveries at false discovery rate q (step-up procedure)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    cut = 0
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= q * rank / m:
            cut = rank
    found = [False] * m
    for i in order[:cut]:
        found[i] = True
    return found


def compare(
    a: dict[str, np.ndarray],
    b: dict[str, np.ndarray],
    th: Thresholds,
    key: tuple[str, ...] = (),
    fdr: float = FDR,
) -> Comparison:
    """Every shape of either side: where both hold `min_samples_p95` requests, the p95 ratio
    with its CI and a verdict held to the false discovery rate across the tested shapes."""
    total_a = sum(len(v) for v in a.values()) or 1
    total_b = sum(len(v) for v in b.values()) or 1
    both = sorted(set(a) & set(b))
    tested: list[tuple[str, float, tuple[float, float], float]] = []
    for shape in both:
        if min(len(a[shape]), len(b[shape])) >= th.min_samples_p95:
            seed = seed_for(th.seed, *key, shape, "compare")
            tested.append(
                (shape, *ratio_interval(a[shape], b[shape], 0.95, th.bootstrap_resamples, seed))
            )
    found = benjamini_hochberg([t[3] for t in tested], fdr)
    by_shape = {t[0]: (t, hit) for t, hit in zip(tested, found, strict=True)}
    out = []
    for shape in both:
        xa, xb = a[shape], b[shape]
        p50_a, p50_b = float(np.quantile(xa, 0.5)), float(np.quantile(xb, 0.5))
        p95_a, p95_b = float(np.quantile(xa, 0.95)), float(np.quantile(xb, 0.95))
        hit = by_shape.get(shape)
        ratio: float = p95_b / p95_a if p95_a else float("nan")
        ci: tuple[float, float] | None = None
        p: float | None = None
        verdict = Verdict.INSUFFICIENT
        if hit is not None:
            (_, ratio, ci, p), discovered = hit
            verdict = Verdict.SAME
            if discovered:
                verdict = Verdict.FASTER if ratio < 1 else Verdict.SLOWER
        out.append(
            ShapeComparison(
                shape=shape,
                n_a=len(xa),
                n_b=len(xb),
                p50_a_us=p50_a,
                p50_b_us=p50_b,
                p95_a_us=p95_a,
                p95_b_us=p95_b,
                ratio_p50=p50_b / p50_a if p50_a else None,
                ratio_p95=ratio if p95_a else None,
                ci_p95=ci,
                p_value=p,
                verdict=verdict,
                traffic_a=len(xa) / total_a,
                traffic_b=len(xb) / total_b,
            )
        )
    return Comparison(
        shapes=tuple(out),
        only_a=tuple(sorted(set(a) - set(b))),
        only_b=tuple(sorted(set(b) - set(a))),
        fdr=fdr,
        tested=len(tested),
        tail=tail_of(a, b, th, key),
    )


def tail_of(
    a: dict[str, np.ndarray], b: dict[str, np.ndarray], th: Thresholds, key: tuple[str, ...]
) -> tuple[QuantileComparison, ...]:
    """The slice's pooled p50 and p95 (from `min_samples_p95` requests a side) and p99 (from
    `min_samples_p99`), B over A with their bootstrap CIs."""
    xa = np.concatenate(list(a.values())) if a else np.zeros(0)
    xb = np.concatenate(list(b.values())) if b else np.zeros(0)
    out = []
    for name, q, need in (
        ("p50", 0.5, th.min_samples_p95),
        ("p95", 0.95, th.min_samples_p95),
        ("p99", 0.99, th.min_samples_p99),
    ):
        if min(len(xa), len(xb)) < need:
            continue
        seed = seed_for(th.seed, *key, name, "slice")
        ratio, ci, _ = ratio_interval(xa, xb, q, th.bootstrap_resamples, seed)
        qa, qb = float(np.quantile(xa, q)), float(np.quantile(xb, q))
        moved = not ci[0] <= 1.0 <= ci[1]
        out.append(QuantileComparison(name, len(xa), len(xb), qa, qb, ratio, ci, moved))
    return tuple(out)


OpKey = tuple[str, str, str]
"""(launching op, input dims, input types as JSON): what aligns two traces' op x shapes."""


def mean_ratio(
    a: np.ndarray, b: np.ndarray, resamples: int, seed: int
) -> tuple[float, tuple[float, float], float]:
    """mean(B) / mean(A), its percentile bootstrap 95% CI (each side's calls resampled), and
    the two-sided bootstrap p-value against 1."""
    rng = np.random.default_rng(seed)
    xa, xb = np.sort(a), np.sort(b)
    ma = xa[rng.integers(0, len(xa), size=(resamples, len(xa)))].mean(axis=1)
    mb = xb[rng.integers(0, len(xb), size=(resamples, len(xb)))].mean(axis=1)
    ratios = mb / ma
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    below = (np.sum(ratios <= 1.0) + 1) / (len(ratios) + 1)
    above = (np.sum(ratios >= 1.0) + 1) / (len(ratios) + 1)
    point = float(xb.mean() / xa.mean())
    return point, (float(lo), float(hi)), float(min(1.0, 2 * min(below, above)))


def compare_ops(
    a: dict[OpKey, np.ndarray],
    b: dict[OpKey, np.ndarray],
    th: Thresholds,
    key: tuple[str, ...] = (),
    fdr: float = FDR,
    categories: Mapping[OpKey, TimeCategory] | None = None,
) -> tuple[tuple[OpComparison, ...], tuple[OpOnly, ...], tuple[OpOnly, ...]]:
    """Every op x shape both traces ran: the ratio of mean device time per call with its CI
    where each side has `min_samples` calls, verdicts held to the FDR across them, and each
    one's part of the change of the whole (the sum of every op x shape of a side); and the op x
    shapes of one side only, with their time, share and part of the change."""
    cats = categories or {}
    both = sorted(set(a) & set(b))
    tested = [
        k
        for k in both
        if min(len(a[k]), len(b[k])) >= th.min_samples and a[k].mean() > 0 and b[k].mean() > 0
    ]
    stats = {
        k: mean_ratio(a[k], b[k], th.bootstrap_resamples, seed_for(th.seed, *key, *k, "op"))
        for k in tested
    }
    found = dict(zip(tested, benjamini_hochberg([stats[k][2] for k in tested], fdr), strict=True))
    sum_a = sum(float(v.sum()) for v in a.values())
    sum_b = sum(float(v.sum()) for v in b.values())
    total_a, total_b, change = sum_a or 1.0, sum_b or 1.0, sum_b - sum_a

    def part(delta: float) -> float | None:
        return delta / change if change else None

    out = []
    for k in both:
        op, shape, types = k
        ma, mb = float(a[k].mean()), float(b[k].mean())
        share = max(float(a[k].sum()) / total_a, float(b[k].sum()) / total_b)
        ratio, ci, p, verdict = (mb / ma if ma else float("nan")), None, None, Verdict.INSUFFICIENT
        if k in stats:
            ratio, ci, p = stats[k]
            verdict = Verdict.SAME
            if found[k]:
                verdict = Verdict.FASTER if ratio < 1 else Verdict.SLOWER
        delta = float(b[k].sum()) - float(a[k].sum())
        cat = cats.get(k, TimeCategory.OTHER)
        out.append(
            OpComparison(
                op, shape, _dtype(types), len(a[k]), len(b[k]), ma, mb, ratio, ci, p, verdict,
                share, types, cat, part(delta),
            )
        )  # fmt: skip
    out.sort(key=lambda o: (-abs(o.delta_us), o.op, o.shape, o.types))

    def only(
        side: dict[OpKey, np.ndarray], other: dict[OpKey, np.ndarray], in_b: bool
    ) -> tuple[OpOnly, ...]:
        total = total_b if in_b else total_a
        rows = []
        for k in set(side) - set(other):
            t = float(side[k].sum())
            cat = cats.get(k, TimeCategory.OTHER)
            rows.append(OpOnly(*k, in_b, len(side[k]), t, t / total, cat, part(t if in_b else -t)))
        return tuple(sorted(rows, key=lambda o: (-o.total_us, o.op, o.shape, o.types)))

    return tuple(out), only(a, b, False), only(b, a, True)


def _dtype(types: str) -> str | None:
    """The first tensor input's element type of an op's `Input type` JSON."""
    try:
        listed = json.loads(types)
    except ValueError:
        return None
    for t in listed if isinstance(listed, list) else ():
        d = dtype_of(t)
        if d is not None:
            return str(d)
    return None


@dataclass(frozen=True)
class ShipCheck:
    """Whether B is safe to ship against its SLA: the reason, and the quantile that decided."""

    reason: ShipReason
    quantile: QuantileComparison | None = None
    target_us: float | None = None

    @property
    def safe(self) -> bool | None:
        """True or False; None without a target to judge by."""
        return None if self.reason == ShipReason.NO_SLA else self.reason == ShipReason.SAFE


def ship_check(tail: tuple[QuantileComparison, ...], targets: dict[str, float]) -> ShipCheck:
    """Against the SLA targets of B's slice (`p95`, `p99` in microseconds): B misses one of the
    quantiles it has the evidence for, or meets them all while one rose beyond its CI, or is
    safe; without a judged target there is no decision."""
    judged = [(t, targets[t.quantile]) for t in tail if t.quantile in targets]
    if not judged:
        return ShipCheck(ShipReason.NO_SLA)
    missed = [(t, v) for t, v in judged if t.b_us > v]
    if missed:
        t, v = max(missed, key=lambda x: x[0].b_us / x[1])
        return ShipCheck(ShipReason.MISSES_SLA, t, v)
    rose = [(t, v) for t, v in judged if t.moved and t.ratio > 1]
    if rose:
        t, v = max(rose, key=lambda x: x[0].ratio)
        return ShipCheck(ShipReason.TAIL_ROSE, t, v)
    t, v = max(judged, key=lambda x: x[0].b_us / x[1])
    return ShipCheck(ShipReason.SAFE, t, v)
