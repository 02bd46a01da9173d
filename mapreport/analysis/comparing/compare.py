"""Two runs compared per request shape (docs/compare.md): the B/A ratio of each latency
quantile with a two-sample bootstrap CI (fixed seed), a verdict per shape, and the false
discovery rate held across shapes (Benjamini-Hochberg).

A side is any set of requests: a slice of one dataset, of another, of another night. The
functions here take the latency samples of each side by shape; `side_samples` reads them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec
import numpy as np

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.comparing.compare_ops import (
    ANCHORS,
    OP_CALLS,
    OpComparison,
    OpKey,
    OpOnly,
    compare_ops,
    mean_ratio,
    shape_recorded,
)
from mapreport.analysis.comparing.compare_stats import (
    FDR,
    INDEPENDENT,
    MIN_SHIFT_SHAPES,
    BlockChoice,
    LatencyBasis,
    RunShift,
    band_means,
    benjamini_hochberg,
    ratio_draws,
    ratio_interval,
    run_shift,
    shape_block,
    summarize,
)
from mapreport.core.kinds import CompareVerdict as Verdict
from mapreport.core.kinds import ShipReason

__all__ = [
    "ANCHORS",
    "FDR",
    "OP_CALLS",
    "OpComparison",
    "OpKey",
    "OpOnly",
    "benjamini_hochberg",
    "compare_ops",
    "mean_ratio",
    "ratio_interval",
    "shape_recorded",
]


class QuantileTest(msgspec.Struct, frozen=True):
    """One quantile of one shape, A against B: a test of the comparison's family."""

    quantile: str
    """`p50`, `p95` or `p99`."""
    a_us: float
    b_us: float
    ratio: float
    ci: tuple[float, float]
    """95% block bootstrap CI of `ratio`."""
    p_value: float
    verdict: Verdict
    """`faster` or `slower` where the test survives Benjamini-Hochberg, else `same`."""
    blocks: tuple[int, int]
    """The block length, in the shape's own requests, each side was resampled in."""
    queue_us: float | None = None
    """A moved quantile's change of queue wait: B's mean less A's over the requests at the
    quantile (`compare_stats.band_means`); None unmoved or where not recorded."""
    compute_us: float | None = None
    """The same, of compute."""
    vs_shift: float | None = None
    """`ratio` over the run's shift at this quantile (`RunShift`), where the shape was tested
    against it (one run a side); None: tested against 1."""
    vs_shift_ci: tuple[float, float] | None = None

    @property
    def effect(self) -> float:
        """What the verdict was read from: the ratio against the run's shift, else the ratio."""
        return self.vs_shift if self.vs_shift is not None else self.ratio

    @property
    def queue_share(self) -> float | None:
        """The queue wait's part of the move (queue over queue plus compute; None without
        both, or when they cancel)."""
        if self.queue_us is None or self.compute_us is None:
            return None
        total = self.queue_us + self.compute_us
        return self.queue_us / total if total else None


MIX_DIFFERENCE = 0.02
"""A shape's share of the requests differing by this much (2 points) between the sides is a
different mix of work: the whole's total is then not the same work done faster or slower."""


class ShapeComparison(msgspec.Struct, frozen=True):
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
    """The shape's: that of its moved quantile with the largest |log ratio| (`same` when none
    moved, `insufficient` untested)."""
    traffic_a: float
    traffic_b: float
    tests: tuple[QuantileTest, ...] = ()
    """Its tested quantiles (p50 and p95 from `min_samples_p95` requests a side, p99 from
    `min_samples_p99`)."""
    mean_a_us: float = 0.0
    mean_b_us: float = 0.0

    @property
    def contribution_us(self) -> float:
        """What the shape adds to the change of the slice's mean latency per request: its
        share of B's requests times its mean on B, less the same on A (the shapes' and the
        one-side shapes' contributions add up to the change exactly)."""
        return self.traffic_b * self.mean_b_us - self.traffic_a * self.mean_a_us

    def test(self, quantile: str) -> QuantileTest | None:
        """Its test at a quantile (None: not tested)."""
        return next((t for t in self.tests if t.quantile == quantile), None)

    @property
    def decisive(self) -> QuantileTest | None:
        """The moved test that decides the verdict (None when none moved)."""
        moved = [t for t in self.tests if t.verdict in (Verdict.FASTER, Verdict.SLOWER)]
        return max(moved, key=lambda t: abs(np.log(t.effect)), default=None)

    @property
    def impact(self) -> float:
        """Traffic x effect: the larger side's share of requests times |log ratio| of the
        deciding quantile (p95 when none moved): how much of the slice's time the move shifts;
        0 without a ratio."""
        d = self.decisive
        r = d.ratio if d else self.ratio_p95
        return 0.0 if not r or r <= 0 else max(self.traffic_a, self.traffic_b) * abs(np.log(r))


