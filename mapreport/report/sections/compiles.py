"""Compile cost per shape: compiles, recompiles and their reasons, graph breaks, and what each
shape's compiles cost against the runtime they bought (a TORCH_TRACE or TVM tuning log)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.serving.compiles import Compiles
from mapreport.core.kinds import JudgementFamily
from mapreport.report.sections.unit import Facts, Section, present, same


class Fragment(msgspec.Struct):
    """findings.json `compiles` (null without compile events)."""

    compiles: Compiles | None


def read(f: Facts) -> Compiles | None:
    """The slice's compile events."""
    return f.r.compiled.compiles


def fragment(c: Compiles | None) -> Fragment:
    """The compile events as they are."""
    return Fragment(c)


SECTION = Section(
    "compiles",
    "Compile cost per shape",
    read,
    same,
    fragment,
    has=present,
    missing="no compile events; TORCH_TRACE logs or TVM tuning records add them",
    family=JudgementFamily.COMPILES,
)
