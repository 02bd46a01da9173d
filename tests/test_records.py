"""core/records.py: replace, field names and dicts of the package's records, Structs and the
dataclasses left, alike."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import NamedTuple

import msgspec
import pytest

from mapreport.core.records import as_dict, field_names, replace


class Colour(Enum):
    RED = "red"


class Pair(NamedTuple):
    a: int
    b: int


class Inner(msgspec.Struct, frozen=True):
    x: int
    colour: Colour = Colour.RED


class Outer(msgspec.Struct, frozen=True):
    inner: Inner
    pairs: tuple[Pair, ...] = ()
    names: list[str] = msgspec.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Old:
    inner: Inner
    n: int = 0


def test_replace_copies_structs_and_dataclasses_with_the_changes() -> None:
    outer = Outer(Inner(1))
    assert replace(outer, inner=Inner(2)) == Outer(Inner(2))
    assert outer == Outer(Inner(1))  # the original is left as it was
    assert replace(Old(Inner(1)), n=3) == Old(Inner(1), 3)
    with pytest.raises(TypeError):
        replace(Outer(Inner(1)), missing=1)


def test_field_names_are_in_their_order_for_a_class_or_an_instance() -> None:
    assert field_names(Outer) == field_names(Outer(Inner(1))) == ("inner", "pairs", "names")
    assert field_names(Old) == field_names(Old(Inner(1))) == ("inner", "n")
    with pytest.raises(TypeError):
        field_names(3)


def test_as_dict_is_dataclasses_asdict_nested_records_as_dicts_the_rest_as_it_is() -> None:
    outer = Outer(Inner(1), (Pair(1, 2),), ["a"])
    assert as_dict(outer) == {
        "inner": {"x": 1, "colour": Colour.RED},
        "pairs": (Pair(1, 2),),
        "names": ["a"],
    }
    assert isinstance(as_dict(outer)["pairs"][0], Pair)
    assert as_dict(Old(Inner(2), 1)) == {"inner": {"x": 2, "colour": Colour.RED}, "n": 1}
    with pytest.raises(TypeError, match="not a record"):
        as_dict(Old)
