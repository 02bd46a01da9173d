"""Worker processes as mapreport starts them: spawned, with a resource tracker that, when it is
killed, comes back without printing Python's tracebacks.

multiprocessing starts one resource tracker per command; it tracks the semaphores of the
pools' queues. When it is killed (by the out-of-memory killer, or by hand), CPython starts a
new one at the next use, and the new one prints a `KeyError` traceback for each semaphore the
dead one had registered and the pool then releases (CPython 3.11-3.13): noise on the
command's stderr that looks like a crash, after a run that succeeded. The new tracker is
started here with its stderr on /dev/null, and the command says once, in its own words, that
it was restarted.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import warnings
from multiprocessing import resource_tracker
from multiprocessing.context import SpawnContext
from typing import Any

log = logging.getLogger(__name__)
_GUARD = threading.Lock()
_GUARDED: list[bool] = []


def spawn_context() -> SpawnContext:
    """The spawn context every pool of mapreport's uses, with the tracker guard installed."""
    _guard_tracker()
    return multiprocessing.get_context("spawn")


def _guard_tracker() -> None:
    """Install the quiet relaunch once per process."""
    with _GUARD:
        if _GUARDED:
            return
        _GUARDED.append(True)
        tracker: Any = resource_tracker._resource_tracker  # private: see the module
        start = tracker.ensure_running

        def ensure_running() -> Any:
            if tracker._fd is None or tracker._check_alive():
                return start()
            log.warning(
                "the multiprocessing resource tracker of this command died (killed?) and "
                "was started again; semaphores it held may stay until the machine restarts"
            )
            saved = os.dup(2)
            quiet = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(quiet, 2)  # the new tracker inherits this stderr
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # said above, in one line
                    return start()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                os.close(quiet)

        tracker.ensure_running = ensure_running
