"""The commands that compare and explain: `mapreport compare` (two runs, docs/compare.md) and
`mapreport explain` (rerun an evidence pack of a report or of a comparison)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from mapreport.app.options import quiet_opt, verbose_opt
from mapreport.app.terminal import domain_errors, echo, setup_logging
from mapreport.app.values import date_callback, selection_callback
from mapreport.core.errors import DatasetError, UsageError


@click.command("explain")
@click.argument("pack_id", metavar="ID")
@click.option(
    "--dataset",
    type=click.Path(path_type=Path, file_okay=False),
    help="The dataset of a slice report's pack.",
)
@click.option(
    "--compare",
    "compared",
    metavar="OUT",
    type=click.Path(path_type=Path, file_okay=False),
    help="The output folder of a comparison, for its packs (compare.json's evidence ids).",
)
@verbose_opt
@domain_errors
def explain_cmd(pack_id: str, dataset: Path | None, compared: Path | None, verbose: bool) -> None:
    """Rerun the evidence of a class or an action (ID: the action's id in findings.json, or the
    pack named in the report) against the dataset: its figure, n and 95% CI next to the
    report's, the rows and the files they come from. With --compare OUT, a comparison's pack
    (compare.json's evidence ids), rerun against both datasets. Exit 5 when they are not
    reproduced."""
    setup_logging(verbose)
    if (dataset is None) == (compared is None):
        raise UsageError("explain: give --dataset DS (a report's pack) or --compare OUT")
    if compared is not None:
        from mapreport.run.compare_packs import explain as explain_compared

        lines, ok = explain_compared(compared, pack_id)
    else:
        from mapreport.run.evidence import explain

        assert dataset is not None
        lines, ok = explain(dataset, pack_id)
    for line in lines:
        echo(line)
    if not ok:
        sys.exit(DatasetError.exit_code)


@click.command("compare")
@click.argument("a_path", metavar="A", type=click.Path(path_type=Path, file_okay=False))
@click.argument("b_path", metavar="B", type=click.Path(path_type=Path, file_okay=False))
@click.option("--out", required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option("--a-slice", metavar="W[/S]", help="A's slice (needed when A holds several).")
@click.option("--b-slice", metavar="W[/S]", help="B's slice (needed when B holds several).")
@click.option("--a-date", metavar="YYYY-MM-DD", callback=date_callback, help="A: one UTC day.")
@click.option("--b-date", metavar="YYYY-MM-DD", callback=date_callback, help="B: one UTC day.")
@click.option(
    "--a",
    "a_env",
    metavar="KEY=VALUE",
    callback=selection_callback,
    help="A: the files whose environment states it (environment.compiler_version=1.4).",
)
@click.option(
    "--b",
    "b_env",
    metavar="KEY=VALUE",
    callback=selection_callback,
    help="B: the files whose environment states it (environment.compiler_version=1.5).",
)
@click.option("--no-pdf", "no_pdf", is_flag=True, help="Write compare.html and compare.json only.")
@click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="A run configuration: its SLA targets for B's slice decide whether B is safe to ship.",
)
@click.option(
    "--span",
    is_flag=True,
    help="Compare each request's span (start to end of its compute) even where both sides "
    "record arrivals: how a run read from its profiler trace is compared with its export.",
)
@quiet_opt
@verbose_opt
@domain_errors
def compare_cmd(
    a_path: Path,
    b_path: Path,
    out: Path,
    no_pdf: bool,
    quiet: bool,
    verbose: bool,
    **sides: Any,
) -> None:
    """Compare run B with run A per request shape: the B/A ratio of p50 and p95 latency with a
    bootstrap 95% CI, and a verdict (faster, slower, ~) held to a 5% false discovery rate
    across shapes. A and B are datasets (the same one twice with two slices, two dates or two
    environments: --a/--b KEY=VALUE).
    Writes OUT/compare.html, OUT/compare.pdf and OUT/compare.json (docs/compare.md)."""
    from mapreport.run.comparing import compare_runs

    setup_logging(verbose)
    for path in (a_path, b_path):
        if not path.is_dir():
            raise DatasetError(f"{path}: no such dataset folder")
    done = compare_runs(a_path, b_path, out, **sides, pdf=not no_pdf)
    if quiet:
        return
    a, b = done.a, done.b
    echo(f"compared  {a.label} ({a.requests:,} requests) -> {b.label} ({b.requests:,})")
    echo(f"verdict   {done.verdict}")
    pdf = "" if no_pdf else f", {out / 'compare.pdf'}"
    echo(f"wrote     {out / 'compare.html'}, {out / 'compare.json'}{pdf}")
