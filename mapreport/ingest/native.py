"""The native formats of FORMATS.md: compile profile, runtime telemetry and quality evidence.

Each record kind declares its fields as data (`native_spec.py`); the readers only add the
cross-field rules of the format (timestamp order, event kinds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.core.schema import ENVIRONMENT_KEYS
from mapreport.ingest.base import Head
from mapreport.ingest.native_spec import COMPILE, EVENT, QUALITY, REQUEST
from mapreport.ingest.records import (
    BadRecord,
    Container,
    JsonDecoder,
    container_of,
    csv_header,
    head_bytes,
    iter_records,
    parquet_columns,
)
from mapreport.ingest.spec import FieldError, convert_record

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink


def environment_row(side: str, env: Any) -> dict[str, Any]:
    """Canonical environment row from an environment object; unknown keys go to `extra`."""
    if not isinstance(env, Mapping):
        raise FieldError("environment", "must be an object")
    row: dict[str, Any] = {"side": side}
    for key in ENVIRONMENT_KEYS:
        value = env.get(key)
        if value is not None and not isinstance(value, str | int | float):
            raise FieldError(f"environment.{key}", "must be a string or a number")
        row[key] = None if value is None else str(value)
    unknown = {k: v for k, v in env.items() if k not in ENVIRONMENT_KEYS}
    row["extra"] = msgspec.json.encode(unknown, order="sorted").decode() if unknown else None
    return row


_ANY: JsonDecoder[Any] = JsonDecoder()


@lru_cache(maxsize=4)
def _first_record(head: Head) -> tuple[Container | None, dict[str, Any] | None]:
    """The container and the first data record (skipping an environment line) of a file."""
    container = container_of(head.path, head.data)
    if container == "jsonl":
        for raw in head.data.split(b"\n")[:3]:
            try:
                rec = _ANY.decode(raw)
            except msgspec.DecodeError:
                continue
            if isinstance(rec, dict) and not (len(rec) == 1 and "environment" in rec):
                return container, rec
        return container, None
    if container == "csv":
        return container, dict.fromkeys(csv_header(head.path), "")
    if container == "parquet":
        return container, dict.fromkeys(parquet_columns(head.path), None)
    return None, None


def _normalise(rec: dict[str, Any]) -> dict[str, Any]:
    """Turn an all-null CSV/Parquet cell set into the sparse form JSON records have."""
    return {k: v for k, v in rec.items() if v is not None and v != ""}


class NativeReader(msgspec.Struct, frozen=True):
    """A native JSONL/CSV/Parquet format identified by the keys of its first record."""

    name: str
    summary: str
    tables: tuple[str, ...]
    side: str
    marker_keys: tuple[frozenset[str], ...]
    add: Callable[[Sink, int, dict[str, Any], bool], None]
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """True when the first data record has one of this format's marker key sets."""
        _, rec = _first_record(head)
        return rec is not None and any(keys <= rec.keys() for keys in self.marker_keys)

    def read(self, path: Path, sink: Sink) -> None:
        """Stream every record into the sink: runtime JSON Lines and plainly typed Parquet
        through the columnar fast path (`fast.py`), everything else record by record."""
        from mapreport.ingest import fast  # numpy and Arrow's compute: only when reading

        container = container_of(path, head_bytes(path))
        if container is None:
            raise InputError(path, None, None, "not JSON Lines, CSV or Parquet")
        if self.name == "native-runtime" and container == "jsonl":

            def slow_for(s: Sink) -> fast.Slow:
                return lambda line, rec: self.one(s, line, rec, container)

            fast.read_jsonl(path, sink, slow_for)
            return
        if self.name == "native-runtime" and container == "parquet" and fast.parquet_fits(path):
            fast.read_parquet(path, sink, lambda line, rec: self.one(sink, line, rec, container))
            return
        for line, rec in iter_records(path, container):
            self.one(sink, line, rec, container)

    def one(self, sink: Sink, line: int, rec: Any, container: Container) -> None:
        """Convert one decoded record (or reject it, naming its line and field)."""
        if isinstance(rec, BadRecord):
            sink.reject(line, rec.field, rec.reason, rec.raw)
            return
        if not isinstance(rec, dict):
            sink.reject(line, None, "record is not a JSON object", rec)
            return
        if container == "jsonl" and "environment" in rec and len(rec) == 1:
            try:
                sink.add("environment", line, environment_row(self.side, rec["environment"]))
            except FieldError as e:
                sink.reject(line, e.field, e.reason, rec)
            return
        if container != "jsonl":
            rec = _normalise(rec)
        try:
            self.add(sink, line, rec, container == "csv")
        except FieldError as e:
            sink.reject(line, e.field, e.reason, rec)


def _slice(row: dict[str, Any]) -> dict[str, Any]:
    row["slice"] = row["slice"] or ""
    return row


def add_compile(sink: Sink, line: int, rec: dict[str, Any], text: bool) -> None:
    """Add one compile plan entry (a planned op or subgraph of one bucket of one plan)."""
    sink.add("compile_plan", line, _slice(convert_record(COMPILE, rec, text)))


def add_runtime(sink: Sink, line: int, rec: dict[str, Any], text: bool) -> None:
    """Add a request or an adaptation event, checking the format's timestamp rules."""
    if rec.get("event") not in (None, ""):
        sink.add("adaptation_event", line, _slice(convert_record(EVENT, rec, text)))
        return
    row = _slice(convert_record(REQUEST, rec, text))
    if row["queue_start_us"] is None:
        row["queue_start_us"] = row["arrival_us"]
    if row["compute_start_us"] < row["arrival_us"]:
        raise FieldError("compute_start_us", "is before arrival_us")
    if row["compute_end_us"] < row["compute_start_us"]:
        raise FieldError("compute_end_us", "is before compute_start_us")
    if row["queue_start_us"] > row["compute_start_us"]:
        raise FieldError("queue_start_us", "is after compute_start_us")
    row["status"] = row["status"] or "ok"
    sink.add("request", line, row)


def add_quality(sink: Sink, line: int, rec: dict[str, Any], text: bool) -> None:
    """Add one quality result."""
    sink.add("quality", line, _slice(convert_record(QUALITY, rec, text)))


NATIVE_READERS: tuple[NativeReader, ...] = (
    NativeReader(
        name="native-compile",
        summary="mapreport compile profile v1 (JSONL/CSV/Parquet): planned ops per shape bucket",
        tables=("compile_plan", "environment"),
        side="compile",
        marker_keys=(frozenset({"plan_id", "shape_bucket", "predicted_us"}),),
        add=add_compile,
    ),
    NativeReader(
        name="native-runtime",
        summary="mapreport runtime telemetry v1 (JSONL/CSV/Parquet): requests, adaptation events",
        tables=("request", "adaptation_event", "environment"),
        side="runtime",
        marker_keys=(
            frozenset({"request_id", "arrival_us"}),
            frozenset({"event", "ts_us", "workload"}),
        ),
        add=add_runtime,
    ),
    NativeReader(
        name="native-quality",
        summary="mapreport quality evidence (JSONL/CSV/Parquet): metric per precision and slice",
        tables=("quality",),
        side="quality",
        marker_keys=(frozenset({"metric", "baseline", "value", "precision"}),),
        add=add_quality,
    ),
)
