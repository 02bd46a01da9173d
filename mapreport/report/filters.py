"""Jinja filters: every number in a report is formatted here, never in a template."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from mapreport.analysis.base.common import Interval

DASH = "–"


def missing(x: Any) -> bool:
    """None or a non-finite float."""
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def duration(us: float | None) -> str:
    """Microseconds as a readable duration: 820 µs, 4.40 ms, 1.25 s."""
    if us is None or missing(us):
        return DASH
    a = abs(us)
    if a < 10 and us:  # a kernel's few microseconds, or a roofline bound below one
        return f"{us:.2f} µs"
    if a < 1000:
        return f"{us:.0f} µs"
    if a < 1_000_000:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1_000_000:.2f} s"


def duration_ms(ms: float | None) -> str:
    """Milliseconds (compile times) as a readable duration."""
    return duration(None if ms is None else ms * 1000)


EXACT = 1e-9
"""A share this close to 0 or 1 is all or nothing (float sums of shares miss 1 by ~1e-16)."""


def pct(x: float | None, digits: int = 1) -> str:
    """A share as a percentage: 0.923 -> 92.3%; never a rounded 100% or 0%: a share that
    rounds to either says which side it is on (`> 99.9%`, `< 0.1%`), with one decimal."""
    if x is None or missing(x):
        return DASH
    # "drives 100%" beside evidence of 99.96% is a contradiction, and "99.995%" is noise
    if EXACT < x < 1 - EXACT and round(x * 100, digits) in (0, 100):
        if round(x * 100, 1) not in (0, 100):
            return f"{x * 100:.1f}%"
        return "> 99.9%" if x > 0.5 else "< 0.1%"
    return f"{x * 100:.{digits}f}%"


def signed_pct(x: float | None, digits: int = 1) -> str:
    """A signed change as a percentage: +24.2%, −3.1%."""
    if x is None or missing(x):
        return DASH
    return f"{x * 100:+.{digits}f}%".replace("-", "−")


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


def p_value(p: float | None) -> str:
    """A test's p-value after its `p`: `= 0.012`, or `< 0.001`."""
    if p is None or missing(p):
        return DASH
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def size(n: float | None) -> str:
    """Bytes in binary units: 512 B, 3.4 MiB."""
    if n is None or missing(n):
        return DASH
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return DASH


def metric_value(value: float | None, metric: str) -> str:
    """A value formatted by the unit its metric name carries (_us, _bytes, shares, a relative
    `_change`); a metric whose name carries no unit is a count (mismatching keys, blocked
    requests), printed whole: never "1.00" keys."""
    if metric.endswith("_us"):
        return duration(value)
    if metric.endswith("_bytes"):
        return size(value)
    if metric.startswith("quality"):
        return DASH if value is None else f"{value:g}"  # a score as its record states it
    if metric.endswith("_change"):
        return signed_pct(value)
    if any(k in metric for k in ("share", "ape", "rate", "gain", "error", "regret", "accuracy")):
        return pct(value)
    return num(value)


def pct_whole(x: float | None) -> str:
    """A share in whole percent: 0.654 -> 65%."""
    return pct(x, 0)


def index(x: float | None) -> str:
    """An index in [0, 1] to three places (Jain's index)."""
    return ratio(x, 3)


def num1(x: float | None) -> str:
    """A rate to one decimal place."""
    return num(x, 1)


def num2(x: float | None) -> str:
    """A rate to two decimal places."""
    return num(x, 2)


def plural_word(n: int, noun: str) -> str:
    """`noun` for one, `nouns` for any other count."""
    return noun if n == 1 else noun + "s"


def plural(n: int, noun: str) -> str:
    """`1 action`, `8 actions`, `1,204 requests`."""
    return f"{n:,} {plural_word(n, noun)}"


def quantile(q: float | None) -> str:
    """A quantile as its percentile's number: 0.5 -> 50, 0.999 -> 99.9."""
    return "–" if q is None else f"{q * 100:g}"


def clock(us: float | None) -> str:
    """A wall-clock time (us since the epoch) in UTC, to the second."""
    if us is None or missing(us):
        return "–"
    from datetime import UTC, datetime

    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def sort_value(x: float | int | None) -> str:
    """A number for a sortable cell's data-sort ('' when missing: it sorts as text)."""
    return "" if x is None or missing(x) else repr(x)


FILTERS: dict[str, Callable[..., str]] = {
    "sort_value": sort_value,
    "quantile": quantile,
    "clock": clock,
    "plural": plural,
    "pct_whole": pct_whole,
    "p_value": p_value,
    "index": index,
    "num1": num1,
    "num2": num2,
    "bytes": size,
    "metric_value": metric_value,
    "duration": duration,
    "duration_ms": duration_ms,
    "pct": pct,
    "signed_pct": signed_pct,
    "ci": ci,
    "num": num,
    "ratio": ratio,
}
