"""Method and evidence rules: how shapes, latency, buckets and predictions are read, and the
evidence thresholds every figure is held to."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import Thresholds
from mapreport.report.sections.unit import Facts, Section, same


class Fragment(msgspec.Struct):
    """findings.json `thresholds`."""

    thresholds: Thresholds


def read(f: Facts) -> Thresholds:
    """The run's evidence thresholds."""
    return f.r.thresholds


def fragment(th: Thresholds) -> Fragment:
    """The thresholds as they are."""
    return Fragment(th)


SECTION = Section("method", "Method and evidence rules", read, same, fragment)
