"""Static chart export: plotly figures to SVG through kaleido and one warm Chromium per run."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    import plotly.graph_objects as go

log = logging.getLogger(__name__)

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
CLOSE_S = 20.0
"""How long stopping the warm browser may take before it is killed: kaleido joins its server
thread without a limit, and that thread once waited forever on a browser that did not answer
its close (a report worker's exit in a `make test` run, 2026-12-06: the run hung 11 minutes)."""


def browsers_below(root: int) -> set[int]:
    """The pids of the Chromium processes descending from process `root` (read from /proc;
    empty where there is none)."""
    parent: dict[int, int] = {}
    command: dict[int, str] = {}
    proc = Path("/proc")
    for entry in os.listdir(proc) if proc.is_dir() else ():
        if entry.isdigit():
            try:
                stat = (proc / entry / "stat").read_text()
                cmd = (proc / entry / "cmdline").read_bytes()
            except OSError:
                continue  # ended meanwhile
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            command[int(entry)] = cmd.decode(errors="replace")
    below: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - below
        below |= frontier
    return {p for p in below if "chrom" in command.get(p, "")}


class SvgExporter(msgspec.Struct):
    """Exports figures to SVG, starting Chromium once; a failure disables export for the rest
    of the run and is kept in `failure` so reports can say why their charts are missing."""

    failure: str | None = None
    timings_s: list[tuple[str, float]] = msgspec.field(default_factory=list)
    """(chart id, seconds) per export of this run, for the render benchmark."""
    start_s: float | None = None
    """Seconds the warm Chromium took to start (once per run)."""
    _started: bool = False

    def _start(self) -> None:
        import kaleido  # imported late: it is slow to import and only the PDF needs it
        import plotly.io as pio

        if not any(shutil.which(n) for n in CHROMIUM_NAMES):
            raise RuntimeError("no Chromium found on PATH (install Debian's 'chromium')")
        pio.defaults.mathjax = False  # MathJax would be fetched from a CDN and stalls offline
        t0 = time.perf_counter()
        kaleido.start_sync_server(mathjax=False, silence_warnings=True)
        self.start_s = time.perf_counter() - t0
        self._started = True

    def svg(self, fig: go.Figure, name: str = "") -> bytes | None:
        """The figure as SVG bytes, or None when export is unavailable (see `failure`)."""
        if self.failure is not None:
            return None
        try:
            if not self._started:
                self._start()
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                # plotly warns that per-call options are ignored with a warm server: intended
                warnings.simplefilter("ignore", UserWarning)
                out = fig.to_image(format="svg", width=fig.layout.width, height=fig.layout.height)
            self.timings_s.append((name, time.perf_counter() - t0))
            return bytes(out)
        except Exception as e:  # noqa: BLE001 - any exporter failure degrades, never aborts
            self.failure = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            log.warning("chart export disabled: %s", self.failure)
            return None

    def close(self, within_s: float = CLOSE_S) -> None:
        """Stop the warm browser; one that has not stopped within `within_s` is killed, with
        every Chromium below this process, so that neither a run nor a worker's exit waits on
        it."""
        if not self._started:
            return
        import kaleido

        self._started = False
        stopping = threading.Thread(
            target=kaleido.stop_sync_server,
            kwargs={"silence_warnings": True},
            name="chart-browser-close",
            daemon=True,
        )
        stopping.start()
        stopping.join(within_s)
        if not stopping.is_alive():
            return
        for pid in browsers_below(os.getpid()):
            with contextlib.suppress(OSError):  # ended meanwhile
                os.kill(pid, signal.SIGKILL)
        stopping.join(within_s)  # its browser gone, kaleido's thread reads the end of its pipe
        log.warning("the chart browser did not stop within %.0f s: killed", within_s)
        if stopping.is_alive():
            # kaleido's own close at the interpreter's exit would wait on the same thread
            from kaleido._sync_server import GlobalKaleidoServer

            GlobalKaleidoServer()._initialized = False
