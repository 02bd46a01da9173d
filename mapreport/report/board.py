"""The board (index.html) for a fleet's night: every slice's row ordered by severity, the
counts per status, the filters' choices and a sparkline of each tail against its SLA. Its
view and its words; `index.html.j2` loops and prints."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

import msgspec
from markupsafe import Markup

from mapreport.core.kinds import Status
from mapreport.report.judgements import FAMILY_NAMES
from mapreport.report.words import label


class IndexEntry(Protocol):
    """What the board reads of an index entry (`report.IndexEntry`)."""

    @property
    def name(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def status(self) -> str: ...
    @property
    def health(self) -> str: ...
    @property
    def trend(self) -> list[float]: ...
    @property
    def sla_us(self) -> float | None: ...
    @property
    def workload(self) -> str: ...
    @property
    def top_owner(self) -> str: ...


SEVERITY = {"": 0, Status.FAILING: 1, Status.AT_RISK: 2, Status.HEALTHY: 3, Status.NOT_JUDGED: 4}
"""Row order: failed reports, failing, at risk, healthy."""
SPARK_W, SPARK_H = 96, 22
"""The sparkline's size in CSS pixels."""


class BoardRow(msgspec.Struct, frozen=True):
    """One slice on the board."""

    e: IndexEntry
    status: str
    """Its status's words ("report failed" for a report that was not written)."""
    spark: Markup


class Board(msgspec.Struct, frozen=True):
    """The board's rows and what its header and filters show."""

    rows: tuple[BoardRow, ...]
    counts: tuple[tuple[str, str, int], ...]
    """(status, its words, slices) in severity order, with failed reports first."""
    workloads: tuple[str, ...]
    owners: tuple[str, ...]
    families: tuple[str, ...] = tuple(
        name if name[1:2].isupper() else name[0].lower() + name[1:]  # "CUDA graphs" stays
        for name in FAMILY_NAMES.values()
    )
    """The judgement families a status is the worst of, as the footnote names them."""


def sparkline(values: Sequence[float], sla: float | None) -> Markup:
    """An inline SVG of the tail across nights, with the SLA as a dashed line ('' with
    fewer than two nights). Numbers only: nothing from a file reaches the markup."""
    if len(values) < 2:
        return Markup("")
    top = max([*values, sla or 0.0]) * 1.1 or 1.0

    def y(v: float) -> float:
        return round(SPARK_H - 2 - (SPARK_H - 4) * v / top, 1)

    step = (SPARK_W - 4) / (len(values) - 1)
    points = " ".join(f"{round(2 + i * step, 1)},{y(v)}" for i, v in enumerate(values))
    line = (
        f'<line x1="0" x2="{SPARK_W}" y1="{y(sla)}" y2="{y(sla)}" class="spark-sla"/>'
        if sla
        else ""
    )
    last = values[-1]
    over = "spark-over" if sla and last > sla else "spark-ok"
    return Markup(
        f'<svg class="spark" width="{SPARK_W}" height="{SPARK_H}" role="img" '
        f'aria-label="tail over {len(values)} nights">{line}'
        f'<polyline points="{points}" class="spark-line"/>'
        f'<circle cx="{round(2 + (len(values) - 1) * step, 1)}" cy="{y(last)}" r="2" '
        f'class="{over}"/></svg>'
    )


def _status(e: IndexEntry) -> str:
    """The entry's status ('' for a report that was not written; an entry written before
    statuses were kept is healthy only if its state was)."""
    if e.error:
        return ""
    return e.status or (Status.HEALTHY if e.health == "healthy" else Status.FAILING)


def board(entries: Sequence[IndexEntry]) -> Board:
    """Rows by severity (then by name), counts per status, the filters' choices."""
    rows = [
        BoardRow(
            e,
            label(_status(e)) if _status(e) else "report failed",
            sparkline(e.trend, e.sla_us),
        )
        for e in sorted(entries, key=lambda e: (SEVERITY.get(_status(e), 9), e.name))
    ]
    count = Counter(r.status for r in rows)
    failed = count["report failed"]
    counts = ((("failed", "report failed", failed),) if failed else ()) + tuple(
        (st.value, label(st), count[label(st)]) for st in Status
    )
    return Board(
        rows=tuple(rows),
        counts=counts,
        workloads=tuple(sorted({e.workload for e in entries} - {""})),
        owners=tuple(sorted({e.top_owner for e in entries} - {""})),
    )
