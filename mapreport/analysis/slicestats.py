"""The aggregates of a loaded slice's requests (`query.load_slice`) that several families read,
each computed once, one statement per grain (issue 38).

The per-shape figures and the per-(shape, core) compute medians are tables of the loaded slice
(`query.SHAPE_STATS`, `query.CORE_STATS`: an evidence pack defines them as CTEs of the same
text). The slice-wide figures are `SliceTotals`: the request counts, the latency quantiles, the
window and the token totals, from which the slice's latency, its token rate and the batch
throughputs follow without another scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mapreport.analysis.common import Percentiles
from mapreport.analysis.query import QS, SLICE_TABLE, pct_of
from mapreport.core.connection import Connection

_TOTALS = f"""
    SELECT count(*), count(*) FILTER (WHERE status = 'ok'),
        quantile_cont(latency_us, {QS}) FILTER (WHERE status = 'ok'),
        min(arrival_us), max(compute_end_us),
        count(*) FILTER (WHERE status = 'ok' AND output_tokens IS NOT NULL),
        sum(output_tokens) FILTER (WHERE status = 'ok'),
        min(arrival_us) FILTER (WHERE status = 'ok' AND output_tokens IS NOT NULL),
        max(compute_end_us) FILTER (WHERE status = 'ok' AND output_tokens IS NOT NULL)
    FROM {SLICE_TABLE}
"""


@dataclass(frozen=True)
class SliceTotals:
    """The loaded slice's requests, every shape together."""

    requests: int
    ok: int
    latency: Percentiles
    """p50/p95/p99 of ok requests' end-to-end latency."""
    first_arrival_us: float | None
    last_end_us: float | None
    """The window: the first arrival and the last completion of any request."""
    token_requests: int
    """Ok requests that state their output tokens."""
    output_tokens: int | None
    token_first_us: float | None
    token_last_us: float | None
    """The window of the ok requests that state their output tokens."""

    @property
    def window_s(self) -> float | None:
        """The window in seconds (None without requests)."""
        if self.first_arrival_us is None or self.last_end_us is None:
            return None
        return (float(self.last_end_us) - float(self.first_arrival_us)) / 1e6


def slice_totals(con: Connection) -> SliceTotals:
    """The loaded slice's totals, in one scan."""
    row = con.execute(_TOTALS).fetchall()[0]
    n_total, n, lat, t0, t1, n_tok, tokens, tok0, tok1 = row
    return SliceTotals(
        requests=int(n_total),
        ok=int(n),
        latency=pct_of(int(n), lat),
        first_arrival_us=None if t0 is None else float(t0),
        last_end_us=None if t1 is None else float(t1),
        token_requests=int(n_tok),
        output_tokens=None if tokens is None else int(tokens),
        token_first_us=None if tok0 is None else float(tok0),
        token_last_us=None if tok1 is None else float(tok1),
    )


def slice_latency(t: SliceTotals) -> dict[str, Any]:
    """The slice's request counts, time window and latency percentiles (ok requests)."""
    return {
        "requests": t.requests,
        "failed": t.requests - t.ok,
        "latency": t.latency,
        "window": (t.first_arrival_us, t.last_end_us),
    }
