"""Files a run folder holds beside its telemetry that no reader reads: each kind declared as
data (file names, and a test of the first bytes where the name alone could be telemetry), so
that ingesting a folder as it was recorded lists them as skipped instead of failing on them.
A file no reader and no kind here claims is still an error (`format not recognised`)."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path

import msgspec


class Sidecar(msgspec.Struct, frozen=True):
    """A kind of file recorded beside telemetry that mapreport does not read."""

    name: str
    """Printed where a reader's name would be (`skipped   <name> <path>: ...`)."""
    what: str
    """What the file is and, where a reader reads its data in another file, which."""
    names: tuple[str, ...]
    """Lower-case `fnmatch` patterns of the file's name (a `.gz` suffix dropped)."""
    head: re.Pattern[bytes] | None = None
    """A test of the file's first decompressed bytes; None: its name says enough."""

    def claims(self, path: Path, head: bytes) -> bool:
        """Whether `path`, whose first bytes are `head`, is a file of this kind."""
        name = path.name.lower().removesuffix(".gz")
        if not any(fnmatchcase(name, p) for p in self.names):
            return False
        return self.head is None or self.head.search(head) is not None


SIDECARS: tuple[Sidecar, ...] = (
    Sidecar(
        "execution-trace",
        "PyTorch execution trace (an op graph without times); the profiler trace recorded "
        "with it is read",
        ("*.json",),
        re.compile(rb'\A\s*\{\s*"schema"\s*:\s*"[^"]*",.*"nodes"\s*:\s*\[', re.DOTALL),
    ),
    Sidecar(
        "analyzer-csv",
        "Model Analyzer's table generated from its checkpoint; the checkpoint (.ckpt) is read",
        ("*metrics-model-*.csv", "*metrics-server-only.csv"),
        re.compile(rb"\AModel,"),
    ),
    Sidecar(
        "analyzer-plots",
        "Model Analyzer's plot settings; its checkpoint (.ckpt) is read",
        ("plot_manager.json",),
        re.compile(rb'\A\s*\{\s*"_simple_plots"'),
    ),
    Sidecar(
        "aiperf-csv",
        "AIPerf's aggregate export as CSV; its JSON twin (*_aiperf.json) is read",
        ("*profile_export_aiperf.csv",),
        re.compile(rb"\AMetric,avg,"),
    ),
    Sidecar(
        "tvm-workloads",
        "MetaSchedule's workload database (each tuned IRModule by its index); the tuning "
        "records beside it (database_tuning_record.json) are read",
        ("database_workload.json", "*_workload.json"),
        re.compile(rb'\A\s*\[\s*"-?\d+"\s*,\s*"'),
    ),
    Sidecar(
        "tuning-scores",
        "each MetaSchedule candidate's cost-model score, read with the tuning records beside "
        "it (database_tuning_record.json)",
        ("database_cost_model.json", "*_cost_model.json"),
        re.compile(rb'\A\s*\[\s*\d+\s*,\s*\d+\s*,\s*[-+0-9.eE]+\s*,\s*"'),
    ),
    Sidecar(
        "documentation",
        "documentation or a licence",
        (
            "readme",
            "readme.*",
            "license",
            "license.*",
            "licence",
            "licence.*",
            "copying",
            "copying.*",
            "notice",
            "notice.*",
            "*.md",
            "*.rst",
        ),
    ),
)
"""Every known kind, tried in this order after every reader declined the file."""


def sidecar_of(path: Path, head: bytes) -> Sidecar | None:
    """The kind of non-telemetry file `path` is, or None when it is none of SIDECARS."""
    return next((s for s in SIDECARS if s.claims(path, head)), None)
