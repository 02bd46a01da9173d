"""The design-review packet (the PDF): five pages that decide, and an appendix. Its view and
its words; the template `packet.html.j2` loops and prints. Facts come from the analysis and
the report's view (`view.ReportView`), read once; nothing here is computed anew."""

from __future__ import annotations

from typing import Any

import msgspec

from mapreport.analysis.actions.actions import SLICE_WIDE
from mapreport.analysis.actions.observe import MATERIAL_TRAFFIC
from mapreport.analysis.base.common import Regression, SlaCheck
from mapreport.analysis.loop.history import History
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.core.kinds import ActionState, BottleneckClass, DeviceActivity
from mapreport.core.records import replace
from mapreport.report import sections, words
from mapreport.report.filters import duration, pct, ratio, signed_pct
from mapreport.report.lines import ActionView
from mapreport.report.sections.roofline import RooflineView
from mapreport.report.sections.timeline import TimelineView
from mapreport.report.sections.unit import Part
from mapreport.report.states import state_line
from mapreport.report.view import ReportView

DECISIONS = 3
"""Decisions page 1 asks for, at most."""
SHORT_WORDS = 15
"""An action's short imperative, at most this many words."""
NIGHTS = 5
"""Nights of the SLA quantile page 1 shows beside tonight's."""
OP_ROWS = 5
"""Op x shape rows page 3 prints beside a compile plan's table."""
OP_ROWS_ALONE = 12
"""Op x shape rows page 3 prints when the roofline is the only mapping to hold a slice to."""
CHARTS = ("accuracy_vs_gain",)
"""The charts the packet prints (on its mapping page): the only ones its PDF exports."""
APPENDIX = (
    "checklist",
    "failures",
    "environment",
    "coverage",
    "blocking",
    "method",
    "data",
    "glossary",
)
"""The sections the appendix holds (the environment only when it is not locked); the review
checklist and the pitfalls first (page 1 counts them and names the failing ones)."""
APPENDIX_PARTIALS = {"checklist": "sections/checks.html.j2"}
"""Appendix parts shorter than their report section: the checklist without the sign-offs
table (page 1 states every sign-off)."""


class ActionLine(msgspec.Struct, frozen=True):
    """One action as the packet prints it: its imperative, effect, rollback and main rule."""

    av: ActionView
    short: str
    effect: str
    rollback: str
    rule: str
    state: str


class ShapeTail(msgspec.Struct, frozen=True):
    """A shape of page 2: its figures and what drives its tail."""

    m: ShapeMetrics
    driver: str


class PacketView(msgspec.Struct, frozen=True):
    """What the packet prints beyond the report's view."""

    sla_rows: tuple[tuple[SlaCheck, str, str], ...]
    """(check, headroom, the last nights' values of its quantile)."""
    cards: tuple[tuple[str, str], ...]
    changes: tuple[str, ...]
    """What changed since the compared night, by name."""
    decisions: tuple[tuple[int, ActionLine], ...]
    actions: tuple[ActionLine, ...]
    shapes: tuple[ShapeTail, ...]
    other_shapes: int
    tail_pack: str | None
    appendix: tuple[Part[Any], ...]
    device_summary: str
    """Where a trace's device time went, in one sentence ('' without device time)."""
    roofline: RooflineView | None
    """The roofline section's view (page 3 prints its first rows)."""
    timeline: TimelineView | None
    """The timeline section's view (page 2 of a trace without requests)."""
    op_rows: int
    """Op x shape rows page 3 prints."""
    charts: tuple[str, ...] = CHARTS


def short(title: str) -> str:
    """An action's imperative: its title up to the colon that ends it (`: `; an op's `::`
    is part of its name), at most SHORT_WORDS words."""
    head = title.split(": ", 1)[0].strip()
    said = head.split()
    return head if len(said) <= SHORT_WORDS else " ".join(said[:SHORT_WORDS]) + " …"


def _effect(av: ActionView) -> str:
    """What the action's evidence says it acts on: the share of the tail excess its driver
    holds, or the net gain at stake; a blocker makes the result trustworthy."""
    e = av.a.evidence
    where = "the slice's" if av.a.shape == SLICE_WIDE else "its shape's"
    if e.metric.startswith("tail_share.") and e.value is not None:
        return f"up to {pct(e.value)} of {where} tail excess above p95"
    if e.metric == "net_gain_p50" and e.value is not None:
        return f"{signed_pct(e.value)} net p50 compute on its shape"
    if e.metric == "headroom_us" and e.value is not None:
        return f"up to {av.impact_text}"
    if e.metric == "device_idle_share" and e.value is not None:
        return f"up to {pct(e.value)} of the device's span, now idle"
    if e.metric == "padding_waste_us" and e.value is not None:
        return f"up to {av.impact_text} on padding"
    if av.a.impact <= 0:
        return "a result that can be trusted"
    return words.evidence(e)


def _rollback(av: ActionView) -> str:
    t = av.a.rollback_trigger
    if t.threshold is None:
        return "not a runtime change" if t.runs == 0 else "not measurable"
    on = f", fixed {t.since}" if t.since else ""
    return f"{words.metric(t.metric)} > {duration(t.threshold)}{on}"


def _rule(av: ActionView) -> str:
    matrix = av.a.validation_matrix
    if not matrix:
        return "–"
    x = matrix[0]
    return f"{words.metric(x.metric)}: {words.criterion(x)}"


