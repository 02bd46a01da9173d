"""Streaming a JSON object's top-level keys: the same keys as a full decode, however the bytes
are cut into chunks, and bounded on hostile input."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapreport.ingest import detect, jsonkeys
from mapreport.ingest.jsonkeys import (
    CHUNK,
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_KEY_BYTES,
    MAX_KEYS,
    WINDOW,
    TopKeys,
    file_keys,
    top_keys,
)

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
@pytest.mark.slow
def test_keys_match_a_full_decode_at_any_chunking(doc: dict[str, Any], cuts: list[int]) -> None:
    data = json.dumps(doc, ensure_ascii=False, indent=1).encode()
    scan = top_keys(chunked(data, cuts))
    assert scan.keys == list(doc)
    assert scan.done
    text = data.decode()
    for key, at in zip(scan.keys, scan.offsets, strict=True):  # each offset is its key's quote
        assert json.decoder.scanstring(text, len(data[:at].decode()) + 1)[0] == key  # type: ignore[attr-defined]


_SOUP = st.lists(st.sampled_from([b'"', b"\\", b"{", b"}", b"[", b"]", b":", b",", b"a", b" "]))


@settings(max_examples=300, deadline=None)
@given(_SOUP, st.lists(st.integers(0, 200), max_size=8), st.sampled_from([1, 3, WINDOW]))
def test_any_bytes_give_the_same_keys_at_any_chunking(
    soup: list[bytes], cuts: list[int], window: int
) -> None:
    # malformed JSON gives some keys and no error; where a chunk or a skipped window ends
    # never changes which (an escape pending at a cut included)
    data = b'{"k": 1, ' + b"".join(soup)
    whole = top_keys([data])
    saved, jsonkeys.WINDOW = jsonkeys.WINDOW, window
    try:
        scan = top_keys(chunked(data, cuts))
    finally:
        jsonkeys.WINDOW = saved
    assert (scan.keys, scan.offsets) == (whole.keys, whole.offsets)


def count_steps(monkeypatch: Any, chunks: list[bytes]) -> tuple[TopKeys, int]:
    """The scan of `chunks` and how many Python-level steps it took (each step is C passes
    over at most one window or chunk)."""
    steps = 0

    def counted(name: str) -> Any:
        real = getattr(TopKeys, name)

        def step(*args: Any) -> Any:
            nonlocal steps
            steps += 1
            return real(*args)

        return step

    for name in ("_string", "_skip", "_top"):
        monkeypatch.setattr(TopKeys, name, counted(name))
    return top_keys(chunks), steps


N = 4 << 20


def before_events(key: bytes, value: bytes) -> bytes:
    return b'{"' + key + b'": ' + value + b', "traceEvents": []}'


HOSTILE = {
    # what cost the old scanner a Python step per escape: ~45 s for the 64 MiB it may read
    "escaped backslashes": before_events(b"deviceProperties", b'"' + b"\\\\" * (N // 2) + b'"'),
    "escaped quotes": before_events(b"distributedInfo", b'"' + b'\\"' * (N // 2) + b'"'),
    "nested escapes": before_events(b"m", b'["' + b'\\\\\\"' * (N // 4) + b'"]'),
    "small strings": before_events(b"m", b"[" + b'"",' * (N // 3) + b'""]'),
    "small keys": before_events(
        b"m", b"{" + b",".join(b'"k%d":0' % i for i in range(N // 10)) + b"}"
    ),
    "brackets": before_events(b"m", b"[" + b"[{}]," * (N // 5) + b"[]]"),
    "long number": before_events(b"m", b"0." + b"1" * N),
    "spaces": b'{"m"' + b" " * N + b": [1" + b" " * N + b'], "traceEvents": []}',
}


@pytest.mark.parametrize("shape", list(HOSTILE))
@pytest.mark.slow
def test_hostile_values_cost_steps_per_window_not_per_token(shape: str, monkeypatch: Any) -> None:
    data = HOSTILE[shape]
    assert json.loads(data)  # valid JSON, all of it
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    scan, steps = count_steps(monkeypatch, chunks)
    assert scan.keys == list(json.loads(data))
    # a step per window or chunk, and a few per top-level token; the old scanner took one
    # per escape or token (millions here)
    assert steps <= 2 * (len(data) // WINDOW + len(chunks)) + 4 * len(scan.keys) + 8


def test_malformed_top_levels_stop_after_a_bounded_number_of_steps(monkeypatch: Any) -> None:
    for data in (
        b"{" + b'"", ' * 100_000,  # strings with no colon: no key ever counts
        b"{" + b"[] " * 100_000,  # values with no keys
    ):
        scan, steps = count_steps(monkeypatch, [data])
        assert scan.done
        assert scan.keys == []
        assert steps <= 3 * MAX_ITEMS + 2


def test_a_value_nested_deeper_than_any_reader_decodes_stops_the_scan(monkeypatch: Any) -> None:
    data = b'{"a": ' + b"[" * (MAX_DEPTH * 10) + b"]" * (MAX_DEPTH * 10) + b', "traceEvents": []}'
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    scan, steps = count_steps(monkeypatch, chunks)
    assert scan.done
    assert scan.keys == ["a"]
    assert steps <= MAX_DEPTH // WINDOW + 8


def test_a_key_named_twice_is_found_with_both_offsets() -> None:
    data = b'{"traceEvents": [], "x": {"traceEvents": 1}, "traceEvents": [{"ph": "X"}]}'
    scan = top_keys([data])
    assert scan.keys == ["traceEvents", "x", "traceEvents"]
    assert scan.repeated() == ("traceEvents", 1, data.rindex(b'"traceEvents"'))
    assert top_keys([b'{"a": 1, "b": 2}']).repeated() is None
    # offsets of a piece fed after a gap (a caller that left out a large value)
    scan = TopKeys()
    scan.feed(b'{"a": [')
    scan.feed(b'], "a": 2}', at=1000)
    assert scan.repeated() == ("a", 1, 1003)


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
