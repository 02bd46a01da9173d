"""Shape coverage: the share of traffic a compiled bucket held, the runtime shapes no bucket
holds, and the buckets no production request used."""

from __future__ import annotations

import msgspec

from mapreport.analysis.mapping.coverage import Coverage
from mapreport.report.sections.unit import Facts, Section, same


class Fragment(msgspec.Struct):
    """findings.json `coverage`."""

    coverage: Coverage


def read(f: Facts) -> Coverage:
    """The slice's coverage by its plans' buckets."""
    return f.r.coverage


def fragment(c: Coverage) -> Fragment:
    """The coverage as it is."""
    return Fragment(c)


SECTION = Section("coverage", "Shape coverage", read, same, fragment, needs_requests=True)
