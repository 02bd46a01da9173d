"""The comparison report: its view and words (the template `compare.html.j2` loops and
prints), and compare.json (docs/compare.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mapreport import __version__
from mapreport.analysis.compare import Comparison, ShapeComparison, Verdict
from mapreport.report.filters import pct, plural

COMPARE_SCHEMA_VERSION = "1.0"
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
            "–" if s.ci_p95 is None else f"[{ratio_text(s.ci_p95[0])}, {ratio_text(s.ci_p95[1])}]",
            VERDICT_WORDS[s.verdict],
        )
        for s in c.shapes
    )


def headline(c: Comparison) -> str:
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


def document(c: Comparison, a: Side, b: Side, generated_at: str) -> dict[str, Any]:
    """compare.json."""
    return {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "generator": f"mapreport {__version__}",
        "generated_at": generated_at,
        "a": vars(a),
        "b": vars(b),
        "verdict": headline(c),
        "fdr": c.fdr,
        "tested": c.tested,
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
            }
            for s in c.shapes
        ],
        "only_a": list(c.only_a),
        "only_b": list(c.only_b),
    }
