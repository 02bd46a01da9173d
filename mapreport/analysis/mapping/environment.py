"""Environment lock: are the compile and runtime sides of a slice the same environment?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from mapreport.analysis.base.common import SourceFile
from mapreport.analysis.base.judgement import Judgement
from mapreport.analysis.base.query import Selection, records
from mapreport.core.connection import Connection
from mapreport.core.kinds import JudgementFamily, Status, StatusReason
from mapreport.core.schema import (
    COMPILED_IN_PROCESS,
    ENVIRONMENT_COMPARED,
    ENVIRONMENT_SHOWN,
)

SIDES = ("compile", "runtime")
COMPILE_TABLES = ("compile_plan", "compile_event")
"""The tables of a slice's compile side."""
RUNTIME_TABLES = (
    "request",
    "op_exec",
    "adaptation_event",
    "load_sweep",
    "metric_sample",
    "loadgen_run",
)
"""Tables whose rows make a slice's runtime side."""


class EnvMismatch(msgspec.Struct, frozen=True):
    """A key whose value differs between the compile and the runtime side (or within one)."""

    key: str
    compile: tuple[str, ...]
    runtime: tuple[str, ...]


class EnvironmentCheck(msgspec.Struct, frozen=True):
    """Environment metadata of both sides of a slice and whether it matches."""

    compile: dict[str, str]
    runtime: dict[str, str]
    mismatches: tuple[EnvMismatch, ...]
    missing_sides: tuple[str, ...]
    compared_keys: tuple[str, ...]
    sides: tuple[str, ...] = SIDES
    """The sides the slice has data of: a served model without a compile plan or compile log
    has no compile side to record, and a compile log alone no runtime side."""
    unrecorded: tuple[str, ...] = ()
    """A compile side without a record read only from a JIT compiler's logs (TORCH_TRACE): it
    compiled in the serving process, so nothing is asked of it (not `missing_sides`)."""
    unrecorded_formats: tuple[str, ...] = ()
    """The formats of those sides' inputs."""

    @property
    def comparable(self) -> bool:
        """Where both sides are recorded, at least one compared key is stated on both (else
        nothing was compared, and nothing is locked); a missing side is its own reason."""
        return not self.compared or bool(self.compared_keys) or bool(self.missing_sides)

    @property
    def locked(self) -> bool:
        """True when every side the slice has is recorded, at least one key is compared where
        there are two sides, and every compared key matches."""
        return not self.mismatches and not self.missing_sides and self.comparable

    @property
    def uncompared_keys(self) -> tuple[str, ...]:
        """The compared keys that one side or both do not state."""
        return tuple(k for k in ENVIRONMENT_COMPARED if k not in self.compared_keys)

    @property
    def compared(self) -> bool:
        """Both sides exist, so the lock compares them (else it is one side's record)."""
        return self.sides == SIDES


def _values(rows: Sequence[dict[str, Any]], key: str) -> tuple[str, ...]:
    return tuple(sorted({str(r[key]) for r in rows if r.get(key) is not None}))


def check_environment(
    rows: Sequence[dict[str, Any]],
    expected: tuple[str, ...] = SIDES,
    formats: Mapping[str, frozenset[str]] | None = None,
) -> EnvironmentCheck:
    """Compare the environment records of a slice's compile-side and runtime-side files;
    `expected`: the sides the slice has data of (only those can be missing); `formats`: each
    side's input formats (a compile side read only from a JIT compiler's logs is not missing
    its record: it compiled in the serving process, `COMPILED_IN_PROCESS`).

    A key differs when both sides state it with different values, or when one side holds
    several values (files of one side captured in different environments).
    """
    sides = {s: [r for r in rows if r["side"] == s] for s in SIDES}
    absent = tuple(s for s, rs in sides.items() if not rs and s in expected)
    given = formats or {}
    unrecorded = tuple(
        s for s in absent if s == "compile" and given.get(s) and given[s] <= COMPILED_IN_PROCESS
    )
    missing = tuple(s for s in absent if s not in unrecorded)
    shown = {
        s: {k: ", ".join(v) for k in ENVIRONMENT_SHOWN if (v := _values(rs, k))}
        for s, rs in sides.items()
    }
    mismatches = []
    compared = []
    for key in ENVIRONMENT_COMPARED:
        c, r = _values(sides["compile"], key), _values(sides["runtime"], key)
        if c and r:
            compared.append(key)
        if (c and r and c != r) or len(c) > 1 or len(r) > 1:
            mismatches.append(EnvMismatch(key, c, r))
    return EnvironmentCheck(
        compile=shown["compile"],
        runtime=shown["runtime"],
        mismatches=tuple(mismatches),
        missing_sides=missing,
        compared_keys=tuple(compared),
        sides=tuple(s for s in SIDES if s in expected),
        unrecorded=unrecorded,
        unrecorded_formats=tuple(sorted(set().union(*(given[s] for s in unrecorded)))),
    )


