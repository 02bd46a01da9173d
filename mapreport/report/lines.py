"""The lines several sections print (`sections.unit.Facts` builds each once per slice): each
action with its words and evidence link, each shape with the words its decision and class rest
on, a checklist item, a pitfall, the per-core compute an action rests on."""

from __future__ import annotations

import hashlib

import msgspec

from mapreport.analysis.actions.action_params import Impact
from mapreport.analysis.actions.actions import SLICE_WIDE, Action, class_id
from mapreport.analysis.serving.scheduling import CoreCompute
from mapreport.analysis.serving.shape import ShapeMetrics
from mapreport.analysis.steps.impact import action_impact
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import ActionKind, BottleneckClass, CheckState
from mapreport.report import decisions, prose, words


class ActionView(msgspec.Struct, frozen=True):
    """One action as the report shows it, with where its evidence is."""

    a: Action
    title: str
    rollback: str
    shape_key: str
    """The anchor key of the action's shape ('' for a slice-wide action)."""
    evidence_href: str
    """The report anchor showing the evidence the action rests on."""
    impact: Impact
    """What the action acts on, in its unit."""
    impact_text: str
    """The impact in words with its unit (`words.impact`)."""
    ticket: str = ""
    """The action as Markdown, for an issue tracker."""


class CheckLine(msgspec.Struct, frozen=True):
    """One review-checklist item: its name, its state and why."""

    name: str
    state: CheckState
    text: str

    @property
    def failed(self) -> bool:
        """The item was checked and does not hold."""
        return self.state == CheckState.FAIL

    @property
    def passed(self) -> bool:
        """The item was checked and holds."""
        return self.state == CheckState.PASS


class Row(msgspec.Struct, frozen=True):
    """A label, its text and whether it is a problem: one line of the pitfalls."""

    name: str
    flag: bool
    text: str


class ShapeLine(msgspec.Struct, frozen=True):
    """A shape with the words its decision and class rest on, and the actions on it."""

    m: ShapeMetrics
    decision_reason: str
    class_reason: str
    key: str
    """Its anchor key: rows are `shape-<key>`, `class-<key>` and `decision-<key>`."""
    actions: tuple[tuple[int, str], ...] = ()
    """(number in the actions section, id) of each action on the shape."""
    pack: str | None = None
    """The id of its class's evidence pack (None: a class without evidence)."""

    @property
    def n_baseline(self) -> int:
        """Requests of the variant the gain is measured against."""
        m = self.m
        return m.n_static if m.gain.baseline_variant == "static" else m.n_fallback

    @property
    def muted_class(self) -> bool:
        """The shape has no bottleneck class to act on."""
        return self.m.diagnosis.cls in (BottleneckClass.NONE, BottleneckClass.INSUFFICIENT_EVIDENCE)


class CoreEvidence(msgspec.Struct, frozen=True):
    """The per-core compute a core-placement action rests on (the slice-wide Jain index,
    over every shape's busy time, can read 1.000 beside it)."""

    shape: str
    action_id: str
    cores: tuple[CoreCompute, ...]


def anchor_key(name: str) -> str:
    """An HTML id part for a name from the input files (any characters, any length)."""
    return hashlib.sha256(name.encode()).hexdigest()[:12]


def evidence_href(a: Action, cores: frozenset[str]) -> str:
    """Where the report shows the evidence an action rests on: a tuning action's shape row in
    "Bottleneck class per shape" (or its per-core compute), a decision's shape, a blocker's
    section, the blocking section."""
    key = anchor_key(a.shape)
    if a.kind == ActionKind.CORE_IMBALANCE and a.id in cores:
        return f"#cores-{a.id}"
    if a.kind in (ActionKind.SPECIALISE, ActionKind.CLOSE_THE_LOOP):
        return f"#decision-{key}"
    if a.kind == ActionKind.ENVIRONMENT_MISMATCH or a.missing_side:
        return "#environment"
    if a.kind == ActionKind.PRECISION_WITHOUT_QUALITY:
        return "#checklist"
    if a.kind == ActionKind.ADAPTATION_BLOCKING:
        return "#blocking"
    return f"#class-{key}"


def action_view(a: Action, r: SliceResult, cores: frozenset[str] = frozenset()) -> ActionView:
    """An action with its words and the anchor of its evidence."""
    title = prose.action_title(a, r.name)
    rollback = prose.rollback_text(a, r.name)
    key = anchor_key(a.shape) if a.shape != SLICE_WIDE else ""
    impact = action_impact(a, r)
    return ActionView(
        a,
        title,
        rollback,
        key,
        evidence_href(a, cores),
        impact,
        words.impact(impact),
        prose.ticket(a, title, rollback, r),
    )


def shape_line(m: ShapeMetrics, r: SliceResult) -> ShapeLine:
    """A shape with its reasons, its anchor key, the actions on it and its class's pack."""
    th = r.thresholds
    b = r.blocking
    involved = {v for e in b.material for v in e.shapes} | set(b.triggers)
    on = tuple(
        (i, a.id)
        for i, a in enumerate(r.actions, 1)
        if a.shape == m.shape or (a.kind == ActionKind.ADAPTATION_BLOCKING and m.shape in involved)
    )
    key = anchor_key(m.shape)
    pack = class_id(r.workload, r.slice, m.shape) if m.diagnosis.evidence is not None else None
    return ShapeLine(m, decisions.decision_reason(m, th), words.class_reason(m, r), key, on, pack)
