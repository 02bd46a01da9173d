"""Shape names that differ in form only align by their numbers, and nothing else does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mapreport.analysis.comparing.compare_names import align_names, renamed, shape_numbers

NAMED = [f"batch={b},seq={s}" for b in (1, 4, 8) for s in (32, 64, 128, 256)]
DIMS = [f"{b}x{s}" for b in (1, 4, 8) for s in (32, 64, 128, 256)]


def test_a_trace_annotated_by_dims_aligns_with_a_named_export() -> None:
    names = align_names(NAMED, DIMS)
    assert len(names) == 12
    assert names["1x128"] == "batch=1,seq=128"
    assert names["8x32"] == "batch=8,seq=32"
    assert renamed({"1x128": 3, "other": 1}, names) == {"batch=1,seq=128": 3, "other": 1}


def test_names_both_sides_hold_are_never_renamed_and_ambiguous_numbers_align_with_nothing() -> None:
    # "1x128" is on both sides: it stays; "b=1 s=128" and "1,128" share their numbers on B
    assert align_names(["1x128", "batch=4,seq=32"], ["1x128", "4x32"]) == {"4x32": "batch=4,seq=32"}
    assert align_names(["batch=1,seq=128"], ["b=1 s=128", "1,128"]) == {}
    assert align_names(["a=1,b=128", "1x128"], ["1,128"]) == {}  # A holds the numbers twice
    assert align_names(["prefill"], ["decode"]) == {}  # no numbers, no claim
    assert shape_numbers("batch=2,seq=0.5") == ("2", "0.5")


@given(st.lists(st.tuples(st.integers(1, 64), st.integers(1, 4096)), unique=True, max_size=20))
def test_renaming_is_one_to_one(dims: list[tuple[int, int]]) -> None:
    a = [f"batch={x},seq={y}" for x, y in dims]
    b = [f"{x}x{y}" for x, y in dims]
    names = align_names(a, b)
    assert len(set(names.values())) == len(names) == len(dims)
    assert all(shape_numbers(k) == shape_numbers(v) for k, v in names.items())
