"""Two tuning runs compared, in words (docs/compare.md, "Tuning, compared"): the sentence page
1 prints, the whole before the parts (which side's cost model ranks better over every workload
both tuned, then which side chose better), the table's rows, and compare.json's `tuning`."""

from __future__ import annotations

from typing import Any

import msgspec

from mapreport.analysis.base.common import Interval
from mapreport.analysis.comparing.compare_tuning import (
    Pooled,
    SideTuned,
    TuningComparison,
    WorkloadTuned,
)
from mapreport.core.kinds import TuningEdge
from mapreport.report.compare_file import (
    Pair,
    PooledAccuracy,
    TuningCompared,
    TuningSide,
    TuningWorkload,
    carried,
)
from mapreport.report.compare_whole import ratio_text
from mapreport.report.filters import duration, num, plural, ratio, signed_pct

EDGE_WORDS: dict[TuningEdge, str] = {
    TuningEdge.A_BETTER: "A better",
    TuningEdge.B_BETTER: "B better",
    TuningEdge.WITHIN_NOISE: "within noise",
    TuningEdge.UNMEASURED: "not measured",
}
"""A workload's cell: which side did better by the figure."""


def _ci(ci: Interval | None, fmt: Any = ratio) -> str:
    return "" if ci is None else f" [{fmt(ci.low)}, {fmt(ci.high)}]"


def _acc(p: Pooled | None) -> str:
    return "–" if p is None else f"{ratio(p.value)}{_ci(p.ci)}"


def _ranks(t: TuningComparison) -> str:
    """The first clause: the cost models' ranking over the workloads both scored."""
    a, b = _acc(t.pairwise_a), _acc(t.pairwise_b)
    over = f"over {plural(t.ranked, 'workload')} both scored"
    if t.ranks is TuningEdge.B_BETTER:
        return f"B's tuning ranks better: pairwise accuracy {b} against A's {a} {over}"
    if t.ranks is TuningEdge.A_BETTER:
        return f"A's tuning ranks better: pairwise accuracy {a} against B's {b} {over}"
    if t.ranks is TuningEdge.WITHIN_NOISE:
        return (
            f"Neither side's cost model ranks better: pairwise accuracy {a} on A, {b} on B {over}"
        )
    return "No cost-model scores on both sides: no ranking to compare"


def _chose(t: TuningComparison) -> str:
    """The second clause: the configs each side chose, B's time over A's."""
    said = f"{ratio_text(t.chosen_ratio)}{_ci(t.chosen_ci, ratio_text)}"
    if t.chose is TuningEdge.B_BETTER:
        return f"B chose better: its chosen configs take {said} of A's time"
    if t.chose is TuningEdge.A_BETTER:
        return f"A chose better: B's chosen configs take {said} of A's time"
    if t.chose is TuningEdge.WITHIN_NOISE and t.chosen_ci is not None:
        return f"the choices are within noise of each other (B's time {said} of A's)"
    if t.chose is TuningEdge.WITHIN_NOISE:
        return "the choices rest on one measurement a side: neither is shown better"
    return "neither side chose a config both could be timed by"


def tuning_sentence(t: TuningComparison | None) -> str | None:
    """Page 1's line on the tuning runs (None when neither side holds tuning records)."""
    return None if t is None else _sentence(t)


def _sentence(t: TuningComparison) -> str:
    n = plural(len(t.workloads), "workload")
    if not t.workloads:
        held = f"A tuned {plural(t.tuned_a, 'workload')}, B {num(t.tuned_b)}"
        if t.several:
            held += f"; {plural(len(t.several), 'workload')} with several runs on a side"
        return f"No workload tuned on both sides to compare ({held})."
    return f"{_ranks(t)}; {_chose(t)} ({n} both tuned)."


class TuningRow(msgspec.Struct, frozen=True):
    """One workload both sides tuned, as the table prints it."""

    workload: str
    runs: str
    candidates: str
    chosen: str
    regret_a: str
    regret_b: str
    chosen_ratio: str
    chose: str
    pairwise_a: str
    pairwise_b: str
    ranks: str


def _name(w: WorkloadTuned) -> str:
    return " at ".join(x for x in (w.task, w.shape) if x)


def tuning_rows(t: TuningComparison | None) -> tuple[TuningRow, ...]:
    """The table's rows, one per workload both tuned."""
    if t is None:
        return ()
    return tuple(
        TuningRow(
            workload=_name(w),
            runs=f"{w.a.plan_id} → {w.b.plan_id}",
            candidates=f"{num(w.a.candidates)} → {num(w.b.candidates)}",
            chosen=f"{duration(w.a.chosen_us)} → {duration(w.b.chosen_us)}",
            regret_a=f"{signed_pct(w.a.regret)}{_ci(w.a.regret_ci, signed_pct)}",
            regret_b=f"{signed_pct(w.b.regret)}{_ci(w.b.regret_ci, signed_pct)}",
            chosen_ratio=f"{ratio_text(w.chosen_ratio)}{_ci(w.chosen_ci, ratio_text)}",
            chose=EDGE_WORDS[w.chose],
            pairwise_a=f"{ratio(w.a.pairwise_accuracy)}{_ci(w.a.pairwise_ci)}",
            pairwise_b=f"{ratio(w.b.pairwise_accuracy)}{_ci(w.b.pairwise_ci)}",
            ranks=EDGE_WORDS[w.ranks],
        )
        for w in t.workloads
    )


def _pair(ci: Interval | None) -> Pair | None:
    return None if ci is None else (ci.low, ci.high)


def _pooled_doc(p: Pooled | None) -> PooledAccuracy | None:
    return None if p is None else PooledAccuracy(value=p.value, ci=_pair(p.ci))


def _side_doc(s: SideTuned) -> TuningSide:
    return carried(TuningSide, s, regret_ci=_pair(s.regret_ci), pairwise_ci=_pair(s.pairwise_ci))


def tuning_doc(t: TuningComparison) -> TuningCompared:
    """compare.json's `tuning` (present only where a side holds tuning records)."""
    return carried(
        TuningCompared,
        t,
        text=_sentence(t),
        chosen_ci=_pair(t.chosen_ci),
        pairwise_a=_pooled_doc(t.pairwise_a),
        pairwise_b=_pooled_doc(t.pairwise_b),
        pairwise_change_ci=_pair(t.pairwise_change_ci),
        workloads=tuple(
            carried(
                TuningWorkload,
                w,
                chosen_ci=_pair(w.chosen_ci),
                pairwise_change_ci=_pair(w.pairwise_change_ci),
                a=_side_doc(w.a),
                b=_side_doc(w.b),
            )
            for w in t.workloads
        ),
    )
