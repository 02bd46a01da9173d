"""What the command line prints and how it ends: every line escaped for a terminal, domain
errors as one line and their exit code, logging in the same form."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from mapreport.core.errors import MapreportError

F = TypeVar("F", bound=Callable[..., Any])


_UNSAFE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What must not reach a terminal raw: C0 and C1 controls (ESC sequences retitle, clear or
recolour it; a newline forges a second line), bidi overrides, lone surrogates (undecodable
bytes of a file name)."""


def terminal_safe(text: str) -> str:
    """`text` with every unsafe character written as its escape (`\\x1b`, `\\n`, `\\u202e`)."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def echo(text: str, err: bool = False) -> None:
    """Print one line; names and messages from files cannot drive the terminal or split it."""
    click.echo(terminal_safe(text), err=err)


class _SafeFormatter(logging.Formatter):
    """Log lines escaped like everything else printed (tracebacks keep their newlines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().formatMessage(record))


def progress_printer(quiet: bool, always: bool = False) -> Callable[[str], None]:
    """Progress lines on stderr, on a terminal (a log file gets the summary lines), or with
    `always` anywhere: a Spark run, whose stages take minutes, says what it is at in a batch
    job's log too."""
    if quiet or not (always or sys.stderr.isatty()):
        return lambda _msg: None
    return lambda msg: echo(f"  {msg}", err=True)


SYSTEM_ERROR_EXIT = 7
"""Exit code when the operating system refused an operation (OSError)."""


def domain_errors(fn: F) -> F:
    """Turn a MapreportError into `mapreport: <message>` on stderr and its exit code."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MapreportError as e:
            for i, line in enumerate(e.lines()):  # each line escaped on its own
                echo(f"mapreport: {line}" if i == 0 else line, err=True)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            echo("mapreport: interrupted", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except OSError as e:  # the system refused: a full disk, a read-only or missing folder
            where = f" ({e.filename})" if e.filename else ""
            echo(f"mapreport: system error: {e.strerror or e}{where}", err=True)
            sys.exit(SYSTEM_ERROR_EXIT)
        except Exception as e:
            first = str(e).splitlines()[0] if str(e) else ""
            echo(
                f"mapreport: internal error: {type(e).__name__}: {first} "
                "(run with -v for the traceback; please report it)",
                err=True,
            )
            if logging.getLogger().isEnabledFor(logging.INFO):
                logging.getLogger(__name__).exception("internal error")
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def setup_logging(verbose: bool) -> None:
    """Warnings (with -v, every step) as `mapreport: LEVEL name: message`, escaped."""
    handler = logging.StreamHandler()
    handler.setFormatter(_SafeFormatter("mapreport: %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    for noisy in ("weasyprint", "fontTools", "choreographer", "kaleido", "logistro"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
