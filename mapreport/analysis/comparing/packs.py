"""A comparison's evidence packs, declared beside its figures: for the slice's pooled
quantiles, every tested request shape and every tested op x shape, the spec (the ratio, its n
and CI as compare.json states them, each side's dataset, slice, night and files, the
thresholds), the self-contained SQL that selects each side's rows (the comparison's own
selection, `compare.SAMPLES` and `compare.OP_CALLS`, each value a literal) and the figure
recomputed from the rows by the comparison's own functions (`ratio_interval`, `mean_ratio`)
with the same seeds. `run.compare_packs` writes, reads and replays them."""

from __future__ import annotations

import hashlib
import json
from datetime import date
from enum import StrEnum
from typing import Any

import msgspec
import numpy as np

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.query import SqlValue, inline, literal
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.comparing.compare import (
    OP_CALLS,
    SAMPLES,
    Comparison,
    mean_ratio,
    ratio_interval,
    shape_seed,
)
from mapreport.core.records import as_dict
from mapreport.core.window import night_window


class Figure(StrEnum):
    """What a comparison pack's figure is."""

    SLICE = "slice"
    """A quantile of the slice, every shape pooled: B over A."""
    SHAPE = "shape"
    """A quantile of a request shape (p50, p95, p99): B over A."""
    OP = "op"
    """An op x shape's mean device time per call: B over A."""


QUANTILE_OF = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
SIDE_ROWS = {"a": "a_rows", "b": "b_rows"}
"""The tables a comparison pack's `.sql` makes of each side's rows, which its figure reads."""


class SideSpec(msgspec.Struct, frozen=True):
    """Where one side's rows are: its dataset, slice, night and (chosen by environment) files."""

    dataset: str
    workload: str
    slice: str
    night: str | None
    """The UTC day (ISO) whose arrivals the side holds; None: every night."""
    sources: list[str] | None
    """The files the side was restricted to (an environment selection); None: all."""


class ComparePack(msgspec.Struct, frozen=True):
    """One figure of a comparison and how to reproduce it from both datasets."""

    id: str
    figure: Figure
    subject: str
    key: list[str]
    """The comparison's key (each side's workload and slice): part of every seed."""
    shape: str
    """The request shape (SHAPE), the op's input dims (OP), '' (SLICE)."""
    quantile: str
    """`p95`, `p99` (SLICE, SHAPE); '' (OP)."""
    op: str
    types: str
    a: SideSpec
    b: SideSpec
    ratio: float
    ci: list[float]
    n_a: int
    n_b: int
    thresholds: dict[str, Any]
    basis: str = "end_to_end"
    """`span`: every request's latency is its span (`compare.SAMPLES`' `$span`)."""
    blocks: list[int] = msgspec.field(default_factory=lambda: [1, 1])
    """The block length each side's latencies were resampled in (SLICE, SHAPE)."""
    shape_b: str = ""
    """B's own name of the shape, where B names it otherwise (`compare_names`); '': the same."""

    def shape_of(self, side: SideSpec) -> str:
        """The shape as the side's own rows name it."""
        return self.shape_b if self.shape_b and side is self.b else self.shape

    def sql(self, side: SideSpec) -> str:
        """The self-contained query of one side's rows, built from the parameters alone."""
        return self._sql(side, pooled=False)

    def pooled_sql(self, side: SideSpec) -> str:
        """The query of every row one side's packs of this kind select from (every shape's
        requests, or every op x shape's calls): `sql` is it filtered to this pack's."""
        return self._sql(side, pooled=True)

    def _sql(self, side: SideSpec, pooled: bool) -> str:
        start, end = _bounds(side)
        bound: dict[str, SqlValue] = {
            "w": side.workload,
            "s": side.slice,
            "start": start,
            "end": end,
            "shape": self.shape_of(side),
            "op": self.op,
            "types": self.types,
            "span": self.basis == "span",
        }
        if self.figure == Figure.OP:
            select = f"SELECT * FROM ({OP_CALLS})"
            if not pooled:
                select += " WHERE op = $op AND shape = $shape AND types = $types"
        else:
            select = f"SELECT * FROM ({SAMPLES})"
            if self.figure == Figure.SHAPE and not pooled:
                select += " WHERE shape = $shape"
        if side.sources is not None:
            bound["ids"] = side.sources
            select = f"SELECT * FROM ({select}) WHERE list_contains($ids, source_id)"
        if self.figure != Figure.OP:  # in time order: the block bootstrap reads it so
            select += " ORDER BY at_us, source_id, line"
        return inline(select, bound)

    def figure_sql(self) -> str:
        """The SELECT of the ratio's point value from both sides' rows (the tables `SIDE_ROWS`
        names), as `reduce` computes it: Q_q(B) / Q_q(A) of the requests' latency (numpy's
        linear quantile: `quantile_cont`), or mean(B) / mean(A) of an op x shape's device time
        per call; and each side's rows."""
        a, b = SIDE_ROWS["a"], SIDE_ROWS["b"]
        if self.figure == Figure.OP:
            value = f"(SELECT avg(dur) FROM {b}) / (SELECT avg(dur) FROM {a})"
        else:
            of = "(SELECT quantile_cont(latency_us, $q) FROM {})"
            value = inline(f"{of.format(b)} / {of.format(a)}", {"q": QUANTILE_OF[self.quantile]})
        return (
            f"SELECT 'ratio' AS figure, {literal(self.subject)} AS of, {value} AS value, "
            f"(SELECT count(*) FROM {a}) AS n_a, (SELECT count(*) FROM {b}) AS n_b"
        )

    def reduce(self, a: np.ndarray, b: np.ndarray) -> tuple[float, tuple[float, float]]:
        """The ratio and CI from each side's values, as the comparison computed them."""
        th = msgspec.convert(self.thresholds, Thresholds, strict=True)
        if self.figure == Figure.OP:
            seed = seed_for(th.seed, *self.key, self.op, self.shape, self.types, "op")
            ratio, ci, _ = mean_ratio(a, b, th.bootstrap_resamples, seed)
        else:
            q, bl = QUANTILE_OF[self.quantile], (self.blocks[0], self.blocks[1])
            seed = seed_for(th.seed, *self.key, self.quantile, "slice")
            if self.figure == Figure.SHAPE:
                seed = shape_seed(th.seed, tuple(self.key), self.shape, self.quantile)
            ratio, ci, _ = ratio_interval(a, b, q, th.bootstrap_resamples, seed, bl)
        return ratio, ci


