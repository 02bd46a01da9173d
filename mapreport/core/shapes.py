"""Canonical shape strings, shape buckets and bucket containment (tightest bucket wins)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

MAX_INTEGER = 2**53
"""The largest dimension value: the bound every number a record holds has (beyond it a float
no longer holds every integer)."""
MAX_DIMS = 64
"""A shape with more dimensions than this is rejected: no model input has that many."""

SCALAR = "()"
UNKNOWN = "unknown"
"""The shape of a request whose trace does not record one (Triton TIMESTAMPS-level traces)."""
_DIGITS = re.compile(r"[0-9]+")


def _digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() also accepts '²' and other characters int() refuses."""
    return _DIGITS.fullmatch(text) is not None


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class ShapeError(ValueError):
    """A shape or bucket value breaks FORMATS.md; the message says why."""


def _dim_value(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ShapeError(f"dimension '{name}' must be a non-negative integer, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ShapeError(f"dimension '{name}' must be a non-negative integer, got {value!r}")
        value = int(value)
    if value < 0:
        raise ShapeError(f"dimension '{name}' must be non-negative, got {value}")
    if value > MAX_INTEGER:
        raise ShapeError(f"dimension '{name}' is {value}, beyond 2^53")
    return int(value)


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ShapeError(f"dimension name {name!r} is not an identifier")
    return name


def canonical_shape(value: Any) -> str:
    """Canonical string of a runtime shape: {a:1,b:2} -> 'a=1,b=2', [[4,96]] -> '4x96'."""
    if isinstance(value, str):
        return canonical_shape(parse_shape(value))
    if isinstance(value, Mapping):
        if not value:
            raise ShapeError("shape object has no dimensions")
        if len(value) > MAX_DIMS:
            raise ShapeError(f"shape has {len(value)} dimensions, more than {MAX_DIMS}")
        parts = [f"{_check_name(k)}={_dim_value(k, v)}" for k, v in value.items()]
        return ",".join(sorted(parts))
    if isinstance(value, list | tuple):
        tensors = [t if isinstance(t, list | tuple) else [t] for t in value]
        if not tensors:
            raise ShapeError("positional shape has no tensors")
        if sum(len(t) for t in tensors) > MAX_DIMS:
            raise ShapeError(f"shape has more than {MAX_DIMS} dimensions")
        # a zero-dimensional (scalar) tensor is written "()" so no shape is the empty string
        return ";".join(
            "x".join(str(_dim_value(f"[{i}][{j}]", d)) for j, d in enumerate(t)) or SCALAR
            for i, t in enumerate(tensors)
        )
    raise ShapeError(f"shape must be an object or a list, got {type(value).__name__}")


def parse_shape(text: str) -> dict[str, int] | list[list[int]]:
    """Parse a canonical shape string back into a named mapping or a positional list."""
    text = text.strip()
    if not text:
        raise ShapeError("empty shape string")
    if "=" in text:
        out: dict[str, int] = {}
        for part in text.split(","):
            name, sep, val = part.partition("=")
            if not sep or not _digits(val.strip()):
                raise ShapeError(f"bad dimension {part!r} in shape {text!r}")
            out[_check_name(name.strip())] = int(val)
        return out
    tensors: list[list[int]] = []
    for tensor in text.split(";"):
        dims = tensor.split("x") if tensor != SCALAR else []
        if not all(_digits(d.strip()) for d in dims):
            raise ShapeError(f"bad positional shape {text!r}")
        tensors.append([int(d) for d in dims])
    return tensors


class Bucket(msgspec.Struct, frozen=True, order=True):
    """A compile-time shape bucket: a closed integer range per named dimension."""

    dims: tuple[tuple[str, int, int], ...]

    @property
    def points(self) -> int:
        """How many distinct shapes the bucket holds (its tightness)."""
        return math.prod(hi - lo + 1 for _, lo, hi in self.dims)

    def __str__(self) -> str:
        return ",".join(f"{n}={lo}" if lo == hi else f"{n}={lo}-{hi}" for n, lo, hi in self.dims)

    def contains(self, shape: Mapping[str, int]) -> bool:
        """True when the shape has the same dimension names and every value is in range."""
        if len(shape) != len(self.dims):
            return False
        for name, lo, hi in self.dims:
            v = shape.get(name)
            if v is None or not lo <= v <= hi:
                return False
        return True


def make_bucket(value: Any) -> Bucket:
    """Build a bucket from its JSON object ({"batch": [1, 8], "seq": 128}) or canonical string."""
    if isinstance(value, str):
        return parse_bucket(value)
    if not isinstance(value, Mapping) or not value:
        raise ShapeError("shape_bucket must be a non-empty object of dimension ranges")
    if len(value) > MAX_DIMS:
        raise ShapeError(f"bucket has {len(value)} dimensions, more than {MAX_DIMS}")
    dims = []
    for name, rng in value.items():
        _check_name(name)
        if isinstance(rng, list | tuple):
            if len(rng) != 2:
                raise ShapeError(f"range of '{name}' must be [lo, hi], got {rng!r}")
            lo, hi = _dim_value(name, rng[0]), _dim_value(name, rng[1])
        else:
            lo = hi = _dim_value(name, rng)
        if lo > hi:
            raise ShapeError(f"range of '{name}' is empty: {lo} > {hi}")
        dims.append((name, lo, hi))
    return Bucket(tuple(sorted(dims)))


def parse_bucket(text: str) -> Bucket:
    """Parse a canonical bucket string 'batch=1-8,seq=65-128'."""
    out: dict[str, list[int]] = {}
    for part in text.strip().split(","):
        name, sep, rng = part.partition("=")
        lo, dash, hi = rng.partition("-")
        if not sep or not _digits(lo) or (dash and not _digits(hi)):
            raise ShapeError(f"bad bucket dimension {part!r} in {text!r}")
        out[name.strip()] = [int(lo), int(hi) if dash else int(lo)]
    return make_bucket(out)


def canonical_bucket(value: Any) -> str:
    """Canonical string of a bucket object or string."""
    return str(make_bucket(value))


def named(shape: str) -> dict[str, int] | None:
    """The named dimensions of a canonical shape string, or None for a positional or unknown
    shape."""
    if shape == UNKNOWN:
        return None
    parsed = parse_shape(shape)
    return parsed if isinstance(parsed, dict) else None


def tightest(shape: str, buckets: Iterable[Bucket]) -> Bucket | None:
    """The bucket with the fewest points holding the shape (ties: smallest string), or None."""
    dims = named(shape)
    if dims is None:
        return None
    best: Bucket | None = None
    for b in buckets:
        if b.contains(dims) and (best is None or (b.points, str(b)) < (best.points, str(best))):
            best = b
    return best


def sort_key(shape: str) -> tuple[Sequence[Any], str]:
    """Order shapes by their dimension values, then by text: batch=2 before batch=10."""
    try:
        parsed = parse_shape(shape)
    except ShapeError:
        return ((), shape)
    if isinstance(parsed, dict):
        return (tuple(parsed[k] for k in sorted(parsed)), shape)
    return (tuple(d for t in parsed for d in t), shape)


SEQUENCE_EDGES: tuple[int, ...] = tuple(2**k for k in range(6, 18))
"""Default upper edges of the sequence-length buckets of generative requests (64 ... 131072
tokens): a length takes the smallest edge at or above it."""


def parse_edges(text: str) -> tuple[int, ...]:
    """`"128,512,2048"` -> (128, 512, 2048): positive integers, strictly increasing."""
    try:
        edges = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise ShapeError(f"sequence bucket edges must be integers, got {text!r}") from None
    if not edges or any(e <= 0 for e in edges) or list(edges) != sorted(set(edges)):
        raise ShapeError(f"sequence bucket edges must be positive and increasing, got {text!r}")
    return edges


def sequence_bucket(length: int, edges: Sequence[int] = SEQUENCE_EDGES) -> int:
    """The bucket a sequence length falls in, named by its upper edge: the smallest edge at or
    above it; beyond the last edge, the next power of two (so the buckets stay few)."""
    for edge in edges:
        if length <= edge:
            return edge
    return 1 << max(length - 1, 0).bit_length()


def sequence_shape(input_tokens: int, output_tokens: int | None, edges: Sequence[int]) -> str:
    """The shape of a generative request: its input (and output) length buckets, e.g.
    `isl=1024,osl=256` for 550 tokens in and 247 out with power-of-two edges."""
    dims = {"isl": sequence_bucket(input_tokens, edges)}
    if output_tokens is not None:
        dims["osl"] = sequence_bucket(output_tokens, edges)
    return canonical_shape(dims)