def side_formats(sources: Sequence[SourceFile]) -> dict[str, frozenset[str]]:
    """The input formats of each side: a source is of the compile side when it wrote compile
    rows, of the runtime side when it wrote runtime rows (a file may be of both)."""
    out: dict[str, set[str]] = {s: set() for s in SIDES}
    for f in sources:
        tables = {t for t, n in f.rows.items() if n}
        if tables & set(COMPILE_TABLES):
            out["compile"].add(f.format)
        if tables & set(RUNTIME_TABLES):
            out["runtime"].add(f.format)
    return {side: frozenset(found) for side, found in out.items()}


def environments(
    con: Connection, source_ids: list[str], workload: str, also: Selection
) -> list[dict[str, Any]]:
    """Environment rows of the given source files and of those `also` selects, and those
    stated for the workload."""
    sql, params = also
    cur = con.execute(
        f"""SELECT * EXCLUDE (line, extra, workload) FROM environment
        WHERE list_contains($ids, source_id) OR source_id IN ({sql}) OR workload = $w""",
        {**params, "ids": source_ids, "w": workload},
    )
    return records(cur)


DATA_TABLES = ("compile_plan", "compile_event", "quality", *RUNTIME_TABLES)
"""Tables whose rows make a file part of a workload's records (the environment alone does
not)."""


class SourceSelection(msgspec.Struct, frozen=True):
    """The source files of a workload whose environment states `key` = `value`."""

    key: str
    value: str
    sources: tuple[str, ...]
    """Matching files: their own environment states the value, or, stating none, the
    workload's environment files all do; and the matching environment files themselves."""
    files: int
    """The workload's files with records."""
    unstated: int
    """Files whose environment (their own, else the workload's) states no value of `key`."""
    ambiguous: int
    """Files whose environment states several values of `key`."""
    seen: tuple[str, ...]
    """Every value of `key` stated for the workload's files."""


def select_sources(con: Connection, workload: str, key: str, value: str) -> SourceSelection:
    """The files of `workload` whose environment states `key` = `value` (`key`: a column of
    the environment record, `ENVIRONMENT_SHOWN`; anything else is a ValueError)."""
    if key not in ENVIRONMENT_SHOWN:
        raise ValueError(f"{key!r} is not an environment key ({', '.join(ENVIRONMENT_SHOWN)})")
    with_data = " UNION ".join(
        f"SELECT DISTINCT source_id FROM {t} WHERE workload = $w" for t in DATA_TABLES
    )
    files = [str(r[0]) for r in con.execute(with_data, {"w": workload}).fetchall()]
    # the key is one of the schema's own column names (checked above), never read text
    rows = con.execute(
        f"""SELECT source_id, workload = $w AS stated, list(DISTINCT "{key}")
        FILTER (WHERE "{key}" IS NOT NULL)
        FROM environment WHERE list_contains($ids, source_id) OR workload = $w
        GROUP BY ALL""",
        {"w": workload, "ids": files},
    ).fetchall()
    own: dict[str, set[str]] = {}
    stated: set[str] = set()
    env_files: dict[str, set[str]] = {}
    for source, for_workload, values in rows:
        got = {str(v) for v in values or ()}
        own.setdefault(str(source), set()).update(got)
        if for_workload:
            stated |= got
            env_files.setdefault(str(source), set()).update(got)
    chosen, unstated, ambiguous = [], 0, 0
    for f in files:
        values = own.get(f) or stated
        if not values:
            unstated += 1
        elif len(values) > 1:
            ambiguous += 1
        elif value in values:
            chosen.append(f)
    chosen += [f for f, got in env_files.items() if got == {value} and f not in files]
    seen = set(stated).union(*own.values()) if own else stated
    return SourceSelection(
        key, value, tuple(sorted(chosen)), len(files), unstated, ambiguous, tuple(sorted(seen))
    )


def judge(env: EnvironmentCheck) -> Judgement | None:
    """The compile side's environment against the runtime side's: at risk when a compared key
    differs (the prediction was made elsewhere); healthy when locked on at least one compared
    key; not judged when a side records none, the slice has one side only, or no key is stated
    on both (None: the slice has neither side)."""
    family = JudgementFamily.ENVIRONMENT
    if not env.sides:
        return None
    if env.mismatches:
        return Judgement(
            family,
            Status.AT_RISK,
            StatusReason.ENVIRONMENT_DIFFERS,
            float(len(env.mismatches)),
            n=len(env.compared_keys),
            subject=env.mismatches[0].key,
        )
    if env.unrecorded and not env.missing_sides:
        return Judgement(
            family,
            Status.NOT_JUDGED,
            StatusReason.ENVIRONMENT_NOT_RECORDED,
            subject=", ".join(env.unrecorded_formats),
        )
    if env.locked and env.compared_keys:
        n = len(env.compared_keys)
        return Judgement(family, Status.HEALTHY, StatusReason.ENVIRONMENT_LOCKED, 0.0, n=n)
    return Judgement(family, Status.NOT_JUDGED, StatusReason.ENVIRONMENT_ONE_SIDE)
