"""Static chart export: plotly figures to SVG through kaleido and one warm Chromium per run."""

from __future__ import annotations

import logging
import shutil
import time
import warnings
from dataclasses import dataclass, field

import plotly.graph_objects as go
import plotly.io as pio

log = logging.getLogger(__name__)

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


@dataclass
class SvgExporter:
    """Exports figures to SVG, starting Chromium once; a failure disables export for the rest
    of the run and is kept in `failure` so reports can say why their charts are missing."""

    failure: str | None = None
    timings_s: list[tuple[str, float]] = field(default_factory=list)
    """(chart id, seconds) per export of this run, for the render benchmark."""
    start_s: float | None = None
    """Seconds the warm Chromium took to start (once per run)."""
    _started: bool = False

    def _start(self) -> None:
        import kaleido  # imported late: it is slow to import and only the PDF needs it

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

    def close(self) -> None:
        """Stop the warm browser."""
        if self._started:
            import kaleido

            kaleido.stop_sync_server(silence_warnings=True)
            self._started = False
