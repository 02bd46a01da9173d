"""The comparison report: its view and words (the template `compare.html.j2` loops and
prints), and compare.json (docs/compare.md)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.comparing.compare import (
    Comparison,
    OpComparison,
    QuantileComparison,
    ShapeComparison,
    ShipCheck,
)
from mapreport.analysis.comparing.compare_mapping import Figure, MappingComparison, ShapeMapping
from mapreport.analysis.comparing.compare_stats import LatencyBasis
from mapreport.analysis.comparing.compare_whole import TotalComparison
from mapreport.analysis.comparing.runlevel import MIN_RUNS, RunsCompared
from mapreport.core.kinds import CompareVerdict as Verdict
from mapreport.core.kinds import ShipReason
from mapreport.core.records import replace
from mapreport.report.compare_tests import (
    UNTESTED,
    TestCells,
    basis_sentence,
    mix_sentence,
    names_sentence,
    shift_sentence,
    test_cells,
)
from mapreport.report.compare_whole import (
    OP_VERDICT_WORDS,
    UNRECORDED,
    VERDICT_WORDS,
    OnlyLine,
    only_lines,
    parts_sentence,
    ratio_text,
    signed_duration,
    whole_sentence,
)
from mapreport.report.filters import duration, num, pct, plural, ratio, signed_pct
from mapreport.report.view import anchor_key
from mapreport.report.words import label

Parts = dict[str, dict[str, tuple[float, float, float] | None]]
"""Per shape: latency, queue and compute (p50, p95, p99) of one side (`side_parts`)."""


class Side(msgspec.Struct, frozen=True):
    """What one side of a comparison is."""

    label: str
    dataset: str
    workload: str
    slice: str
    requests: int
    """Ok requests with their arrival."""
    calls: int = 0
    """Traced calls of ops a recorded operator launched."""
    basis: LatencyBasis = LatencyBasis.END_TO_END
    """What its requests' latencies are: end to end, or each request's span."""


def ratio_ci(ci: tuple[float, float] | None) -> str:
    """A ratio's CI as printed: [x0.91, x0.98] ('–' without one)."""
    return "–" if ci is None else f"[{ratio_text(ci[0])}, {ratio_text(ci[1])}]"


class Line(msgspec.Struct, frozen=True):
    """One shape's row of the table, its ratios in words."""

    s: ShapeComparison
    ratio_p50: str
    ratio_p95: str
    ci: str
    verdict: str
    key: str
    """The anchor of the shape's row (`shape-<key>`)."""
    evidence: str
    """The relative link to the shape's evidence pack ('' when untested)."""
    tests: TestCells = UNTESTED
    contribution: str = ""
    """What the shape adds to the change of the slice's mean latency per request."""


Evidence = dict[tuple[str, ...], str]
"""Evidence pack ids by what they are of (`compare_packs.evidence_ids`)."""


def _href(evidence: Evidence, *what: str) -> str:
    pid = evidence.get(what)
    return f"evidence/{pid}.sql" if pid else ""


def _line(s: ShapeComparison, evidence: Evidence) -> Line:
    return Line(
        s,
        ratio_text(s.ratio_p50),
        ratio_text(s.ratio_p95),
        ratio_ci(s.ci_p95),
        VERDICT_WORDS[s.verdict],
        anchor_key(s.shape),
        _href(evidence, "shape", s.shape),
        test_cells(s),
        signed_duration(s.contribution_us),
    )


def lines(c: Comparison, evidence: Evidence | None = None) -> tuple[Line, ...]:
    """The table's rows."""
    return tuple(_line(s, evidence or {}) for s in c.shapes)


def moved_lines(c: Comparison, evidence: Evidence | None = None) -> tuple[Line, ...]:
    """Page 1's shapes that moved most, by traffic x effect."""
    return tuple(_line(s, evidence or {}) for s in c.moved_most())


class TailLine(msgspec.Struct, frozen=True):
    """One pooled quantile of the slice, in words."""

    q: QuantileComparison
    ratio: str
    ci: str
    verdict: str
    evidence: str


