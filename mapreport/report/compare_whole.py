"""The comparison's whole in words: each side's devices, the total time B over A with its CI and
its split by category, and the op x shapes that made the change (docs/compare.md, "The whole
first")."""

from __future__ import annotations

import msgspec

from mapreport.analysis.comparing.compare import Comparison, OpComparison, OpOnly
from mapreport.analysis.comparing.compare_whole import TotalComparison
from mapreport.core.kinds import CompareVerdict as Verdict
from mapreport.core.kinds import TimeBasis, TimeCategory
from mapreport.report.filters import duration, num, pct

CATEGORY_WORDS = {
    TimeCategory.GEMM: "GEMM",
    TimeCategory.CONV: "convolution",
    TimeCategory.ATTENTION: "attention",
    TimeCategory.NORM: "normalisation and softmax",
    TimeCategory.ELEMENTWISE: "elementwise",
    TimeCategory.REDUCTION: "reduction",
    TimeCategory.COPY: "data movement on the device",
    TimeCategory.TRANSFER: "host-device copies and sets",
    TimeCategory.OTHER: "other ops",
    TimeCategory.UNATTRIBUTED: "kernels no recorded op launched",
}
VERDICT_WORDS = {
    Verdict.FASTER: "faster",
    Verdict.SLOWER: "slower",
    Verdict.SAME: "~",
    Verdict.INSUFFICIENT: "too few requests",
}
OP_VERDICT_WORDS = {**VERDICT_WORDS, Verdict.INSUFFICIENT: "too few calls"}
UNRECORDED = "dims not recorded: calls of different sizes may be pooled"
"""Said beside the verdict of an op x shape whose input dims the trace did not record."""
BASIS_WORDS = {
    TimeBasis.DEVICE: "Device time",
    TimeBasis.HOST: "Host time (no device rows: each host op's own time)",
}


def ratio_text(x: float | None) -> str:
    """A ratio as benchstat prints a change: x1.31."""
    return "–" if x is None else f"x{x:.2f}"


def signed_duration(us: float) -> str:
    """A change of time with its sign: +12.0 µs, −3.40 ms."""
    return ("+" if us >= 0 else "−") + duration(abs(us))


def part_text(contribution: float | None) -> str:
    """A part of the change of the whole: '61.0% of the change', or 'against it' when it moved
    the other way."""
    if contribution is None:
        return "no change of the whole"
    if contribution < 0:
        return f"{pct(-contribution)} against the change"
    return f"{pct(contribution)} of the change"


def short_shape(shape: str) -> str:
    """An op's input dims without the trailing unrecorded inputs: 512;141x512;();() -> 512;141x512
    (`();()` stays: it is what says the dims were not recorded)."""
    parts = shape.split(";")
    while len(parts) > 1 and parts[-1] in ("()", ""):
        parts.pop()
    return ";".join(parts) if any(p not in ("()", "") for p in parts) else shape


def devices_text(t: TotalComparison) -> str:
    """Each side's devices as its traces state them."""

    def one(which: str, basis: TimeBasis, devices: tuple[str, ...]) -> str:
        if basis == TimeBasis.HOST:
            return f"{which}: the host only (its traces hold no device rows)"
        return f"{which}: {', '.join(devices) or 'a device its traces do not name'}"

    return f"{one('A', t.basis_a, t.devices_a)}; {one('B', t.basis_b, t.devices_b)}."


def _verdict(t: TotalComparison, same_mix: bool) -> str:
    if not t.moved:
        return "no change shown"
    if not same_mix:  # less time on other work is not speed
        more = "more" if t.ratio > 1 else "less"
        return f"B spent {more} time overall, on a different mix of requests"
    return "B is slower overall" if t.ratio > 1 else "B is faster overall"


def whole_sentence(t: TotalComparison | None, same_mix: bool = True) -> str:
    """The whole in one sentence ('' without traced ops on both sides); `same_mix`: the sides
    served the same mix of request shapes (`Comparison.mix_moved`)."""
    if t is None:
        return ""
    basis = BASIS_WORDS[t.basis_b] if t.basis_a == t.basis_b else "Time (A's and B's differ)"
    said = (
        f"{basis.split(' (')[0]}, every op of both traces: {duration(t.a_us)} → "
        f"{duration(t.b_us)} ({ratio_text(t.ratio)}, 95% CI [{ratio_text(t.ci[0])}, "
        f"{ratio_text(t.ci[1])}]): {_verdict(t, same_mix)}"
    )
    big = [c for c in t.categories if c.contribution is not None][:3]
    if big:
        said += "; by category, " + ", ".join(
            f"{CATEGORY_WORDS[c.category]} {signed_duration(c.b_us - c.a_us)} "
            f"({part_text(c.contribution)})"
            for c in big
        )
    return said + "."