class QuantileComparison(msgspec.Struct, frozen=True):
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
    blocks: tuple[int, int] = (1, 1)
    """The block length each side's series was resampled in."""


class Comparison(msgspec.Struct, frozen=True):
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
    tests: int = 0
    """Tests made (shape x quantile): the family the false discovery rate is held across."""
    blocks: tuple[BlockChoice, BlockChoice] = (INDEPENDENT, INDEPENDENT)
    """Each side's latency autocorrelation and block length."""
    basis: LatencyBasis = LatencyBasis.END_TO_END
    shifts: tuple[RunShift, ...] = ()
    """Per quantile, the run's shift the shapes were tested against (one run a side, at least
    MIN_SHIFT_SHAPES shapes tested); empty: tested against 1."""
    mean_a_us: float = 0.0
    """The slice's mean latency per request on A (every shape)."""
    mean_b_us: float = 0.0
    one_side_us: float = 0.0
    """The part of the mean's change that the shapes only one side ran make (B's share times
    mean of its own, less A's)."""
    renamed: tuple[tuple[str, str], ...] = ()
    """B's shape names aligned with A's by their numbers (B's name, A's: `compare_names`)."""

    @property
    def mix_moved(self) -> ShapeComparison | None:
        """The shape whose share of the requests differs most between the sides, where it
        differs by MIX_DIFFERENCE or more (None: the sides served the same mix): a whole's
        total then holds the mix as well as the speed."""
        most = max(self.shapes, key=lambda s: abs(s.traffic_b - s.traffic_a), default=None)
        if most is None or abs(most.traffic_b - most.traffic_a) < MIX_DIFFERENCE:
            return None
        return most

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


SAMPLES = """
    SELECT shape, latency_us, queue_us, compute_us, source_id, line, at_us FROM (
        SELECT shape, source_id, line,
            $span OR arrival_known IS FALSE AS spanned,
            CASE WHEN spanned THEN compute_end_us - compute_start_us
                 ELSE compute_end_us - arrival_us END AS latency_us,
            CASE WHEN NOT spanned AND queue_known IS NOT FALSE
                 THEN compute_start_us - queue_start_us END AS queue_us,
            CASE WHEN queue_known IS NOT FALSE THEN compute_end_us - compute_start_us END
                AS compute_us,
            CASE WHEN spanned THEN compute_start_us ELSE arrival_us END AS at_us
        FROM request
        WHERE workload = $w AND slice = $s AND status = 'ok'
            AND ($start IS NULL OR arrival_us >= $start) AND ($end IS NULL OR arrival_us < $end)
    )
    ORDER BY at_us, source_id, line
"""
"""A side's ok requests in time order, each with its latency: end to end (arrival to end of
compute) where its arrival is recorded, else (or with `$span`) its span, start to end of
compute, as a profiler trace's request span gives it; its queue wait (end-to-end only) and
compute where recorded. What a shape's and the slice's quantiles are of (`side_samples`; a
comparison's evidence packs select from it)."""


def side_params(
    workload: str, slice_: str, start_us: float | None, end_us: float | None, span: bool = False
) -> dict[str, str | float | bool | None]:
    """The bound parameters of a side's selection (`SAMPLES`): its slice and arrival window,
    and whether every request's latency is its span."""
    return {"w": workload, "s": slice_, "start": start_us, "end": end_us, "span": span}


Split = tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]
"""A side's queue wait and compute per shape, each aligned with its latencies (NaN: not
recorded)."""
QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


def _need(name: str, th: Thresholds) -> int:
    return th.min_samples_p99 if name == "p99" else th.min_samples_p95


def _move_parts(
    shape: str, q: float, a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray],
    parts: tuple[Split | None, Split | None],
) -> tuple[float | None, float | None]:  # fmt: skip
    """B - A of the mean queue wait and of the mean compute of the requests at the quantile
    (`band_means`), where both sides record both for every request of the shape."""
    got = []
    for lat, split in ((a[shape], parts[0]), (b[shape], parts[1])):
        if split is None or shape not in split[0] or shape not in split[1]:
            return None, None
        queue, comp = split[0][shape], split[1][shape]
        if np.isnan(queue).any() or np.isnan(comp).any():
            return None, None
        got.append(band_means(lat, queue, comp, q))
    return got[1][0] - got[0][0], got[1][1] - got[0][1]


