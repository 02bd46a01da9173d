"""Token timing of generative requests per shape (sequence-length bucket): time to first token
and mean inter-token latency, as the client measured them (AIPerf), with the sequence lengths
each shape's requests had."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mapreport.analysis.base.common import Percentiles
from mapreport.analysis.base.query import ShapeRow
from mapreport.analysis.base.slicestats import SliceTotals
from mapreport.core.shapes import sort_key


class TokenTiming(msgspec.Struct, frozen=True):
    """One shape's time to first token and inter-token latency (ok requests)."""

    shape: str
    ttft: Percentiles
    itl: Percentiles
    input_tokens_p50: float | None
    output_tokens_p50: float | None


def token_timing(rows: Sequence[ShapeRow]) -> tuple[TokenTiming, ...]:
    """Of the slice's per-shape rows: per shape with token timing, its TTFT and ITL
    p50/p95/p99 (ok requests)."""
    out = [
        TokenTiming(r.shape, r.ttft, r.itl, r.input_tokens_p50, r.output_tokens_p50)
        for r in rows
        if r.ttft.n or r.itl.n
    ]
    return tuple(sorted(out, key=lambda t: sort_key(t.shape)))


class TokenRate(msgspec.Struct, frozen=True):
    """The slice's generation throughput: output tokens of its ok requests over the time from
    the first arrival to the last completion."""

    requests: int
    output_tokens: int
    window_s: float
    tokens_per_s: float


def token_rate(t: SliceTotals) -> TokenRate | None:
    """Of the slice's totals: output tokens per second (None without output token counts or
    with a window of no length)."""
    first, last = t.token_first_us, t.token_last_us
    if not t.token_requests or t.output_tokens is None or first is None or last is None:
        return None
    window = (last - first) / 1e6
    if window <= 0:
        return None
    return TokenRate(t.token_requests, t.output_tokens, window, t.output_tokens / window)