def _bounds(side: SideSpec) -> tuple[float | None, float | None]:
    if side.night is None:
        return None, None
    w = night_window(date.fromisoformat(side.night))
    return w.start_us, w.end_us


def _pack(fields: dict[str, Any]) -> ComparePack:
    """A pack with its id: the hash of everything that defines its figure."""
    body = json.dumps(fields, sort_keys=True, default=str).encode()
    return ComparePack(id=hashlib.sha256(body).hexdigest()[:12], **fields)


def packs(
    c: Comparison,
    a: SideSpec,
    b: SideSpec,
    key: tuple[str, ...],
    th: Thresholds,
    ops: bool = True,
) -> list[ComparePack]:
    """A pack per pooled quantile, per tested shape and (`ops`: both sides' op times are device
    time, which `OP_CALLS` selects) per tested op x shape."""
    common = {"key": list(key), "a": a, "b": b, "thresholds": as_dict(th), "basis": c.basis.value}
    b_names = {a_name: b_name for b_name, a_name in c.renamed}

    def one(
        figure: Figure,
        subject: str,
        ratio: float,
        ci: tuple[float, float],
        n: tuple[int, int],
        shape: str = "",
        quantile: str = "",
        op: str = "",
        types: str = "",
        blocks: tuple[int, int] = (1, 1),
    ) -> ComparePack:
        what = {"figure": figure, "subject": subject, "shape": shape, "quantile": quantile}
        if figure == Figure.SHAPE and shape in b_names:  # B's rows name it otherwise
            what["shape_b"] = b_names[shape]
        return _pack(
            {**common, **what, "op": op, "types": types, "ratio": ratio, "ci": list(ci)}
            | {"n_a": n[0], "n_b": n[1], "blocks": list(blocks)}
        )

    out = [
        one(
            Figure.SLICE,
            f"the slice's {t.quantile}, every shape pooled",
            t.ratio,
            t.ci,
            (t.n_a, t.n_b),
            quantile=t.quantile,
            blocks=t.blocks,
        )
        for t in c.tail
    ]
    out += [
        one(
            Figure.SHAPE,
            f"{t.quantile} of {s.shape}",
            t.ratio,
            t.ci,
            (s.n_a, s.n_b),
            shape=s.shape,
            quantile=t.quantile,
            blocks=t.blocks,
        )
        for s in c.shapes
        for t in s.tests
    ]
    out += [
        one(
            Figure.OP,
            f"mean device time per call of {o.op} at {o.shape or 'no dims'}",
            o.ratio,
            o.ci,
            (o.count_a, o.count_b),
            shape=o.shape,
            op=o.op,
            types=o.types,
        )
        for o in c.ops
        if o.ci is not None and ops
    ]
    return out


GROUPED_BY = {Figure.SHAPE: ("shape",), Figure.OP: ("op", "shape", "types")}
"""The columns a pack of each kind selects its rows from its side's rows by."""


def evidence_ids(done: list[ComparePack]) -> dict[tuple[str, ...], str]:
    """Each pack's id by what it is of: (slice, quantile), (shape, shape), (op, op, dims,
    types); compare.json and the page link each figure to its pack by it."""
    out: dict[tuple[str, ...], str] = {}
    for p in done:
        if p.figure == Figure.SLICE:
            out[(p.figure.value, p.quantile)] = p.id
        elif p.figure == Figure.SHAPE:
            out[(p.figure.value, p.shape, p.quantile)] = p.id
            if p.quantile == "p95":
                out[(p.figure.value, p.shape)] = p.id
        else:
            out[(p.figure.value, p.op, p.shape, p.types)] = p.id
    return out