def tail_lines(c: Comparison, evidence: Evidence | None = None) -> tuple[TailLine, ...]:
    """Page 1's pooled quantiles of the slice."""
    return tuple(
        TailLine(
            t,
            ratio_text(t.ratio),
            ratio_ci(t.ci),
            ("slower" if t.ratio > 1 else "faster") if t.moved else "~",
            _href(evidence or {}, "slice", t.quantile),
        )
        for t in c.tail
    )


class DrillRow(msgspec.Struct, frozen=True):
    """One part of a shape's time on both sides."""

    part: str
    cells: tuple[str, ...]
    """p50 A, p50 B, p95 A, p95 B, p99 A, p99 B."""


class DrillLine(msgspec.Struct, frozen=True):
    """A moved shape's time, split: each part's p50, p95 and p99 on both sides."""

    line: Line
    parts: tuple[DrillRow, ...]


PART_WORDS = {"latency": "End to end", "queue": "Queue wait", "compute": "Compute"}


def drill_lines(
    c: Comparison, parts: tuple[Parts, Parts], evidence: Evidence | None = None
) -> tuple[DrillLine, ...]:
    """The drill-down of the shapes that moved most: where the time moved (queue or compute)."""
    out = []
    for line in moved_lines(c, evidence):
        rows = []
        for part, words in PART_WORDS.items():
            qa = parts[0].get(line.s.shape, {}).get(part)
            qb = parts[1].get(line.s.shape, {}).get(part)
            if qa is None and qb is None:
                continue
            cells = [duration(None if q is None else q[i]) for i in range(3) for q in (qa, qb)]
            rows.append(DrillRow(words, tuple(cells)))
        out.append(DrillLine(line, tuple(rows)))
    return tuple(out)


class OpLine(msgspec.Struct, frozen=True):
    """One op x shape's row of the table."""

    o: OpComparison
    ratio: str
    ci: str
    verdict: str
    evidence: str


def _op_line(o: OpComparison, evidence: Evidence) -> OpLine:
    said = OP_VERDICT_WORDS[o.verdict]
    return OpLine(
        o,
        ratio_text(o.ratio),
        ratio_ci(o.ci),
        said if o.recorded else f"{said} ({UNRECORDED})",
        _href(evidence, "op", o.op, o.shape, o.types),
    )


def op_lines(c: Comparison, evidence: Evidence | None = None) -> tuple[OpLine, ...]:
    """The op table's rows."""
    return tuple(_op_line(o, evidence or {}) for o in c.ops)


def ops_moved_lines(c: Comparison, evidence: Evidence | None = None) -> tuple[OpLine, ...]:
    """Page 1's op x shapes that moved most, by device-time share x effect."""
    return tuple(_op_line(o, evidence or {}) for o in c.ops_moved_most())


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
    """What the traces' op x shapes say, in sentences ('' without them): how many ran on both
    sides or one, then the parts of the change of the whole, largest first."""
    if not c.ops and not c.ops_only_a and not c.ops_only_b:
        return ""
    thin = sum(1 for o in c.ops if o.verdict == Verdict.INSUFFICIENT)
    moved = sum(1 for o in c.ops if o.verdict in (Verdict.FASTER, Verdict.SLOWER))
    said = [f"{plural(len(c.ops), 'op x shape')} ran on both sides ({moved} moved per call"]
    said[0] += f", {thin} with under the calls a test needs)" if thin else ")"
    if c.ops_only_a or c.ops_only_b:
        said.append(f"{len(c.ops_only_a)} on A only, {len(c.ops_only_b)} on B only")
    return " ".join(x for x in ("; ".join(said) + ".", parts_sentence(c)) if x)


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


def headline(c: Comparison, total: TotalComparison | None = None) -> str:
    """The verdict, the whole before the parts: the traces' total time B over A, the slice's
    pooled latency, then the request shapes' and the op x shapes' moves, each in a sentence."""
    return " ".join(headline_parts(c, total))


