"""PDF: WeasyPrint over the print variant of the HTML report, fetching only our own assets."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from weasyprint import HTML
from weasyprint.urls import URLFetcher

from mapreport.report.html import STATIC_DIR

log = logging.getLogger(__name__)


class AssetsOnlyFetcher(URLFetcher):  # type: ignore[misc]
    """Allows `data:` URLs (the embedded SVG charts) and files below the package's static
    folder; anything else a trace could smuggle in (file:///etc/passwd, http://...) is
    refused and recorded in `blocked`."""

    def __init__(self) -> None:
        super().__init__(allowed_protocols=("data", "file"), allow_redirects=False)
        self.blocked: list[str] = []
        self._root = STATIC_DIR.resolve()

    def fetch(self, url: str, headers: Any = None) -> Any:
        """Fetch an allowed URL or raise ValueError (WeasyPrint then skips the resource)."""
        if url.startswith("data:"):
            return super().fetch(url, headers)
        if url.startswith("file://"):
            path = Path(url.removeprefix("file://").split("?")[0]).resolve()
            if path.is_relative_to(self._root):
                return super().fetch(url, headers)
        self.blocked.append(url[:200])
        log.warning("blocked a resource the report asked for: %s", url[:200])
        raise ValueError(f"mapreport fetches only its own assets; refused {url[:200]}")


def write_pdf(html: str, target: Path) -> list[str]:
    """Render HTML to a PDF file; returns the URLs that were refused."""
    fetcher = AssetsOnlyFetcher()
    # no base: a relative link (evidence/<id>.sql) stays relative to the PDF's own folder, not
    # a file:// path of the machine that built it (everything the report shows is inline)
    HTML(string=html, base_url=None, url_fetcher=fetcher).write_pdf(target)
    return fetcher.blocked
