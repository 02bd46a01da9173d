"""MLPerf loadgen's result summary (`mlperf_log_summary.txt`): `label : value` lines under the
`MLPerf Results Summary`, `Additional Stats` and `Test Parameters Used` banners, into one
`loadgen_run` row (mlperf_spec.FIELDS: latencies in ns become us). `Result is : VALID` is the
run's validity; the constraint lines (`Min duration satisfied : Yes`, ...), early-stopping
estimates, the other test parameters and the warnings are kept in `extra`; `No errors
encountered during test.` is 0 errors.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.mlperf_spec import run_fields, workload_of
from mapreport.ingest.records import LONG_LINE, bounded_lines, open_bytes

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

BANNER = "MLPerf Results Summary"
MAX_LINES = 10_000
"""A summary is about a hundred lines; a file this long is not one."""
_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")


class MlperfSummaryReader:
    """MLPerf loadgen result summary: one run's targets, percentiles and validity."""

    name = "mlperf-summary"
    summary = (
        "MLPerf loadgen mlperf_log_summary.txt: scenario, targets (latency, TTFT, TPOT), "
        "achieved percentiles, throughput and validity"
    )
    tables = ("loadgen_run",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """The summary's banner within its first lines."""
        return BANNER.encode() in head.data[:400] and head.data.lstrip().startswith(b"=")

    def read(self, path: Path, sink: Sink) -> None:
        """One loadgen_run row."""
        stated: dict[str, tuple[int, str]] = {}
        notes: list[str] = []
        with open_bytes(path) as fh:
            for lineno, raw in bounded_lines(fh):
                if lineno > MAX_LINES:
                    raise InputError(path, lineno, None, f"more than {MAX_LINES} lines")
                if raw is None:
                    raise InputError(path, lineno, None, LONG_LINE)
                text = raw.decode("utf-8", "replace").rstrip()
                m = _LINE.match(text)
                if m and not text.lstrip().startswith("*"):
                    stated.setdefault(m.group(1), (lineno, m.group(2)))
                elif text.strip() and not text.startswith("="):
                    notes.append(text.strip())
        if "Scenario" not in stated:
            raise InputError(path, None, "Scenario", "the summary names no scenario")
        row, used = run_fields(path, stated, "summary")
        row["workload"] = workload_of(path, sink.hints)
        row["slice"] = sink.hints.get("slice", "")
        if any("No errors encountered" in n for n in notes):
            row["errors"] = 0
        row["extra"] = json_text(
            {
                "stated": {k: v for k, (_, v) in stated.items() if k not in used},
                "notes": notes or None,
            }
        )
        sink.add("loadgen_run", 1, row)
