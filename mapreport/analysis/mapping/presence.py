"""Which tables hold a slice's records, asked once before its analysis: a family over a
table without them is not asked (its answer is known: nothing), and the slice's sides
(compile, runtime) follow from the same answer. One statement, each table read up to its
first matching row."""

from __future__ import annotations

import msgspec

from mapreport.analysis.mapping.environment import COMPILE_TABLES, RUNTIME_TABLES, SIDES
from mapreport.core.connection import Connection

"""Tables whose rows make a slice's compile side (a record naming no slice serves every slice
of its workload)."""
PROBED = ("compile_event", *(t for t in RUNTIME_TABLES if t != "request"), "quality")
"""The tables a family may be skipped for. Not the requests (the loaded slice counts them,
`slicestats.SliceTotals`) nor the plans (no family is skipped for them; on the 1M benchmark
a probe of the plans in force took 20 ms, one of each other table 0.4-4 ms)."""


class Presence(msgspec.Struct, frozen=True):
    """The tables with a row of the slice's workload (or of every workload), and the sides
    whose records other than requests name the slice."""

    tables: frozenset[str]
    found_sides: frozenset[str]

    def has(self, table: str) -> bool:
        """Whether `table` may hold the slice's rows (a family over it must be asked)."""
        return table in self.tables

    def sides(self, has_requests: bool) -> tuple[str, ...]:
        """The slice's sides: compile (plans, compile events) and runtime (requests, profiled
        ops, adaptation events, load sweeps, server metrics, loadgen runs); both when it
        has neither."""
        found = self.found_sides | ({"runtime"} if has_requests else set())
        return tuple(s for s in SIDES if s in found) or SIDES


OWN_ROWS = {"metric_sample": "workload = $w AND slice = $s"}
"""Tables whose family reads only the slice's own rows: the server metrics family
(`telemetry.vocabulary_of`) starts from the slice's samples and reaches a server's own
(workload '') through their files, so a server's samples alone ask nothing of it."""

EVERY_TABLE = Presence(frozenset(PROBED), frozenset(SIDES))
"""Nothing skipped: every family asked, both sides."""


def presence(con: Connection, workload: str, slice_: str) -> Presence:
    """The slice's `Presence`. A table counts when any row names the workload (or no
    workload; `OWN_ROWS`: the slice): a superset of what each family selects, so a family
    skipped would have found nothing. A side counts when a row names the slice (compile
    records: or no slice)."""
    branches = [
        *((f"table:{t}", t, OWN_ROWS.get(t, "workload IN ($w, '')")) for t in PROBED),
        *(("side:compile", t, "workload = $w AND slice IN ($s, '')") for t in COMPILE_TABLES),
        *(
            ("side:runtime", t, "workload = $w AND slice = $s")
            for t in PROBED
            if t in RUNTIME_TABLES
        ),
    ]
    # one row at most per branch: no table is read past its first match
    sql = " UNION ALL ".join(
        f"SELECT * FROM (SELECT '{label}' AS label FROM {table} WHERE {where} LIMIT 1)"
        for label, table, where in branches
    )
    found = {str(r[0]) for r in con.execute(sql, {"w": workload, "s": slice_}).fetchall()}
    tables = frozenset(t for t in PROBED if f"table:{t}" in found)
    return Presence(tables, frozenset(s for s in SIDES if f"side:{s}" in found))
