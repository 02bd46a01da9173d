"""Declared raw -> canonical field mappings and the value checks every reader shares."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from mapreport.core.shapes import MAX_INTEGER, ShapeError, canonical_bucket, canonical_shape

Kind = Literal["str", "float", "int", "shape", "bucket", "bool"]
MAX_MAGNITUDE = float(MAX_INTEGER)
"""The largest magnitude a number of any table may have (9.0e15: 285 years in microseconds,
where float64 still counts whole microseconds). A larger one, valid JSON as it is, would turn
into inf or lose every digit in the differences, sums and ratios of the analysis."""


INT_LIMIT = 2**62
"""An integer (core, batch size, bytes) must be below this in magnitude: it fits int64 with
room for the sums of the analysis."""


def out_of_range(f: str, value: Any) -> FieldError:
    """The error for a number beyond MAX_MAGNITUDE (its text cut to 60 characters)."""
    return FieldError(f, f"out of range: {_show(value)} (a number must be within +-2^53)")


class FieldError(ValueError):
    """A value that breaks its field's declaration; `field` names it."""

    def __init__(self, field: str | None, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(reason)


class Field(msgspec.Struct, frozen=True):
    """One raw field of an input record and the canonical column it lands in."""

    raw: str
    kind: Kind
    required: bool = False
    column: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    """The largest value its column holds (an int32 column: 2^31 - 1)."""
    choices: tuple[str, ...] | None = None

    @property
    def target(self) -> str:
        """The canonical column name (the raw name unless mapped)."""
        return self.column or self.raw


class RecordSpec(msgspec.Struct, frozen=True):
    """The declared fields of one record kind."""

    name: str
    fields: tuple[Field, ...]

    @property
    def raw_names(self) -> frozenset[str]:
        """The raw names this spec knows; any other key goes to `extra`."""
        return frozenset(f.raw for f in self.fields)


def as_float(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (a bool, a string) and for an integer
    beyond float range (`1e400` written out as an integer), which the caller rejects."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _number(f: Field, value: Any, text: bool) -> float:
    if text and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise FieldError(f.raw, f"expected a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(f.raw, f"expected a number, got {_show(value)}")
    out = as_float(value)
    if out is not None and not math.isfinite(out):
        raise FieldError(f.raw, f"expected a finite number, got {value!r}")
    if f.kind == "int":
        if out is None or abs(out) >= INT_LIMIT:
            raise FieldError(f.raw, f"integer out of range: {_show(value)}")
    elif out is None or abs(out) > MAX_MAGNITUDE:
        raise out_of_range(f.raw, value)
    if f.minimum is not None and out < f.minimum:
        raise FieldError(f.raw, f"must be >= {f.minimum:g}, got {value!r}")
    if f.maximum is not None and out > f.maximum:
        raise FieldError(f.raw, f"must be <= {f.maximum:.0f}, got {value!r}")
    return out


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def convert_value(f: Field, value: Any, text: bool = False) -> Any:
    """Check and convert one raw value; `text` is true for CSV cells (everything a string)."""
    if f.kind == "str":
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise FieldError(f.raw, f"expected a string, got {_show(value)}")
        out = str(value)
        if f.choices is not None and out not in f.choices:
            raise FieldError(f.raw, f"must be one of {', '.join(f.choices)}; got {out!r}")
        return out
    if f.kind == "float":
        return _number(f, value, text)
    if f.kind == "int":
        num = _number(f, value, text)
        if num != int(num):
            raise FieldError(f.raw, f"expected an integer, got {value!r}")
        return int(num)
    if f.kind == "bool":
        if text and isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        if not isinstance(value, bool):
            raise FieldError(f.raw, f"expected true or false, got {_show(value)}")
        return value
    try:
        if f.kind == "shape":
            return canonical_shape(value)
        return canonical_bucket(value)
    except ShapeError as e:
        raise FieldError(f.raw, str(e)) from None


def convert_record(
    spec: RecordSpec, record: Mapping[str, Any], text: bool = False
) -> dict[str, Any]:
    """Map a raw record to canonical columns; unknown keys go to `extra` as JSON."""
    out: dict[str, Any] = {}
    for f in spec.fields:
        value = record.get(f.raw)
        if value is None or (text and value == ""):
            if f.required:
                raise FieldError(f.raw, "required field is missing")
            out[f.target] = None
            continue
        out[f.target] = convert_value(f, value, text)
    known = spec.raw_names
    unknown = {k: v for k, v in record.items() if k not in known}
    out["extra"] = msgspec.json.encode(unknown, order="sorted").decode() if unknown else None
    return out


_TYPES: dict[str, Any] = {
    "str": str,
    "float": float,
    "int": int,
    "shape": dict[str, int],
    "bucket": str,
    "bool": bool,
}


def struct_of(
    spec: RecordSpec,
    name: str,
    types: Mapping[str, Any],
    module: str,
    forbid_unknown: bool = True,
) -> type[msgspec.Struct]:
    """A msgspec Struct that decodes the records `spec` declares, each value typed by its kind
    (or by `types`, per raw name); a field with choices is a Literal of them. With
    `forbid_unknown` a record with any other key fails to decode."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in sorted(spec.fields, key=lambda f: not f.required):  # required ones come first
        kind = types.get(f.raw) or (Literal[f.choices] if f.choices else _TYPES[f.kind])
        fields.append((f.raw, kind) if f.required else (f.raw, kind | None, None))
    return msgspec.defstruct(
        name, fields, module=module, forbid_unknown_fields=forbid_unknown, gc=False
    )
