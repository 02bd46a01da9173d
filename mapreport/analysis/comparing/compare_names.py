"""Request shapes that two sides name in different forms (docs/compare.md, "Shape names"):
a profiler trace annotated `1x128` and a server's export that says `batch=1,seq=128` name the
same shape. They align by the numbers in their names, in order, where that is one to one."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TypeVar

_NUMBER = re.compile(r"\d+(?:\.\d+)?")

V = TypeVar("V")


def shape_numbers(name: str) -> tuple[str, ...]:
    """The numbers a shape's name holds, in order (`batch=1,seq=128` and `1x128`: 1, 128)."""
    return tuple(_NUMBER.findall(name))


def align_names(a: Iterable[str], b: Iterable[str]) -> dict[str, str]:
    """B's shape names that A holds under another name: B's name -> A's. Only names each side
    holds alone are renamed, and only where their numbers are not empty and name exactly one
    shape on each side (two names of one side with the same numbers align with nothing)."""
    names_a, names_b = set(a), set(b)
    only_a, only_b = names_a - names_b, names_b - names_a
    keys_a = Counter(shape_numbers(n) for n in names_a)
    keys_b = Counter(shape_numbers(n) for n in names_b)
    by_key = {shape_numbers(n): n for n in only_a}
    return {
        name: by_key[key]
        for name in sorted(only_b)
        if (key := shape_numbers(name)) and key in by_key and keys_a[key] == 1 and keys_b[key] == 1
    }


def renamed(held: Mapping[str, V], names: Mapping[str, str]) -> dict[str, V]:
    """`held` with its keys renamed by `names` (a key not in `names` is kept)."""
    return {names.get(key, key): value for key, value in held.items()}