def headline_parts(c: Comparison, total: TotalComparison | None = None) -> tuple[str, ...]:
    """The verdict's paragraphs in order (page 1 prints one each; compare.json joins them)."""
    whole = whole_sentence(total, c.mix_moved is None)
    ops = ops_sentence(c)
    if not c.shapes and not c.only_a and not c.only_b and ops:
        return tuple(x for x in (whole, ops) if x)
    said = (
        whole,
        mix_sentence(c) if total is not None else "",
        tail_sentence(c),
        shift_sentence(c),
        _shapes_headline(c),
        names_sentence(c),
        basis_sentence(c),
        ops,
    )
    return tuple(x for x in said if x)


def _shapes_headline(c: Comparison) -> str:
    """The verdict in one sentence: what moved, at which quantile, which way, on how much
    traffic."""
    slower, faster = c.decided(Verdict.SLOWER), c.decided(Verdict.FASTER)
    if not c.tested:
        return (
            "No shape has enough requests on both sides to compare its p50 and p95 "
            "(each side needs the evidence threshold's count)."
        )
    moved = slower + faster
    if not moved:
        return (
            f"No shape's p50 or p95 moved beyond its CI: {plural(c.tested, 'shape')} compared "
            f"({plural(c.tests, 'test')}), the false discovery rate held at {pct(c.fdr, 0)}."
        )

    def one(s: ShapeComparison) -> str:
        d = s.decisive
        at = f" at {d.quantile}" if d else ""
        if d is not None and d.vs_shift is not None:
            at += " against the run's shift"
        r = ratio_text(d.effect if d else s.ratio_p95)
        return f"{s.shape} {r}{at} ({pct(s.traffic_b)} of B's traffic)"

    parts = []
    if slower:
        parts.append(f"slower on {', '.join(one(s) for s in slower)}")
    if faster:
        parts.append(f"faster on {', '.join(one(s) for s in faster)}")
    return (
        f"B is {'; '.join(parts)}, of {plural(c.tested, 'shape')} compared "
        f"({plural(c.tests, 'test')}, false discovery rate {pct(c.fdr, 0)})."
    )


class MappingLine(msgspec.Struct, frozen=True):
    """One shape's mapping row: signed errors, their change with its CI, gains, decisions."""

    m: ShapeMapping
    change: str
    ci: str
    decision: str


class MappingView(msgspec.Struct, frozen=True):
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


class RunLine(msgspec.Struct, frozen=True):
    """One quantile across runs, in words."""

    quantile: str
    runs_a: int
    runs_b: int
    ratio: str
    ci: str
    verdict: str


class RunsView(msgspec.Struct, frozen=True):
    """The run-to-run section: a sentence, and a row per quantile where runs allow one."""

    sentence: str
    lines: tuple[RunLine, ...]


def _held(r: RunsCompared) -> str:
    said = []
    if r.runs_a or r.runs_b:
        said.append(
            f"A holds {plural(r.runs_a, 'run')} of requests, B {r.runs_b} (a run: one file)"
        )
    if r.traces_a or r.traces_b:
        said.append(f"A's ops come from {plural(r.traces_a, 'trace file')}, B's from {r.traces_b}")
    return "; ".join(said) or "Neither side holds requests or traced ops"


def runs_view(r: RunsCompared) -> RunsView:
    """What the runs of each side allow claiming, in words."""
    held = _held(r)
    if not r.claimed:
        return RunsView(
            f"{held}. The intervals above resample the requests (and calls) of each side: they "
            "measure the variation within a run, not run-to-run noise; a claim about the "
            f"builds, configs or devices in general needs {MIN_RUNS} or more runs a side, each "
            "with the requests its quantile needs.",
            (),
        )
    rows = tuple(
        RunLine(
            q.quantile,
            q.runs_a,
            q.runs_b,
            ratio_text(q.ratio),
            ratio_ci(q.ci),
            "–" if q.ci is None else ("moved" if q.moved else "~"),
        )
        for q in r.quantiles
        if q.runs_a or q.runs_b
    )
    said = [f"{q.quantile} {ratio_text(q.ratio)} {ratio_ci(q.ci)}" for q in r.quantiles if q.moved]
    said += [f"{o.op} {ratio_text(o.ratio)} {ratio_ci(o.ci)}" for o in r.ops if o.moved]
    ops = (
        f" {plural(len(r.ops), 'op x shape')} ran in {MIN_RUNS} or more trace files a side."
        if r.ops
        else ""
    )
    return RunsView(
        f"{held}. Across runs (the geometric mean of each run's figure, Welch's 95% t "
        f"interval): {'; '.join(said) if said else 'nothing moved beyond its interval'}.{ops}",
        rows,
    )


