"""Analysis: pure functions from the canonical tables (through DuckDB) to frozen results.

`analyze_slice` runs every metric family of METRICS.md for one workload slice (assembled in
`analysis.slice`); analysis returns facts, never sentences. Importing the package loads only
its small value types; the metric families (numpy, the statistics, the history) load when a
name below is first used, so a command that never analyses does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mapreport.analysis.base.common import Review, Thresholds

if TYPE_CHECKING:
    from mapreport.analysis.base.query import slices as list_slices
    from mapreport.analysis.loop.history import RunKey, Stored
    from mapreport.analysis.steps.results import SliceResult
    from mapreport.analysis.steps.slice import analyze_slice

__all__ = ["Review", "RunKey", "SliceResult", "Stored", "Thresholds", "analyze_slice"]
__all__ += ["list_slices"]

_LAZY = {"RunKey": "loop.history", "Stored": "loop.history", "SliceResult": "steps.results"}
_LAZY |= {"analyze_slice": "steps.slice", "list_slices": "base.query"}


def __getattr__(name: str) -> Any:
    """A name of `_LAZY`, imported from its module on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
    return getattr(module, "slices" if name == "list_slices" else name)
