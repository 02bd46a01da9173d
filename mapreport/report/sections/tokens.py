"""Token latency per shape: time to first token and inter-token latency of a served LLM's
requests, and its output tokens per second (an AIPerf profile export)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.mapping.tokens import TokenRate, TokenTiming
from mapreport.report.sections.unit import Facts, Section, same


class TokensView(msgspec.Struct, frozen=True):
    """Each shape's token timing, the slice's token rate, and how the client timed them."""

    tokens: tuple[TokenTiming, ...]
    rate: TokenRate | None
    thresholds: Thresholds
    """The evidence thresholds below which a p95 or p99 is greyed."""
    client_side: bool
    """The latency was timed by the client: network and queue are in it, inseparable."""


class Fragment(msgspec.Struct):
    """findings.json `token_timing` (empty without it) and `token_rate` (null without it)."""

    token_timing: tuple[TokenTiming, ...]
    token_rate: TokenRate | None


def read(f: Facts) -> TokensView:
    """The token timing, and whether the server's queue and compute split is missing."""
    r = f.r
    client = any(m.queue.n == 0 and m.latency.n > 0 for m in r.shapes) and bool(r.serving.tokens)
    return TokensView(r.serving.tokens, r.serving.token_rate, r.thresholds, client)


def fragment(v: TokensView) -> Fragment:
    """The token timing and rate as they are."""
    return Fragment(v.tokens, v.rate)


SECTION = Section(
    "tokens",
    "Token latency per shape",
    read,
    same,
    fragment,
    has=lambda v: bool(v.tokens),
    missing="no token timing; an AIPerf profile export adds time to first token and ITL",
)
