"""OpenTelemetry OTLP/JSON, as the collector's file exporter writes it (one `TracesData` or
`MetricsData` per line) or as one document (the protocol's examples):

- spans: Triton's OpenTelemetry mode (a span named after the model with `triton.model_name`,
  `triton.model_version`, `triton.trace_id`, `triton.trace_parent_id`, events REQUEST_START,
  QUEUE_START, REQUEST_END; a child span `compute` with COMPUTE_START ... COMPUTE_END; the
  root span's events) becomes one `request` per model span, as a Triton trace file does
  (`triton_trace.emit_request`; a composing model's span under an ensemble's is its child).
  Every other span goes to `op_exec`: name, start, duration, the span kind as category; trace,
  span and parent ids, status, service, scope and attributes in `extra`. The workload is
  `--workload`, else the resource's `service.name`, else the file's name up to its first dot.
- metrics: sums, gauges, histograms, exponential histograms and summaries go to
  `metric_sample`, one row per data point value, at the point's `timeUnixNano`; each
  `MetricsData` is one scrape. A monotonic cumulative sum is a `counter`, a delta one a
  `delta_counter` (a non-monotonic sum is a `gauge`); explicit-bound histograms become
  cumulative `_bucket` rows (`le` the bound, null for +Inf) with `_sum` and `_count`, delta ones
  typed `delta_histogram`; an exponential histogram's buckets become the same rows at bounds
  base^(index + 1), base = 2^(2^-scale), its zero bucket at the zero threshold. Attributes
  (and the resource's) are the labels; a `model` or `model_name` attribute names the workload.

Ids are hex strings; 64-bit integers may be JSON strings (the protobuf JSON mapping).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text, read_document
from mapreport.ingest.records import TRUNCATED, JsonDecoder, open_bytes
from mapreport.ingest.spec import FieldError
from mapreport.ingest.triton_trace import Trace, emit_request

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

MAX_LINE_BYTES = 64 << 20
"""One exported batch (a line) at most: the collector writes a batch of spans per line."""
WORKLOAD_ATTRIBUTES = ("model", "model_name", "triton.model_name")
KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
CUMULATIVE = 2
_FIRST = re.compile(rb'\s*\{\s*"(resourceSpans|resourceMetrics)"')
_DECODE: JsonDecoder[Any] = JsonDecoder()


def any_value(v: Any) -> Any:
    """An OTLP AnyValue (`{"stringValue": ...}`, `{"intValue": "5"}`, arrays, kv lists) as a
    plain JSON value."""
    if not isinstance(v, dict) or len(v) != 1:
        return v
    ((kind, value),) = v.items()
    if kind == "intValue":
        return _int(value, "intValue")
    if kind == "arrayValue":
        return [any_value(x) for x in (value or {}).get("values", [])]
    if kind == "kvlistValue":
        return attributes((value or {}).get("values", []))
    return value


def attributes(kvs: Any) -> dict[str, Any]:
    """`[{"key", "value": AnyValue}, ...]` -> {key: value}."""
    out: dict[str, Any] = {}
    for kv in kvs if isinstance(kvs, list) else []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = any_value(kv.get("value"))
    return out


def _int(value: Any, name: str) -> int:
    """A 64-bit integer, as a JSON number or a decimal string."""
    if isinstance(value, bool):
        raise FieldError(name, f"expected an integer, got {value!r}")
    if isinstance(value, int):
        out = value
    elif isinstance(value, str) and value.isascii() and value.lstrip("-").isdigit():
        out = int(value)
    else:
        raise FieldError(name, f"expected an integer, got {value!r}"[:120])
    if not -(2**63) <= out < 2**64:
        raise FieldError(name, f"out of range: {value!r}"[:120])
    return out


def _ns(value: Any, name: str) -> int:
    out = _int(value, name)
    if out <= 0:
        raise FieldError(name, f"must be a positive time in ns since the epoch, got {value!r}")
    return out


def _number(point: dict[str, Any], name: str) -> float | None:
    """A data point's value (`asDouble` or `asInt`); None when it has none (NaN too)."""
    if "asInt" in point:
        return float(_int(point["asInt"], f"{name}.asInt"))
    value = point.get("asDouble")
    if value is None or (isinstance(value, str) and value == "NaN"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(f"{name}.asDouble", f"expected a number, got {value!r}"[:120])
    return None if math.isnan(value) else float(value)


def documents(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, decoded document) of an OTLP/JSON file: each line of a JSON Lines export, or the
    file as one document when its first line is not one whole."""
    with open_bytes(path) as fh:
        first = fh.readline(MAX_LINE_BYTES + 1)
    try:
        whole_line = _DECODE.decode(first) if first.strip() else None
    except msgspec.DecodeError:
        whole_line = None
    if not isinstance(whole_line, dict):
        doc, _ = read_document(path)
        yield 1, doc
        return
    lineno = 0
    with open_bytes(path) as fh:
        try:
            while raw := fh.readline(MAX_LINE_BYTES + 1):
                lineno += 1
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    raise InputError(path, lineno, None, f"line longer than {MAX_LINE_BYTES} bytes")
                if not raw.strip():
                    continue
                try:
                    yield lineno, _DECODE.decode(raw)
                except msgspec.DecodeError as e:
                    raise InputError(path, lineno, None, f"invalid JSON: {e}") from None
        except EOFError:
            raise InputError(path, lineno + 1, None, TRUNCATED) from None


class OtlpReader:
    """OpenTelemetry OTLP/JSON traces and metrics."""

    name = "otlp"
    summary = (
        "OpenTelemetry OTLP/JSON (collector file exporter): spans as profiled ops, Triton's "
        "OpenTelemetry traces as requests, metrics as time series"
    )
    tables = ("request", "op_exec", "metric_sample")
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON object whose first key is `resourceSpans` or `resourceMetrics`."""
        return _FIRST.match(head.data) is not None

    def read(self, path: Path, sink: Sink) -> None:
        """Every span and data point of every exported batch."""
        unnamed = path.name.split(".")[0]
        for scrape, (line, doc) in enumerate(documents(path)):
            if not isinstance(doc, dict):
                sink.reject(line, None, "not a TracesData or MetricsData object", doc)
                continue
            try:
                if "resourceSpans" in doc:
                    _spans(sink, line, doc["resourceSpans"], unnamed)
                if "resourceMetrics" in doc:
                    _metrics(sink, line, scrape, doc["resourceMetrics"])
            except FieldError as e:
                sink.reject(line, e.field, e.reason, json_text(doc) or "")


def _spans(sink: Sink, line: int, resource_spans: Any, unnamed: str) -> None:
    """One batch's spans: Triton request spans as requests, every other span as an op."""
    spans: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (span, its resource attributes)
    for rs in _list(resource_spans, "resourceSpans"):
        resource = attributes((rs.get("resource") or {}).get("attributes"))
        for ss in _list(rs.get("scopeSpans"), "scopeSpans"):
            scope = ss.get("scope") or {}
            for span in _list(ss.get("spans"), "spans"):
                spans.append(({**span, "_scope": scope.get("name")}, resource))
    by_id = {str(s.get("spanId")): s for s, _ in spans}
    used: set[str] = set()
    requests: dict[str, Trace] = {}
    parent_of: dict[str, str] = {}
    for span, _ in spans:
        attrs = attributes(span.get("attributes"))
        if not attrs.get("triton.model_name"):
            continue
        sid = str(span.get("spanId"))
        t = Trace(line)
        t.meta = {
            "model_name": attrs["triton.model_name"],
            "model_version": attrs.get("triton.model_version"),
            "request_id": attrs.get("triton.request_id") or None,
        }
        _events(span, t)
        root = by_id.get(str(span.get("parentSpanId")))
        while root is not None and not attributes(root.get("attributes")).get("triton.model_name"):
            _events(root, t)  # the root span's HTTP/GRPC events
            used.add(str(root.get("spanId")))
            root = by_id.get(str(root.get("parentSpanId")))
        if root is not None:
            parent_of[sid] = str(root.get("spanId"))
        requests[sid] = t
        used.add(sid)
    for span, _ in spans:
        parent = str(span.get("parentSpanId"))
        if span.get("name") == "compute" and parent in requests:
            _events(span, requests[parent])
            used.add(str(span.get("spanId")))
    children: dict[str, list[Trace]] = {}
    for sid, parent in parent_of.items():
        children.setdefault(parent, []).append(requests[sid])
    for sid, t in requests.items():
        rid = t.meta.get("request_id") or sid
        emit_request(sink, str(rid), t, children.get(sid, []), unnamed)
    for span, resource in spans:
        if str(span.get("spanId")) not in used:
            _op(sink, line, span, resource, unnamed)


def _events(span: dict[str, Any], t: Trace) -> None:
    for ev in span.get("events") or []:
        if isinstance(ev, dict) and isinstance(ev.get("name"), str):
            t.stamps.setdefault(ev["name"].upper(), _ns(ev.get("timeUnixNano"), "timeUnixNano"))


def _op(
    sink: Sink, line: int, span: dict[str, Any], resource: dict[str, Any], unnamed: str
) -> None:
    name = span.get("name")
    if not isinstance(name, str) or not name:
        sink.reject(line, "name", "span has no name", span)
        return
    try:
        start = _ns(span.get("startTimeUnixNano"), "startTimeUnixNano")
        end = _ns(span.get("endTimeUnixNano"), "endTimeUnixNano")
    except FieldError as e:
        sink.reject(line, e.field, f"span {name!r}: {e.reason}", span)
        return
    if end < start:
        sink.reject(line, "endTimeUnixNano", f"span {name!r} ends before it starts", span)
        return
    service = resource.get("service.name")
    kind = span.get("kind")
    sink.add(
        "op_exec",
        line,
        {
            "workload": sink.hints.get("workload") or (str(service) if service else unnamed),
            "slice": sink.hints.get("slice", ""),
            "name": name,
            "category": KINDS.get(kind, str(kind)) if kind is not None else None,
            "ts_us": start / 1000,  # int / int: exact to the microsecond; 1e3 would not be
            "dur_us": (end - start) / 1000,
            "extra": json_text(
                {
                    "trace_id": span.get("traceId"),
                    "span_id": span.get("spanId"),
                    "parent_span_id": span.get("parentSpanId") or None,
                    "status": span.get("status") or None,
                    "service": service,
                    "scope": span.get("_scope"),
                    "resource": {k: v for k, v in resource.items() if k != "service.name"} or None,
                    "attributes": attributes(span.get("attributes")) or None,
                    "events": len(span.get("events") or []) or None,
                }
            ),
        },
    )


def _metrics(sink: Sink, line: int, scrape: int, resource_metrics: Any) -> None:
    for rm in _list(resource_metrics, "resourceMetrics"):
        resource = attributes((rm.get("resource") or {}).get("attributes"))
        for sm in _list(rm.get("scopeMetrics"), "scopeMetrics"):
            for metric in _list(sm.get("metrics"), "metrics"):
                _metric(sink, line, scrape, metric, resource)


def _metric(
    sink: Sink, line: int, scrape: int, metric: dict[str, Any], resource: dict[str, Any]
) -> None:
    name = metric.get("name")
    if not isinstance(name, str) or not name:
        sink.reject(line, "name", "metric has no name", metric)
        return
    for kind in ("sum", "gauge", "histogram", "exponentialHistogram", "summary"):
        body = metric.get(kind)
        if not isinstance(body, dict):
            continue
        for point in _list(body.get("dataPoints"), f"{name}.dataPoints"):
            try:
                rows = list(_point_rows(name, kind, body, point))
                at = _ns(point.get("timeUnixNano"), f"{name}.timeUnixNano") / 1000
            except FieldError as e:
                sink.reject(line, e.field, f"metric {name!r}: {e.reason}", point)
                continue
            labels = {**resource, **attributes(point.get("attributes"))}
            workload = sink.hints.get("workload") or next(
                (str(labels[k]) for k in WORKLOAD_ATTRIBUTES if labels.get(k)), ""
            )
            text = msgspec.json.encode(labels, order="sorted").decode() if labels else None
            for sample, type_, le, quantile, value in rows:
                sink.add(
                    "metric_sample",
                    line,
                    {
                        "workload": workload,
                        "slice": sink.hints.get("slice", ""),
                        "scrape": scrape,
                        "scrape_us": at,
                        "metric": name,
                        "sample": sample,
                        "type": type_,
                        "labels": text,
                        "le": le,
                        "quantile": quantile,
                        "value": value,
                        "extra": json_text({"unit": metric.get("unit") or None}),
                    },
                )
        return
    sink.reject(line, name, "metric has no sum, gauge, histogram or summary", metric)


Row = tuple[str, str, float | None, float | None, float | None]
"""(sample name, type, le, quantile, value) of one metric_sample row."""


def _point_rows(name: str, kind: str, body: dict[str, Any], point: Any) -> Iterator[Row]:
    if not isinstance(point, dict):
        raise FieldError(f"{name}.dataPoints", "data point is not an object")
    cumulative = body.get("aggregationTemporality", CUMULATIVE) == CUMULATIVE
    if kind == "gauge" or (kind == "sum" and not body.get("isMonotonic")):
        yield name, "gauge", None, None, _number(point, name)
    elif kind == "sum":
        yield name, "counter" if cumulative else "delta_counter", None, None, _number(point, name)
    elif kind == "summary":
        for q in _list(point.get("quantileValues") or [], f"{name}.quantileValues"):
            yield name, "summary", None, float(q.get("quantile", 0.0)), _float(q.get("value"))
        yield f"{name}_sum", "summary", None, None, _float(point.get("sum"))
        yield f"{name}_count", "summary", None, None, float(_int(point.get("count", 0), "count"))
    else:
        type_ = "histogram" if cumulative else "delta_histogram"
        bounds, counts = _buckets(name, kind, point)
        running = 0
        for bound, c in zip(bounds, counts, strict=True):
            running += c
            yield f"{name}_bucket", type_, bound, None, float(running)
        if "sum" in point:
            yield f"{name}_sum", type_, None, None, _float(point.get("sum"))
        total = _int(point.get("count", running), f"{name}.count")
        if total != running:
            raise FieldError(f"{name}.count", f"count {total} but the buckets hold {running}")
        yield f"{name}_count", type_, None, None, float(total)


def _buckets(name: str, kind: str, point: dict[str, Any]) -> tuple[list[float | None], list[int]]:
    """A histogram point's upper bounds (None: +Inf) and per-bucket counts."""
    if kind == "histogram":
        counts = [_int(c, f"{name}.bucketCounts") for c in point.get("bucketCounts") or []]
        bounds: list[float | None] = [_float(b) for b in point.get("explicitBounds") or []]
        if counts and len(counts) != len(bounds) + 1:
            raise FieldError(f"{name}.bucketCounts", "must have one more entry than the bounds")
        return [*bounds, None][: len(counts)], counts
    scale = _int(point.get("scale", 0), f"{name}.scale")
    if not -10 <= scale <= 20:
        raise FieldError(f"{name}.scale", f"out of range: {scale}")
    base = 2.0 ** (2.0**-scale)
    zero = _int(point.get("zeroCount", 0), f"{name}.zeroCount")
    threshold = _float(point.get("zeroThreshold", 0.0)) or 0.0
    negative = point.get("negative") or {}
    if any(_int(c, f"{name}.negative") for c in negative.get("bucketCounts") or []):
        raise FieldError(f"{name}.negative", "negative values are not read (latencies, sizes)")
    positive = point.get("positive") or {}
    offset = _int(positive.get("offset", 0), f"{name}.positive.offset")
    pos = [_int(c, f"{name}.positive.bucketCounts") for c in positive.get("bucketCounts") or []]
    out_bounds: list[float | None] = [threshold]
    out_counts = [zero]
    for i, c in enumerate(pos):
        out_bounds.append(base ** (offset + i + 1))
        out_counts.append(c)
    out_bounds.append(None)
    out_counts.append(0)
    return out_bounds, out_counts


def _float(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError("value", f"expected a number, got {value!r}"[:120])
    return float(value)


def _list(value: Any, name: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise FieldError(name, "must be a list of objects")
    return value
