"""findings.json's schema is generated from the sections' fragment types (issue 52): the file
readers use is that output, every key the document writes is declared once, and the schema
refuses what the types do not state. The golden cases validate against it
(test_golden.test_every_golden_findings_validates_against_its_schema)."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import jsonschema
import msgspec

from mapreport.analysis.steps.results import SliceResult
from mapreport.report.findings import (
    ORDER,
    SCHEMA_FILE,
    Head,
    document_type,
    findings,
    fragment_type,
    schema,
    schema_text,
    strict,
)
from mapreport.report.sections import SECTIONS


def test_the_schema_file_is_the_generated_schema() -> None:
    """Regenerate with MAPREPORT_UPDATE_GOLDEN=1 after a change to a fragment's type."""
    text = schema_text()
    if os.environ.get("MAPREPORT_UPDATE_GOLDEN"):
        SCHEMA_FILE.write_text(text, encoding="utf-8")
    assert SCHEMA_FILE.read_text(encoding="utf-8") == text, (
        "findings.schema.json is stale: MAPREPORT_UPDATE_GOLDEN=1 pytest "
        "tests/test_findings_schema.py rewrites it"
    )


def test_every_key_is_declared_once_in_document_order() -> None:
    keys = [f.encode_name for f in msgspec.structs.fields(document_type())]
    owners: dict[str, str] = {}
    for s in SECTIONS:
        t = fragment_type(s)
        for f in msgspec.structs.fields(t) if t else ():
            assert f.encode_name not in owners, (f.encode_name, owners.get(f.encode_name), s.id)
            owners[f.encode_name] = s.id
    head = [f.encode_name for f in msgspec.structs.fields(Head)]
    assert sorted(keys) == sorted(head + list(owners))
    assert set(ORDER) <= set(keys), set(ORDER) - set(keys)
    assert keys[: len(ORDER)] == [k for k in ORDER if k in keys]


MUTATIONS: dict[str, Callable[[dict[str, Any]], object]] = {
    "unknown top-level key": lambda d: d.update(extra=1),
    "unknown key in a shape": lambda d: d["shapes"][0].update(extra=1),
    "a count as text": lambda d: d["shapes"][0].update(n="1"),
    "an unknown action class": lambda d: d["actions"][0].update({"class": "retune"}),
    "a missing section key": lambda d: d.pop("history"),
    "an unknown decision": lambda d: d["decisions"].update(guess={"shapes": [], "meaning": ""}),
}


def test_a_demo_document_validates_and_every_mutation_of_it_fails(
    demo_results: dict[str, SliceResult],
) -> None:
    """Every object is closed, every category an enum, every count a number: the schema
    holds a document to the types it is generated from."""
    s = schema()
    validator = jsonschema.validators.validator_for(s)(s)
    validator.check_schema(s)
    doc = strict(findings(demo_results["bert-base"], "2026-11-30T00:00:00+00:00"))
    assert list(validator.iter_errors(doc)) == []
    assert doc["shapes"]
    assert doc["actions"]
    for what, mutate in MUTATIONS.items():
        bad = copy.deepcopy(doc)
        mutate(bad)
        assert list(validator.iter_errors(bad)), what
    assert "ranking" not in s["required"]  # absent without tuning records
