"""MLPerf loadgen's detail log (`mlperf_log_detail.txt`): one `:::MLLOG {json}` line per logged
key (`key`, `value`, `time_ms`, `namespace`, `event_type`, `metadata`), into one `loadgen_run`
row (mlperf_spec.FIELDS: the `effective_*` settings, the `requested_server_*` token targets, the
`result_*` percentiles; ns become us), with the loadgen version, the test's date and the
error count. Warnings and errors the log records (`metadata.is_error` / `is_warning`) and the
other `effective_*` / `result_*` keys are kept in `extra`; lines that are not `:::MLLOG` lines
(a SUT's own prints) are counted there too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.mlperf_spec import TEXT, number, run_fields, workload_of
from mapreport.ingest.records import LONG_LINE, JsonDecoder, bounded_lines, open_bytes

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

MARK = b":::MLLOG "
KEPT_PREFIXES = ("effective_", "result_", "early_stopping", "generated_", "qsl_", "sut_name")
_DECODE: JsonDecoder[Any] = JsonDecoder()


class MlperfDetailReader:
    """MLPerf loadgen detail log: one run's settings, results and validity."""

    name = "mlperf-detail"
    summary = (
        "MLPerf loadgen mlperf_log_detail.txt (:::MLLOG lines): scenario, targets, achieved "
        "percentiles, validity, loadgen version"
    )
    tables = ("loadgen_run",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """The first line is an `:::MLLOG` record."""
        return head.data.lstrip().startswith(MARK + b"{")

    def read(self, path: Path, sink: Sink) -> None:
        """One loadgen_run row."""
        values: dict[str, tuple[int, Any]] = {}
        flagged: list[dict[str, Any]] = []
        other_lines = 0
        with open_bytes(path) as fh:
            for lineno, raw in bounded_lines(fh):
                if raw is None:
                    raise InputError(path, lineno, None, LONG_LINE)
                if not raw.startswith(MARK):
                    other_lines += bool(raw.strip())
                    continue
                try:
                    rec = _DECODE.decode(raw[len(MARK) :])
                except msgspec.DecodeError as e:
                    sink.reject(lineno, None, f"invalid :::MLLOG JSON: {e}", raw)
                    continue
                if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
                    sink.reject(lineno, "key", ":::MLLOG record has no key", raw)
                    continue
                values.setdefault(rec["key"], (lineno, rec.get("value")))
                found = rec.get("metadata")
                meta: dict[str, Any] = found if isinstance(found, dict) else {}
                if meta.get("is_error") or meta.get("is_warning"):
                    flagged.append(
                        {
                            "line": lineno,
                            "error": bool(meta.get("is_error")),
                            "key": rec["key"],
                            "value": rec.get("value"),
                        }
                    )
        scenario = values.get(TEXT["scenario"][1])
        if scenario is None:
            raise InputError(path, None, TEXT["scenario"][1], "the log names no scenario")
        row, used = run_fields(path, values, "detail")
        row["workload"] = workload_of(path, sink.hints)
        row["slice"] = sink.hints.get("slice", "")
        row["loadgen_version"] = _text(values.get("loadgen_version"))
        row["run_at"] = _text(values.get("test_datetime"))
        errors = number(values.get("num_errors", (0, None))[1])
        row["errors"] = int(errors) if errors is not None else None
        row["extra"] = json_text(
            {
                "logged": {
                    k: v
                    for k, (_, v) in values.items()
                    if k not in used and k.startswith(KEPT_PREFIXES)
                },
                "flagged": flagged[:50] or None,
                "flagged_count": len(flagged) or None,
                "other_lines": other_lines or None,
            }
        )
        sink.add("loadgen_run", values[TEXT["scenario"][1]][0], row)


def _text(entry: tuple[int, Any] | None) -> str | None:
    if entry is None or entry[1] is None:
        return None
    return str(entry[1])
