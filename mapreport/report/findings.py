"""findings.json: the machine-readable twin of a report, assembled from its sections'
fragments (each a `msgspec.Struct`), and its JSON Schema, generated from the same types
(`schema`; `findings.schema.json` is its output, kept current by a test).

A fragment states result types as `msgspec.to_builtins` writes them (enums as their values,
intervals as [low, high]); where the document's layout differs from a type (flattened
percentiles, renamed keys) or states words, the section declares it, once, beside its view.
"""

from __future__ import annotations

import codecs
import json
import math
import re
import typing
from pathlib import Path
from typing import Any

import msgspec

from mapreport import __version__
from mapreport.analysis.steps.results import SliceResult
from mapreport.report.sections import SECTIONS, Assembled, assemble
from mapreport.report.sections.unit import Section

FINDINGS_SCHEMA_VERSION = "2.0"
SCHEMA_ID = f"https://mapreport.invalid/findings/{FINDINGS_SCHEMA_VERSION}"


class Head(msgspec.Struct):
    """What the document is: its schema version, what wrote it when, and which slice."""

    schema_version: str
    generator: str
    generated_at: str
    workload: str
    slice: str


ORDER = (
    *("schema_version", "generator", "generated_at", "workload", "slice", "summary", "status"),
    *("status_reason", "judgements", "scope", "thresholds", "environment", "coverage"),
    *("accuracy", "decisions", "shapes", "over_sla", "tail_drivers", "tail_class"),
    *("tail_class_evidence", "scheduling", "actions", "checklist", "pitfalls", "history"),
    *("blocking", "drift", "op_drift", "profile_next", "operators", "compiles", "load_sweep"),
    *("telemetry", "queue_check", "token_timing", "token_rate", "loadgen", "sources", "ops"),
    *("device", "timeline", "graph_buckets", "ranking"),
)
"""The document's keys in the order schema 2.0 writes them; a section's keys not listed here
follow in page order."""


def strict(doc: Any) -> Any:
    """`doc` with every non-finite float as null: findings.json is strict JSON (RFC 8259 has
    no NaN or Infinity, and JSON.parse refuses them), whatever a figure came to."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: strict(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [strict(v) for v in doc]
    return doc


_EXPONENT = re.compile(rb"e[-+]?[0-9]+(?=,?\n)")
_SMALL = re.compile(rb"0\.0000[1-9][0-9]*(?=,?\n)")
"""The ends of the floats msgspec writes otherwise than Python's `repr` (1e16 for 1e+16, 1e-7
for 1e-07, 0.00001 for 1e-05). In indented JSON a number is the last token of its line and
follows a space, and a string never holds a raw line break, so nothing inside a string matches;
each pattern starts with a literal, which `re` finds fast."""
_NUMBER = frozenset(b"0123456789.-")


def _python_floats(text: bytes) -> bytes:
    """Indented JSON with every float as Python's `repr` writes it."""
    spans: list[tuple[int, int]] = []
    for m in _EXPONENT.finditer(text):
        start = m.start()
        while text[start - 1] in _NUMBER:
            start -= 1
        if text[start - 1] == ord(" "):
            spans.append((start, m.end()))
    for m in _SMALL.finditer(text):
        start = m.start() - (text[m.start() - 1] == ord("-"))
        if text[start - 1] == ord(" "):  # not the end of 10.00001
            spans.append((start, m.end()))
    if not spans:
        return text
    out: list[bytes] = []
    done = 0
    for start, end in sorted(spans):
        out += [text[done:start], repr(float(text[start:end])).encode()]
        done = end
    return b"".join([*out, text[done:]])


