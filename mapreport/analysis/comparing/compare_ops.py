"""Two traces' op x shapes aligned and compared (docs/compare.md, "How an op x shape is
compared"): each side's device (or host) time per call of every op x input shape, B over A with
a bootstrap CI, and the op x shapes one side ran alone."""

from __future__ import annotations

import json
from collections.abc import Mapping

import msgspec
import numpy as np

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.stats import seed_for
from mapreport.analysis.comparing.compare_stats import FDR, benjamini_hochberg
from mapreport.core.devices import dtype_of
from mapreport.core.kinds import CompareVerdict as Verdict
from mapreport.core.kinds import TimeCategory


class OpComparison(msgspec.Struct, frozen=True):
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


class OpOnly(msgspec.Struct, frozen=True):
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
        QUALIFY row_number() OVER (
            PARTITION BY p.source_id, p.line ORDER BY a.ts DESC, a.te, a.call
        ) = 1
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
    a, b = align_out_buffers(a, b)
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


def _types(types: str) -> tuple[str, ...] | None:
    try:
        listed = json.loads(types)
    except ValueError:
        return None
    return tuple(json.dumps(t) for t in listed) if isinstance(listed, list) else None


def align_out_buffers(
    a: Mapping[OpKey, np.ndarray], b: Mapping[OpKey, np.ndarray]
) -> tuple[dict[OpKey, np.ndarray], dict[OpKey, np.ndarray]]:
    """Both sides with an op x shape that carries one trailing input more than an op x shape
    of the same op on the other side, and otherwise the same inputs, named as that one: the
    trailing input is an `out=` buffer (Inductor calls `aten::addmm` with the output buffer
    it allocated: 6 inputs, where eager's call has 5). Only op x shapes neither side aligns
    otherwise are renamed."""
    a, b = dict(a), dict(b)
    for mine, other in ((a, b), (b, a)):
        lone = {
            (k[0], k[1], t): k for k in set(other) - set(mine) if (t := _types(k[2])) is not None
        }
        for k in sorted(set(mine) - set(other)):
            types = _types(k[2])
            parts = k[1].split(";")
            if not types or len(parts) != len(types) or len(parts) < 2:
                continue
            match = lone.get((k[0], ";".join(parts[:-1]), types[:-1]))
            if match is not None and match not in mine:
                mine[match] = mine.pop(k)
                del lone[(match[0], match[1], types[:-1])]
    return a, b


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
