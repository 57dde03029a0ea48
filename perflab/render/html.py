"""Small HTML and text building blocks. Every string from outside goes through :func:`esc`
in HTML and through :func:`printable` in text meant for a terminal."""

from __future__ import annotations

import base64
import functools
import html
import re
from collections.abc import Collection, Iterable, Sequence
from importlib import resources
from typing import Final

# text for a terminal lives in the model, where the compile diagnostics reach it too
from perflab.model.terminal import UNSAFE_TEXT as UNSAFE_TEXT
from perflab.model.terminal import escaped_char
from perflab.model.terminal import printable as printable
from perflab.model.terminal import printable_lines as printable_lines


@functools.cache
def static_text(name: str) -> str:
    """A file shipped in ``perflab/render/static`` (browser code and styles live there)."""
    return (resources.files("perflab.render") / "static" / name).read_text(encoding="utf-8")


def style() -> str:
    return f"<style>\n{static_text('perflab.css')}</style>"


# What XML 1.0 forbids in a document (C0 controls but tab, newline and carriage return;
# lone surrogates; U+FFFE and U+FFFF): one of them makes an SVG or XHTML reader reject the
# whole document, and a lone surrogate cannot be written as UTF-8 at all.
NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


# The bidirectional marks, embeddings, overrides and isolates: in a name from a file they
# would make the page show text other than what the file holds (a kernel's name read
# backwards, a range that seems to be another), so they are shown as their escapes.
BIDI_CONTROLS: Final = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def esc(value: object) -> str:
    """Escape any value for HTML, SVG and XML text and attribute context: markup characters
    escaped, each character of :data:`NOT_XML` replaced by U+FFFD, and each of
    :data:`BIDI_CONTROLS` written as its escape (``\\u202e``)."""
    text = NOT_XML.sub("\ufffd", str(value))
    return html.escape(BIDI_CONTROLS.sub(escaped_char, text), quote=True)


def svg_image(svg: str, alt: str, style: str = "") -> str:
    """An SVG document as an ``<img>`` with a data URI: the sanitisers of untrusted
    notebooks (JupyterLab's, GitHub's) drop inline ``<svg>`` but keep images."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    extra = f' style="{esc(style)}"' if style else ""
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{esc(alt)}"{extra}>'


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    raw_cols: int = 0,
    left: Collection[int] = (0,),
    css_class: str = "",
) -> str:
    """An HTML table. Cells are escaped, except the last ``raw_cols`` columns, which
    callers build from already-escaped markup (bars, links). Columns ``left`` (text) are
    left-aligned, the rest (numbers) right-aligned. ``css_class`` marks the table (e.g.
    ``perflab-sortable``, which ``static/sortable-table.js`` makes sortable)."""

    def td(i: int, content: str, tag: str = "td") -> str:
        return f'<{tag} class="l">{content}</{tag}>' if i in left else f"<{tag}>{content}</{tag}>"

    head = "".join(td(i, esc(h), "th") for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            is_raw = raw_cols and i >= len(row) - raw_cols
            cells.append(td(i, cell if is_raw else esc(cell)))
        body.append("<tr>" + "".join(cells) + "</tr>")
    opening = f'<table class="{esc(css_class)}">' if css_class else "<table>"
    return f"{opening}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def text_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, left: Collection[int] = (0,)
) -> str:
    """A fixed-width text table: columns ``left`` (text) left-aligned, the rest right.
    Cells are :func:`printable`: a control character in a name cannot reach the terminal."""
    headers = [printable(h) for h in headers]
    rows = [[printable(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def wrap(body: str) -> str:
    return f'{style()}<div class="perflab">{body}</div>'
