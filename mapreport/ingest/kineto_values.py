"""Kineto: typed values of raw trace fields (integers as the profiler writes them, JSON
texts, input dims as canonical shapes)."""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa

from mapreport.core.shapes import ShapeError, canonical_shape

ENCODE = msgspec.json.Encoder().encode
"""Compact JSON text of a decoded value (the `extra` column and JSON-valued args)."""
I64 = pa.int64()
_INT64 = (-(2**63), 2**63)


def int_value(value: Any) -> int | None:
    """An id as an int: ints as they are, numeric strings (decimal or 0x) parsed; None else."""
    if type(value) is int:
        return value if _INT64[0] <= value < _INT64[1] else None
    if isinstance(value, str):
        try:
            return int_value(int(value, 0))
        except ValueError:
            return None
    return None


def int_array(values: list[Any], kind: pa.DataType = I64) -> pa.Array:
    """An integer column of ids that are ints, numeric strings or missing."""
    try:
        return pa.array(values, kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        ints = [int_value(v) for v in values]
        if kind == pa.int32():
            ints = [v if v is not None and -(2**31) <= v < 2**31 else None for v in ints]
        return pa.array(ints, kind)


def text_array(values: list[Any], as_json: bool) -> pa.Array:
    """A string column of ints or strings: `str()` of each, or its JSON text."""
    try:
        return pa.array(values, pa.int64()).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    # mostly ints (Kineto's pid/tid: a few events use names): ints cast, the rest patched in
    others = {i: v for i, v in enumerate(values) if type(v) is not int and v is not None}
    ints = [None if i in others else v for i, v in enumerate(values)] if others else values
    try:
        texts = pa.array(ints, pa.int64()).cast(pa.string()).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # ints beyond 64 bits
        texts = [None if v is None else str(v) for v in ints]
    for i, v in others.items():
        texts[i] = ENCODE(v).decode() if as_json else str(v)
    return pa.array(texts, pa.string())


def canonical_dims(dims: Any) -> str | None:
    """Canonical positional shape from `Input Dims`; nested tensor lists are flattened one
    level per tensor; anything else has no shape."""
    if not isinstance(dims, list):
        return None
    tensors = []
    for t in dims:
        if isinstance(t, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in t):
            tensors.append(t)
        elif isinstance(t, list):  # a tensor list (e.g. aten::cat inputs): keep its first
            inner = next((x for x in t if isinstance(x, list)), [])
            tensors.append([d for d in inner if isinstance(d, int)])
        else:
            tensors.append([])
    try:
        return canonical_shape(tensors) if tensors else None
    except ShapeError:
        return None
