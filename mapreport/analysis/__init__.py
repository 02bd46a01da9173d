"""Analysis: pure functions from the canonical tables (through DuckDB) to frozen results.

`analyze_slice` runs every metric family of METRICS.md for one workload slice (assembled in
`analysis.slice`); analysis returns facts, never sentences.
"""

from __future__ import annotations

from mapreport.analysis import query
from mapreport.analysis.common import Review, Thresholds
from mapreport.analysis.history import RunKey, Stored
from mapreport.analysis.results import SliceResult
from mapreport.analysis.slice import analyze
from mapreport.connection import Connection

__all__ = ["Review", "RunKey", "SliceResult", "Stored", "Thresholds", "analyze_slice"]
__all__ += ["list_slices"]


def list_slices(con: Connection) -> list[tuple[str, str]]:
    """Every (workload, slice) that served requests, compiled, profiled or was swept."""
    return query.slices(con)


def analyze_slice(
    con: Connection,
    workload: str,
    slice_: str,
    th: Thresholds,
    review: Review | None = None,
    stored: Stored | None = None,
    run: RunKey | None = None,
) -> SliceResult:
    """The finished analysis of one slice; without stored history it is the first night."""
    key = run or RunKey("adhoc", "9999-12-31")
    return analyze(con, workload, slice_, th, review or Review(), stored or Stored(), key)
