"""Prometheus text exposition (version 0.0.4), as Triton's, vLLM's or TGI's `/metrics` serve it:
one scrape per file, or a series of scrapes as a scraper or `curl` in a loop writes them, into
`metric_sample`.

Parsing is `prometheus_client`'s text parser, one metric family block at a time, so a broken
line costs only its block and every sample keeps its line. A new scrape starts at a comment
line holding only a time (`# 2026-11-30T02:00:00Z`, `# 1764468000.5`, `# scrape_time=...`, as
`echo "# $(date -u +%FT%TZ)"` writes it before each `curl`), or where a family already seen in
the scrape appears again (its time then unknown). A sample's own timestamp (milliseconds, as
federation writes it) dates it; otherwise its scrape's time does. Samples named like none of
their block's declared family (the `# TYPE` line names another metric, the published Triton
histogram example) are rejected, never read as untyped series. The workload is a sample's
`model` or `model_name` label (`--workload` overrides); server-wide samples (GPU, process) have
workload "". Values stay in the metric's own unit; NaN (a summary with no observations) is null.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.base import Head
from mapreport.ingest.records import LONG_LINE, TRUNCATED, bounded_lines, open_bytes

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from mapreport.ingest.sink import Sink

WORKLOAD_LABELS = ("model", "model_name")
"""Labels naming the model a sample measures (Triton: `model`; vLLM, TGI: `model_name`)."""
SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("_sum", "_count", "_created"),
    "info": ("_info",),
}
"""The series names a declared family's samples may have besides its own name."""
BLOCK_LINES = 10_000
"""Sample lines parsed at a time (a family's samples beyond it are parsed in further parts)."""
SNIFF_BYTES = 65536
"""What `read_head` gives sniffing: a head this long may end inside a line."""
MAX_SCRAPES = 1_000_000
"""Scrapes in one file at most (an int32 ordinal, and a bound on a file's bookkeeping)."""

_DIRECTIVE = re.compile(rb"#\s*(HELP|TYPE|UNIT)\s+(\S+)")
_TIME_MARK = re.compile(
    r"#\s*(?:scrape(?:d)?(?:[ _](?:time|at))?\s*[:=]?\s*)?"
    r"(\d{4}-\d\d-\d\d[T ][0-9:.]+(?:Z|[+-]\d\d:?\d\d)?|\d{9,11}(?:\.\d+)?)\s*$"
)
_FIRST = re.compile(rb"\s*(#|[A-Za-z_:][A-Za-z0-9_:]*[{ ])")


def scrape_time_us(comment: str) -> float | None:
    """The time (µs since the epoch, UTC) a comment line marks a scrape with, else None."""
    m = _TIME_MARK.fullmatch(comment.strip())
    if m is None:
        return None
    text = m.group(1)
    if text[0:4].isdigit() and "-" in text:
        try:
            t = datetime.fromisoformat(text)
        except ValueError:
            return None
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        return t.timestamp() * 1e6
    return float(text) * 1e6


class _Block(msgspec.Struct):
    """One family's lines: its HELP/TYPE comments and samples, with their line numbers."""

    name: str | None = None
    lines: list[tuple[int, str]] = msgspec.field(default_factory=list)


class _Scrape(msgspec.Struct):
    index: int = 0
    time_us: float | None = None
    seen: set[str] = msgspec.field(default_factory=set)


