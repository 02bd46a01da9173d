"""Plain-text formatting of durations and shares, shared by action titles and report filters."""

from __future__ import annotations

import math
from typing import Any

DASH = "–"


def missing(x: Any) -> bool:
    """None or a non-finite float."""
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def duration(us: float | None) -> str:
    """Microseconds as a readable duration: 820 µs, 4.40 ms, 1.25 s."""
    if us is None or missing(us):
        return DASH
    a = abs(us)
    if a < 1000:
        return f"{us:.0f} µs"
    if a < 1_000_000:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1_000_000:.2f} s"


def pct(x: float | None, digits: int = 1) -> str:
    """A share as a percentage: 0.923 -> 92.3%."""
    return DASH if x is None or missing(x) else f"{x * 100:.{digits}f}%"


def signed_pct(x: float | None, digits: int = 1) -> str:
    """A signed change as a percentage: +24.2%, −3.1%."""
    if x is None or missing(x):
        return DASH
    return f"{x * 100:+.{digits}f}%".replace("-", "−")
