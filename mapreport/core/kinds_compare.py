"""The categories of the comparison of two slices' time (`analysis/comparing`), beside `kinds`
(which is at its size limit; `kinds` re-exports them, so they are named from either). Members are
strings, as there."""

from __future__ import annotations

from enum import StrEnum


class TimeBasis(StrEnum):
    """What a compared side's total time is the sum of: its device rows (kernels, copies and
    sets), or, when it has none (a CPU run, a trace of the host only), its host-side ops."""

    DEVICE = "device"
    HOST = "host"


class TimeCategory(StrEnum):
    """What a compared op x shape's time is spent on, for the split of the total."""

    GEMM = "gemm"
    CONV = "conv"
    ATTENTION = "attention"
    NORM = "norm"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    COPY = "copy"
    """Ops that move data on the device (cat, index_select, copy_ on device)."""
    TRANSFER = "transfer"
    """Calls whose device rows are all host-device copies or memsets."""
    OTHER = "other"
    """Ops the category table does not know."""
    UNATTRIBUTED = "unattributed"
    """Kernels no recorded operator launched (graph replays): named by the kernel."""
