"""Environment lock: are the compile and runtime sides of a slice the same environment?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mapreport.analysis.results import EnvironmentCheck, EnvMismatch

COMPARED = (
    "compiler",
    "compiler_version",
    "runtime",
    "runtime_version",
    "driver",
    "firmware",
    "hardware",
    "container_digest",
    "git_sha",
)
"""Keys that define the environment. `host` and `captured_at` identify a capture and are
shown, not compared: a compile farm and a serving node are different machines by design."""

SHOWN = (*COMPARED, "host", "captured_at")


def _values(rows: Sequence[dict[str, Any]], key: str) -> tuple[str, ...]:
    return tuple(sorted({str(r[key]) for r in rows if r.get(key) is not None}))


def check_environment(rows: Sequence[dict[str, Any]]) -> EnvironmentCheck:
    """Compare the environment records of a slice's compile-side and runtime-side files.

    A key differs when both sides state it with different values, or when one side holds
    several values (files of one side captured in different environments).
    """
    sides = {s: [r for r in rows if r["side"] == s] for s in ("compile", "runtime")}
    missing = tuple(s for s, rs in sides.items() if not rs)
    shown = {
        s: {k: ", ".join(v) for k in SHOWN if (v := _values(rs, k))} for s, rs in sides.items()
    }
    mismatches = []
    compared = []
    for key in COMPARED:
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
    )
