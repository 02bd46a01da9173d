"""The analysis SQL, written once in DuckDB's dialect, as Spark SQL: transpiled by sqlglot with a
dialect that fixes what sqlglot's Spark output gets wrong for mapreport's queries, and refuses
what it cannot translate without changing the meaning.

sqlglot's own Spark output, measured here (sqlglot 30.30): `quantile_cont(x, q)` becomes
`PERCENTILE_CONT(x, q)`, which Spark rejects; `percentile_cont(q) WITHIN GROUP (ORDER BY x)`
becomes `PERCENTILE_APPROX`, an approximation; `list(x ORDER BY k)` becomes `COLLECT_LIST(x)`,
which drops the order; `first(x ORDER BY k)` keeps an ORDER BY Spark does not accept; `CREATE OR
REPLACE TEMP TABLE` becomes `CREATE TEMPORARY VIEW`, which fails for the next slice. Here:
exact quantiles are Spark's `percentile` (linear interpolation between order statistics, as
DuckDB's `quantile_cont`); ordered lists and firsts sort collected structs by their keys; a
temporary table is a replaceable temporary view.
Each query is transpiled once and cached; a translation sqlglot flags as unsupported, or any
approximate function in the output, is an error, never a warning.
"""

from __future__ import annotations

import functools
import re
from typing import Any, ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel

APPROXIMATE = re.compile(r"\b(PERCENTILE_APPROX|APPROX_\w+)\s*\(", re.IGNORECASE)
"""Spark functions whose result is an estimate: never produced for mapreport's figures."""


class TranspileError(ValueError):
    """A query the Spark dialect cannot state with the same meaning."""


def _keys(order: exp.Order) -> list[tuple[exp.Expression, bool]]:
    return [(o.this, bool(o.args.get("desc"))) for o in order.expressions]


def _sorted_structs(
    gen: Any, value: exp.Expression, order: exp.Order, distinct: bool, where: str
) -> str:
    """`value`'s collected rows (those `where` keeps: a FILTER clause, or '') sorted by the
    order's keys (each ascending or descending, nulls last as DuckDB's default), as an array of
    structs with the value last."""
    keys = _keys(order)
    fields = [f"{gen.sql(k)} AS k{i}" for i, (k, _) in enumerate(keys)]
    collected = f"COLLECT_{'SET' if distinct else 'LIST'}(STRUCT({', '.join(fields)}, "
    collected += f"{gen.sql(value)} AS v)){where}"
    compare = []
    for i, (_, desc) in enumerate(keys):
        a, b = ("r", "l") if desc else ("l", "r")
        compare.append(
            f"CASE WHEN l.k{i} IS NULL AND r.k{i} IS NULL THEN 0 WHEN l.k{i} IS NULL THEN 1 "
            f"WHEN r.k{i} IS NULL THEN -1 WHEN {a}.k{i} < {b}.k{i} THEN -1 "
            f"WHEN {a}.k{i} > {b}.k{i} THEN 1 ELSE 0 END"
        )
    cmp = compare[0] if len(compare) == 1 else _chain(compare)
    return f"ARRAY_SORT({collected}, (l, r) -> {cmp})"


def _chain(parts: list[str]) -> str:
    """Lexicographic comparison: the first non-zero of the parts."""
    out = parts[-1]
    for p in reversed(parts[:-1]):
        out = f"CASE WHEN ({p}) <> 0 THEN ({p}) ELSE ({out}) END"
    return out


def _unordered(node: exp.Expression) -> tuple[exp.Expression, exp.Order | None, bool]:
    """An aggregate's argument split into its value, its ORDER BY and DISTINCT."""
    arg = node.this
    order = arg if isinstance(arg, exp.Order) else None
    value = order.this if order is not None else arg
    distinct = isinstance(value, exp.Distinct)
    if distinct:
        value = value.expressions[0]
    return value, order, distinct


def _array_agg(gen: Any, node: exp.ArrayAgg, where: str = "") -> str:
    value, order, distinct = _unordered(node)
    if order is None:
        return f"COLLECT_{'SET' if distinct else 'LIST'}({gen.sql(value)}){where}"
    return f"TRANSFORM({_sorted_structs(gen, value, order, distinct, where)}, s -> s.v)"


