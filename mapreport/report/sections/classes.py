"""Bottleneck class per shape: the one class each shape's evidence decides, the evidence it
rests on (with its pack) and why."""

from __future__ import annotations

import msgspec

from mapreport.analysis.serving.classify import DECIDING_SHARE
from mapreport.report.lines import ShapeLine
from mapreport.report.sections.unit import Facts, Section, same


class ClassesView(msgspec.Struct, frozen=True):
    """Each shape with its class's reason and pack."""

    shapes: tuple[ShapeLine, ...]
    deciding_share: float = DECIDING_SHARE
    """The share of the tail excess the largest driver needs to decide."""


def read(f: Facts) -> ClassesView:
    """The shapes with their class reasons."""
    return ClassesView(f.shapes)


SECTION = Section("classes", "Bottleneck class per shape", read, same, needs_requests=True)