def _ascii(error: UnicodeError) -> tuple[str, int]:
    """The characters ASCII cannot hold as the standard encoder's `ensure_ascii` writes them
    (a surrogate pair above U+FFFF)."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = []
    for c in error.object[error.start : error.end]:
        n = ord(c)
        if n >= 0x10000:
            n -= 0x10000
            out.append(f"\\u{0xD800 | (n >> 10):04x}\\u{0xDC00 | (n & 0x3FF):04x}")
        else:
            out.append(f"\\u{n:04x}")
    return "".join(out), error.end


codecs.register_error("mapreport.json-ascii", _ascii)


def encode(doc: dict[str, Any]) -> bytes:
    """findings.json's bytes: `doc` as strict JSON indented by two, byte for byte what
    `json.dumps(strict(doc), indent=2)` writes, in one pass of msgspec (which writes a
    non-finite float as null) rather than the standard library's indenting encoder, written
    in Python; the floats and the characters outside ASCII that msgspec writes otherwise are
    then rewritten as the standard encoder writes them."""
    try:
        text = msgspec.json.format(msgspec.json.encode(doc), indent=2)
    except UnicodeEncodeError:  # a lone surrogate (a file name's undecodable byte)
        return json.dumps(strict(doc), indent=2, allow_nan=False).encode()
    text = _python_floats(text)
    if not text.isascii():
        text = text.decode().encode("ascii", "mapreport.json-ascii")
    # DEL is ASCII, which the standard encoder escapes too; raw, it is only ever inside a string
    return text.replace(b"\x7f", b"\\u007f")


def plain(x: Any) -> Any:
    """A value as JSON-ready builtins (structs and dataclasses to objects, enums to strings)."""
    return msgspec.to_builtins(x)


def _ordered(doc: dict[str, Any]) -> dict[str, Any]:
    first = {k: doc[k] for k in ORDER if k in doc}
    return first | {k: x for k, x in doc.items() if k not in first}


def document(a: Assembled, generated_at: str) -> dict[str, Any]:
    """The whole findings document of one slice: its head, then every section's fragment."""
    r = a.facts.r
    head = Head(
        FINDINGS_SCHEMA_VERSION, f"mapreport {__version__}", generated_at, r.workload, r.slice
    )
    doc: dict[str, Any] = plain(head)
    for p in a.parts:
        fragment = p.fragment()
        if fragment is not None:
            doc |= plain(fragment)
    return _ordered(doc)


def findings(r: SliceResult, generated_at: str) -> dict[str, Any]:
    """The findings document of a slice not otherwise reported (the Python API's)."""
    return document(assemble(r), generated_at)


def fragment_type(s: Section[Any, Any]) -> type[msgspec.Struct] | None:
    """The Struct a section's fragment is, from its declared return type."""
    if s.fragment is None:
        return None
    made: type[msgspec.Struct] = typing.get_type_hints(s.fragment)["return"]
    return made


def document_type() -> type[msgspec.Struct]:
    """The whole document as one Struct: the head's fields, then every fragment's, in the
    document's order (so its schema is the document's)."""
    fields: dict[str, tuple[str, Any, Any]] = {}
    structs: list[type[msgspec.Struct]] = [Head]
    structs += [t for t in map(fragment_type, SECTIONS) if t is not None]
    for struct in structs:
        for f in msgspec.structs.fields(struct):
            if f.encode_name in fields:
                raise ValueError(f"findings.json key {f.encode_name!r} is stated twice")
            fields[f.encode_name] = (f.name, f.type, f.default)
    ordered = _ordered(fields)
    return msgspec.defstruct(
        "Findings",
        [(name, t) if d is msgspec.NODEFAULT else (name, t, d) for name, t, d in ordered.values()],
        kw_only=True,
        forbid_unknown_fields=True,
    )


def _closed(node: Any) -> Any:
    """The schema with every object closed (the document holds only its types' fields) and
    every number nullable (`strict` writes a non-finite figure as null)."""
    if isinstance(node, list):
        return [_closed(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed(x) for k, x in node.items()}
    if "properties" in out:
        out.setdefault("additionalProperties", False)
    if out.get("type") == "number":
        out["type"] = ["number", "null"]
    return out


def schema() -> dict[str, Any]:
    """findings.json's JSON Schema (draft 2020-12), generated from the fragments' types."""
    body = _closed(msgspec.json.schema(document_type()))
    defs = body.pop("$defs")
    top = defs.pop("Findings")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"mapreport findings.json, schema version {FINDINGS_SCHEMA_VERSION}",
        "description": "The machine-readable twin of one workload slice's report. Times in "
        "microseconds (_us), shares and errors as fractions (0.25 = 25%). A statistic that "
        "could not be measured is null, never 0. Generated from the report's section types "
        "(mapreport/report/findings.py); do not edit.",
        **{k: x for k, x in top.items() if k not in ("title", "description")},
        "$defs": defs,
    }


SCHEMA_FILE = Path(__file__).with_name("findings.schema.json")
"""The schema as a file, for readers of findings.json: `schema()`'s output, which
tests/test_findings_schema.py holds it to (and rewrites with MAPREPORT_UPDATE_GOLDEN=1)."""


def schema_text() -> str:
    """The schema as the file holds it."""
    return json.dumps(schema(), indent=1, ensure_ascii=False) + "\n"
