"""The command line: parse arguments, call the pipeline, turn domain errors into one line.

Exit codes: 0 success; 1 unexpected internal error; 2 usage error; 3 bad input data;
4 bad configuration; 5 dataset missing or empty; 6 one or more slice reports failed;
7 system error (full disk, read-only or missing folder).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from mapreport import __version__
from mapreport.app.evidence_cli import compare_cmd, explain_cmd
from mapreport.app.export_cli import export_cmd
from mapreport.app.options import (
    date_opt,
    engine_opt,
    force_opt,
    jobs_opt,
    no_wait_opt,
    pdf_form_opt,
    quiet_opt,
    run_date_opt,
    verbose_opt,
    window_opt,
    with_engine,
    with_pdf,
)
from mapreport.app.terminal import (
    SYSTEM_ERROR_EXIT,
    domain_errors,
    echo,
    progress_printer,
    setup_logging,
)
from mapreport.app.values import edges_option, span_option
from mapreport.core.errors import (
    ERROR_POLICIES,
    DatasetError,
    ErrorPolicy,
    ReportError,
)
from mapreport.core.window import (
    UNDATED,
    last_complete_day,
    parse_date,
)
from mapreport.engine.engines import open_engine
from mapreport.engine.settings import EngineName, EngineSettings
from mapreport.run.api_window import report_window
from mapreport.run.config import default_config, load_config

if TYPE_CHECKING:
    from mapreport.ingest import IngestResult
    from mapreport.run.nightly import NightRun
    from mapreport.run.outcome import SliceOutcome

# The readers, the analysis, the report and DuckDB are imported by the commands that use them,
# not here: `mapreport --help` would otherwise load them all (0.5 s of a 0.55 s start).


def _summarise_ingest(results: list[IngestResult], quiet: bool) -> None:
    if quiet:
        return
    for r in results:
        if r.status == "skipped":  # a file no reader reads, beside the telemetry
            echo(f"{r.status:9} {r.format:15} {r.path}: not a telemetry file: {r.notes[0]}")
            continue
        rows = ", ".join(f"{t} {n}" for t, n in sorted(r.rows.items()))
        rejected = f", {r.rejected} rejected" if r.rejected else ""
        # one line per file: rows without a date say so on it
        undated = (
            "; rows without a wall-clock time count only in --window all reports "
            "(ingest with --date to give them a night)"
            if UNDATED in r.days
            else ""
        )
        echo(f"{r.status:9} {r.format:15} {r.path} ({rows}{rejected}){undated}")
        for note in r.notes:
            echo(f"  note: {r.path}: {note}")


def _summarise_reports(outcomes: list[SliceOutcome], out: Path, quiet: bool) -> None:
    failed = [o for o in outcomes if o.error]
    if not quiet:
        for o in outcomes:
            if o.error:
                echo(f"FAILED    {o.name}: {o.error}")
            elif o.unchanged:
                echo(f"unchanged {o.name} -> {o.folder}/ (same inputs as its report)")
            else:
                echo(f"report    {o.name} -> {o.folder}/{', '.join(o.written)}")
            if o.recomputed:
                echo(
                    f"backfill  {o.name}: {o.night} recorded again; the later night(s) "
                    f"{', '.join(o.recomputed)} recomputed from it"
                )
        echo(f"index     {out / 'index.html'}")
    if failed:
        e = ReportError(
            f"{len(failed)} of {len(outcomes)} slice report(s) failed: "
            + "; ".join(f"{o.name}: {o.error}" for o in failed)
        )
        if any(o.refused_by_system for o in failed):
            e.exit_code = SYSTEM_ERROR_EXIT  # the system refused a write, as for any OSError
        raise e


class _FormatChoice(click.Choice[str]):
    """The readers' names, looked up only when --format is given or `ingest --help` shown:
    importing every reader costs more than the rest of the command line's start."""

    def __init__(self) -> None:
        super().__init__((), case_sensitive=True)

    @property
    def choices(self) -> tuple[str, ...]:
        """Every reader's name, sorted."""
        from mapreport.ingest import READERS

        return tuple(sorted(READERS))

    @choices.setter
    def choices(self, _: object) -> None:
        """Click's constructor sets the choices; they are the readers' instead."""


