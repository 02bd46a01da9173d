"""findings.json read back as typed values (the Python API, docs/api.md): its top-level
fields, each judgement and each action as frozen records (msgspec Structs) with the categories of
`core/kinds.py`, and every other part as the JSON object it is (`Findings.doc`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import DatasetError
from mapreport.core.kinds import (
    ActionKind,
    FigureUnit,
    ImpactUnit,
    JudgementFamily,
    OwnerRole,
    Status,
    StatusReason,
)

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

FINDINGS = "findings.json"
READ_MAJOR = "2"
"""The findings.json major version these types read (docs/findings.md)."""


class Judgement(msgspec.Struct, frozen=True):
    """One family's judgement (findings.json `judgements[]`)."""

    family: JudgementFamily
    state: Status
    reason: StatusReason
    words: str
    figure: float | None
    unit: FigureUnit
    bound: float | None
    n: int | None
    ci: tuple[float, float] | None
    subject: str | None
    deciding: bool


class Evidence(msgspec.Struct, frozen=True):
    """The figure an action or a class rests on (`actions[].evidence`)."""

    metric: str
    value: float | None
    n: int
    ci: tuple[float, float] | None
    sources: tuple[str, ...]
    note: str
    pooled_n: int = 0


class RollbackTrigger(msgspec.Struct, frozen=True):
    """When to undo an action (`actions[].rollback_trigger`)."""

    metric: str
    threshold: float | None
    window: str
    text: str


class Validation(msgspec.Struct, frozen=True):
    """One row of an action's validation matrix."""

    shape: str
    metric: str
    baseline: float | None
    criterion: str


class Impact(msgspec.Struct, frozen=True):
    """What an action acts on, in its unit (`actions[].impact`)."""

    unit: ImpactUnit
    value: float | None
    text: str
    share: float | None = None


class Action(msgspec.Struct, frozen=True):
    """One action of the report (`actions[]`; its `class` is `kind` here)."""

    id: str
    title: str
    shape: str
    kind: ActionKind
    owner_role: OwnerRole
    owner: str | None
    evidence: Evidence | None
    rollback_trigger: RollbackTrigger
    validation_matrix: tuple[Validation, ...]
    impact: Impact


class Findings(msgspec.Struct, frozen=True):
    """One slice's findings.json: the top-level fields typed, the whole document in `doc`."""

    schema_version: str
    generator: str
    generated_at: str
    workload: str
    slice: str
    summary: str
    status: Status | None
    status_reason: str | None
    judgements: tuple[Judgement, ...]
    actions: tuple[Action, ...]
    doc: dict[str, Any]
    """Every key of the document as JSON values (docs/findings.md)."""

    @property
    def name(self) -> str:
        """`workload/slice`, or the workload for a whole workload."""
        return f"{self.workload}/{self.slice}" if self.slice else self.workload

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the report shows (`api_tables.REPORT_TABLES`), as DataFrames."""
        return {name: t.to_pandas() for name, t in self.arrow_tables().items()}

    def arrow_tables(self) -> dict[str, pa.Table]:
        """The tables the report shows, as Arrow tables."""
        from mapreport.run.api_tables import report_tables

        return report_tables(self.doc)


def findings_of(doc: dict[str, Any], where: str = "findings") -> Findings:
    """A findings document (as json.loads gives it) as typed values; a document of another
    major version, or one that does not have these fields, is a one-line DatasetError."""
    version = str(doc.get("schema_version", "")) if isinstance(doc, dict) else ""
    if version.split(".")[0] != READ_MAJOR:
        raise DatasetError(
            f"{where}: findings schema_version {version or 'missing'!r}; this mapreport reads "
            f"{READ_MAJOR}.x (write the report again)"
        )
    actions = [{**a, "kind": a.get("class")} for a in doc.get("actions") or []]
    top = {k: doc.get(k) for k in _TOP}
    try:
        return msgspec.convert(
            {**top, "actions": actions, "judgements": doc.get("judgements") or [], "doc": doc},
            Findings,
        )
    except msgspec.ValidationError as e:
        raise DatasetError(f"{where}: not a findings document of this mapreport: {e}") from None


_TOP = (
    "schema_version",
    "generator",
    "generated_at",
    "workload",
    "slice",
    "summary",
    "status",
    "status_reason",
)


def read_findings(path: str | Path) -> Findings:
    """A findings.json (or a report folder holding one) read back as typed values."""
    f = Path(path)
    if f.is_dir():
        f = f / FINDINGS
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{f}: no such findings file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DatasetError(f"{f}: cannot read findings ({str(e).splitlines()[0]})") from None
    return findings_of(doc, str(f))
