"""An MLPerf submission's system description (`systems/<system>.json`): one runtime-side
`environment` row. hardware = `accelerators_per_node` x `accelerator_model_name` (x
`number_of_nodes` nodes when more than one), runtime = `framework`, driver = the `Driver ...`
entry of `other_software_stack`, host = `system_name`; the rest of the description (memory,
interconnect, host processors, operating system, submitter, division) is kept in `extra`. A
description applies to the workload `--workload` names (the benchmark its results are for);
without one it joins no report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text, read_document

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

REQUIRED = ("accelerator_model_name", "system_name")
_DRIVER = re.compile(r"\bDriver\s+([0-9][\w.\-]*)", re.IGNORECASE)


class MlperfSystemReader:
    """MLPerf system description: the runtime environment of a submission's results."""

    name = "mlperf-system"
    summary = (
        "MLPerf submission systems/<system>.json: accelerator, nodes, framework and driver as "
        "the runtime environment"
    )
    tables = ("environment",)
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON object holding the description's accelerator and submitter keys."""
        text = head.data.lstrip()
        return (
            text.startswith(b"{")
            and b'"accelerator_model_name"' in head.data
            and b'"submitter"' in head.data
            and b'"system_type"' in head.data
        )

    def read(self, path: Path, sink: Sink) -> None:
        """One environment row."""
        doc, _ = read_document(path)
        if not isinstance(doc, dict):
            raise InputError(path, None, None, "a system description is a JSON object")
        for key in REQUIRED:
            if not isinstance(doc.get(key), str) or not doc[key].strip():
                raise InputError(path, None, key, "required field is missing")
        model = doc["accelerator_model_name"].strip()
        per_node = doc.get("accelerators_per_node")
        nodes = doc.get("number_of_nodes")
        hardware = f"{per_node} x {model}" if isinstance(per_node, int) and per_node else model
        if isinstance(nodes, int) and nodes > 1:
            hardware += f" x {nodes} nodes"
        stack = str(doc.get("other_software_stack") or "")
        driver = _DRIVER.search(stack)
        used = {"accelerator_model_name", "accelerators_per_node", "number_of_nodes", "framework"}
        row: dict[str, Any] = {
            "side": "runtime",
            "hardware": hardware,
            "runtime": _text(doc.get("framework")),
            "driver": driver.group(1) if driver else None,
            "host": doc["system_name"].strip(),
            "workload": sink.hints.get("workload") or None,
            "extra": json_text(
                {k: v for k, v in doc.items() if k not in used and v not in ("", None)}
            ),
        }
        sink.add("environment", 1, row)


def _text(v: Any) -> str | None:
    return str(v).strip() or None if v is not None else None
