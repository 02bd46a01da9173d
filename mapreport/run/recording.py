"""The closed loop's record of each night: what a slice is reviewed against, what a night's
report reads (its inputs digest and revision), and the recomputation of later nights after a
night is recorded again (a backfill, late data)."""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime
from typing import Any

from mapreport.analysis import Review, RunKey, Stored, analyze_slice
from mapreport.analysis.steps.record import history_rows
from mapreport.core.kinds import OwnerRole
from mapreport.core.schema import PARTITIONED
from mapreport.core.window import EVERYTHING, Window, night_window, range_window
from mapreport.dataset.store import Dataset
from mapreport.engine.engines import Engine
from mapreport.run.config import Config


def review_of(config: Config, workload: str, slice_: str) -> Review:
    """What a slice is reviewed against: its description, SLA targets, the owners and the
    sign-offs."""
    sla = config.slice_config(workload, slice_)
    return Review(
        sla_p95_us=sla.sla_p95_us if sla else None,
        sla_p99_us=sla.sla_p99_us if sla else None,
        owners={OwnerRole(k): v for k, v in config.owners.items()},
        signoffs={OwnerRole(k): v for k, v in config.signoffs.items()},
        description=sla.description if sla else "",
        device=config.device,
    )


def inputs_digest(ds: Dataset, live: set[str], workload: str, window: Window) -> str:
    """A digest of the source files a workload's report reads in the window."""
    sources = sorted(
        {
            f.name.split("-", 1)[0]
            for t in PARTITIONED
            for files, _ in ds.scans(t, workload, live, window)
            for f in files
        }
    )
    return hashlib.sha256(",".join(sources).encode()).hexdigest()[:20]


def revision_of(stored: Stored, run_date: str, inputs: str) -> int:
    """The revision this run makes of its night: 1 the first time, one more each time the
    night is recorded again from other inputs (late data)."""
    before = [r for r in stored.runs if r["run_date"] == run_date]
    if not before:
        return 1
    last = before[-1]
    revision = int(last.get("revision") or 1)
    return revision + 1 if last.get("inputs") not in (None, inputs) else revision


def recompute_later(
    ds: Dataset, engine: Engine, workload: str, slice_: str, config: Config, key: RunKey
) -> tuple[str, ...]:
    """Re-record every night after `key`'s that the slice's history holds, oldest first, each
    from its own window and the nights before it: a backfill or a late night's re-run changes
    what the later nights' action states and regressions follow from."""
    later = sorted({r["run_date"] for r in ds.history("history_run", workload, slice_)})
    later = [d for d in later if d > key.run_date]
    live = set(ds.live())
    review = review_of(config, workload, slice_)
    for night in later:
        stored = stored_history(ds, workload, slice_)
        row = [r for r in stored.runs if r["run_date"] == night][-1]
        window = stored_window(row)
        inputs = inputs_digest(ds, live, workload, window)
        again = RunKey(
            row["run_id"],
            night,
            key.baseline_run,
            window,
            inputs,
            revision_of(stored, night, inputs),
            key.recorded_at,
        )
        con = engine.connect(ds, workload, window)
        result = analyze_slice(con, workload, slice_, config.thresholds, review, stored, again)
        ds.write_history(night, workload, slice_, history_rows(result, again))
    return tuple(later)


def stored_window(row: dict[str, Any]) -> Window:
    """The window a recorded night covered, from its history_run row (a row written before
    windows existed covered everything)."""
    spec, tz = row.get("window"), row.get("timezone") or "UTC"
    if spec is None:
        return EVERYTHING
    if spec == "range":
        start, end = (row.get(k) for k in ("window_start_us", "window_end_us"))
        return range_window(_moment(start), _moment(end), tz)
    return night_window(date.fromisoformat(row["run_date"]), spec, tz)


def _moment(t_us: float | None) -> datetime | None:
    return None if t_us is None else datetime.fromtimestamp(t_us / 1e6, UTC)


def stored_history(ds: Dataset, workload: str, slice_: str) -> Stored:
    """The slice's recorded history, as the dataset holds it."""
    return Stored(
        ds.history("history_run", workload, slice_),
        ds.history("history_shape", workload, slice_),
        ds.history("history_action", workload, slice_),
        ds.history("history_op", workload, slice_),
    )


def earlier_digest(stored: Stored, run_date: str) -> str:
    """A digest of the recorded nights before `run_date` (a re-recorded one changes it)."""
    rows = [
        f"{r['run_date']}/{r['run_id']}/{r.get('recorded_at')}/{r.get('inputs')}"
        for r in stored.runs
        if str(r["run_date"]) < run_date
    ]
    return hashlib.sha256(",".join(rows).encode()).hexdigest()[:16]