def _sla_rows(v: ReportView) -> tuple[tuple[SlaCheck, str, str], ...]:
    rows = []
    for s in v.verdict.sla:
        headroom = signed_pct(s.headroom)
        key = f"latency_{s.quantile}_us"
        nights = " → ".join(duration(getattr(p, key)) for p in v.recent_runs[-NIGHTS:])
        rows.append((s, headroom, nights or "first night"))
    return tuple(rows)


def _cards(v: ReportView) -> tuple[tuple[str, str], ...]:
    """Page 1's figures by the slice's kind: a served LLM's token timing and restarts, a
    compiled slice's coverage and accuracy."""
    of = v.of
    shapes = [x.m for x in v.shapes]
    rf = of["roofline"].rf if of["roofline"] else None
    cards = [("Requests", f"{v.requests:,}"), ("Shapes", f"{len(shapes):,}")]
    if not v.requests and rf is not None:  # a trace alone: its device, not requests
        cards = [("Ops x shapes", f"{len(rf.rows):,}")]
    share = {m.shape: m.traffic_share for m in shapes}
    tokens = of["tokens"]
    busiest = max(tokens.tokens, key=lambda t: share.get(t.shape, 0.0), default=None)
    if busiest is not None:
        cards += [
            (f"TTFT p95 ({busiest.shape})", duration(busiest.ttft.p95)),
            (f"ITL p95 ({busiest.shape})", duration(busiest.itl.p95)),
        ]
    if tokens.rate is not None:
        cards.append(("Output tokens/s", f"{tokens.rate.tokens_per_s:,.0f}"))
    if (telemetry := of["serving"].t) is not None:
        cards.append(("Server restarts", f"{telemetry.resets:,}"))
    coverage, accuracy = of["coverage"], of["accuracy"].a
    if coverage.plans:
        cards += [
            ("Covered traffic", pct(coverage.covered_traffic_share)),
            ("Within tolerance", pct(accuracy.within_tolerance_share)),
            (
                "Kendall τ",
                ratio(accuracy.kendall_tau),
            ),
        ]
    t = of["timeline"].t if of["timeline"] else None
    if t is not None:
        cards.append(("Device idle", pct(t.shares[DeviceActivity.IDLE])))
    if rf is not None:
        cards += [
            ("Device time", duration(rf.gpu_time_us)),
            ("Above the roofline", duration(rf.headroom_us) if rf.device else "no device"),
        ]
    env = v.assembled.of(sections.environment.SECTION).card  # the HTML's card too
    cards.append(("Environment", f"{env.word} ({env.note})" if env.note else env.word))
    return tuple(cards)


def _changes(v: ReportView) -> tuple[str, ...]:
    """State changes since the compared night, each named."""
    h = v.assembled.of(sections.history.SECTION).h
    if h is None or not h.compared_to:
        return ()
    out = []
    for sv in v.states:
        s = sv.s
        if s.state == ActionState.OPEN and not s.held:
            continue
        what = f"{words.label(s.kind)} at {words.shape_name(s.shape)}"
        out.append(f"{what} {state_line(s)}")
    if v.moved:
        # a regression stays measured against the last night that met the SLA, which may be
        # older than the night compared here: such a shape names its own reference night
        out.append(
            "p95 moved beyond its CI at "
            + ", ".join(f"{g.shape} ({signed_pct(g.change)}{_own_night(g, h)})" for g in v.moved)
        )
    return tuple(out)


def _own_night(g: Regression, h: History) -> str:
    """` against <night>` when the shape's reference night is not the compared one."""
    return "" if g.against_run_date == h.compared_night else f" against {g.against_run_date}"


def _driver(m: ShapeMetrics) -> str:
    t = m.tail
    if t is None:
        return f"too few requests (n = {m.n})"
    if not t.material:
        return "no material tail (noise)"
    cls = m.diagnosis.cls
    if cls == BottleneckClass.INSUFFICIENT_EVIDENCE:
        return "undecided: evidence too thin"
    return words.label(cls)


def build(v: ReportView) -> PacketView:
    """The packet's view of one slice, from its page's and its sections' views."""
    states = {sv.s.action_id: words.label(sv.s.state) for sv in v.states}
    lines = tuple(
        ActionLine(
            av, short(av.title), _effect(av), _rollback(av), _rule(av), states.get(av.a.id, "new")
        )
        for av in v.actions
    )
    shown = tuple(
        ShapeTail(x.m, _driver(x.m))
        for x in v.shapes
        if x.m.traffic_share >= MATERIAL_TRAFFIC or (x.m.tail is not None and x.m.tail.material)
    )
    printed = {p.id: p for p in v.sections}
    appendix = tuple(
        replace(printed[i], partial=APPENDIX_PARTIALS.get(i, ""))
        for i in APPENDIX
        if i in printed
        and (i != "environment" or not v.assembled.of(sections.environment.SECTION).env.locked)
    )
    return PacketView(
        sla_rows=_sla_rows(v),
        cards=_cards(v),
        changes=_changes(v),
        decisions=tuple(enumerate(lines[:DECISIONS], start=1)),
        actions=lines,
        shapes=shown,
        other_shapes=len(v.shapes) - len(shown),
        tail_pack=v.assembled.of(sections.tail.SECTION).pack,
        appendix=appendix,
        device_summary=v.assembled.of(sections.summary.SECTION).device,
        roofline=v.assembled.of(sections.roofline.SECTION),
        timeline=v.assembled.of(sections.timeline.SECTION),
        op_rows=OP_ROWS if v.assembled.of(sections.coverage.SECTION).plans else OP_ROWS_ALONE,
    )
