"""Option values the command line checks before any file is read: a bad one is a usage error
(exit 2) naming the option, not a failure halfway through an ingest."""

from __future__ import annotations

from datetime import date

import click


def edges_option(value: str | None) -> str | None:
    """--sequence-buckets checked before any file is read (a bad list is a usage error)."""
    if value is None:
        return None
    from mapreport.core.shapes import ShapeError, parse_edges

    try:
        return ",".join(map(str, parse_edges(value)))
    except ShapeError as e:
        raise click.BadParameter(str(e)) from None


def span_option(value: str | None) -> str | None:
    """--request-span checked before any file is read (a bad pattern is a usage error)."""
    if value is None:
        return None
    from mapreport.ingest.kineto_requests import span_pattern

    try:
        span_pattern(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return value


def date_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> date | None:
    """Click's callback for a YYYY-MM-DD option (`date_option`)."""
    return date_option(value)


def date_option(value: str | None) -> date | None:
    """A YYYY-MM-DD option as a date (None when not given); anything else is a usage error."""
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date (YYYY-MM-DD)") from None


def selection_callback(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[str, str] | None:
    """Click's callback for a side's environment selection: `[environment.]KEY=VALUE`, KEY an
    environment record's key (docs/formats.md), as (key, value)."""
    if value is None:
        return None
    from mapreport.core.schema import ENVIRONMENT_SHOWN

    key, eq, wanted = value.partition("=")
    key = key.strip().removeprefix("environment.")
    if not eq or not wanted:
        raise click.BadParameter(f"{value!r} is not KEY=VALUE (environment.compiler_version=1.5)")
    if key not in ENVIRONMENT_SHOWN:
        raise click.BadParameter(
            f"{key!r} is not an environment key (one of: {', '.join(ENVIRONMENT_SHOWN)})"
        )
    return key, wanted
