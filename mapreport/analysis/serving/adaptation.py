"""Runtime adaptation gain: adapted versus baseline compute, its bootstrap CI, its cost."""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

import msgspec
import numpy as np
import pyarrow as pa

from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.base.query import SAMPLES, VARIANT_FIGURES, ShapeRow, Variants, variants_of
from mapreport.analysis.base.stats import (
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


class ShapeGain(msgspec.Struct, frozen=True):
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


class _Compared(NamedTuple):
    """The samples a shape's gain compares, and on what basis."""

    adapted: Sample | None
    base: Sample | None
    base_variant: str
    basis: GainBasis
    compared: tuple[str, ...]
    charged: bool = True
    """The adapted side is this shape's own (False: other shapes' compiled path, and this
    shape did not compile: no adaptation cost to charge)."""

    @property
    def sizes(self) -> tuple[int, int]:
        """The adapted and the baseline sample's sizes (0: none)."""
        return (
            0 if self.adapted is None else len(self.adapted),
            0 if self.base is None else len(self.base),
        )

    def measurable(self, th: Thresholds) -> bool:
        """Both samples hold the evidence rules' minimum (and at least one value)."""
        return (
            self.adapted is not None
            and self.base is not None
            and (min(self.sizes) >= max(th.min_samples, 1))
        )


def _compared(
    covered: bool,
    samples: dict[str, Sample],
    th: Thresholds,
    other: Mapping[str, OtherPath] | None,
) -> _Compared:
    """Adapted against the baseline (static when covered, else fallback); an uncovered shape
    that ran one path only against the other path on comparable shapes (`other`)."""
    base_variant = "static" if covered else "fallback"
    adapted = samples.get("adapted")
    base = samples.get(base_variant)
    na = 0 if adapted is None else len(adapted)
    nb = 0 if base is None else len(base)
    if not covered and other and min(na, nb) < th.min_samples:
        # one path only: the other from comparable shapes, per element
        eager, compiled = other.get("fallback"), other.get("adapted")
        if na >= th.min_samples and eager is not None:
            return _Compared(
                adapted, eager.sample, base_variant, GainBasis.COMPARABLE_SHAPES, eager.shapes
            )
        if nb >= th.min_samples and compiled is not None:
            return _Compared(
                compiled.sample,
                base,
                base_variant,
                GainBasis.COMPARABLE_SHAPES,
                compiled.shapes,
                charged=False,
            )
    return _Compared(adapted, base, base_variant, GainBasis.SAME_SHAPE, ())


def gain_reads(
    key: tuple[str, str, str],
    covered: bool,
    samples: dict[str, Sample],
    th: Thresholds,
    other: Mapping[str, OtherPath] | None = None,
) -> None:
    """Ask the samples `shape_gain` will compare to read ahead the ranks its bootstrap reads
    (`Sample.prefetch`), so that a slice's groups read by rank on the engine are read for all
    of its shapes in one query."""
    c = _compared(covered, samples, th, other)
    if c.adapted is not None and c.base is not None and c.measurable(th):
        na, nb = c.sizes
        seed = seed_for(th.seed, *key)
        with_p95 = min(na, nb) >= th.min_samples_p95
        _read_once(c.adapted, c.base, na, nb, th.bootstrap_resamples, seed, with_p95)


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
    c = _compared(covered, samples, th, other)
    adapted, base, base_variant, basis, compared, charged = c
    na, nb = c.sizes
    n_events, cost_us = events
    if not charged:
        cost_us, caused_wait_us = 0.0, None  # it did not compile: nothing to charge

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
    if not c.measurable(th):
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


class OtherPath(msgspec.Struct, frozen=True):
    """The compute of one path on shapes of comparable size, scaled per element to a shape."""

    sample: SortedArray
    shapes: tuple[str, ...]


PATHS: dict[str, tuple[str, ...]] = {"adapted": ("static", "adapted"), "fallback": ("fallback",)}
"""The compiled path (a graph built before or while serving) and the eager one, by variant."""


class ComparablePaths:
    """Per path, the in-memory compute samples of every shape that ran it, ordered by element
    count: what `other_paths` pools from. Built once per slice, so that a shape's comparable
    shapes are a range found by bisection, not a pass parsing every shape of the slice (which
    made a slice of thousands of shapes quadratic)."""

    def __init__(self, samples: Mapping[tuple[str, str], Sample]):
        sizes = {s: elements(s) for s, _ in samples}  # each shape's dims parsed once
        self.groups: dict[str, list[tuple[int, str, str, SortedArray]]] = {}
        for path, variants in PATHS.items():
            held = [
                (es, s, v, x)
                for (s, v), x in samples.items()
                if v in variants
                and (es := sizes[s]) is not None
                # a group too large to hold is not pooled: its shape has both paths itself
                and isinstance(x, SortedArray)
            ]
            held.sort(key=lambda g: (g[0], g[1], g[2]))
            self.groups[path] = held
        self.sizes = {path: [g[0] for g in held] for path, held in self.groups.items()}

    def near(self, path: str, shape: str, e: int) -> list[tuple[int, str, str, SortedArray]]:
        """The groups of `path` on other shapes within `COMPARABLE_FACTOR` of `e` elements, in
        (shape, variant) order."""
        sizes = self.sizes[path]
        lo = bisect.bisect_left(sizes, e / COMPARABLE_FACTOR)
        hi = bisect.bisect_right(sizes, e * COMPARABLE_FACTOR)
        return sorted(
            (g for g in self.groups[path][lo:hi] if g[1] != shape), key=lambda g: (g[1], g[2])
        )


def other_paths(
    shape: str, pools: ComparablePaths, paths: Collection[str] = tuple(PATHS)
) -> dict[str, OtherPath]:
    """Per path of `paths` ("adapted": compiled, "fallback": eager), that path's compute times
    on the other shapes of comparable size (`COMPARABLE_FACTOR`), each scaled by this shape's
    elements over its own: what this shape would have taken on that path, per element. Only
    where those shapes are as small or smaller and as large or larger than this one (a rate
    interpolated, not extrapolated to a size no shape of that path had)."""
    e = elements(shape)
    out: dict[str, OtherPath] = {}
    if e is None:
        return out
    for path in paths:
        near = pools.near(path, shape, e)
        # the rate per element is interpolated between sizes that ran, never extrapolated
        brackets = bool(near) and min(g[0] for g in near) <= e <= max(g[0] for g in near)
        count = sum(len(g[3]) for g in near)
        if brackets and 0 < count <= MAX_POOLED:
            values = np.concatenate([x.values * (e / es) for es, _, _, x in near])
            out[path] = OtherPath(SortedArray(values), tuple(sorted({g[1] for g in near})))
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
    reader = RankReader(con, big)
    out: dict[tuple[str, str], Sample] = {k: RankedSample(reader, k, sizes[k]) for k in big}
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


RANK_BASE = 2**32
"""A wanted rank's code is its group's position times this, plus the rank."""

RANKS_SQL = f"""
WITH wanted AS (SELECT unnest($codes) AS code), ranked AS (
    SELECT list_position($groups, shape || chr(31) || variant) AS g, compute_us AS v,
        row_number() OVER (PARTITION BY shape, variant ORDER BY compute_us) - 1 AS i
    FROM ({SAMPLES}) WHERE list_contains($groups, shape || chr(31) || variant)
)
SELECT ranked.g, ranked.i, ranked.v FROM ranked
JOIN wanted ON wanted.code = ranked.g * {RANK_BASE} + ranked.i
"""
"""The compute times of (shape, variant) groups at the given 0-based ranks (ascending order,
the order `compute_samples` sorts a group in), each wanted rank coded with its group's
(1-based) position in `$groups`: every group's ranks in one query, the groups sorted on the
engine once."""


class RankReader:
    """Reads the ranks of a slice's large groups (`RankedSample`) for all of them at once:
    the ranks the samples are asked to read ahead (`want`) wait until a value is needed, then
    every group's are read in one query (one sort of each group on the engine, one job)."""

    def __init__(self, con: Connection, groups: Sequence[tuple[str, str]]):
        self.con = con
        self.groups = list(groups)
        self.known: dict[tuple[str, str], dict[int, float]] = {g: {} for g in self.groups}
        self.pending: dict[tuple[str, str], set[int]] = {g: set() for g in self.groups}

    def want(self, group: tuple[str, str], ranks: IntArray) -> None:
        """Read these ranks of `group` with the next query (those not read before)."""
        self.pending[group] |= set(ranks.tolist()) - self.known[group].keys()

    def values(self, group: tuple[str, str], ranks: IntArray) -> FloatArray:
        """The values at these ranks of `group`; a query for every group's pending ranks when
        one of these was not read."""
        wanted = ranks.tolist()
        known = self.known[group]
        if any(r not in known for r in wanted):
            self.want(group, ranks)
            self._read()
        return np.array([known[r] for r in wanted], dtype=np.float64)

    def _read(self) -> None:
        codes = [
            (i + 1) * RANK_BASE + r for i, g in enumerate(self.groups) for r in self.pending[g]
        ]
        params = {"groups": [f"{s}\x1f{v}" for s, v in self.groups], "codes": sorted(codes)}
        for g, i, v in self.con.execute(RANKS_SQL, params).fetchall():
            self.known[self.groups[int(g) - 1]][int(i)] = float(v)
        self.pending = {g: set() for g in self.groups}


class RankedSample:
    """A (shape, variant) group read by rank from the engine, each rank once: what reaches this
    process is the order statistics the bootstrap draws (at most two per resample and
    quantile), not the group."""

    def __init__(self, reader: RankReader, group: tuple[str, str], n: int):
        self.reader, self.group, self.n = reader, group, n

    def __len__(self) -> int:
        """The group's size (its ok requests of the primary plan)."""
        return self.n

    def at(self, ranks: IntArray) -> FloatArray:
        """The values at these ranks, reading the ones not read before."""
        return self.reader.values(self.group, ranks)

    def prefetch(self, ranks: IntArray) -> None:
        """Read these ranks with the reader's next query (the slice's groups together)."""
        self.reader.want(self.group, ranks)


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
