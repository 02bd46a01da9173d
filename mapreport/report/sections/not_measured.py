"""Not measured: every section without its data, named once, with why and which input would
add it (instead of a section printed empty). Its view is the other sections' parts, which the
assembly hands it after making them (`sections.assemble`)."""

from __future__ import annotations

from typing import Any

from mapreport.report.sections.unit import Facts, Part, Section


def read(_: Facts) -> tuple[Part[Any], ...]:
    """Nothing of the slice: the assembly gives it the parts without their data."""
    return ()


def view(missing: tuple[Part[Any], ...]) -> tuple[Part[Any], ...]:
    """The sections without their data, in page order."""
    return missing


SECTION = Section("not_measured", "Not measured", read, view, has=bool, missing="")
