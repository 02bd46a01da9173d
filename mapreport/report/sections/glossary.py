"""Glossary: each term the report uses without saying what it means (the PDF's, only the terms
its pages use)."""

from __future__ import annotations

from mapreport.report.sections.unit import Facts, Section, same
from mapreport.report.words import GLOSSARY


def read(_: Facts) -> dict[str, tuple[str, str]]:
    """Term id -> (term, meaning); the body links each term's uses to `#term-<id>`."""
    return GLOSSARY


SECTION = Section("glossary", "Glossary", read, same)