def compare(
    a: Mapping[str, np.ndarray],
    b: Mapping[str, np.ndarray],
    th: Thresholds,
    key: tuple[str, ...] = (),
    fdr: float = FDR,
    blocks: tuple[BlockChoice, BlockChoice] = (INDEPENDENT, INDEPENDENT),
    parts: tuple[Split | None, Split | None] = (None, None),
    pooled: tuple[np.ndarray, np.ndarray] | None = None,
    basis: LatencyBasis = LatencyBasis.END_TO_END,
    relative: bool = False,
) -> Comparison:
    """Every shape of either side: where both hold `min_samples_p95` requests, the p50 and p95
    ratios (p99 from `min_samples_p99`) with their block bootstrap CIs (each side's latencies
    in time order, in blocks of its `blocks` length scaled to the shape's share), verdicts
    held to the false discovery rate across every test made (shape x quantile), and each moved
    quantile's change split into queue wait and compute (`parts`). `relative` (one run a
    side): each shape is tested against the run's shift (`RunShift`, where MIN_SHIFT_SHAPES
    shapes are tested at the quantile), not against 1: a move of the whole run cannot be told
    from a change of the machine between the runs, a shape's move beyond it can."""
    total_a = sum(len(v) for v in a.values()) or 1
    total_b = sum(len(v) for v in b.values()) or 1
    both = sorted(set(a) & set(b))
    drawn: list[Drawn] = []
    for shape in both:
        xa, xb = a[shape], b[shape]
        bl = (
            shape_block(blocks[0].length, len(xa), total_a),
            shape_block(blocks[1].length, len(xb), total_b),
        )
        for name, q in QUANTILES:
            if min(len(xa), len(xb)) >= _need(name, th):
                seed = shape_seed(th.seed, key, shape, name)
                point, draws = ratio_draws(xa, xb, q, th.bootstrap_resamples, seed, bl)
                drawn.append((shape, name, q, bl, point, draws))
    shifts = _shifts(drawn) if relative else {}
    runs = []
    for shape, name, q, bl, point, draws in drawn:
        ratio, ci, p = summarize(point, draws)
        against = None
        if name in shifts:  # tested against the run's shift, not against 1
            _, shift_point, shift_draws = shifts[name]
            against = summarize(point / shift_point, draws / shift_draws)
            p = against[2]
        runs.append((shape, name, q, bl, (ratio, ci, p), against))
    found = benjamini_hochberg([r[4][2] for r in runs], fdr)
    tests: dict[str, list[QuantileTest]] = {}
    for (shape, name, q, bl, (ratio, ci, p), against), hit in zip(runs, found, strict=True):
        verdict = Verdict.SAME
        queue_us = compute_us = None
        if hit:
            effect = against[0] if against else ratio
            verdict = Verdict.FASTER if effect < 1 else Verdict.SLOWER
            queue_us, compute_us = _move_parts(shape, q, a, b, parts)
        qa, qb = float(np.quantile(a[shape], q)), float(np.quantile(b[shape], q))
        vs, vs_ci = (against[0], against[1]) if against else (None, None)
        parts_us = (queue_us, compute_us)
        test = QuantileTest(name, qa, qb, ratio, ci, p, verdict, bl, *parts_us, vs, vs_ci)
        tests.setdefault(shape, []).append(test)
    out = [_shape(s, a[s], b[s], tuple(tests.get(s, ())), total_a, total_b) for s in both]
    # ranked by what each adds to the change of the whole (its mean latency per request)
    out.sort(key=lambda c: (-abs(c.contribution_us), c.shape))
    # exact sums: a set's order changes with each process's string hashes
    own = math.fsum(float(np.sum(b[s])) for s in set(b) - set(a)) / total_b
    own -= math.fsum(float(np.sum(a[s])) for s in set(a) - set(b)) / total_a
    return Comparison(
        shapes=tuple(out),
        only_a=tuple(sorted(set(a) - set(b))),
        only_b=tuple(sorted(set(b) - set(a))),
        fdr=fdr,
        tested=len(tests),
        tail=tail_of(a, b, th, key, blocks, pooled),
        tests=len(runs),
        blocks=blocks,
        basis=basis,
        shifts=tuple(shift for shift, _, _ in shifts.values()),
        mean_a_us=sum(float(np.sum(v)) for v in a.values()) / total_a,
        mean_b_us=sum(float(np.sum(v)) for v in b.values()) / total_b,
        one_side_us=own,
    )


