"""Runtime adaptation gain: adapted versus baseline compute, its bootstrap CI, its cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from mapreport.analysis.common import Interval, Thresholds
from mapreport.analysis.query import SAMPLES, VARIANT_FIGURES, ShapeRow, Variants, variants_of
from mapreport.analysis.stats import (
    FloatArray,
    IntArray,
    Sample,
    SortedArray,
    bootstrap_ratio_gain,
    gain_ranks,
    quantile,
    seed_for,
)
from mapreport.core.connection import Connection, sample_limit
from mapreport.core.kinds import GainBasis, GainGap, GainState
from mapreport.core.shapes import ShapeError, parse_shape


@dataclass(frozen=True)
class ShapeGain:
    """The adaptation figures of one shape."""

    baseline_variant: str | None
    """static when the shape is covered, else fallback; None without baseline requests."""
    n_adapted: int
    n_baseline: int
    adaptation_events: int
    adaptation_cost_us: float
    state: GainState
    gap: GainGap | None = None
    """Why the gain is not measured (state not_measured)."""
    baseline_p50_us: float | None = None
    adapted_p50_us: float | None = None
    gain_p50: float | None = None
    gain_p50_ci: Interval | None = None
    gain_p95: float | None = None
    gain_p95_ci: Interval | None = None
    cost_per_request_us: float | None = None
    net_gain_p50: float | None = None
    net_gain_p50_ci: Interval | None = None
    basis: GainBasis | None = None
    """What the gain compares with (None: not measured)."""
    compared_shapes: tuple[str, ...] = ()
    """The shapes of comparable size whose other path it was compared with (basis
    comparable_shapes)."""
    caused_wait_us: float | None = None
    """Queue wait its adaptation events held other requests of their worker in (blocking),
    charged with the compile time in the net gain (None: the wait is not measured)."""

    @property
    def saving_p50_us(self) -> float | None:
        """Median compute a significant adaptation saves per request."""
        if self.state != GainState.SIGNIFICANT or not self.baseline_p50_us:
            return None
        if not self.adapted_p50_us:
            return None
        return self.baseline_p50_us - self.adapted_p50_us


def shape_gain(
    key: tuple[str, str, str],
    covered: bool,
    samples: dict[str, Sample],
    events: tuple[int, float],
    th: Thresholds,
    other: Mapping[str, OtherPath] | None = None,
    caused_wait_us: float | None = None,
) -> ShapeGain:
    """Gain on p50 and p95 of adapted over the baseline (static when covered, else fallback).

    `samples` maps a plan variant to the shape's ok compute times; `events` is the number and
    summed duration of its adaptation events; `caused_wait_us` the queue wait those events
    held other requests of their worker in. Both are spread over the adapted requests and
    charged against the p50 gain (net gain). A gain that cannot be measured is None with
    the gap that stopped it, never zero.

    An uncovered shape that ran one path only (compiled while serving, or eagerly) is compared
    with the other path on shapes of comparable size (`other`, from `other_paths`: "adapted"
    is the compiled path, "fallback" the eager one), when its own path has the samples the
    evidence rules ask for; the basis says which comparison was made.
    """
    base_variant = "static" if covered else "fallback"
    adapted = samples.get("adapted")
    base = samples.get(base_variant)
    na = 0 if adapted is None else len(adapted)
    nb = 0 if base is None else len(base)
    n_events, cost_us = events
    basis = GainBasis.SAME_SHAPE
    compared: tuple[str, ...] = ()
    if not covered and other and min(na, nb) < th.min_samples:
        # one path only: the other from comparable shapes, per element
        eager, compiled = other.get("fallback"), other.get("adapted")
        if na >= th.min_samples and eager is not None:
            base, basis, compared = eager.sample, GainBasis.COMPARABLE_SHAPES, eager.shapes
        elif nb >= th.min_samples and compiled is not None:
            adapted, basis, compared = compiled.sample, GainBasis.COMPARABLE_SHAPES, compiled.shapes
            cost_us, caused_wait_us = 0.0, None  # it did not compile: nothing to charge
        na = 0 if adapted is None else len(adapted)
        nb = 0 if base is None else len(base)

    def missing(gap: GainGap) -> ShapeGain:
        variant = base_variant if nb else None
        return ShapeGain(variant, na, nb, n_events, cost_us, GainState.NOT_MEASURED, gap)

    one_path = other is not None and basis == GainBasis.SAME_SHAPE
    if adapted is None or na == 0:
        alone = one_path and nb >= th.min_samples
        return missing(GainGap.NO_OTHER_PATH if alone else GainGap.NO_ADAPTED)
    if base is None or nb == 0:
        alone = one_path and na >= th.min_samples
        return missing(GainGap.NO_OTHER_PATH if alone else GainGap.NO_BASELINE)
    if na < th.min_samples or nb < th.min_samples:
        return missing(GainGap.TOO_FEW)
    seed = seed_for(th.seed, *key)
    with_p95 = min(na, nb) >= th.min_samples_p95
    _read_once(adapted, base, na, nb, th.bootstrap_resamples, seed, with_p95)
    cost_per = (cost_us + (caused_wait_us or 0.0)) / na
    g50, lo50, hi50 = bootstrap_ratio_gain(adapted, base, 0.5, th.bootstrap_resamples, seed)
    net, nlo, nhi = bootstrap_ratio_gain(
        adapted, base, 0.5, th.bootstrap_resamples, seed, offset=cost_per
    )
    g95 = ci95 = None
    if with_p95:
        g95, lo95, hi95 = bootstrap_ratio_gain(
            adapted, base, 0.95, th.bootstrap_resamples, seed + 1
        )
        ci95 = Interval(lo95, hi95)
    state = (
        GainState.SIGNIFICANT
        if nlo > 0
        else GainState.REGRESSION
        if nhi < 0
        else GainState.NOT_SIGNIFICANT
    )
    return ShapeGain(
        baseline_variant=base_variant,
        n_adapted=na,
        n_baseline=nb,
        adaptation_events=n_events,
        adaptation_cost_us=cost_us,
        state=state,
        baseline_p50_us=_median(base),
        adapted_p50_us=_median(adapted),
        gain_p50=g50,
        gain_p50_ci=Interval(lo50, hi50),
        gain_p95=g95,
        gain_p95_ci=ci95,
        cost_per_request_us=cost_per,
        net_gain_p50=net,
        net_gain_p50_ci=Interval(nlo, nhi),
        basis=basis,
        compared_shapes=compared,
        caused_wait_us=caused_wait_us,
    )


COMPARABLE_FACTOR = 2.0
"""Shapes whose element counts are within this factor of each other are of comparable size."""
MAX_POOLED = 200_000
"""The most compute times pooled from comparable shapes (larger groups are read by rank from
the engine and are not pooled)."""


def elements(shape: str) -> int | None:
    """A shape's element count: the product of its dims (summed over a positional shape's
    tensors); None where it names none."""
    try:
        parsed = parse_shape(shape)
    except ShapeError:
        return None
    tensors = [list(parsed.values())] if isinstance(parsed, dict) else parsed
    total = sum(int(np.prod(t, dtype=np.float64)) for t in tensors)
    return total if total > 0 else None


@dataclass(frozen=True)
class OtherPath:
    """The compute of one path on shapes of comparable size, scaled per element to a shape."""

    sample: SortedArray
    shapes: tuple[str, ...]


PATHS: dict[str, tuple[str, ...]] = {"adapted": ("static", "adapted"), "fallback": ("fallback",)}
"""The compiled path (a graph built before or while serving) and the eager one, by variant."""


def other_paths(shape: str, samples: Mapping[tuple[str, str], Sample]) -> dict[str, OtherPath]:
    """Per path ("adapted": compiled, "fallback": eager), that path's compute times on the other
    shapes of comparable size (`COMPARABLE_FACTOR`), each scaled by this shape's elements over
    its own: what this shape would have taken on that path, per element. Only where those
    shapes are as small or smaller and as large or larger than this one (a rate interpolated,
    not extrapolated to a size no shape of that path had)."""
    e = elements(shape)
    out: dict[str, OtherPath] = {}
    if e is None:
        return out
    for path, variants in PATHS.items():
        pool, used = [], {}
        for (s, v), x in sorted(samples.items()):
            es = elements(s) if s != shape and v in variants else None
            if es is None or not e / COMPARABLE_FACTOR <= es <= e * COMPARABLE_FACTOR:
                continue
            if not isinstance(x, SortedArray):
                continue  # a group too large to hold: its shape has both paths itself
            pool.append(x.values * (e / es))
            used[s] = es
        values = np.concatenate(pool) if pool else np.zeros(0)
        # the rate per element is interpolated between sizes that ran, never extrapolated
        brackets = bool(used) and min(used.values()) <= e <= max(used.values())
        if brackets and 0 < len(values) <= MAX_POOLED:
            out[path] = OtherPath(SortedArray(values), tuple(sorted(used)))
    return out


def _read_once(
    adapted: Sample, base: Sample, na: int, nb: int, resamples: int, seed: int, p95: bool
) -> None:
    """A sample read by rank from the engine (`RankedSample`) is read once for every figure of
    `shape_gain` (its p50 and p95 gains and medians), not once per figure: each read sorts the
    group again on the engine. The ranks are drawn for an in-memory sample too (the bootstrap
    draws them again): one code path."""
    wanted = [gain_ranks(na, nb, 0.5, resamples, seed)]
    if p95:
        wanted.append(gain_ranks(na, nb, 0.95, resamples, seed + 1))
    for i, x in enumerate((adapted, base)):
        x.prefetch(np.concatenate([w[i] for w in wanted]))


def _median(x: Sample) -> float:
    return quantile(x, 0.5)


def variant_samples(
    con: Connection,
) -> tuple[Variants, dict[tuple[str, str], Sample]] | None:
    """In one scan, where the connection brings any group into this process (no
    `sample_limit`): each (shape, variant)'s compute-sample count, p50 and p95 (as
    `query.variant_stats`) and its samples, sorted by the engine. None on a connection with a
    limit (`compute_samples` reads its groups)."""
    if sample_limit(con) is not None:
        return None
    t = con.sql(
        f"""
        SELECT shape, variant, {VARIANT_FIGURES}, list(compute_us ORDER BY compute_us) AS v
        FROM ({SAMPLES}) GROUP BY shape, variant
        """
    ).to_arrow_table()
    columns = (t[c].to_pylist() for c in ("shape", "variant", "n", "q"))
    return variants_of(zip(*columns, strict=True)), _sorted_lists(t)


def _sorted_lists(t: pa.Table) -> dict[tuple[str, str], Sample]:
    """Each row's sorted list `v` as a SortedArray, sliced from one Arrow buffer without a Python
    float per request."""
    out: dict[tuple[str, str], Sample] = {}
    if t.num_rows == 0:
        return out
    lists = t["v"].combine_chunks()
    values = np.asarray(lists.values.to_numpy(), np.float64)
    offsets = lists.offsets.to_numpy()
    for i, (shape, variant) in enumerate(
        zip(t["shape"].to_pylist(), t["variant"].to_pylist(), strict=True)
    ):
        out[(str(shape), str(variant))] = SortedArray(values[offsets[i] : offsets[i + 1]])
    return out


def compute_samples(con: Connection, rows: Sequence[ShapeRow]) -> dict[tuple[str, str], Sample]:
    """Measured compute times of ok requests of the primary plan per (shape, variant) of the
    given shapes, for the bootstrap: each group sorted by the engine. A group larger than the
    connection's `sample_limit` stays where it is and is read by rank (`RankedSample`)."""
    limit = sample_limit(con)
    sizes = {(r.shape, v): n for r in rows for v, (n, _, _) in r.variants.items()}
    big = [k for k, n in sizes.items() if limit is not None and n > limit]
    out: dict[tuple[str, str], Sample] = {k: RankedSample(con, *k, sizes[k]) for k in big}
    if len(big) == len(sizes):
        return out
    t = con.sql(
        f"""
        SELECT shape, variant, list(compute_us ORDER BY compute_us) AS v
        FROM ({SAMPLES}) WHERE list_contains($shapes, shape)
            AND NOT list_contains($big, shape || chr(31) || variant)
        GROUP BY shape, variant
        """,
        params={"shapes": [r.shape for r in rows], "big": [f"{s}\x1f{v}" for s, v in big]},
    ).to_arrow_table()
    if t is None:
        return out
    return out | _sorted_lists(t)