def _op_name(o: OpComparison | OpOnly) -> str:
    name = f"{o.op} {short_shape(o.shape)}".strip()
    return name if o.recorded else f"{name} (dims not recorded)"


def parts_sentence(c: Comparison, k: int = 3) -> str:
    """The op x shapes that made most of the change, largest |B - A| first ('' without any)."""
    rows = c.ops_by_contribution(k)
    if not rows:
        return ""

    def one(o: OpComparison | OpOnly) -> str:
        how = (
            f"only in {'B' if o.in_b else 'A'}"
            if isinstance(o, OpOnly)
            else ratio_text(o.ratio) + " a call"
        )
        return f"{_op_name(o)} {signed_duration(o.delta_us)} ({how}, {part_text(o.contribution)})"

    return "Largest parts of the change: " + "; ".join(one(o) for o in rows) + "."


class WholeRow(msgspec.Struct, frozen=True):
    """A row of page 1's whole: the total, or one category."""

    what: str
    a: str
    b: str
    ratio: str
    ci: str
    part: str
    calls: str


class WholeView(msgspec.Struct, frozen=True):
    """Page 1's whole: the devices, the total and its split."""

    devices: str
    basis: str
    rows: tuple[WholeRow, ...]
    verdict: str


def whole_view(t: TotalComparison | None, same_mix: bool = True) -> WholeView | None:
    """The whole's table (None without traced ops on both sides)."""
    if t is None:
        return None
    total = WholeRow(
        "Total",
        duration(t.a_us),
        duration(t.b_us),
        ratio_text(t.ratio),
        f"[{ratio_text(t.ci[0])}, {ratio_text(t.ci[1])}]",
        signed_duration(t.delta_us),
        f"{num(t.calls_a)} / {num(t.calls_b)}",
    )
    rows = tuple(
        WholeRow(
            CATEGORY_WORDS[c.category],
            duration(c.a_us),
            duration(c.b_us),
            ratio_text(c.ratio),
            "",
            f"{signed_duration(c.b_us - c.a_us)} ({part_text(c.contribution)})",
            f"{num(c.calls_a)} / {num(c.calls_b)}",
        )
        for c in t.categories
    )
    basis = BASIS_WORDS[t.basis_b] if t.basis_a == t.basis_b else "Time (bases differ)"
    return WholeView(devices_text(t), basis, (total, *rows), _verdict(t, same_mix))


class PartLine(msgspec.Struct, frozen=True):
    """An op x shape of either side as a part of the change of the whole."""

    op: str
    shape: str
    a: str
    b: str
    change: str
    part: str
    per_call: str
    """B/A per call, or which side alone ran it."""
    verdict: str


def part_lines(c: Comparison, k: int = 10) -> tuple[PartLine, ...]:
    """Page 1's op x shapes that made most of the change, largest |B - A| first."""
    out = []
    for o in c.ops_by_contribution(k):
        if isinstance(o, OpOnly):
            a, b = (0.0, o.total_us) if o.in_b else (o.total_us, 0.0)
            how, verdict = f"only in {'B' if o.in_b else 'A'}", "not compared"
        else:
            a, b = o.mean_us_a * o.count_a, o.mean_us_b * o.count_b
            how, verdict = ratio_text(o.ratio), OP_VERDICT_WORDS[o.verdict]
        if not o.recorded:
            verdict += f" ({UNRECORDED})"
        out.append(
            PartLine(
                o.op, short_shape(o.shape), duration(a), duration(b),
                signed_duration(o.delta_us), part_text(o.contribution), how, verdict,
            )
        )  # fmt: skip
    return tuple(out)


class OnlyLine(msgspec.Struct, frozen=True):
    """An op x shape one side ran and the other did not: listed, not compared."""

    side: str
    op: str
    shape: str
    note: str
    calls: str
    time: str
    share: str
    part: str


def only_lines(c: Comparison) -> tuple[OnlyLine, ...]:
    """Every op x shape of one side only, A's then B's, most time first."""
    return tuple(
        OnlyLine(
            "B" if o.in_b else "A",
            o.op,
            o.shape,
            "" if o.recorded else UNRECORDED,
            num(o.count),
            duration(o.total_us),
            pct(o.share),
            part_text(o.contribution),
        )
        for o in (*c.ops_only_a, *c.ops_only_b)
    )
