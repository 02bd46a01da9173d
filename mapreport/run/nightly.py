"""The nightly job: one night per run. Ingest the night's sources, age out old partitions,
report the night's window of every slice and record it in the closed-loop history."""

from __future__ import annotations

from datetime import date, timedelta

import msgspec

from mapreport.core.errors import ConfigError
from mapreport.core.window import Window, last_complete_day, night_window
from mapreport.dataset.store import Dataset, Retention
from mapreport.engine.engines import Engine, open_engine
from mapreport.ingest import IngestResult
from mapreport.run.config import Config
from mapreport.run.ingesting import IngestFailures, ingest
from mapreport.run.outcome import Progress, SliceOutcome, quiet
from mapreport.run.reporting import report


class LateData(msgspec.Struct, frozen=True):
    """A file ingested tonight whose rows belong to a night already reported."""

    path: str
    nights: tuple[str, ...]


class NightRun(msgspec.Struct):
    """What one nightly run did."""

    night: str
    window: Window
    ingested: list[IngestResult] = msgspec.field(default_factory=list)
    outcomes: list[SliceOutcome] = msgspec.field(default_factory=list)
    late: list[LateData] = msgspec.field(default_factory=list)
    retention: Retention | None = None


def run(
    config: Config,
    progress: Progress = quiet,
    night: date | None = None,
    force: bool = False,
    jobs: int | None = None,
    wait: bool = True,
    window: str | None = None,
    pdf: bool = True,
) -> NightRun:
    """The nightly job for `night` (default: the last complete day in run.timezone): ingest
    the configured sources (`{date}` filled in; `jobs` files at once), remove partitions
    older than run.retain_days, then report every slice over the night's window (`window`,
    default run.window) and record it, all on the engine config.engine names."""
    if not config.sources:
        raise ConfigError(f"{config.path}: run.sources lists no input files")
    night = night or last_complete_day(config.timezone)
    done = NightRun(
        night.isoformat(), night_window(night, window or config.window, config.timezone)
    )
    engine = open_engine(config.engine)
    try:
        return _run(config, engine, done, progress, night, force, jobs, wait, pdf)
    finally:
        engine.close()


def _run(
    config: Config,
    engine: Engine,
    done: NightRun,
    progress: Progress,
    night: date,
    force: bool,
    jobs: int | None,
    wait: bool,
    pdf: bool,
) -> NightRun:
    failed: IngestFailures | None = None
    try:
        done.ingested = ingest(
            config.dataset,
            config.source_files(night),
            config.on_error,
            progress=progress,
            hints=config.hints,
            jobs=jobs or config.jobs,
            wait=wait,
            night=done.night,
            engine=engine,
        )
    except IngestFailures as e:
        done.ingested, failed = e.results, e
    ds = Dataset(config.dataset)
    done.late = late_data(ds, done.ingested, done.night)
    if config.retain_days is not None:
        done.retention = ds.retain(keep_from(night, config.retain_days))
    done.outcomes = report(
        config.dataset,
        config.out,
        config,
        pdf=pdf,
        progress=progress,
        record=config.record_history,
        run_date=done.night,
        force=force,
        window=done.window,
        engine=engine,
        jobs=jobs or config.jobs,
    )
    if failed is not None:
        failed.outcomes = done.outcomes
        raise failed
    return done


def keep_from(night: date, retain_days: int) -> str:
    """The first night kept when `retain_days` nights are kept, `night` the last of them
    (more nights than the calendar has before `night`: every night is kept)."""
    if retain_days - 1 >= (night - date.min).days:
        return date.min.isoformat()
    return (night - timedelta(days=retain_days - 1)).isoformat()


def late_data(ds: Dataset, ingested: list[IngestResult], night: str) -> list[LateData]:
    """Files read tonight that added rows to earlier nights the history already holds: those
    nights change only when they are run again (`--date`)."""
    recorded = ds.recorded_nights()
    late = []
    for r in ingested:
        earlier = tuple(d for d in r.days if d < night and d in recorded)
        if r.status == "ingested" and earlier:
            late.append(LateData(str(r.path), earlier))
    return late
