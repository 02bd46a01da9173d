"""The unit a report is made of: a section, from the part of the result it reads to what its
partial prints, what findings.json states of it and the charts it draws.

A section module declares `SECTION = Section(...)` with its functions: `read` picks what it
reads of the slice (`Facts`: the result and the lines several sections print), `view` turns that
into the typed value its template prints (`templates/sections/<id>.html.j2`, which sees it as
`v`), `fragment` into the keys it adds to findings.json (a `msgspec.Struct`, whose fields the
schema is generated from), `figures` into its charts. The registry (`sections/__init__.py`) lists
the sections in page order; `assemble` makes one slice's parts in one pass over it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import msgspec

from mapreport.analysis.steps.results import SliceResult
from mapreport.core.kinds import ActionKind, JudgementFamily
from mapreport.core.records import field_names
from mapreport.report.lines import ActionView, CoreEvidence, ShapeLine, action_view, shape_line

if TYPE_CHECKING:
    import plotly.graph_objects as go

X = TypeVar("X")
V = TypeVar("V")

NO_REQUESTS = (
    "no per-request records (this slice holds {formats} data only); a native request "
    "log, a PyTorch profiler trace with request annotations, Triton trace files or "
    "Triton's OpenTelemetry spans add it (an AIPerf export adds client-side latency)"
)
"""Why a section that needs request telemetry has nothing to show."""
NO_PLAN = (
    "no compile plan names this slice, so there is no prediction to hold the runtime "
    "against; a native compile profile, TensorRT layer info, TORCH_TRACE or TVM tuning "
    "records add one"
)
"""Why a section that holds the runtime against a compile plan has nothing to show."""


T = TypeVar("T")


@dataclass(frozen=True)
class Facts:
    """What a section reads: the slice's result and the lines several sections print, each
    built once, when a section first asks for it."""

    r: SliceResult
    _shared: dict[Callable[..., Any], Any] = field(default_factory=dict, repr=False, compare=False)

    def share(self, read: Callable[[Facts], T]) -> T:
        """What `read` makes of this slice, made once: a section reads another's lines by its
        `read` (the summary reads the checklist's) without making them twice."""
        if read not in self._shared:
            self._shared[read] = read(self)
        return cast(T, self._shared[read])

    @cached_property
    def cores(self) -> tuple[CoreEvidence, ...]:
        """Per core-placement action: its shape's median compute on each core."""
        r = self.r
        per_shape = r.scheduling.shape_cores if r.scheduling else {}
        return tuple(
            CoreEvidence(a.shape, a.id, per_shape[a.shape])
            for a in r.actions
            if a.kind == ActionKind.CORE_IMBALANCE and per_shape.get(a.shape)
        )

    @cached_property
    def actions(self) -> tuple[ActionView, ...]:
        """Tonight's actions with their words, in the order the actions section numbers them."""
        with_cores = frozenset(e.action_id for e in self.cores)
        return tuple(action_view(a, self.r, with_cores) for a in self.r.actions)

    @cached_property
    def shapes(self) -> tuple[ShapeLine, ...]:
        """Every shape with its reasons and the actions on it."""
        return tuple(shape_line(m, self.r) for m in self.r.shapes)

    @cached_property
    def formats(self) -> str:
        """The formats of the slice's input files, in the order first seen."""
        return ", ".join(dict.fromkeys(s.format for s in self.r.sources)) or "no sources"


def _always(_: Any) -> bool:
    return True


def same(x: X) -> X:
    """The view of a section whose partial prints what it read as it is."""
    return x


def shallow(x: object) -> dict[str, Any]:
    """A record's fields by name, their values as they are (a fragment adds to them)."""
    return {name: getattr(x, name) for name in field_names(x)}


def present(x: object) -> bool:
    """What the section read holds something (not None, not empty)."""
    return bool(x)


class Section(msgspec.Struct, Generic[X, V], frozen=True):
    """One report section (or, without a title, one part of findings.json only)."""

    id: str
    title: str
    read: Callable[[Facts], X]
    """What it reads of the slice: its own sub-result, or the few it combines."""
    view: Callable[[X], V]
    """What its partial prints, from what it read alone."""
    fragment: Callable[[V], msgspec.Struct] | None = None
    """The keys it adds to findings.json (every slice's document has them, shown or not)."""
    figures: Callable[[V], Mapping[str, go.Figure]] | None = None
    """Its charts by id, those with something to draw."""
    charts: tuple[str, ...] = ()
    """The ids of its charts, in the order it shows them."""
    captions: Mapping[str, str] = msgspec.field(default_factory=dict)
    """What a chart shows, printed under it (a caption wraps on a phone; a plotly title does
    not), so chart titles stay short."""
    has: Callable[[V], bool] = _always
    """Whether it has something to show."""
    missing: str | Callable[[V], str] = ""
    """Why it has nothing to show and which input would add it ("Not measured"); '' when its
    absence is good news, not a gap (failures and restarts): then it is simply left out."""
    needs_requests: bool = False
    """Not measured when the slice has no request telemetry (a compile log, a layer profile
    or a load sweep alone)."""
    needs_plan: bool = False
    """Not measured when no compile plan names the slice (served traffic alone: nothing to
    compare the runtime with)."""
    family: JudgementFamily | None = None
    """The judgement family whose figure it shows, if any."""

    @property
    def template(self) -> str:
        """Its partial."""
        return f"sections/{self.id}.html.j2"

    @property
    def optional(self) -> bool:
        """Left out, never listed as not measured, when it has nothing to show."""
        return self.missing == ""

    @property
    def page(self) -> bool:
        """It is printed (a section without a title is a part of findings.json only)."""
        return bool(self.title)

    def why_missing(self, v: V) -> str:
        """Why it has nothing to show (`missing` for this view)."""
        return self.missing if isinstance(self.missing, str) else self.missing(v)


class Part(msgspec.Struct, Generic[V], frozen=True):
    """One section of one slice: its view, and whether and why it shows nothing."""

    section: Section[Any, V]
    v: V
    shown: bool
    not_measured: str
    """Why it has nothing to show ('' when it is shown, or left out as good news)."""
    partial: str = ""
    """Another partial than the section's own (the packet's shorter checklist)."""

    @property
    def id(self) -> str:
        """The section's id."""
        return self.section.id

    @property
    def title(self) -> str:
        """The section's heading."""
        return self.section.title

    @property
    def template(self) -> str:
        """The partial that prints it."""
        return self.partial or self.section.template

    @property
    def charts(self) -> tuple[str, ...]:
        """The section's chart ids."""
        return self.section.charts

    def fragment(self) -> msgspec.Struct | None:
        """The keys the section adds to findings.json."""
        s = self.section
        if s.fragment is None:
            return None
        return s.fragment(self.v)

    def figures(self) -> Mapping[str, go.Figure]:
        """The section's charts (none when it is not shown)."""
        s = self.section
        if s.figures is None or not self.shown:
            return {}
        return s.figures(self.v)


def part(s: Section[X, V], facts: Facts) -> Part[V]:
    """One section's part of one slice: read, viewed, and judged shown or not measured."""
    r = facts.r
    v = s.view(facts.share(s.read))
    if s.needs_requests and not r.requests:
        return Part(s, v, False, NO_REQUESTS.format(formats=facts.formats))
    if s.needs_plan and not r.coverage.plans:
        return Part(s, v, False, NO_PLAN)
    if not s.has(v):
        return Part(s, v, False, s.why_missing(v))
    return Part(s, v, s.page, "")
