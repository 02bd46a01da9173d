"""findings.json's bytes (issue 53): msgspec encodes the document, and what it writes is byte
for byte what the standard library's `json.dumps(strict(doc), indent=2)` wrote before, for any
document: floats as `repr` writes them, non-finite ones as null, every character outside ASCII
(and DEL) escaped, a lone surrogate included."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from mapreport.analysis.steps.results import SliceResult
from mapreport.report.findings import encode, findings, strict


def _standard(doc: Any) -> bytes:
    return json.dumps(strict(doc), indent=2, allow_nan=False).encode()


NASTY_TEXT = ["é", "\x7f", '\x00\n\t"\\', "\u2028", "😀", "\ud800", ": 1e-07,\n", " 0.00001\n"]
"""Text a name from the wild may hold: escapes, what the standard encoder writes otherwise than
msgspec, and what looks like a number at a line's end."""

FLOATS = [1e-05, -1e-05, 9.99e-05, 1e-4, 1e-06, 1e-07, 5e-324, 1e15, 1e16, -1.5e16, 1e21, 1e22]
FLOATS += [1.7976931348623157e308, 10.00001, 123456789012345.6, 0.1, -0.0, math.nan, -math.inf]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.sampled_from(FLOATS)
    | st.text()
    | st.sampled_from(NASTY_TEXT)
)
documents = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.sampled_from(NASTY_TEXT), inner, max_size=4)
    ),
    max_leaves=24,
)


@given(st.dictionaries(st.text(max_size=8), documents, max_size=6))
@example({"floats": FLOATS, "text": NASTY_TEXT, "nested": {"a": [[], {}, [FLOATS[0]]]}})
@example({k: k for k in NASTY_TEXT if k != "\ud800"})
@example({"inf": math.inf, "x": [1e16, {"y": -1e-07}]})
def test_any_document_is_written_as_the_standard_encoder_wrote_it(doc: dict[str, Any]) -> None:
    assert encode(doc) == _standard(doc)


def test_every_demo_slices_findings_are_the_same_bytes(
    demo_results: dict[str, SliceResult],
) -> None:
    """The documents as the report makes them (before `strict`: their NaNs included)."""
    for name, r in demo_results.items():
        doc = findings(r, "2026-11-30T00:00:00+00:00")
        assert encode(doc) == _standard(doc), name