Drawn = tuple[str, str, float, tuple[int, int], float, np.ndarray]
"""One test's shape, quantile name and level, blocks, ratio and bootstrap draws."""


def _shifts(drawn: list[Drawn]) -> dict[str, tuple[RunShift, float, np.ndarray]]:
    """Per quantile with MIN_SHIFT_SHAPES shapes tested: the run's shift (`run_shift`)."""
    out = {}
    for name, _ in QUANTILES:
        mine = [(point, draws) for _, n, _, _, point, draws in drawn if n == name]
        if len(mine) >= MIN_SHIFT_SHAPES:
            out[name] = run_shift(name, [p for p, _ in mine], [d for _, d in mine])
    return out


def shape_seed(base: int, key: tuple[str, ...], shape: str, quantile: str) -> int:
    """The seed of a shape's test at a quantile (p95's is the seed it always had)."""
    if quantile == "p95":
        return seed_for(base, *key, shape, "compare")
    return seed_for(base, *key, shape, quantile, "compare")


def _shape(
    shape: str, xa: np.ndarray, xb: np.ndarray, tests: tuple[QuantileTest, ...],
    total_a: int, total_b: int,
) -> ShapeComparison:  # fmt: skip
    p50_a, p50_b = float(np.quantile(xa, 0.5)), float(np.quantile(xb, 0.5))
    p95_a, p95_b = float(np.quantile(xa, 0.95)), float(np.quantile(xb, 0.95))
    p95 = next((t for t in tests if t.quantile == "p95"), None)
    moved = [t for t in tests if t.verdict in (Verdict.FASTER, Verdict.SLOWER)]
    verdict = Verdict.INSUFFICIENT if not tests else Verdict.SAME
    if moved:
        verdict = max(moved, key=lambda t: abs(np.log(t.effect))).verdict
    return ShapeComparison(
        shape=shape,
        n_a=len(xa),
        n_b=len(xb),
        p50_a_us=p50_a,
        p50_b_us=p50_b,
        p95_a_us=p95_a,
        p95_b_us=p95_b,
        ratio_p50=p50_b / p50_a if p50_a else None,
        ratio_p95=(p95.ratio if p95 else p95_b / p95_a) if p95_a else None,
        ci_p95=p95.ci if p95 else None,
        p_value=p95.p_value if p95 else None,
        verdict=verdict,
        traffic_a=len(xa) / total_a,
        traffic_b=len(xb) / total_b,
        tests=tests,
        mean_a_us=float(np.mean(xa)),
        mean_b_us=float(np.mean(xb)),
    )


def tail_of(
    a: Mapping[str, np.ndarray],
    b: Mapping[str, np.ndarray],
    th: Thresholds,
    key: tuple[str, ...],
    blocks: tuple[BlockChoice, BlockChoice] = (INDEPENDENT, INDEPENDENT),
    pooled: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[QuantileComparison, ...]:
    """The slice's pooled p50 and p95 (from `min_samples_p95` requests a side) and p99 (from
    `min_samples_p99`), B over A with their block bootstrap CIs (`pooled`: each side's
    latencies in time order; else the shapes' joined, resampled one by one)."""
    if pooled is None:
        xa = np.concatenate(list(a.values())) if a else np.zeros(0)
        xb = np.concatenate(list(b.values())) if b else np.zeros(0)
        bl = (1, 1)
    else:
        (xa, xb), bl = pooled, (blocks[0].length, blocks[1].length)
    out = []
    for name, q in QUANTILES:
        if min(len(xa), len(xb)) < _need(name, th):
            continue
        seed = seed_for(th.seed, *key, name, "slice")
        ratio, ci, _ = ratio_interval(xa, xb, q, th.bootstrap_resamples, seed, bl)
        qa, qb = float(np.quantile(xa, q)), float(np.quantile(xb, q))
        moved = not ci[0] <= 1.0 <= ci[1]
        out.append(QuantileComparison(name, len(xa), len(xb), qa, qb, ratio, ci, moved, bl))
    return tuple(out)


class ShipCheck(msgspec.Struct, frozen=True):
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
