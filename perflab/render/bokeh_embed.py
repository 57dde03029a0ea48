"""Embedding bokeh layouts in notebook outputs and standalone files, offline.

Every notebook output of a chart passes through :func:`notebook_bundle`, which gives it
three forms:

- the interactive plot: bokeh's document and a script that draws it, once BokehJS is in the
  page;
- a static picture (:mod:`perflab.render.svg`), both as ``image/svg+xml`` in the bundle and
  inside the HTML as an ``<img>`` (kept by JupyterLab's sanitiser, unlike inline SVG), shown
  until the plot draws: GitHub, nbviewer, untrusted notebooks and viewers that run no script
  show the chart, not an empty box;
- the text view (``text/plain``).

BokehJS itself (about 1.3 MB) is inlined in the first chart output of a kernel session only
(see :class:`RuntimeOnce`), so the notebook stores it once; the plots of later outputs wait
for it. Outside a kernel (a script, a saved page) and in Colab (a frame per output) each
output carries it, so it stands alone.
bokeh is imported inside the functions.
"""

from __future__ import annotations

import sys
from typing import Any

from perflab.render.html import static_text, svg_image, wrap

# Run the plot's script once BokehJS is in the page, then hide the static picture. A later
# output can be drawn before the one carrying BokehJS (a page still loading): it waits a
# while, and if BokehJS never comes the static picture stays.
_DRAW = "(function(){{{}}})();"


def _draw_script(bokeh_js: str) -> str:
    waiter = static_text("bokeh-draw.js")
    return f"<script>{_DRAW.format(waiter + 'draw(function(){' + bokeh_js + '});')}</script>"


class RuntimeOnce:
    """Which chart outputs of a kernel session carry BokehJS.

    The first one does; so does any later output of the same cell (re-running it replaces
    the output that carried BokehJS) and the next output after that cell was deleted
    (JupyterLab says so in each request's metadata). Where the front end sends no cell ids,
    the first output of the session carries it."""

    def __init__(self) -> None:
        self.sent = False
        self.cell: str | None = None

    def needed(self, metadata: dict[str, Any] | None) -> bool:
        """Whether this output must carry BokehJS; ``None``: not in a kernel."""
        if metadata is None:
            return True
        cell = metadata.get("cellId")
        deleted = metadata.get("deletedCells") or []
        again = cell is not None and cell == self.cell
        if not self.sent or again or (self.cell is not None and self.cell in deleted):
            self.sent, self.cell = True, cell if isinstance(cell, str) else None
            return True
        return False


RUNTIME = RuntimeOnce()


def _request_metadata() -> dict[str, Any] | None:
    """The metadata of the kernel request being run, or None where each output must stand
    alone: outside a kernel, and in Colab (which shows every output in a frame of its own)."""
    if "google.colab" in sys.modules:
        return None
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell")
    except Exception:  # an older or unusual kernel: treat as a fresh request
        parent = {}
    metadata = parent.get("metadata") if isinstance(parent, dict) else None
    return dict(metadata) if isinstance(metadata, dict) else {}


def static_svg(layout: Any, text: str) -> str:
    """The static picture of ``layout`` (titled by the text view's first line)."""
    from perflab.render.svg import layout_svg

    return layout_svg(layout, text.splitlines()[0] if text else "")


def _picture(svg: str, text: str) -> str:
    alt = text.splitlines()[0] if text else "chart"
    image = svg_image(svg, alt, "max-width: 100%; height: auto")
    return f'<div class="perflab-static">{image}</div>'


def _chart_html(layout: Any, text: str, svg: str, runtime: bool | None) -> str:
    from bokeh.embed import components

    if runtime is None:
        runtime = RUNTIME.needed(_request_metadata())
    script, div = components(layout, wrap_script=False)
    loader = ""
    if runtime:
        core = "\n".join(_core_js())
        loader = f"<script>if (typeof window.Bokeh === 'undefined') {{\n{core}\n}}</script>"
    return wrap(
        f'<div class="perflab-chart">{loader}{_picture(svg, text)}{div}{_draw_script(script)}</div>'
    )


def notebook_bundle(
    layout: Any, text: str, *, after: str = "", runtime: bool | None = None
) -> dict[str, str]:
    """The MIME bundle of a chart: text, HTML (plus ``after``, already-escaped markup such
    as a table) and the static picture as ``image/svg+xml``."""
    svg = static_svg(layout, text)
    return {
        "text/plain": text,
        "text/html": _chart_html(layout, text, svg, runtime) + after,
        "image/svg+xml": svg,
    }


def _core_js() -> list[str]:
    from bokeh.resources import Resources

    return list(Resources(mode="inline", components=["bokeh"]).js_raw)


def standalone_html(layout: Any, title: str) -> str:
    """A complete HTML file with bokeh's JavaScript inlined: no server, no network."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    return str(file_html(layout, INLINE, title=title))