RANKS_SQL = f"""
SELECT i, v FROM (
    SELECT compute_us AS v, row_number() OVER (ORDER BY compute_us) - 1 AS i
    FROM ({SAMPLES}) WHERE shape = $shape AND variant = $variant
) WHERE list_contains($ranks, i)
"""
"""The compute times of one (shape, variant) at the given 0-based ranks (ascending order, the
order `compute_samples` sorts a group in)."""


class RankedSample:
    """A (shape, variant) group read by rank from the engine, each rank once: what reaches this
    process is the order statistics the bootstrap draws (at most two per resample and
    quantile), not the group."""

    def __init__(self, con: Connection, shape: str, variant: str, n: int):
        self.con, self.shape, self.variant, self.n = con, shape, variant, n
        self.known: dict[int, float] = {}

    def __len__(self) -> int:
        """The group's size (its ok requests of the primary plan)."""
        return self.n

    def at(self, ranks: IntArray) -> FloatArray:
        """The values at these ranks, reading the ones not read before."""
        wanted = ranks.tolist()
        missing = sorted(set(wanted) - self.known.keys())
        if missing:
            params = {"shape": self.shape, "variant": self.variant, "ranks": missing}
            for i, v in self.con.execute(RANKS_SQL, params).fetchall():
                self.known[int(i)] = float(v)
        return np.array([self.known[r] for r in wanted], dtype=np.float64)

    def prefetch(self, ranks: IntArray) -> None:
        """Read these ranks in one query (those not read before)."""
        self.at(ranks)


def adaptation_costs(
    con: Connection, workload: str, slice_: str
) -> dict[str | None, tuple[int, float]]:
    """Adaptation events per shape (None: events that name no shape): (count, summed dur_us)."""
    rows = con.execute(
        """
        SELECT shape, count(*), coalesce(fsum(dur_us), 0)
        FROM adaptation_event WHERE workload = $w AND slice = $s GROUP BY shape
        """,
        {"w": workload, "s": slice_},
    ).fetchall()
    return {shape: (int(n), float(cost)) for shape, n, cost in rows}
