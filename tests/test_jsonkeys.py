"""Streaming a JSON object's top-level keys: the same keys as a full decode, however the bytes
are cut into chunks, and bounded on hostile input."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mapreport.ingest import detect
from mapreport.ingest.jsonkeys import MAX_KEY_BYTES, MAX_KEYS, TopKeys, file_keys, top_keys

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ['"', "\\", '\\"', "{", "}", "[", "]", ":", ","]
)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_TEXT, _VALUES, max_size=6), st.lists(st.integers(0, 10_000), max_size=8))
def test_keys_match_a_full_decode_at_any_chunking(doc: dict[str, Any], cuts: list[int]) -> None:
    data = json.dumps(doc, ensure_ascii=False, indent=1).encode()
    scan = top_keys(chunked(data, cuts))
    assert scan.keys == list(doc)
    assert scan.done


def test_a_key_after_a_large_value_is_found(tmp_path: Path) -> None:
    meta = {"metadata": {"notes": "x" * 200_000, "nested": [[{"traceEvents": 1}]] * 1000}}
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps({**meta, "traceEvents": [], "deviceProperties": []}))
    assert file_keys(path, wanted="traceEvents")[:2] == ["metadata", "traceEvents"]
    assert detect(path).name == "kineto"


def test_nested_trace_events_do_not_count() -> None:
    # a key of the same name inside a value is not the document's
    assert top_keys([b'{"a": {"traceEvents": []}, "b": "\\"traceEvents\\": ["}']).keys == ["a", "b"]


def test_not_an_object_stops_at_once() -> None:
    scan = TopKeys()
    scan.feed(b'  ["traceEvents", 1]')
    assert scan.done
    assert scan.keys == []


def test_limits_hold_on_hostile_objects() -> None:
    many = b"{" + b",".join(b'"k%d":0' % i for i in range(MAX_KEYS * 4)) + b"}"
    assert len(top_keys([many]).keys) == MAX_KEYS
    long_key = b'{"' + b"k" * (MAX_KEY_BYTES * 3) + b'": 1, "traceEvents": []}'
    assert top_keys([long_key[i : i + 1000] for i in range(0, len(long_key), 1000)]).keys == [
        "traceEvents"
    ]


def test_a_truncated_gzip_keeps_the_keys_before_the_break(tmp_path: Path) -> None:
    path = tmp_path / "cut.json.gz"
    noise = random.Random(7).randbytes(300_000).hex()  # incompressible: the cut lands late
    whole = gzip.compress(json.dumps({"metadata": "m", "more": noise, "x": 1}).encode())
    path.write_bytes(whole[: len(whole) // 2])
    assert file_keys(path) == ["metadata", "more"]
