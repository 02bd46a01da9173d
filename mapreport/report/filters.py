"""Jinja filters: every number in a report is formatted here, never in a template."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from mapreport.analysis.results import Interval

DASH = "–"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def duration(us: float | None) -> str:
    """Microseconds as a readable duration: 820 µs, 4.40 ms, 1.25 s."""
    if _missing(us):
        return DASH
    assert us is not None
    a = abs(us)
    if a < 1000:
        return f"{us:.0f} µs"
    if a < 1_000_000:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1_000_000:.2f} s"


def pct(x: float | None, digits: int = 1) -> str:
    """A share as a percentage: 0.923 -> 92.3%."""
    return DASH if _missing(x) else f"{x * 100:.{digits}f}%"  # type: ignore[operator]


def signed_pct(x: float | None, digits: int = 1) -> str:
    """A signed change as a percentage: +24.2%, −3.1%."""
    if _missing(x):
        return DASH
    assert x is not None
    return f"{x * 100:+.{digits}f}%".replace("-", "−")


def ci(iv: Interval | None, digits: int = 1) -> str:
    """A 95% confidence interval of a share: [+19.8%, +27.0%]."""
    if iv is None:
        return DASH
    return f"[{signed_pct(iv.low, digits)}, {signed_pct(iv.high, digits)}]"


def num(x: float | int | None, digits: int = 0) -> str:
    """A plain number with thousands separators."""
    if _missing(x):
        return DASH
    return f"{x:,.{digits}f}"


def ratio(x: float | None, digits: int = 2) -> str:
    """A dimensionless statistic such as Kendall tau."""
    return DASH if _missing(x) else f"{x:.{digits}f}"


def label(text: str | None) -> str:
    """snake_case identifiers as words: close_the_loop -> close the loop."""
    return DASH if not text else text.replace("_", " ")


FILTERS: dict[str, Callable[..., str]] = {
    "duration": duration,
    "pct": pct,
    "signed_pct": signed_pct,
    "ci": ci,
    "num": num,
    "ratio": ratio,
    "label": label,
}
