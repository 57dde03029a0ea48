"""The rows and inline styles every pane of the compile view (:mod:`perflab.render.ptx_view`)
is built from: a row per line, its number, its kind and the colour of its source line.

Inline styles: JupyterLab drops <style> and <script> from an untrusted notebook's HTML but
keeps style attributes (with plain values: hex colours, px and em sizes, flex), so the panes
stay side by side, scroll, and keep their line colours there. The view's <style> block
(``static/ptx-view.css``) adds what needs selectors (hover, pinning, filters, layouts) where
the page is trusted.
"""

from __future__ import annotations

from collections.abc import Callable

from perflab.render.html import esc

INLINE = {
    "panes": "display: flex; gap: 6px; margin-top: 6px",
    "pane": "flex: 1 1 0px; min-width: 0px; border: 1px solid #cccccc; border-radius: 3px",
    "code": (
        "max-height: 480px; overflow: auto; font-family: monospace; font-size: 12px; "
        "line-height: 1.35; white-space: pre"
    ),
    "number": "color: #999999",
    "head": "display: flex; gap: 24px; flex-wrap: wrap",
    "insights": "flex: 1 1 280px; min-width: 280px",
    "filters": "font-size: 12px; margin: 4px 0px",
    "control": "color: #555555",
    "live": "color: #2f5f8a",
    "peak": "color: #d62728; font-weight: bold",
    "schedule": "margin: 4px 0px",
    "column-head": "color: #555555; font-weight: bold; border-bottom: 1px solid #dddddd",
    "pane-note": "font-size: 12px; padding: 2px 6px; color: #555555; border-top: 1px solid #dddddd",
}
EM_PER_CHAR = 0.6  # a monospace font's advance (DejaVu Sans Mono, Menlo, Liberation Mono)
KIND_COLORS = {"directive": "#777777", "comment": "#777777", "label": "#7a3e9d"}


def _hue(line: int) -> int:
    return int(line * 137.508) % 360  # golden angle: neighbouring lines get distant hues


def line_color(line: int, *, hover: bool = False) -> str:
    """The background of source line ``line``'s rows, as hex (the sanitiser of untrusted
    notebooks keeps hex colours in style attributes)."""
    import colorsys

    light, sat = (0.78, 0.85) if hover else (0.91, 0.75)
    r, g, b = colorsys.hls_to_rgb(_hue(line) / 360, light, sat)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def number_span(number: str) -> str:
    """A row's line number or address (not selectable with the code)."""
    return f'<span class="n" style="{INLINE["number"]}">{esc(number)} </span>'


def code_row(
    number: str,
    text: str,
    *,
    line: int | None = None,
    ptx: int | None = None,
    kind: str = "instruction",
) -> str:
    """One line of a pane: its number, then its text as one text node (the JupyterLab
    extension highlights a row's own text), coloured by its source ``line``."""
    attrs = f' class="k-{esc(kind)}"'
    styles = []
    if line is not None:
        attrs += f' data-l="{line}"'
        styles.append(f"background-color: {line_color(line)}")
    if ptx is not None:
        attrs += f' data-p="{ptx}"'
    if kind in KIND_COLORS:
        styles.append(f"color: {KIND_COLORS[kind]}")
    if styles:
        attrs += f' style="{"; ".join(styles)}"'
    return f"<div{attrs}>{number_span(number)}{esc(text)}</div>"


def numbered_rows(
    lines: list[str], first: int, row: Callable[[str, int, str], str]
) -> tuple[str, str]:
    """The rows of a pane of numbered lines (``row(number, index, text)`` makes each, the
    number right-aligned to the widest), and the pane's style: lines wrap, never scroll
    sideways, under a hanging indent of the numbers' width, so a continuation starts under
    its line's text."""
    width = len(str(first + max(len(lines) - 1, 0)))
    rows = "".join(row(str(first + i).rjust(width), i, text) for i, text in enumerate(lines))
    indent = f"{(width + 1) * EM_PER_CHAR:.2f}em"
    style = (
        f"{INLINE['code']}; white-space: pre-wrap; overflow-wrap: anywhere; "
        f"padding-left: {indent}; text-indent: -{indent}"
    )
    return rows, style


def pane(
    title: str,
    body: str,
    *,
    kind: str,
    hint: str = "",
    code_style: str = INLINE["code"],
    foot: str = "",
) -> str:
    """A titled pane of rows; ``kind`` (source, ptx, sass or a Triton stage) lets the view's
    style size it, ``foot`` is a note under its rows."""
    hover = f' title="{esc(hint)}"' if hint else ""
    return (
        f'<div class="pv-pane" data-pane="{esc(kind)}" style="{INLINE["pane"]}">'
        f"<h4{hover}>{esc(title)}</h4>"
        f'<div class="pv-code" style="{code_style}">{body}</div>{foot}</div>'
    )