def _first(gen: Any, node: exp.First, where: str = "") -> str:
    value, order, distinct = _unordered(node)
    if order is None:
        return f"FIRST({gen.sql(value)}){where}"
    return f"ELEMENT_AT({_sorted_structs(gen, value, order, distinct, where)}, 1).v"


def _filter(gen: Any, node: exp.Filter) -> str:
    """An aggregate's FILTER clause; an ordered list's goes inside it, on the collection (Spark
    refuses a FILTER on the expression that sorts it)."""
    where = f" FILTER ({gen.sql(node.expression)})"
    inner = node.this
    if isinstance(inner, exp.ArrayAgg):
        return _array_agg(gen, inner, where)
    if isinstance(inner, exp.First):
        return _first(gen, inner, where)
    return f"{gen.sql(inner)}{where}"


def _percentile(gen: Any, node: exp.PercentileCont) -> str:
    q = node.expression
    if q is None:
        raise TranspileError("a continuous percentile without its column")
    return f"PERCENTILE({gen.sql(node.this)}, {gen.sql(q)})"


def _within_group(gen: Any, node: exp.WithinGroup) -> str:
    inner, order = node.this, node.expression
    if isinstance(inner, exp.PercentileCont) and isinstance(order, exp.Order):
        (column, desc), *rest = _keys(order)
        if rest or desc:
            raise TranspileError("a percentile ordered by more than one ascending key")
        return f"PERCENTILE({gen.sql(column)}, {gen.sql(inner.this)})"
    raise TranspileError(f"WITHIN GROUP of {inner.key}")


def _create(gen: Any, node: exp.Create) -> str:
    """A temporary table is a temporary view on Spark (it has no temporary tables): one that
    replaces the last slice's, as DuckDB's OR REPLACE does."""
    props = node.args.get("properties")
    temporary = props is not None and any(
        isinstance(p, exp.TemporaryProperty) for p in props.expressions
    )
    if node.args.get("kind") == "TABLE" and temporary:
        name, select = gen.sql(node.this), gen.sql(node.expression)
        return f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {select}"
    return str(Spark.Generator.create_sql(gen, node))


RENAMED = {
    "EPOCH_US": "UNIX_MICROS",
    "FSUM": "SUM",
    "FAVG": "AVG",
    "LIST_POSITION": "ARRAY_POSITION",
}
"""DuckDB functions sqlglot passes through by name that Spark calls otherwise. Spark has no
compensated sum: its floating sums may differ from DuckDB's in the last digits. A list
position is 1-based in both (not found: NULL in DuckDB, 0 in Spark)."""


def _anonymous(gen: Any, node: exp.Anonymous) -> str:
    name = str(node.this).upper()
    if name in RENAMED:
        return f"{RENAMED[name]}({', '.join(gen.sql(a) for a in node.expressions)})"
    return str(Spark.Generator.anonymous_sql(gen, node))


class MapreportSpark(Spark):
    """Spark SQL as mapreport's analysis needs it (exact percentiles, ordered lists)."""

    class Generator(Spark.Generator):  # type: ignore[misc, valid-type]  # built at import
        TRANSFORMS: ClassVar[dict[Any, Any]] = {
            **Spark.Generator.TRANSFORMS,
            exp.PercentileCont: _percentile,
            exp.WithinGroup: _within_group,
            exp.ArrayAgg: _array_agg,
            exp.First: _first,
            exp.Create: _create,
            exp.Anonymous: _anonymous,
            exp.Filter: _filter,
        }


@functools.lru_cache(maxsize=1024)
def to_spark(sql: str) -> str:
    """One DuckDB query as Spark SQL (cached); TranspileError when its meaning would change."""
    try:
        out = sqlglot.transpile(
            sql, read="duckdb", write=MapreportSpark, unsupported_level=ErrorLevel.RAISE
        )
    except sqlglot.errors.SqlglotError as e:
        raise TranspileError(str(e).splitlines()[0]) from None
    if len(out) != 1:
        raise TranspileError(f"expected one statement, got {len(out)}")
    if APPROXIMATE.search(out[0]):
        raise TranspileError(f"an approximate function: {APPROXIMATE.search(out[0])}")
    return str(out[0])
