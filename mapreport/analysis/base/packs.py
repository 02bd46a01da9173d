"""Evidence packs, the parts every figure's pack shares: the parameters types a reduction's
query and figure are built from (a pack spec's `params`: data, never code), the pack spec
itself, the registry of pack kinds and the rule that a recomputed figure is the stated one.
Each family declares its reductions' kinds (`core.kinds.Reduction`: SQL, recompute function,
figure in SQL, parameters type) beside its figures (`serving.packs`, `loop.packs`,
`actions.device_packs`, `tuning.packs`) with `declare`; `steps.packs` chooses a pack for each
piece of a slice's evidence; `run.evidence` writes, reads and replays them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import pyarrow as pa

from mapreport.analysis.base.common import Thresholds
from mapreport.core.kinds import Driver, Reduction
from mapreport.core.records import as_dict
from mapreport.core.window import Window


class TailParams(msgspec.Struct, frozen=True):
    """A tail share's pack: the driver, the shapes pooled (each shape's tail is resampled
    with the seed of its own tail, `tail.pooled`) and the memory budgets the plan states (the
    tail query's literals)."""

    driver: Driver
    shapes: list[str]
    budgets: dict[str, float]


class SampleParams(msgspec.Struct, frozen=True):
    """A compute-sample pack: whether the shape is covered (gain), its prediction (APE,
    drift) and the drift's baseline."""

    covered: bool | None = None
    predicted_us: float | None = None
    baseline: float | None = None


class QueueParams(msgspec.Struct, frozen=True):
    """A queue check's pack: the server whose counters are compared, and the window."""

    server: str
    start_us: float
    end_us: float


class SourceParams(msgspec.Struct, frozen=True):
    """A pack of records: the files (source ids) the finding names."""

    sources: list[str]


class RegressionParams(msgspec.Struct, frozen=True):
    """A regression's pack: the reference night's latency quantiles and request count."""

    reference: list[float]
    n_ref: int


class HeadroomParams(msgspec.Struct, frozen=True):
    """A headroom's pack: the op x shape's selection, its roofline bound per call, and the
    bootstrap's seed key."""

    op: str
    category: str
    shape: str
    types: str
    concrete: str
    roof_us: float
    seed_key: list[str]


class TuningParams(msgspec.Struct, frozen=True):
    """A tuning figure's pack: the run that chose and its workload (task key, target, shape,
    as `ranking.rank` groups them)."""

    plan_id: str
    task_key: str
    target: str | None
    shape: str | None


class Recomputed(msgspec.Struct, frozen=True):
    """A pack's figure, n and CI recomputed from its rows."""

    figure: float | None
    n: int
    ci: tuple[float, float] | None
    rows: int
    files: tuple[str, ...]


class NoParams(msgspec.Struct, frozen=True):
    """A pack whose query needs only its slice."""


class Pack(msgspec.Struct, frozen=True):
    """One class's or action's evidence: how to select its rows and what they must give."""

    id: str
    subject: str
    """`action <kind>` or `class <class>`."""
    workload: str
    slice: str
    shape: str
    metric: str
    reduction: Reduction
    sql: str
    params: dict[str, Any]
    figure: float | None
    n: int
    ci: tuple[float, float] | None
    window: dict[str, Any]
    thresholds: dict[str, Any]

    def spec(self) -> dict[str, Any]:
        """The pack as JSON-ready builtins."""
        return as_dict(self)

    def typed(self) -> Any:
        """The pack's parameters as its reduction's record type (`PackKind.params`)."""
        return msgspec.convert(self.params, KINDS[self.reduction].params, strict=True)

    @staticmethod
    def from_spec(data: bytes) -> Pack:
        """A pack back from its spec's JSON, every field and parameter checked for its type
        (msgspec.ValidationError or DecodeError when one is missing, mistyped or unknown)."""
        p = msgspec.json.decode(data, type=Pack, strict=True)
        p.typed()
        msgspec.convert(p.thresholds, Thresholds, strict=True)
        window_of(p)
        return p


def window_of(p: Pack) -> Window:
    """The window a pack's figure was computed over."""
    return msgspec.convert(p.window, Window, strict=True)


MATCH = 1e-12
"""Relative difference up to which a recomputed figure is the stated one (float summation)."""


def close(a: float | None, b: float | None) -> bool:
    """A recomputed figure is the stated one: equal within `MATCH` (both None counts too)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= MATCH * max(abs(a), abs(b), 1e-300)


def reproduced(p: Pack, x: Recomputed) -> bool:
    """The recomputed figure, n and CI are the ones the report stated (to MATCH)."""
    same_ci = (p.ci is None and x.ci is None) or (
        p.ci is not None and x.ci is not None and all(map(close, p.ci, x.ci))
    )
    return close(p.figure, x.figure) and p.n == x.n and same_ci


PACK_ID = re.compile(r"[0-9a-f]{12}")
"""An evidence pack's id: the first 12 hex digits of a SHA-256 (`actions.action_id`)."""


PackSql = Callable[[Reduction, str, str, str, Any], str]
"""A reduction's query: (reduction, workload, slice, shape, params) -> self-contained SQL."""
Recompute = Callable[[Pack, pa.Table, Thresholds, tuple[str, ...]], Recomputed]
"""A reduction's figure from its pack's rows: (pack, rows, thresholds, files) -> Recomputed."""
FigureSql = Callable[[Reduction, Any, Thresholds], str]
"""A reduction's figure in SQL: (reduction, params, thresholds) -> one SELECT over the pack's
rows (`PACK_ROWS`) of one row: `value`, the figure's point value as the recompute function
gives it, and where it has one `n`, every value a literal written in one pass."""

PACK_ROWS = "pack_rows"
"""The view a pack's `.sql` makes of its rows, which its figure's SELECT reads."""


class PackKind(msgspec.Struct, frozen=True):
    """One reduction's query, recompute function, figure in SQL and parameters type, declared
    beside the figure it reproduces (`declare`)."""

    sql: PackSql
    recompute: Recompute
    figure: FigureSql
    params: type
    """The record type of a pack spec's `params`, which its query and figure are built from."""


KINDS: dict[Reduction, PackKind] = {}
"""Every reduction's pack kind, as the family of its figure declares it (the families' modules
import with the analysis; a test holds every `Reduction` to one)."""


def declare(kinds: Mapping[Reduction, PackKind]) -> Mapping[Reduction, PackKind]:
    """Declare a family's pack kinds, each reduction once."""
    for reduction, kind in kinds.items():
        if KINDS.setdefault(reduction, kind) is not kind:
            raise ValueError(f"pack kind {reduction} declared twice")
    return kinds
