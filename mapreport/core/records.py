"""What `dataclasses` offers over records, for the record types of this package: msgspec
Structs (frozen, by and large) and the three dataclasses left (the sink, the config and a
section's facts, which hide fields from repr).

The records are Structs because a Struct class is made in C, where Python 3.11 compiles each
method a dataclass generates: as dataclasses the package's 292 record classes took 0.31 s to make
(1.1 ms a class) in a 0.45 s import; the package's own import measures 0.16 s as Structs against
0.29 s as dataclasses (medians of 9 fresh processes, bytecode compiled). Every command pays it."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import msgspec

R = TypeVar("R")


def replace(record: R, **changes: Any) -> R:
    """A copy of `record` with `changes` (a Struct's or a dataclass's fields)."""
    if isinstance(record, msgspec.Struct):
        return msgspec.structs.replace(record, **changes)
    return dataclasses.replace(record, **changes)  # type: ignore[type-var]


def field_names(record: Any) -> tuple[str, ...]:
    """The names of a record's fields (a Struct's or a dataclass's, class or instance), in
    their order."""
    if isinstance(record, msgspec.Struct) or (
        isinstance(record, type) and issubclass(record, msgspec.Struct)
    ):
        return record.__struct_fields__
    return tuple(f.name for f in dataclasses.fields(record))


def as_dict(record: Any) -> dict[str, Any]:
    """A record's fields as a dict, nested records as dicts too (`dataclasses.asdict`'s
    result: tuples stay tuples, enums stay enums)."""
    if isinstance(record, msgspec.Struct):
        return {name: _value(getattr(record, name)) for name in record.__struct_fields__}
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: _value(getattr(record, f.name)) for f in dataclasses.fields(record)}
    raise TypeError(f"not a record: {type(record).__name__}")


def _value(value: Any) -> Any:
    """A field's value as `as_dict` gives it."""
    if isinstance(value, msgspec.Struct) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return as_dict(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_value(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _value(v) for k, v in value.items()}
    return value
