"""HTML: the Jinja environment (autoescape on everywhere) and the two renderings of one report,
interactive for screens and with SVG charts for print."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.bccache
from markupsafe import Markup

from mapreport.report import states, words
from mapreport.report.filters import FILTERS

if TYPE_CHECKING:
    import plotly.graph_objects as go


def _templates_dir() -> Path:
    installed = Path(__file__).resolve().parent.parent / "templates"
    source = Path(__file__).resolve().parents[2] / "templates"
    return installed if installed.is_dir() else source


TEMPLATES_DIR = _templates_dir()
STATIC_DIR = TEMPLATES_DIR / "static"


OPTIONS: dict[str, Any] = {
    "autoescape": True,
    "undefined": jinja2.StrictUndefined,
    "trim_blocks": True,
    "lstrip_blocks": True,
}
"""How the environment compiles and renders templates (they also name its compiled code)."""


class _CompiledTemplates(jinja2.FileSystemBytecodeCache):
    """Templates compiled once for every process of this user: a fresh process loads the
    compiled code of each template it renders (all of them: 0.05 s) instead of compiling it
    again (1.6-2.3 s; Jinja checks each template's source against what was compiled). Kept in
    Jinja's folder for the user (in the temporary folder, its mode and owner checked); what
    cannot be written there is compiled again next time, never an error."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        """Keep a compiled template, where the folder allows."""
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def compiled_templates() -> jinja2.BytecodeCache | None:
    """The cache of compiled templates, named by Jinja's version and OPTIONS (compiled code
    depends on both); None where no safe folder can be had."""
    named = repr((jinja2.__version__, sorted((k, repr(v)) for k, v in OPTIONS.items())))
    digest = hashlib.sha256(named.encode()).hexdigest()[:16]
    try:
        return _CompiledTemplates(pattern=f"mapreport-{digest}-%s.cache")
    except (OSError, RuntimeError):  # Jinja refuses a folder another user holds
        return None


@cache
def environment() -> jinja2.Environment:
    """The one Jinja environment: autoescaping for every template, strict undefined."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        bytecode_cache=compiled_templates(),
        **OPTIONS,
    )
    env.filters.update(FILTERS)
    env.filters["label"] = words.label
    env.filters["criterion"] = words.criterion
    env.filters["metric"] = words.metric
    env.filters["evidence"] = words.evidence
    env.filters["shape_name"] = words.shape_name
    env.filters["state_line"] = states.state_line
    env.filters["trigger"] = states.trigger
    return env


@cache
def css() -> str:
    """The report stylesheet (screen and print rules), inlined into every report."""
    return (STATIC_DIR / "report.css").read_text(encoding="utf-8")


@cache
def page_js() -> str:
    """The few lines behind sortable tables and "copy as ticket" (inlined: no CDN)."""
    return (STATIC_DIR / "page.js").read_text(encoding="utf-8")


@cache
def plotly_js() -> str:
    """plotly.js, inlined once per HTML file (no CDN: reports are read offline)."""
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def _script_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' can end it early."""
    text = json.dumps(obj, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def interactive_chart(chart_id: str, fig: go.Figure) -> Markup:
    """A div and the script that draws the figure into it with plotly.js."""
    spec = fig.to_plotly_json()
    spec["layout"].pop("width", None)
    payload = _script_json({"data": spec["data"], "layout": spec["layout"]})
    dom_id = f"chart-{chart_id}"
    return Markup(
        f'<div class="chart" id="{dom_id}"></div>'
        f"<script>(function(){{var s={payload};"
        f'Plotly.newPlot("{dom_id}",s.data,s.layout,'
        f'{{"responsive":true,"displaylogo":false}});}})();</script>'
    )


def static_chart(chart_id: str, svg: bytes | None, failure: str | None) -> Markup:
    """An <img> of the SVG export, or a visible note that the chart could not be exported."""
    if svg is None:
        why = Markup.escape(failure or "chart export unavailable")
        return Markup(
            f'<p class="degraded">Chart “{Markup.escape(chart_id)}” is missing from this PDF: '
            f"{why}. The HTML report has it.</p>"
        )
    data = base64.b64encode(svg).decode()
    return Markup(f'<img class="chart" alt="{chart_id}" src="data:image/svg+xml;base64,{data}">')


def render(template: str, **context: Any) -> str:
    """Render a template with the shared environment."""
    return environment().get_template(template).render(**context)


_TERM_LINK = re.compile(r'href="#term-([A-Za-z0-9_-]{1,80})"')


def terms_used(page: str) -> frozenset[str]:
    """The glossary terms a rendered page links to."""
    return frozenset(_TERM_LINK.findall(page))