dataset_opt = click.option(
    "--dataset",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Canonical Parquet dataset folder.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mapreport")
def main() -> None:
    """mapreport: how accurate was the compile-time mapping, and how much did runtime
    adaptation gain? Per workload slice and input shape.

    \b
    Typical use:
      mapreport run sample_data/mapreport.toml          # the nightly job
      mapreport ingest --dataset DS traces/*.jsonl      # add files to a dataset
      mapreport report --dataset DS --out OUT --slice bert-base

    Exit codes: 0 ok, 2 usage, 3 bad input data, 4 bad config, 5 dataset missing or
    empty, 6 a slice report failed, 7 system error (disk full, read-only), 1 internal
    error.
    """


@main.command("ingest")
@dataset_opt
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@click.option(
    "--on-error",
    type=click.Choice(ERROR_POLICIES),
    help="abort: the first bad record stops that file (nothing of it is written). "
    "quarantine: bad records go to the quarantine table and are counted. Default: each "
    "format's own (abort; quarantine for TORCH_TRACE logs).",
)
@click.option("--format", "fmt", type=_FormatChoice(), help="Skip sniffing.")
@click.option(
    "--workload",
    help="Workload name for formats that carry none (profiler traces); "
    "default: the file name up to its first dot.",
)
@click.option("--slice", "slice_", default="", help="Slice name for formats that carry none.")
@click.option(
    "--sequence-buckets",
    "edges",
    metavar="EDGES",
    callback=lambda _c, _p, v: edges_option(v),
    help="Upper edges of the sequence-length buckets that are a generative request's shape "
    "(AIPerf), comma-separated tokens; default powers of two, 64 to 131072.",
)
@click.option(
    "--request-span",
    "span",
    metavar="REGEX",
    callback=lambda _c, _p, v: span_option(v),
    help="The name of a request's profiler span, as a regular expression with a named group "
    "`id` and optionally `shape` (default: `request <id> [<shape>]` and its common variants).",
)
@jobs_opt(
    "Files read at once, each in its own process (commits stay in order; memory grows with "
    "one reader per job)."
)
@click.option(
    "--date",
    "night",
    metavar="YYYY-MM-DD",
    help="The night these files were recorded: where rows without a wall-clock time (a "
    "profiler's relative clock) belong. Without it they count only in --window all reports.",
)
@click.option(
    "--report",
    "report_to",
    metavar="OUT",
    type=click.Path(path_type=Path, file_okay=False),
    help="Then report the dataset's slices into OUT in the same process, as `report --no-pdf "
    "--out OUT` would (default configuration; `report` gives targets, owners and the PDF).",
)
@engine_opt
@no_wait_opt
@quiet_opt
@verbose_opt
@domain_errors
def ingest_cmd(
    dataset: Path,
    files: tuple[Path, ...],
    on_error: str | None,
    fmt: str | None,
    workload: str | None,
    slice_: str,
    edges: str | None,
    span: str | None,
    jobs: int,
    night: str | None,
    report_to: Path | None,
    engine: str | None,
    no_wait: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Read input FILES (folders are walked) into the dataset. The format is detected from
    the content; a file already ingested (same SHA-256) is skipped, and a file whose content
    changed at the same path replaces its earlier version. With --engine spark, Spark's
    executors read the files (the dataset on a folder they share). With --report, the slices
    are reported after a clean ingest without starting a second process (one small trace:
    about a second less than `ingest` then `report`)."""
    from mapreport.run.ingesting import IngestAborted, IngestFailures, ingest

    setup_logging(verbose)
    try:
        policy = cast(ErrorPolicy | None, on_error)
        named = (
            ("workload", workload),
            ("slice", slice_),
            ("sequence_buckets", edges),
            ("request_span", span),
        )
        hints = {k: v for k, v in named if v}
        chosen = EngineName(engine or EngineName.DUCKDB)
        progress = progress_printer(quiet, always=chosen is EngineName.SPARK)
        day = parse_date(night).isoformat() if night else None
        on = open_engine(EngineSettings(chosen))
        try:
            results = ingest(
                dataset, list(files), policy, fmt, progress, hints, jobs, not no_wait, day, on
            )
        finally:
            on.close()
    except (IngestFailures, IngestAborted) as e:
        _summarise_ingest(e.results, quiet)
        raise
    _summarise_ingest(results, quiet)
    if report_to is not None:
        from mapreport.run.reporting import report

        config = with_engine(default_config(), engine)
        spark = config.engine.name is EngineName.SPARK
        outcomes = report(
            dataset, report_to, config, pdf=False, progress=progress_printer(quiet, always=spark)
        )
        _summarise_reports(outcomes, report_to, quiet)


@main.command("report")
@dataset_opt
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Output folder: OUT/<workload>[/<slice>]/ and OUT/index.html.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Run configuration (TOML) for SLA targets, owners and thresholds.",
)
@click.option(
    "--slice",
    "only",
    metavar="WORKLOAD[/SLICE]",
    help="Regenerate only this slice (all slices of WORKLOAD without /SLICE).",
)
@click.option("--no-pdf", is_flag=True, help="Write HTML and findings.json only.")
@pdf_form_opt
@click.option(
    "--record-history",
    is_flag=True,
    help="Add this run to the closed-loop history (the nightly `run` always does).",
)
@date_opt
@run_date_opt
@window_opt
@click.option("--since", metavar="ISO-TIME", help="Report from this time (with --until: a range).")
@click.option("--until", metavar="ISO-TIME", help="Report up to this time (excluded).")
@force_opt
@jobs_opt(
    "Slices reported at once, each in its own worker process with its own DuckDB connection "
    "and Chromium (memory grows with each; on Spark, slices analysed at once on one session)."
)
@engine_opt
@quiet_opt
@verbose_opt
@domain_errors
def report_cmd(
    dataset: Path,
    out: Path,
    config_path: Path | None,
    only: str | None,
    no_pdf: bool,
    pdf_form: str | None,
    record_history: bool,
    night: str | None,
    run_date: str | None,
    window: str | None,
    since: str | None,
    until: str | None,
    force: bool,
    jobs: int,
    engine: str | None,
    quiet: bool,
    verbose: bool,
) -> None:
    """Write report.html, report.pdf and findings.json per workload slice from the dataset,
    without re-ingesting anything. Without --date, --window, --since or --until a report
    covers everything in the dataset; reports show the recorded history of earlier nights."""
    from mapreport.run.reporting import report

    setup_logging(verbose)
    config = with_engine(load_config(config_path) if config_path else default_config(), engine)
    config = with_pdf(config, pdf_form)
    chosen = report_window(night or run_date, window, since, until, config.timezone)
    outcomes = report(
        dataset,
        out,
        config,
        only,
        not no_pdf,
        progress_printer(quiet, always=config.engine.name is EngineName.SPARK),
        record=record_history,
        force=force,
        window=chosen,
        jobs=jobs,
    )
    _summarise_reports(outcomes, out, quiet)


@main.command("run")
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path, dir_okay=False))
@date_opt
@run_date_opt
@window_opt
@force_opt
@jobs_opt(
    "Worker processes: source files read at once, then slices reported at once (each worker "
    "with its own DuckDB connection and Chromium; memory grows with each) [default: run.jobs "
    "of CONFIG, else 1].",
    default=None,
)
@engine_opt
@no_wait_opt
@pdf_form_opt
@quiet_opt
@verbose_opt
@domain_errors
def run_cmd(
    config_path: Path,
    night: str | None,
    run_date: str | None,
    window: str | None,
    force: bool,
    jobs: int | None,
    engine: str | None,
    no_wait: bool,
    pdf_form: str | None,
    quiet: bool,
    verbose: bool,
) -> None:
    """The nightly job for one night (--date; default: the last complete day in
    run.timezone): ingest the sources CONFIG lists ({date} filled in), report every slice over
    the night's window and record the night in the closed-loop history. Running an earlier
    night than the latest recorded (a backfill) recomputes the later nights' history too. A
    slice that fails is listed in index.html and makes the exit code non-zero; the others are
    written."""
    from mapreport.run.ingesting import IngestAborted, IngestFailures
    from mapreport.run.nightly import run

    setup_logging(verbose)
    config = with_pdf(with_engine(load_config(config_path), engine), pdf_form)
    day = night or run_date
    if not quiet:
        echo(f"config    {config.path}")
        echo(f"dataset   {config.dataset}")
        echo(f"out       {config.out}")
        if config.engine.name is not EngineName.DUCKDB:
            echo(f"engine    {config.engine.name} ({config.engine.master})")
    try:
        done = run(
            config,
            progress_printer(quiet, always=config.engine.name is EngineName.SPARK),
            parse_date(day) if day else None,
            force=force,
            jobs=jobs,
            wait=not no_wait,
            window=window,
        )
    except (IngestFailures, IngestAborted) as e:
        _summarise_ingest(e.results, quiet)
        if isinstance(e, IngestFailures):  # the night's reports were written all the same
            with contextlib.suppress(ReportError):
                _summarise_reports(e.outcomes, config.out, quiet)
        raise
    _summarise_ingest(done.ingested, quiet)
    _summarise_night(done, quiet)
    _summarise_reports(done.outcomes, config.out, quiet)


def _summarise_night(done: NightRun, quiet: bool) -> None:
    """The night, its late data, retention and backfill, one line each."""
    if quiet:
        return
    w = done.window
    span = "everything in the dataset" if w.everything else f"{w.spec} window, {w.timezone}"
    echo(f"night     {done.night} ({span})")
    for late in done.late:
        nights = ", ".join(late.nights)
        echo(
            f"late data {late.path} adds rows to {nights}, already reported: run again with "
            f"--date {late.nights[-1]} to revise {'them' if len(late.nights) > 1 else 'it'}"
        )
    if done.retention is not None:
        r = done.retention
        echo(
            f"retention removed {len(r.partitions)} day partition(s) before {r.keep_from} "
            f"({r.files} files, {r.bytes / 2**20:.1f} MiB; {len(r.retired)} source file(s) retired)"
        )


@main.command("retain")
@dataset_opt
@click.option(
    "--days",
    type=click.IntRange(1, None),
    required=True,
    help="Nights to keep, the night of --date the last of them.",
)
@click.option(
    "--date",
    "night",
    metavar="YYYY-MM-DD",
    help="The last night kept [default: the last complete day, UTC].",
)
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@verbose_opt
@domain_errors
def retain_cmd(dataset: Path, days: int, night: str | None, dry_run: bool, verbose: bool) -> None:
    """Remove the runtime tables' day partitions older than --days nights (history stays).
    A source file none of whose rows remain is retired and not read back in."""
    from mapreport.dataset.store import Dataset
    from mapreport.run.nightly import keep_from

    setup_logging(verbose)
    last = parse_date(night) if night else last_complete_day("UTC")
    plan = Dataset(dataset).retain(keep_from(last, days), dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    for d in plan.partitions:
        echo(f"{verb:12} {d.relative_to(dataset)}")
    echo(
        f"{verb} {len(plan.partitions)} day partition(s) before {plan.keep_from}: {plan.files} "
        f"files, {plan.bytes / 2**20:.1f} MiB; {len(plan.retired)} source file(s) "
        f"{'would be ' if dry_run else ''}retired"
    )


main.add_command(explain_cmd)
main.add_command(compare_cmd)
main.add_command(export_cmd)


@main.command("check")
@dataset_opt
@click.option(
    "--repair",
    is_flag=True,
    help="Move each damaged file (with its source's commit record and data files where it is "
    "a committed source's) to DATASET/damaged/<time>/, remove FIFOs and sockets, and say what "
    "to ingest again.",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Read footers only: no content hash, no page (a damaged page or a flipped bit "
    "passes unseen).",
)
@verbose_opt
@domain_errors
def check_cmd(dataset: Path, repair: bool, quick: bool, verbose: bool) -> None:
    """Verify every file the dataset holds: links and special files, commit records, each
    data file's bytes against its commit record's hash and its pages' checksums, Parquet
    footers and column types, the records against the data files, history, evidence specs.
    Exit 5 when one is damaged (without --repair, or what --repair leaves)."""
    from mapreport.dataset.store import Dataset
    from mapreport.run.check import check
    from mapreport.run.check import repair as set_aside

    setup_logging(verbose)
    ds = Dataset(dataset)
    found = check(ds, quick=quick)
    for d in found.damage:
        echo(f"damaged   {d.path}: {d.why}" + (f"; {d.remedy}" if d.remedy else ""))
    if not found.damage:
        echo(f"ok        {found.files} file(s) checked in {dataset}" + (" (quick)" * quick))
        return
    if not repair:
        raise DatasetError(
            f"{len(found.damage)} damaged file(s) in {dataset}; `mapreport check --dataset "
            f"{dataset} --repair` sets them aside"
        )
    done = set_aside(ds, found)
    if done.aside is not None:
        echo(
            f"set aside {done.moved} file(s) (the damaged ones and their sources') in {done.aside}"
        )
    if done.removed:
        echo(f"removed   {done.removed} FIFO(s), socket(s) or device(s)")
    if done.left:
        raise DatasetError(
            f"{len(done.left)} link(s) out of {dataset} left as they are: replace each with the "
            "folder or file it points to"
        )


@main.command("formats")
def formats_cmd() -> None:
    """List the input formats mapreport reads and the tables each writes, then the files
    recorded beside them that it skips."""
    from mapreport.ingest import READERS
    from mapreport.ingest.sidecars import SIDECARS

    for r in READERS.values():
        echo(f"{r.name:16} {r.summary}")
        echo(f"{'':16} -> {', '.join(r.tables)}")
        if r.deprecated:
            echo(f"{'':16} DEPRECATED: {r.deprecated}")
    echo("")
    echo("Skipped when a folder is ingested (not telemetry; listed, exit 0):")
    for s in SIDECARS:
        echo(f"{s.name:16} {s.what}")
        echo(f"{'':16} files named {', '.join(s.names)}")


if __name__ == "__main__":
    main()
