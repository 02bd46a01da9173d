"""The words of a comparison's per-quantile tests (docs/compare.md, "How a shape is compared"
and "Bursty noise"): what the latencies are, the block length chosen and why, each shape's
tested quantiles, and where a moved quantile's time moved (queue wait or compute)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.comparing.compare import Comparison, QuantileTest, ShapeComparison
from mapreport.analysis.comparing.compare_stats import BlockChoice, LatencyBasis
from mapreport.core.kinds import CompareVerdict as Verdict
from mapreport.report.compare_whole import VERDICT_WORDS, ratio_text, signed_duration
from mapreport.report.filters import duration, pct, plural

LATENCY_WORDS = {
    LatencyBasis.END_TO_END: "end-to-end latency (arrival to end of compute)",
    LatencyBasis.SPAN: "each request's span (start to end of its compute, as a profiler "
    "trace's request span gives it: no arrival is recorded, so no queue wait)",
}


def basis_sentence(c: Comparison) -> str:
    """What the compared latencies are, in a sentence."""
    return f"Latency compared: {LATENCY_WORDS[c.basis]}."


def names_sentence(c: Comparison) -> str:
    """Which of B's shape names were aligned with A's by their numbers ('' when none)."""
    if not c.renamed:
        return ""
    b_name, a_name = c.renamed[0]
    return (
        f"B names its shapes otherwise: {plural(len(c.renamed), 'shape')} aligned with A's by "
        f"the numbers in their names (B's {b_name} is A's {a_name}; compare.json "
        "renamed_b lists every one)."
    )


def mix_sentence(c: Comparison) -> str:
    """Whether the sides served the same mix of shapes ('' when they did): a whole's total
    then changes with the mix as well as with the speed."""
    most = c.mix_moved
    if most is None:
        return ""
    return (
        f"The sides served different mixes of shapes ({most.shape}: {pct(most.traffic_a)} of "
        f"A's requests, {pct(most.traffic_b)} of B's), so a total's change holds the mix as "
        "well as the speed; the shapes compare like with like."
    )


def mean_sentence(c: Comparison) -> str:
    """The slice's mean latency per request, A to B, and the part one-side shapes make."""
    if not c.shapes:
        return ""
    change = c.mean_b_us - c.mean_a_us
    own = (
        f", {signed_duration(c.one_side_us)} of it from shapes only one side ran"
        if c.only_a or c.only_b
        else ""
    )
    return (
        f"Mean latency per request {duration(c.mean_a_us)} on A, {duration(c.mean_b_us)} on "
        f"B ({signed_duration(change)}{own}); the shapes are ranked by what each adds to it."
    )


def _block(which: str, b: BlockChoice) -> str:
    if b.lag1 is None:
        return f"{which}: too few requests to estimate"
    died = (
        "none above the white-noise band, so requests are resampled one by one"
        if b.length <= 1
        else f"it falls under the white-noise band ±{b.band:.3f} at lag {b.length}"
    )
    return (
        f"{which}: lag-1 autocorrelation {b.lag1:+.2f} over {b.n:,} requests; {died} (block "
        f"{b.length})"
    )


def blocks_sentence(c: Comparison) -> str:
    """The block length each side's intervals were resampled in, and the autocorrelation it
    was chosen from ('' without requests)."""
    if not c.shapes and not c.tail:
        return ""
    return (
        "Intervals resample blocks of consecutive requests, as long as the latency "
        "autocorrelation across consecutive requests lasts (each request's log latency less "
        f"its shape's median): {_block('A', c.blocks[0])}; {_block('B', c.blocks[1])}. "
        f"{plural(c.tests, 'test')} (shape x quantile) at a false discovery rate of "
        f"{pct(c.fdr, 0)}."
    )


def test_text(t: QuantileTest | None) -> str:
    """A quantile's test as a cell: x1.26 [x1.09, x1.57] slower ('–' untested)."""
    if t is None:
        return "–"
    if t.vs_shift is not None and t.vs_shift_ci is not None:  # tested against the run's shift
        lo, hi = t.vs_shift_ci
        return (
            f"{ratio_text(t.ratio)}; {ratio_text(t.vs_shift)} against the run's shift "
            f"[{ratio_text(lo)}, {ratio_text(hi)}] {VERDICT_WORDS[t.verdict]}"
        )
    return (
        f"{ratio_text(t.ratio)} [{ratio_text(t.ci[0])}, {ratio_text(t.ci[1])}] "
        f"{VERDICT_WORDS[t.verdict]}"
    )


def shift_sentence(c: Comparison) -> str:
    """The run's shift the shapes were tested against, per quantile ('' when tested against
    1)."""
    if not c.shifts:
        return ""
    each = "; ".join(
        f"{r.quantile} {ratio_text(r.ratio)} [{ratio_text(r.ci[0])}, {ratio_text(r.ci[1])}]"
        f" over {plural(r.shapes, 'shape')}, {'moved' if r.moved else 'no move shown'}"
        for r in c.shifts
    )
    return (
        f"The run as a whole (the median of its shapes' ratios): {each}. With one run a "
        "side a move of the whole run cannot be told from a change of the machine between the "
        "runs (load, clocks, a neighbour), so each shape is tested against it: a shape "
        "flagged moved more than the rest of its run; two runs or more a side decide the "
        "whole."
    )


def split_text(t: QuantileTest) -> str:
    """Where a moved quantile's time moved: queue wait and compute, with the queue's part
    ('' where the records do not split it)."""
    if t.queue_us is None or t.compute_us is None:
        return ""
    share = t.queue_share
    part = "" if share is None else f" (queue wait {pct(share)} of the move)"
    return (
        f"{t.quantile}: queue wait {signed_duration(t.queue_us)}, compute "
        f"{signed_duration(t.compute_us)}{part}"
    )


class TestCells(msgspec.Struct, frozen=True):
    """A shape's tests as the table prints them: p50, p95, p99, and the split of its moves."""

    p50: str
    p95: str
    p99: str
    split: str


UNTESTED = TestCells("–", "–", "–", "")


def test_cells(s: ShapeComparison) -> TestCells:
    """The cells of a shape's tests."""
    moved = [t for t in s.tests if t.verdict in (Verdict.FASTER, Verdict.SLOWER)]
    return TestCells(
        test_text(s.test("p50")),
        test_text(s.test("p95")),
        test_text(s.test("p99")),
        "; ".join(x for x in (split_text(t) for t in moved) if x),
    )
