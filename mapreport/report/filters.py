"""Jinja filters: every number in a report is formatted here, never in a template."""

from __future__ import annotations

from collections.abc import Callable

from mapreport.analysis.results import Evidence, Interval
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
    """A value formatted by the unit its metric name carries (_us, _bytes, shares)."""
    if metric.endswith("_us"):
        return duration(value)
    if metric.endswith("_bytes"):
        return size(value)
    if any(k in metric for k in ("share", "ape", "rate", "gain", "error")):
        return pct(value)
    return num(value, 2) if isinstance(value, float) else num(value)


def evidence(e: Evidence | None) -> str:
    """What a finding rests on: metric, value, CI, n and the files (source ids)."""
    if e is None:
        return DASH
    parts = [f"{e.metric} = {metric_value(e.value, e.metric)}"]
    if e.ci is not None:
        parts.append(
            f"95% CI {ci(e.ci)}"
            if "gain" in e.metric or "error" in e.metric or e.metric == "ape"
            else f"95% CI [{pct(e.ci.low)}, {pct(e.ci.high)}]"
        )
    if e.n:
        parts.append(f"n = {e.n:,}")
    if e.note:
        parts.append(e.note)
    if e.sources:
        parts.append("files " + ", ".join(s[:8] for s in e.sources))
    return "; ".join(parts)


FILTERS: dict[str, Callable[..., str]] = {
    "bytes": size,
    "metric_value": metric_value,
    "evidence": evidence,
    "duration": duration,
    "pct": pct,
    "signed_pct": signed_pct,
    "ci": ci,
    "num": num,
    "ratio": ratio,
    "label": label,
}
