"""`mapreport export`: the tables a report or a comparison shows, taken from its findings.json
or compare.json, as CSV, Parquet and one workbook each (docs/api.md, "Exports")."""

from __future__ import annotations

from pathlib import Path

import click

from mapreport.app.options import quiet_opt, verbose_opt
from mapreport.app.terminal import domain_errors, echo, setup_logging


@click.command("export")
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Output folder: OUT/<workload>[/<slice>]/ for a report, OUT/<compare folder>/ for a "
    "comparison, each with <table>.csv, .parquet and tables.xlsx.",
)
@quiet_opt
@verbose_opt
@domain_errors
def export_cmd(reports: tuple[Path, ...], out: Path, quiet: bool, verbose: bool) -> None:
    """Write every table a report shows (per_shape, op_shape, tail_drivers, judgements,
    actions, checklist) or a comparison shows (shapes, shape_tests, tail, shapes_one_side,
    ops, ops_one_side, categories, mapping_shapes) as CSV and Parquet, and a workbook with a
    sheet per table, named and typed as in findings.json or compare.json. REPORTS:
    findings.json or compare.json files, or folders holding them (a report run's OUT, one
    slice's folder, a `mapreport compare` OUT)."""
    from mapreport.run.api_export import export

    setup_logging(verbose)
    for name, folder in export(list(reports), out):
        if not quiet:
            echo(f"export    {name} -> {folder}/")
