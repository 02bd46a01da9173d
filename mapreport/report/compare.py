"""The comparison report: its view and words (the template `compare.html.j2` loops and
prints), and compare.json (docs/compare.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mapreport import __version__
from mapreport.analysis.compare import Comparison, OpComparison, ShapeComparison, ShipCheck
from mapreport.analysis.compare_mapping import Figure, MappingComparison, ShapeMapping
from mapreport.core.kinds import CompareVerdict as Verdict
from mapreport.core.kinds import ShipReason
from mapreport.report.filters import duration, num, pct, plural, ratio, signed_pct
from mapreport.report.words import label

COMPARE_SCHEMA_VERSION = "1.0"
Parts = dict[str, dict[str, tuple[float, float, float] | None]]
"""Per shape: latency, queue and compute (p50, p95, p99) of one side (`side_parts`)."""
VERDICT_WORDS = {
    Verdict.FASTER: "faster",
    Verdict.SLOWER: "slower",
    Verdict.SAME: "~",
    Verdict.INSUFFICIENT: "too few requests",
}


@dataclass(frozen=True)
class Side:
    """What one side of a comparison is."""

    label: str
    dataset: str
    workload: str
    slice: str
    requests: int


def ratio_ci(ci: tuple[float, float] | None) -> str:
    """A ratio's CI as printed: [x0.91, x0.98] ('–' without one)."""
    return "–" if ci is None else f"[{ratio_text(ci[0])}, {ratio_text(ci[1])}]"


def ratio_text(x: float | None) -> str:
    """A ratio as benchstat prints a change: x1.31."""
    return "–" if x is None else f"x{x:.2f}"


@dataclass(frozen=True)
class Line:
    """One shape's row of the table, its ratios in words."""

    s: ShapeComparison
    ratio_p50: str
    ratio_p95: str
    ci: str
    verdict: str


def lines(c: Comparison) -> tuple[Line, ...]:
    """The table's rows."""
    return tuple(
        Line(
            s,
            ratio_text(s.ratio_p50),
            ratio_text(s.ratio_p95),
            ratio_ci(s.ci_p95),
            VERDICT_WORDS[s.verdict],
        )
        for s in c.shapes
    )


@dataclass(frozen=True)
class OpLine:
    """One op x shape's row of the table."""

    o: OpComparison
    ratio: str
    ci: str
    verdict: str


def op_lines(c: Comparison) -> tuple[OpLine, ...]:
    """The op table's rows."""
    return tuple(
        OpLine(
            o,
            ratio_text(o.ratio),
            ratio_ci(o.ci),
            VERDICT_WORDS[o.verdict],
        )
        for o in c.ops
    )


SHIP_WORDS = {
    ShipReason.NO_SLA: "No ship decision: no SLA target for B's slice (--config with its "
    "[[slices]] sets one).",
    ShipReason.MISSES_SLA: "Not safe to ship: B's {q} {b} misses its SLA of {target}.",
    ShipReason.TAIL_ROSE: "Not safe to ship: B meets its SLA of {target}, but its {q} rose "
    "{ratio} ({a} → {b}) beyond its CI.",
    ShipReason.SAFE: "Safe to ship against the SLA: B's {q} {b} meets {target}, and no tail "
    "quantile rose beyond its CI.",
}


def ship_sentence(s: ShipCheck) -> str:
    """The ship decision in one sentence."""
    t = s.quantile
    return SHIP_WORDS[s.reason].format(
        q=t.quantile if t else "",
        a=duration(t.a_us) if t else "",
        b=duration(t.b_us) if t else "",
        ratio=ratio_text(t.ratio) if t else "",
        target=duration(s.target_us),
    )


def ops_sentence(c: Comparison) -> str:
    """What the traces' op x shapes say, in one sentence ('' without them)."""
    if not c.ops:
        return ""
    slower = [o for o in c.ops if o.verdict == Verdict.SLOWER]
    faster = [o for o in c.ops if o.verdict == Verdict.FASTER]
    thin = sum(1 for o in c.ops if o.verdict == Verdict.INSUFFICIENT)

    def one(o: OpComparison) -> str:
        return f"{o.op} {ratio_text(o.ratio)}"

    said = [f"{plural(len(c.ops), 'op x shape')} ran on both sides"]
    if slower:
        said.append(f"B slower on {', '.join(one(o) for o in slower[:3])}")
    if faster:
        said.append(f"faster on {', '.join(one(o) for o in faster[:3])}")
    if thin:
        said.append(f"{thin} with under the calls a test needs")
    return "Device time per call: " + "; ".join(said) + "."


