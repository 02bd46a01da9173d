"""Records against counters: a slice's per-request records and its server's counters over the
same window should agree on the mean queue wait; a disagreement beyond the tolerance is a
data-quality finding (an observability action) before either is trusted."""

from __future__ import annotations

import msgspec

from mapreport.analysis.mapping.telemetry import Telemetry
from mapreport.core.connection import Connection


class QueueCheck(msgspec.Struct, frozen=True):
    """Mean queue wait from per-request records against the server's counters over the same
    window: a disagreement beyond the tolerance is a data-quality finding."""

    records_mean_us: float
    records_n: int
    metrics_mean_us: float
    metrics_requests: float
    start_us: float
    end_us: float
    difference: float
    """(records - metrics) / metrics."""
    tolerance: float

    @property
    def disagrees(self) -> bool:
        """True beyond the tolerance."""
        return abs(self.difference) > self.tolerance


QUEUE_TOLERANCE = 0.10


def difference(records: float, counters: float) -> float:
    """(records - counters) / counters; with no queue wait on the counters, any recorded wait
    is all disagreement (1.0)."""
    if counters > 0:
        return (records - counters) / counters
    return 1.0 if records > 0 else 0.0


def queue_check(
    con: Connection, t: Telemetry | None, min_requests: int, slice_table: str
) -> QueueCheck | None:
    """The consistency check, where records and timed counters cover the same window."""
    total = t.total if t is not None else None
    if total is None or total.since_start or total.queue_mean_us is None:
        return None
    if total.start_us is None or total.end_us is None or not total.requests:
        return None
    n, mean = con.execute(
        f"""SELECT count(queue_us), favg(queue_us) FROM {slice_table}
        WHERE status = 'ok' AND queue_us IS NOT NULL AND arrival_us > $a AND arrival_us <= $b""",
        {"a": total.start_us, "b": total.end_us},
    ).fetchall()[0]
    if not n or int(n) < min_requests or mean is None:
        return None
    diff = difference(float(mean), total.queue_mean_us)
    return QueueCheck(
        float(mean),
        int(n),
        total.queue_mean_us,
        total.requests,
        total.start_us,
        total.end_us,
        diff,
        QUEUE_TOLERANCE,
    )
