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
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING

from perflab.render.html import static_text, svg_image, wrap

if TYPE_CHECKING:
    from bokeh.model import Model

# where a static script takes the code it wraps (a comment: the file alone stays valid)
CODE_HERE = "/* CODE */"


def _script(name: str, code: str) -> str:
    """A ``<script>`` of static file ``name`` with ``code`` in its place."""
    head, found, tail = static_text(name).partition(CODE_HERE)
    if not found:
        raise ValueError(f"static/{name} has no {CODE_HERE} for the code it wraps")
    return f"<script>{head}{code}{tail}</script>"


def _draw_script(bokeh_js: str) -> str:
    """Run the plot's script once BokehJS is in the page (see static/bokeh-draw.js)."""
    return _script("bokeh-draw.js", bokeh_js)


class RuntimeOnce:
    """Which chart outputs of a kernel session carry BokehJS.

    The first one does; so does any later output of the same cell (re-running it replaces
    the output that carried BokehJS) and the next output after that cell was deleted
    (JupyterLab says so in each request's metadata). Where the front end sends no cell ids,
    the first output of the session carries it."""

    def __init__(self) -> None:
        self.sent = False
        self.cell: str | None = None

    def needed(self, metadata: Mapping[str, object] | None) -> bool:
        """Whether this output must carry BokehJS; ``None``: not in a kernel."""
        if metadata is None:
            return True
        cell = metadata.get("cellId")
        deleted = metadata.get("deletedCells") or []
        gone = isinstance(deleted, Container) and self.cell is not None and self.cell in deleted
        again = cell is not None and cell == self.cell
        if not self.sent or again or gone:
            self.sent, self.cell = True, cell if isinstance(cell, str) else None
            return True
        return False


RUNTIME = RuntimeOnce()


def _request_metadata() -> dict[str, object] | None:
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


def static_svg(layout: Model, text: str) -> str:
    """The static picture of ``layout`` (titled by the text view's first line)."""
    from perflab.render.svg import layout_svg

    return layout_svg(layout, text.splitlines()[0] if text else "")


def _picture(svg: str, text: str) -> str:
    alt = text.splitlines()[0] if text else "chart"
    image = svg_image(svg, alt, "max-width: 100%; height: auto")
    return f'<div class="perflab-static">{image}</div>'


def _chart_html(layout: Model, text: str, svg: str, runtime: bool | None) -> str:
    from bokeh.embed import components

    if runtime is None:
        runtime = RUNTIME.needed(_request_metadata())
    script, div = components(layout, wrap_script=False)
    loader = ""
    if runtime:
        loader = _script("bokeh-load.js", "\n".join(_core_js()))
    return wrap(
        f'<div class="perflab-chart">{loader}{_picture(svg, text)}{div}{_draw_script(script)}</div>'
    )


def notebook_bundle(
    layout: Model, text: str, *, after: str = "", runtime: bool | None = None
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


def standalone_html(layout: Model, title: str) -> str:
    """A complete HTML file with bokeh's JavaScript inlined: no server, no network."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    return str(file_html(layout, INLINE, title=title))
