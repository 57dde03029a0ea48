"""Embedding bokeh layouts in notebook outputs and standalone files, offline.

Both forms inline bokeh's JavaScript, so a page needs no server and no network. Shared by the
timeline and the roofline; bokeh is imported inside the functions.
"""

from __future__ import annotations

from typing import Any

from perflab.render.html import esc, wrap


def notebook_html(layout: Any, text: str) -> str:
    """HTML for a notebook output: the bokeh runtime inlined once per page (no network),
    then the plot. Viewers that run no JavaScript show the text view instead."""
    from bokeh.embed import components

    script, div = components(layout)
    runtime = "\n".join(_core_js())
    fallback = f"<noscript><pre>{esc(text)}</pre></noscript>"
    return wrap(
        f"<script>if (typeof window.Bokeh === 'undefined') {{\n{runtime}\n}}</script>"
        f"{div}{script}{fallback}"
    )


def _core_js() -> list[str]:
    from bokeh.resources import Resources

    return list(Resources(mode="inline", components=["bokeh"]).js_raw)


def standalone_html(layout: Any, title: str) -> str:
    """A complete HTML file with bokeh's JavaScript inlined: no server, no network."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    return str(file_html(layout, INLINE, title=title))