def tail_sentence(c: Comparison) -> str:
    """The slice's tail quantiles A against B, with their CIs ('' when too few requests)."""
    if not c.tail:
        return ""
    said = [
        f"{t.quantile} {duration(t.a_us)} → {duration(t.b_us)} ({ratio_text(t.ratio)}, 95% CI "
        f"{ratio_ci(t.ci)}" + (", moved)" if t.moved else ", no change shown)")
        for t in c.tail
    ]
    return "The slice, every shape pooled: " + "; ".join(said) + "."


def headline(c: Comparison) -> str:
    """The verdict: the slice's tail, the request shapes' and the traces' ops' moves, each in
    a sentence."""
    ops = ops_sentence(c)
    shapes = _shapes_headline(c)
    if not c.shapes and not c.only_a and not c.only_b and ops:
        return ops
    return " ".join(x for x in (tail_sentence(c), shapes, ops) if x)


def _shapes_headline(c: Comparison) -> str:
    """The verdict in one sentence: what moved, which way, on how much traffic."""
    slower, faster = c.decided(Verdict.SLOWER), c.decided(Verdict.FASTER)
    if not c.tested:
        return (
            "No shape has enough requests on both sides to compare its p95 "
            "(each side needs the evidence threshold's count)."
        )
    moved = slower + faster
    if not moved:
        return (
            f"No shape's p95 moved beyond its CI: {plural(c.tested, 'shape')} compared, the "
            f"false discovery rate held at {pct(c.fdr, 0)}."
        )

    def one(s: ShapeComparison) -> str:
        return f"{s.shape} {ratio_text(s.ratio_p95)} ({pct(s.traffic_b)} of B's traffic)"

    parts = []
    if slower:
        parts.append(f"slower on {', '.join(one(s) for s in slower)}")
    if faster:
        parts.append(f"faster on {', '.join(one(s) for s in faster)}")
    return (
        f"B is {'; '.join(parts)} at p95, of {plural(c.tested, 'shape')} compared (false "
        f"discovery rate {pct(c.fdr, 0)})."
    )


@dataclass(frozen=True)
class MappingLine:
    """One shape's mapping row: signed errors, their change with its CI, gains, decisions."""

    m: ShapeMapping
    change: str
    ci: str
    decision: str


@dataclass(frozen=True)
class MappingView:
    """The mapping section: the slice figures in words and the shapes' rows."""

    figures: tuple[tuple[str, str, str, str], ...]
    """(what, A, B, change)."""
    lines: tuple[MappingLine, ...]
    changed: int


def mapping_view(mc: MappingComparison | None) -> MappingView | None:
    """The mapping section's view (None when neither side has a compile plan)."""
    if mc is None:
        return None

    def share(f: Figure) -> tuple[str, str, str]:
        return pct(f.a), pct(f.b), signed_pct(f.change)

    def count(f: Figure) -> tuple[str, str, str]:
        return num(f.a), num(f.b), "–" if f.change is None else f"{f.change:+,.0f}"

    figures = (
        ("Traffic in a compiled bucket", *share(mc.coverage)),
        ("Weighted cost-model MAPE", *share(mc.mape)),
        ("Shapes within tolerance", *share(mc.within_tolerance)),
        (
            "Kendall tau",
            ratio(mc.kendall_tau.a),
            ratio(mc.kendall_tau.b),
            ratio(mc.kendall_tau.change),
        ),
        ("Adaptation events", *count(mc.adaptation_events)),
        ("Requests on the fallback path", *count(mc.fallback_requests)),
    )
    lines = tuple(
        MappingLine(
            m,
            signed_pct(m.change),
            "–"
            if m.change_ci is None
            else f"[{signed_pct(m.change_ci.low)}, {signed_pct(m.change_ci.high)}]",
            label(m.decision_a) + ("" if not m.decision_changed else f" → {label(m.decision_b)}"),
        )
        for m in mc.shapes
    )
    return MappingView(figures, lines, len(mc.decisions_changed))


