"""What the analysis asks of a SQL engine: a query's rows as tuples, or as one Arrow table.

DuckDB's connection is one as it is; `mapreport.engine.spark.SparkConnection` is another (it
runs the same DuckDB-dialect SQL on Spark, transpiled). The analysis is typed against this
protocol, not against either engine.
"""

from __future__ import annotations

from typing import Any, Protocol


class Connection(Protocol):
    """A SQL connection the analysis runs its queries on ($name parameters, DuckDB's dialect)."""

    def execute(self, query: str, parameters: Any = None, /) -> Any:
        """Run a statement; the result has `fetchall()`, `fetchone()` and `description`."""

    def sql(self, query: str, *, params: Any = None) -> Any:
        """A query whose result has `to_arrow_table()`."""


def sample_limit(con: Connection) -> int | None:
    """The most values of one group the analysis brings into this process from `con` (None: any
    number); a larger group is read by rank (`adaptation.RankedSample`)."""
    limit = getattr(con, "sample_limit", None)
    return None if limit is None else int(limit)


def holds_slices(con: Connection) -> bool:
    """Whether the analysis holds a loaded slice's requests as a table on `con` rather than as
    a view over the dataset's files (`query.load_slice`): where a view's every read scans the
    files again."""
    return bool(getattr(con, "holds_slices", False))