PRINTED_ROWS = 100
"""Rows each long table of the printed comparison holds, and names each one-side list names
(compare.html and compare.json hold every one): WeasyPrint took 90 s and 1.7 GB to lay out a
table of 4,000 shapes in 164 pages, which no one reads on paper."""


class LeftOut(msgspec.Struct, frozen=True):
    """Per long table, the sentence on the rows the printed comparison leaves out ('' where
    it leaves out none; the screen's page leaves out none)."""

    shapes: str = ""
    ops: str = ""
    mapping: str = ""
    only_ops: str = ""


class Printed(msgspec.Struct, frozen=True):
    """What the printed comparison holds of its long tables and lists (`printed`), and a
    sentence per table on what it leaves out ('' where it leaves out nothing)."""

    lines: tuple[Line, ...]
    op_lines: tuple[OpLine, ...]
    mapping: MappingView | None
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    more_a: int
    """Names of A's own shapes not printed."""
    more_b: int
    left_out: LeftOut
    only_ops: tuple[OnlyLine, ...] = ()


def _left_out(shown: int, total: int, noun: str, which: str) -> str:
    if shown >= total:
        return ""
    return (
        f"Printed: {shown:,} of {plural(total, noun)}, {which}; compare.html and compare.json "
        "hold every one."
    )


def printed(
    c: Comparison, mapping: MappingView | None, evidence: Evidence | None = None
) -> Printed:
    """The PDF's share of the long tables, `PRINTED_ROWS` each: the shapes that moved (most
    traffic x effect first, so every drilled shape's row is there) then the busiest others,
    in the table's order; the op x shapes with the most device time; the shapes whose mapping
    decision changed, then those whose signed error changed most."""
    moved = c.moved_most(len(c.shapes))
    named = {s.shape for s in moved}
    others = sorted(
        (s for s in c.shapes if s.shape not in named),
        key=lambda s: (-max(s.traffic_a, s.traffic_b), s.shape),
    )
    keep = {s.shape for s in (*moved, *others)[:PRINTED_ROWS]}
    shown = tuple(_line(s, evidence or {}) for s in c.shapes if s.shape in keep)
    left_out = LeftOut(
        _left_out(len(shown), len(c.shapes), "shape", "those that moved, then the busiest"),
        _left_out(min(len(c.ops), PRINTED_ROWS), len(c.ops), "op x shape", "the largest changes"),
    )
    only = only_lines(c)
    left_out = replace(
        left_out,
        only_ops=_left_out(
            min(len(only), PRINTED_ROWS), len(only), "one-side op x shape", "the most time"
        ),
    )
    ops = tuple(_op_line(o, evidence or {}) for o in c.ops[:PRINTED_ROWS])
    if mapping is not None and len(mapping.lines) > PRINTED_ROWS:
        ranked = sorted(
            mapping.lines,
            key=lambda x: (not x.m.decision_changed, -abs(x.m.change or 0.0), x.m.shape),
        )
        chosen = {x.m.shape for x in ranked[:PRINTED_ROWS]}
        rows = tuple(x for x in mapping.lines if x.m.shape in chosen)
        which = "those whose decision changed, then the largest changes of signed error"
        left_out = replace(
            left_out, mapping=_left_out(len(rows), len(mapping.lines), "shape", which)
        )
        mapping = replace(mapping, lines=rows)
    return Printed(
        shown,
        ops,
        mapping,
        c.only_a[:PRINTED_ROWS],
        c.only_b[:PRINTED_ROWS],
        max(0, len(c.only_a) - PRINTED_ROWS),
        max(0, len(c.only_b) - PRINTED_ROWS),
        left_out,
        tuple(sorted(only, key=lambda x: x.side)[:PRINTED_ROWS]),
    )