def _mapping_doc(mc: MappingComparison | None) -> dict[str, Any] | None:
    if mc is None:
        return None

    def fig(f: Figure) -> dict[str, float | None]:
        return {"a": f.a, "b": f.b, "change": f.change}

    return {
        "coverage": fig(mc.coverage),
        "mape_weighted": fig(mc.mape),
        "within_tolerance_share": fig(mc.within_tolerance),
        "kendall_tau": fig(mc.kendall_tau),
        "adaptation_events": fig(mc.adaptation_events),
        "fallback_requests": fig(mc.fallback_requests),
        "shapes": [
            {
                "shape": m.shape,
                "signed_error_a": m.signed_error_a,
                "signed_error_b": m.signed_error_b,
                "change": m.change,
                "change_ci": list(m.change_ci) if m.change_ci else None,
                "net_gain_a": m.net_gain_a,
                "net_gain_b": m.net_gain_b,
                "fallback_a": m.fallback_a,
                "fallback_b": m.fallback_b,
                "decision_a": m.decision_a.value,
                "decision_b": m.decision_b.value,
            }
            for m in mc.shapes
        ],
    }


def document(
    c: Comparison,
    a: Side,
    b: Side,
    generated_at: str,
    mapping: MappingComparison | None = None,
    ship: ShipCheck | None = None,
    parts: tuple[Parts, Parts] | None = None,
) -> dict[str, Any]:
    """compare.json (`parts`: each side's latency, queue and compute quantiles per shape)."""
    pa, pb = parts or ({}, {})

    def split(shape: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for side, held in (("a", pa), ("b", pb)):
            for part, q in held.get(shape, {}).items():
                out[f"{part}_{side}"] = (
                    None if q is None else {"p50_us": q[0], "p95_us": q[1], "p99_us": q[2]}
                )
        return out

    return {
        "ship": None
        if ship is None
        else {
            "safe": ship.safe,
            "reason": ship.reason.value,
            "quantile": ship.quantile.quantile if ship.quantile else None,
            "target_us": ship.target_us,
            "text": ship_sentence(ship),
        },
        "mapping": _mapping_doc(mapping),
        "schema_version": COMPARE_SCHEMA_VERSION,
        "generator": f"mapreport {__version__}",
        "generated_at": generated_at,
        "a": vars(a),
        "b": vars(b),
        "verdict": headline(c),
        "fdr": c.fdr,
        "tested": c.tested,
        "tail": [
            {
                "quantile": t.quantile,
                "n_a": t.n_a,
                "n_b": t.n_b,
                "a_us": t.a_us,
                "b_us": t.b_us,
                "ratio": t.ratio,
                "ci": list(t.ci),
                "moved": t.moved,
            }
            for t in c.tail
        ],
        "shapes": [
            {
                "shape": s.shape,
                "n_a": s.n_a,
                "n_b": s.n_b,
                "p50_a_us": s.p50_a_us,
                "p50_b_us": s.p50_b_us,
                "p95_a_us": s.p95_a_us,
                "p95_b_us": s.p95_b_us,
                "ratio_p50": s.ratio_p50,
                "ratio_p95": s.ratio_p95,
                "ci_p95": list(s.ci_p95) if s.ci_p95 else None,
                "p_value": s.p_value,
                "verdict": s.verdict.value,
                "traffic_a": s.traffic_a,
                "traffic_b": s.traffic_b,
                **split(s.shape),
            }
            for s in c.shapes
        ],
        "only_a": list(c.only_a),
        "only_b": list(c.only_b),
        "ops": [
            {
                "op": o.op,
                "shape": o.shape,
                "dtype": o.dtype,
                "count_a": o.count_a,
                "count_b": o.count_b,
                "mean_us_a": o.mean_us_a,
                "mean_us_b": o.mean_us_b,
                "ratio": o.ratio,
                "ci": list(o.ci) if o.ci else None,
                "p_value": o.p_value,
                "verdict": o.verdict.value,
            }
            for o in c.ops
        ],
        "ops_only_a": list(c.ops_only_a),
        "ops_only_b": list(c.ops_only_b),
    }
