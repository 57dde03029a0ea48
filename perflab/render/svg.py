"""Static SVG pictures of bokeh layouts, for viewers that run no JavaScript.

GitHub, nbviewer without scripts, an untrusted notebook and text-only front ends cannot run
BokehJS, and no browser is available when an output is built. So this module draws a bokeh
layout itself: it walks each figure's renderers and their ColumnDataSources (quad, rect,
hbar, vbar, line, multi_line, scatter, circle, segment, text, and the Span, Label, LabelSet
and BoxAnnotation annotations), the axes (linear or log, fixed tickers and label overrides),
the title and the legend. Anything else is left out of the picture, never guessed.

The picture stays small whatever the data: rectangles that touch at pixel resolution merge,
lines keep at most a few points per pixel column, markers on the same pixel draw once, and a
figure holds at most :data:`MAX_SHAPES` shapes (the largest kept). A timeline draws its bars
from the page's pre-computed levels (its visible sources are filled by a script in the
page); :mod:`perflab.render.svg_timeline` reads them the way that script does for the whole
range. The generic chart primitives (scales, ticks, glyphs) are :mod:`perflab.render.svg_chart`.

Every string (titles, labels, kernel names) goes through :func:`perflab.render.html.esc`.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perflab.model.units import shorten
from perflab.render.html import esc
from perflab.render.svg_chart import FONT as FONT
from perflab.render.svg_chart import GRID as GRID

# the chart primitives and the timeline's page-filled sources have their own modules;
# their names are importable from here too
from perflab.render.svg_chart import MAX_SHAPES as MAX_SHAPES
from perflab.render.svg_chart import PLAIN as PLAIN
from perflab.render.svg_chart import TIMELINE as TIMELINE
from perflab.render.svg_chart import Y_LABEL_CHARS as Y_LABEL_CHARS
from perflab.render.svg_chart import Floats as Floats
from perflab.render.svg_chart import GlyphColumns as GlyphColumns
from perflab.render.svg_chart import Scale as Scale
from perflab.render.svg_chart import Shapes as Shapes
from perflab.render.svg_chart import TextProps as TextProps
from perflab.render.svg_chart import axis_range as axis_range
from perflab.render.svg_chart import axis_ticks as axis_ticks
from perflab.render.svg_chart import current_look as current_look
from perflab.render.svg_chart import draw_boxes as draw_boxes
from perflab.render.svg_chart import draw_glyph as draw_glyph
from perflab.render.svg_chart import draw_text as draw_text
from perflab.render.svg_chart import marker_path as marker_path
from perflab.render.svg_chart import merge_boxes as merge_boxes
from perflab.render.svg_chart import nice_ticks as nice_ticks
from perflab.render.svg_chart import num as num
from perflab.render.svg_chart import paint_attrs as paint_attrs
from perflab.render.svg_chart import renderer_data as renderer_data
from perflab.render.svg_chart import stroke_attrs as stroke_attrs
from perflab.render.svg_chart import text_element as text_element
from perflab.render.svg_timeline import Filled as Filled
from perflab.render.svg_timeline import busy_outline as busy_outline
from perflab.render.svg_timeline import collective_sources as collective_sources
from perflab.render.svg_timeline import timeline_args as timeline_args
from perflab.render.svg_timeline import timeline_sources as timeline_sources

if TYPE_CHECKING:
    from bokeh.model import Model
    from bokeh.models import Axis, Plot
    from bokeh.models.annotations import BoxAnnotation, Label, Legend, LegendItem, Span
    from bokeh.models.glyph import Glyph
    from bokeh.models.renderers import GlyphRenderer

# --- one figure ----------------------------------------------------------------------------


@dataclass
class Box:
    """The plot area of a figure (``ox``: the figure's own left edge)."""

    x: float
    y: float
    w: float
    h: float
    ox: float


def _glyph_renderers(fig: Plot) -> Iterator[GlyphRenderer[Glyph]]:
    from bokeh.models.renderers import GlyphRenderer

    for r in fig.renderers:
        if isinstance(r, GlyphRenderer) and r.visible and r.glyph is not None:
            yield r


def _data_of(fig: Plot, filled: Filled) -> Filled:
    out: Filled = {}
    for r in _glyph_renderers(fig):
        out[id(r)] = filled.get(id(r.data_source)) or renderer_data(r)
    return out


X_PROPS = ("x", "left", "right", "x0", "x1")
Y_PROPS = ("y", "top", "bottom", "y0", "y1")


def _data_values(fig: Plot, data: Filled, props: Sequence[str]) -> list[Floats]:
    values = []
    for r in _glyph_renderers(fig):
        cols = GlyphColumns(r.glyph, data[id(r)])
        for p in props:
            if getattr(r.glyph, p, None) is not None and p in type(r.glyph).properties():
                values.append(cols.num(p))
        for p in ("xs" if props is X_PROPS else "ys",):
            if p in type(r.glyph).properties():
                values += [np.asarray(v, float) for v in cols.seq(p)]
    return values


def _scales(fig: Plot, frame: Box, data: Filled) -> tuple[Scale, Scale]:
    xlog = type(fig.x_scale).__name__ == "LogScale"
    ylog = type(fig.y_scale).__name__ == "LogScale"
    x0, x1 = axis_range(fig.x_range, _data_values(fig, data, X_PROPS), xlog)
    y0, y1 = axis_range(fig.y_range, _data_values(fig, data, Y_PROPS), ylog)
    sx = Scale(x0, x1, xlog, frame.x, frame.x + frame.w)
    sy = Scale(y0, y1, ylog, frame.y + frame.h, frame.y)
    return sx, sy


def _visible_axes(models: Sequence[object]) -> list[Axis]:
    from bokeh.models import Axis

    return [a for a in models if isinstance(a, Axis) and a.visible]


def _axis_title(text: str, x: float, y: float, vertical: bool) -> str:
    props: TextProps = {"align": "center", "size": "12px", "color": "#333333"}
    if vertical:
        props.update({"baseline": "middle", "angle": math.pi / 2})
    return text_element(x, y, text, props)


def _axes(out: list[str], fig: Plot, frame: Box, sx: Scale, sy: Scale) -> None:
    """Grid lines, tick labels and axis titles (bottom and left axes)."""
    bottom, right = frame.y + frame.h, frame.x + frame.w
    size = f"{current_look.get().tick_px:g}px"
    tick_x: TextProps = {"align": "center", "baseline": "top", "size": size}
    tick_y: TextProps = {"align": "right", "baseline": "middle", "size": size}
    for axis in _visible_axes(fig.below):
        for t, label in axis_ticks(axis, sx.start, sx.end, sx.log):
            px = float(sx([t])[0])
            out.append(f'<path d="M{num(px)} {num(frame.y)}V{num(bottom)}" stroke="{GRID}"/>')
            out.append(text_element(px, bottom + 4, label, tick_x))
        if axis.axis_label:
            out.append(_axis_title(str(axis.axis_label), frame.x + frame.w / 2, bottom + 40, False))
    for axis in _visible_axes(fig.left):
        for t, label in axis_ticks(axis, sy.start, sy.end, sy.log):
            py = float(sy([t])[0])
            out.append(f'<path d="M{num(frame.x)} {num(py)}H{num(right)}" stroke="{GRID}"/>')
            out.append(text_element(frame.x - 4, py, shorten(label, Y_LABEL_CHARS), tick_y))
        if axis.axis_label:
            out.append(
                _axis_title(str(axis.axis_label), frame.ox + 12, frame.y + frame.h / 2, True)
            )


def _rect(box: Box, paint: str) -> str:
    where = f'x="{num(box.x)}" y="{num(box.y)}" width="{num(box.w)}" height="{num(box.h)}"'
    return f"<rect {where} {paint}/>"


def frame_margin(fig: Plot) -> tuple[float, float, float, float]:
    """Left, top, right, bottom space around the plot area, as bokeh leaves roughly."""
    has = {"left": bool(_visible_axes(fig.left)), "below": bool(_visible_axes(fig.below))}
    labels = [str(getattr(a, "major_label_overrides", {}) or "") for a in fig.left]
    left = 70.0 + (20.0 if any(len(s) > 60 for s in labels) else 0.0) if has["left"] else 10.0
    char_px = 6.5 * current_look.get().tick_px / PLAIN.tick_px
    left = max(left, _longest_y_label(fig) * char_px + 30) if has["left"] else left
    top = 28.0 if getattr(fig.title, "text", "") else 10.0
    right = 10.0 + (_legend_width(fig) if _outside_legends(fig) else 0.0)
    bottom = 48.0 if has["below"] else 10.0
    return left, top, right, bottom


def _longest_y_label(fig: Plot) -> int:
    longest = 0
    for axis in fig.left:
        for value in (getattr(axis, "major_label_overrides", {}) or {}).values():
            longest = max(longest, min(len(str(value)), Y_LABEL_CHARS))
    return longest


def _outside_legends(fig: Plot) -> list[Legend]:
    from bokeh.models.annotations import Legend

    return [m for m in fig.right if isinstance(m, Legend)]


def _legend_items(legend: Legend) -> list[LegendItem]:
    """The legend's items (bokeh turns the tuples it is given into LegendItems)."""
    from bokeh.models.annotations import LegendItem

    return [item for item in legend.items if isinstance(item, LegendItem)]


def _legend_entries(legend: Legend, data: Filled) -> list[tuple[str, GlyphRenderer[Glyph]]]:
    entries = []
    for item in _legend_items(legend):
        if not item.renderers:
            continue
        label = item.label
        field = getattr(label, "field", None)
        r = item.renderers[0]
        if field is not None:
            column = data.get(id(r), {}).get(field, [])
            values = column if isinstance(column, Iterable) else []
            for value in dict.fromkeys(str(v) for v in values):
                entries.append((value, r))
        else:
            entries.append((str(getattr(label, "value", label)), r))
    return entries


def _legend_width(fig: Plot) -> float:
    longest = 0
    for legend in fig.legend:
        for item in _legend_items(legend):
            longest = max(longest, len(str(getattr(item.label, "value", item.label) or "")))
    return 40.0 + 6.5 * min(longest, 60)


def _swatch(r: GlyphRenderer[Glyph], x: float, y: float) -> str:
    glyph = r.glyph
    cols = GlyphColumns(glyph, renderer_data(r))
    kind = type(glyph).__name__
    if kind in ("Line", "MultiLine", "Segment"):
        return f'<path d="M{num(x)} {num(y)}h18" {stroke_attrs(cols)}/>'
    fill = cols.style("fill")[0] if cols.n else ("#888888", 1.0)
    if kind in ("Scatter", "Circle"):
        marker = str(cols.seq("marker")[0]) if kind == "Scatter" else "circle"
        paint = paint_attrs(fill, cols.style("line")[0])
        return f'<path d="{marker_path(marker, x + 9, y, 5)}" {paint}/>'
    return f'<path d="M{num(x + 2)} {num(y - 5)}h14v10h-14Z" {paint_attrs(fill)}/>'


def _legends(out: list[str], fig: Plot, frame: Box, data: Filled) -> None:
    outside = {id(m) for m in _outside_legends(fig)}
    for legend in fig.legend:
        if not legend.visible:
            continue
        entries = _legend_entries(legend, data)[:30]
        if not entries:
            continue
        width, height = _legend_width(fig), 18.0 * len(entries) + 8
        if id(legend) in outside:
            x, y = frame.x + frame.w + 10, frame.y
        else:
            loc = legend.location if isinstance(legend.location, str) else "top_right"
            x = frame.x + 8 if "left" in loc else frame.x + frame.w - width - 8
            y = frame.y + frame.h - height - 8 if "bottom" in loc else frame.y + 8
        out.append(
            _rect(Box(x, y, width, height, x), 'fill="#ffffff" fill-opacity="0.9" stroke="#ddd"')
        )
        for i, (label, r) in enumerate(entries):
            row_y = y + 13 + 18 * i
            out.append(_swatch(r, x + 6, row_y))
            out.append(text_element(x + 30, row_y, label, {"baseline": "middle", "size": "11px"}))


def _at(scale: Scale, value: object) -> float:
    """Where a model's coordinate (a number, as the models drawn here hold) lands."""
    return float(scale(np.asarray([value], dtype=np.float64))[0])


def _span(out: Shapes, m: Span, frame: Box, sx: Scale, sy: Scale) -> None:
    if m.location is None:
        return
    if m.dimension == "height":
        px = num(_at(sx, m.location))
        d = f"M{px} {num(frame.y)}V{num(frame.y + frame.h)}"
    else:
        py = num(_at(sy, m.location))
        d = f"M{num(frame.x)} {py}H{num(frame.x + frame.w)}"
    out.add(f'<path d="{d}" {stroke_attrs(GlyphColumns(m, {}))}/>')


def _label(out: Shapes, m: Label, sx: Scale, sy: Scale) -> None:
    props: TextProps = {
        "align": m.text_align, "baseline": m.text_baseline, "size": m.text_font_size,
        "color": m.text_color, "angle": m.angle,
    }  # fmt: skip
    px = _at(sx, m.x) + (m.x_offset or 0)
    py = _at(sy, m.y) - (m.y_offset or 0)
    out.add(text_element(px, py, str(m.text), props))


def _box_annotation(out: Shapes, m: BoxAnnotation, sx: Scale, sy: Scale) -> None:
    def at(value: object, edge: float) -> float:  # unset or a frame edge (a Node): that edge
        return float(value) if isinstance(value, (int, float)) else edge

    left, right = at(m.left, sx.start), at(m.right, sx.end)
    bottom, top = at(m.bottom, sy.start), at(m.top, sy.end)
    draw_boxes(out, GlyphColumns(m, {}), (sx([left]), sx([right]), sy([bottom]), sy([top])))


def _annotations(out: Shapes, fig: Plot, frame: Box, sx: Scale, sy: Scale) -> None:
    from bokeh.models.annotations import BoxAnnotation, Label, LabelSet, Span

    for m in fig.center:
        if not getattr(m, "visible", True):
            continue
        if isinstance(m, Span):
            _span(out, m, frame, sx, sy)
        elif isinstance(m, Label):
            _label(out, m, sx, sy)
        elif isinstance(m, LabelSet):
            draw_text(out, GlyphColumns(m, _source_of(m)), sx, sy)
        elif isinstance(m, BoxAnnotation):
            _box_annotation(out, m, sx, sy)


def share_budget(needs: Sequence[int], total: int) -> list[int]:
    """Shapes each renderer may draw: all it has when everything fits, else an equal cap
    that small renderers stay under (what they leave goes to the large ones)."""
    caps = [0] * len(needs)
    left = total
    order = sorted(range(len(needs)), key=lambda i: needs[i])
    for k, i in enumerate(order):
        caps[i] = min(needs[i], left // (len(needs) - k))
        left -= caps[i]
    return caps


def _source_of(model: object) -> dict[str, object]:
    return dict(getattr(getattr(model, "source", None), "data", {}) or {})


def figure_svg_parts(
    fig: Plot, x: float, y: float, filled: Filled, min_left: float = 0.0
) -> list[str]:
    """SVG fragments of one bokeh figure placed at (x, y); its plot area starts at least
    ``min_left`` from its edge (so that stacked figures line up)."""
    width, height = float(fig.width or 600), float(fig.height or 600)
    left, top, right, bottom = frame_margin(fig)
    left = max(left, min_left)
    w, h = max(width - left - right, 20), max(height - top - bottom, 20)
    frame = Box(x + left, y + top, w, h, x)
    data = _data_of(fig, filled)
    sx, sy = _scales(fig, frame, data)
    out = [_rect(frame, 'fill="#ffffff" stroke="#cccccc"')]
    _axes(out, fig, frame, sx, sy)
    clip = f"c{uuid.uuid4().hex[:10]}"
    out.append(f'<clipPath id="{clip}">{_rect(frame, "")}</clipPath>')
    shapes = Shapes([f'<g clip-path="url(#{clip})">'])
    renderers = list(_glyph_renderers(fig))
    caps = share_budget([GlyphColumns(r.glyph, data[id(r)]).n for r in renderers], MAX_SHAPES)
    for r, cap in zip(renderers, caps, strict=True):
        shapes.limit = shapes.count + cap
        draw_glyph(shapes, r.glyph, data[id(r)], sx, sy)
    shapes.limit = shapes.count + 200  # annotations
    _annotations(shapes, fig, frame, sx, sy)
    shapes.parts.append("</g>")
    out += shapes.parts
    title = getattr(fig.title, "text", "") or ""
    if title:
        out.append(
            text_element(
                x + left,
                y + 18,
                title,
                {
                    "size": f"{current_look.get().title_px:g}px",
                    "color": "#222222",
                    "baseline": "auto",
                },
            )
        )
    _legends(out, fig, frame, data)
    return out


# --- layouts -------------------------------------------------------------------------------


Placed = list[tuple["Plot", float, float]]  # figures and where they start


def _place(model: object, x: float, y: float) -> tuple[Placed, float, float]:
    """Figures of ``model`` with their positions, and the size taken (columns stack down,
    rows across; other models such as Div take no space)."""
    from bokeh.models import Column, Plot, Row

    if isinstance(model, Column | Row):
        down = isinstance(model, Column)
        placed: Placed = []
        w = h = 0.0
        for child in model.children:
            cx, cy = (x, y + h) if down else (x + w, y)
            items, cw, ch = _place(child, cx, cy)
            placed += items
            w, h = (max(w, cw), h + ch) if down else (w + cw, max(h, ch))
        return placed, w, h
    if isinstance(model, Plot):
        return [(model, x, y)], float(model.width or 600), float(model.height or 600)
    return [], 0.0, 0.0


def layout_svg(layout: Model, title: str = "") -> str:
    """An SVG document drawing every figure of bokeh ``layout`` (a figure, a column or a
    row of them); other models are left out."""
    placed, width, height = _place(layout, 0.0, 0.0)
    parts: list[str] = []
    looks = [TIMELINE if timeline_args(fig) is not None else PLAIN for fig, _, _ in placed]
    left = 0.0
    for (fig, _, _), look in zip(placed, looks, strict=True):
        token = current_look.set(look)
        left = max(left, frame_margin(fig)[0])
        current_look.reset(token)
    for (fig, x, y), look in zip(placed, looks, strict=True):
        args = timeline_args(fig)
        filled = timeline_sources(args) if args is not None else {}
        filled.update(collective_sources(fig))
        token = current_look.set(look)
        try:
            parts += figure_svg_parts(fig, x, y, filled, left)
        finally:
            current_look.reset(token)
    width, height = max(width, 10.0), max(height, 10.0)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(width)}" height="{num(height)}" '
        f'viewBox="0 0 {num(width)} {num(height)}" {FONT} font-size="11">'
    )
    label = f"<title>{esc(title)}</title>" if title else ""
    return (
        head
        + label
        + f'<rect width="{num(width)}" height="{num(height)}" fill="#ffffff"/>'
        + "".join(parts)
        + "</svg>"
    )
