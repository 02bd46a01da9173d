"""The command line's shared options, and what two of them change in a loaded config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from mapreport.core.records import replace
from mapreport.engine.settings import EngineName
from mapreport.run.config import MAX_JOBS, Config, auto_jobs

quiet_opt = click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
no_wait_opt = click.option(
    "--no-wait",
    is_flag=True,
    help="Fail at once (exit 5) when another mapreport is writing the dataset, instead of "
    "waiting for it.",
)
force_opt = click.option(
    "--force",
    is_flag=True,
    help="Redo every slice's report, even one whose inputs (source files, configuration, "
    "history, run date, code) are those its folder's report was made from.",
)
date_opt = click.option(
    "--date",
    "night",
    metavar="YYYY-MM-DD",
    help="The night to report: its calendar day in run.timezone (UTC without a config). The "
    "history records it under this date; running a night again replaces it.",
)
run_date_opt = click.option("--run-date", "run_date", hidden=True, help="Old name of --date.")
window_opt = click.option(
    "--window",
    metavar="day|all|DURATION",
    help="What the night's report covers: its calendar day (day), a duration ending at its end "
    "(6h, 7d), or everything in the dataset (all).",
)
verbose_opt = click.option("--verbose", "-v", is_flag=True, help="Log each step.")
engine_opt = click.option(
    "--engine",
    type=click.Choice([e.value for e in EngineName]),
    help="Where the analysis SQL runs: duckdb, in this process, or spark (the [engine] "
    "section's master and conf; needs the spark extra and Java 17) [default: engine.name of "
    "the config, else duckdb].",
)


class Jobs(click.ParamType[int, Any]):
    """A count of worker processes, 1..MAX_JOBS, or `auto` (`config.auto_jobs`)."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """The count `value` names."""
        if isinstance(value, int):
            return value
        if str(value).strip().lower() == "auto":
            return auto_jobs()
        try:
            n = int(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a count of processes or 'auto'", param, ctx)
        if not 1 <= n <= MAX_JOBS:
            self.fail(f"{n} is not in 1..{MAX_JOBS}", param, ctx)
        return n


def jobs_opt(help: str, default: int | None = 1) -> Callable[[Callable[..., Any]], Any]:
    """`--jobs N|auto`, 1..MAX_JOBS or a worker per core (as memory allows), with what the
    command does with its processes."""
    return click.option(
        "--jobs",
        type=Jobs(),
        default=default,
        show_default=default is not None,
        help=help + " `auto`: one per core, as many as memory holds at 2 GiB each.",
    )


def pdf_form_opt(f: Callable[..., Any]) -> Any:
    """`--pdf packet|full`: the PDF's form (default: run.pdf of the config, else packet)."""
    return click.option(
        "--pdf",
        "pdf_form",
        type=click.Choice(["packet", "full"]),
        default=None,
        help="The PDF: `packet`, the five-page design review with its appendix, or `full`, "
        "every section as the HTML report has them [default: run.pdf, else packet].",
    )(f)


def with_pdf(config: Config, form: str | None) -> Config:
    """The config with --pdf's choice, when one is given."""
    return replace(config, pdf_form=form) if form else config


def with_engine(config: Config, engine: str | None) -> Config:
    """The config with --engine's choice, when one is given."""
    if engine is None:
        return config
    return replace(config, engine=replace(config.engine, name=EngineName(engine)))