class PrometheusReader:
    """Prometheus text exposition: scrapes of `/metrics` as time series."""

    name = "prometheus"
    summary = (
        "Prometheus text exposition (/metrics of Triton, vLLM, TGI): one scrape or a series, "
        "counters, gauges, histograms and summaries as time series"
    )
    tables = ("metric_sample",)
    default_policy: ErrorPolicy = "quarantine"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """Text that starts with a comment or a sample line, whose first sample line
        parses as one; without a HELP/TYPE comment every sample line of the head must parse
        (plain text such as `name value` alone is not enough)."""
        data = head.data.lstrip()
        if not data or _FIRST.match(data) is None:
            return False
        lines = data.split(b"\n")[:-1] if len(head.data) >= SNIFF_BYTES else data.split(b"\n")
        samples = [ln.strip() for ln in lines[:200] if ln.strip() and not ln.startswith(b"#")]
        if not samples:
            return _DIRECTIVE.match(data) is not None
        typed = any(_DIRECTIVE.match(ln.strip()) for ln in lines[:200])
        checked = samples[:1] if typed else samples
        return all(_parses(ln.decode("utf-8", "replace")) for ln in checked)

    def read(self, path: Path, sink: Sink) -> None:
        """One metric_sample row per sample line."""
        scrape = _Scrape()
        block = _Block()
        with open_bytes(path) as fh:
            try:
                for lineno, raw in bounded_lines(fh):
                    if raw is None:
                        sink.reject(lineno, None, LONG_LINE, b"")
                        continue
                    text = raw.decode("utf-8", "surrogateescape").strip()
                    if not text:
                        continue
                    if _is_comment(text):
                        mark = scrape_time_us(text)
                        directive = _DIRECTIVE.match(raw.strip())
                        if mark is not None:
                            self._flush(sink, block, scrape)
                            block = _Block()
                            scrape = self._next(path, lineno, scrape, mark)
                            continue
                        if directive is None:
                            continue  # a comment
                        name = directive.group(2).decode("utf-8", "replace")
                        if name != block.name:
                            self._flush(sink, block, scrape)
                            if name in scrape.seen:  # the family again: the next scrape
                                scrape = self._next(path, lineno, scrape, None)
                            block = _Block(name)
                            scrape.seen.add(name)
                    block.lines.append((lineno, text))
                    if len(block.lines) >= BLOCK_LINES:
                        # a family of a million samples is parsed in parts, each under its
                        # HELP/TYPE lines, so memory stays bounded by the part
                        self._flush(sink, block, scrape)
                        block = _Block(block.name, [x for x in block.lines if _is_comment(x[1])])
            except (EOFError, zlib.error, gzip.BadGzipFile):
                self._flush(sink, block, scrape)  # what came before the break is kept
                sink.reject(None, None, TRUNCATED, b"")
                return
        self._flush(sink, block, scrape)

    @staticmethod
    def _next(path: Path, line: int, scrape: _Scrape, time_us: float | None) -> _Scrape:
        if scrape.index + 1 >= MAX_SCRAPES:
            raise InputError(path, line, None, f"more than {MAX_SCRAPES} scrapes in one file")
        first = not scrape.seen and scrape.index == 0
        return _Scrape(0 if first else scrape.index + 1, time_us)

    def _flush(self, sink: Sink, block: _Block, scrape: _Scrape) -> None:
        """Parse one block and add its samples. When it does not parse, each line is tried
        alone once: the bad ones are rejected by their line and the rest parsed again; lines
        that parse alone but not together are each rejected with the parser's reason."""
        lines = block.lines
        if not _has_samples(lines):
            return
        try:
            families = _parse("\n".join(t for _, t in lines) + "\n")
        except ValueError:
            good = []
            for ln, text in lines:
                if _is_comment(text) or _parses(text):
                    good.append((ln, text))
                else:
                    sink.reject(ln, _sample_name(text), "not a valid sample line", text)
            if not _has_samples(good):
                return
            try:
                families = _parse("\n".join(t for _, t in good) + "\n")
            except ValueError as e:
                why = f"metric family {block.name or ''} does not parse: {e}"[:200]
                for ln, text in good:
                    if not _is_comment(text):
                        sink.reject(ln, _sample_name(text), why, text)
                return
            lines = good
        self._add(sink, lines, families, scrape)

    @staticmethod
    def _add(
        sink: Sink, lines: list[tuple[int, str]], families: list[Metric], scrape: _Scrape
    ) -> None:
        numbers = [ln for ln, t in lines if not _is_comment(t)]
        texts = dict(lines)
        samples = [(f, s) for f in families for s in f.samples]
        if len(samples) != len(numbers):  # the parser merged or split lines: no line numbers
            numbers = [None] * len(samples)  # type: ignore[list-item]
        # a declared family with no samples of its own, followed by samples of other names:
        # its # TYPE line names another metric than they do (the published Triton histogram
        # example). After a family that has samples, other names are plain untyped series.
        declared = next((f for f in families if f.type != "unknown" and not f.samples), None)
        for (family, s), line in zip(samples, numbers, strict=True):
            kind = family.type
            name = family.name
            if declared is not None and family is not declared:
                if not _belongs(s.name, declared.name, declared.type):
                    why = (
                        f"sample {s.name} does not belong to the {declared.type} "
                        f"{declared.name} its # TYPE line declares"
                    )
                    sink.reject(line, s.name, why, texts.get(line, ""))
                    continue
                kind, name = declared.type, declared.name
            labels = dict(s.labels)
            le = labels.pop("le", None) if kind in ("histogram", "gaugehistogram") else None
            quantile = labels.pop("quantile", None) if kind == "summary" else None
            bound = _bound(le)
            q = _bound(quantile)
            if (le is not None and bound is None and le != "+Inf") or (
                quantile is not None and (q is None or not 0 <= q <= 1)
            ):
                if le is not None and bound is None:
                    what, why = "le", f"not a number: {le!r}"
                elif q is None:
                    what, why = "quantile", f"not a finite number: {quantile!r}"
                else:
                    what, why = "quantile", f"{quantile!r} is not between 0 and 1"
                sink.reject(line, what, why, texts.get(line, ""))
                continue
            workload = sink.hints.get("workload") or next(
                (labels[k] for k in WORKLOAD_LABELS if labels.get(k)), ""
            )
            value = float(s.value)
            at = s.timestamp
            sink.add(
                "metric_sample",
                line,
                {
                    "workload": workload,
                    "slice": sink.hints.get("slice", ""),
                    "scrape": scrape.index,
                    "scrape_us": float(at) * 1e6 if at is not None else scrape.time_us,
                    "metric": name,
                    "sample": _sample_name(texts.get(line, "")) or s.name,
                    "type": kind,
                    "labels": msgspec.json.encode(labels, order="sorted").decode()
                    if labels
                    else None,
                    "le": bound,
                    "quantile": q,
                    "value": None if math.isnan(value) else value,
                    "extra": None,
                },
            )


def _parse(text: str) -> list[Metric]:
    from prometheus_client.parser import text_string_to_metric_families

    return list(text_string_to_metric_families(text))


def _parses(line: str) -> bool:
    try:
        _parse(line + "\n")
    except ValueError:
        return False
    return True


def _belongs(sample: str, family: str, kind: str) -> bool:
    return sample == family or any(sample == family + s for s in SUFFIXES.get(kind, ()))


def _bound(text: str | None) -> float | None:
    """A bucket bound or quantile as a float; None for +Inf, a missing or a broken one."""
    if text is None or text in ("+Inf", "Inf"):
        return None
    try:
        out = float(text)
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def _is_comment(text: str) -> bool:
    """A comment line (HELP, TYPE, a scrape mark or free text), of a stripped line."""
    return text[:1] == "#"


def _has_samples(lines: list[tuple[int, str]]) -> bool:
    """Any of the (line number, text) lines is a sample line."""
    return any(not _is_comment(t) for _, t in lines)


def _sample_name(text: str) -> str | None:
    m = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", text)
    return m.group(0) if m else None
