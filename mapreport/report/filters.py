"""Jinja filters: every number in a report is formatted here, never in a template."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mapreport.analysis.results import Interval
from mapreport.units import DASH, duration, missing, pct, signed_pct

__all__ = ["FILTERS", "duration", "pct", "signed_pct"]


def ci(iv: Interval | None, digits: int = 1) -> str:
    """A 95% confidence interval of a share: [+19.8%, +27.0%]."""
    if iv is None:
        return DASH
    return f"[{signed_pct(iv.low, digits)}, {signed_pct(iv.high, digits)}]"


def num(x: float | int | None, digits: int = 0) -> str:
    """A plain number with thousands separators."""
    if missing(x):
        return DASH
    return f"{x:,.{digits}f}"


def ratio(x: float | None, digits: int = 2) -> str:
    """A dimensionless statistic such as Kendall tau."""
    return DASH if missing(x) else f"{x:.{digits}f}"


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
