"""The generic chart primitives of the static SVG pictures (:mod:`perflab.render.svg`): the
look of a figure, a glyph's data columns, scales and ticks, and each bokeh glyph drawn as SVG
shapes (rectangles that touch at pixel resolution merge, lines keep a few points per pixel
column, markers on the same pixel draw once). Every string goes through
:func:`perflab.render.html.esc`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence, Sized
from contextvars import ContextVar
from dataclasses import dataclass
from typing import SupportsFloat, TypedDict

import numpy as np
import numpy.typing as npt

from perflab.render.html import esc

MAX_SHAPES = 3000
FONT = 'font-family="Helvetica,Arial,sans-serif"'
GRID = "#e5e5e5"
Y_LABEL_CHARS = 40  # the left margin fits this many; longer tick labels end in "…"
_DASHES = {"dashed": "6 4", "dotted": "2 4", "dotdash": "2 4 6 4", "dashdot": "6 4 2 4"}
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Look:
    """Sizes of a figure's text and marks. A timeline's picture is shown scaled down to an
    output's width (a notebook, GitHub), so it takes larger text and thicker marks (the
    straggler's collective lines above all) to stay legible there."""

    tick_px: float = 11.0
    title_px: float = 13.0
    stroke: float = 1.0  # line width multiplier
    marker: float = 1.0  # marker size multiplier


PLAIN = Look()
TIMELINE = Look(tick_px=14.0, title_px=16.0, stroke=2.2, marker=1.6)
current_look: ContextVar[Look] = ContextVar("look", default=PLAIN)


def num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


# --- data access -----------------------------------------------------------------------


class GlyphColumns:
    """A renderer's data: each glyph property as an array, whether it names a column, holds
    a value or is left unset."""

    def __init__(self, model: object, data: Mapping[str, object]):
        self.model = model
        self.data = data
        lengths = [len(v) for v in data.values() if isinstance(v, Sized)]
        self.n = max(lengths) if lengths else 1

    def _raw(self, name: str) -> list[object]:
        spec = getattr(self.model, name, None)
        field = getattr(spec, "field", None)
        if field is None and isinstance(spec, str) and spec in self.data:
            field = spec
        if field is not None:
            column = self.data.get(field)
            return list(column) if isinstance(column, Iterable) else [None] * self.n
        value = getattr(spec, "value", spec)
        return [value] * self.n

    def num(self, name: str, default: float = math.nan) -> Floats:
        out = np.full(self.n, default, dtype=np.float64)
        for i, v in enumerate(self._raw(name)):
            if isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
                out[i] = float(v)
        return out

    def seq(self, name: str) -> list[object]:
        return list(self._raw(name))

    def style(self, kind: str) -> list[tuple[str, float]]:
        """(colour, alpha) of ``kind`` ("fill", "line" or "text") per row; "none" if unset."""
        colors = self._raw(f"{kind}_color")
        alphas = self.num(f"{kind}_alpha", 1.0)
        return [
            (_color(c), float(a) if math.isfinite(a) else 1.0)
            for c, a in zip(colors, alphas, strict=False)
        ]


def _color(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, (tuple, list)) and len(value) in (3, 4):
        r, g, b = (int(c) for c in value[:3])
        return f"rgb({r},{g},{b})"
    text = str(value)
    return (
        text
        if re.fullmatch(r"#[0-9a-fA-F]{3,8}|[a-zA-Z]{1,30}|rgba?\([0-9., ]+\)", text)
        else "none"
    )


def renderer_data(renderer: object) -> dict[str, object]:
    source = getattr(renderer, "data_source", None)
    return dict(getattr(source, "data", {}) or {})


# --- scales, ranges and ticks ----------------------------------------------------------


@dataclass
class Scale:
    """Data to pixels along one axis (``lo_px`` is where ``start`` lands)."""

    start: float
    end: float
    log: bool
    lo_px: float
    hi_px: float

    def _t(self, v: Floats) -> Floats:
        return np.log10(np.clip(v, 1e-300, None)) if self.log else v

    def __call__(self, values: npt.ArrayLike) -> Floats:
        v = np.asarray(values, dtype=np.float64)
        s, e = (float(end) for end in self._t(np.array([self.start, self.end])))
        span = (e - s) or 1.0
        return np.asarray(self.lo_px + (self._t(v) - s) / span * (self.hi_px - self.lo_px))


def _extent(values: Sequence[Floats], log: bool) -> tuple[float, float]:
    flat = np.concatenate([np.ravel(v) for v in values]) if values else np.zeros(0)
    flat = flat[np.isfinite(flat) & ((flat > 0) if log else True)]
    if flat.size == 0:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = float(flat.min()), float(flat.max())
    if log:
        pad = max((math.log10(hi) - math.log10(lo)) * 0.05, 0.05)
        return 10 ** (math.log10(lo) - pad), 10 ** (math.log10(hi) + pad)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.1 or 1.0
    return lo - pad, hi + pad


def _bound(value: object, log: bool) -> float | None:
    """A range end set by the figure, or None (unset, NaN, or not positive on a log axis)."""
    if isinstance(value, (int, float)) and math.isfinite(value) and (not log or value > 0):
        return float(value)
    return None


def axis_range(rng: object, data: Sequence[Floats], log: bool) -> tuple[float, float]:
    """The figure's range where it sets one, else (a data range) the data's extent."""
    start, end = _bound(getattr(rng, "start", None), log), _bound(getattr(rng, "end", None), log)
    if start is None or end is None:
        lo, hi = _extent(data, log)
        start = lo if start is None else start
        end = hi if end is None else end
    return (start, end) if start != end else _extent(data, log)


def nice_ticks(lo: float, hi: float, log: bool, want: int = 6) -> list[float]:
    """Readable tick positions: decades (with 2 and 5 when few) on a log axis, 1/2/5 steps
    on a linear one."""
    lo, hi = min(lo, hi), max(lo, hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi or (log and lo <= 0):
        return []
    if log:
        d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        step = max(1, math.ceil((d1 - d0) / want))
        mults = (1, 2, 5) if d1 - d0 <= 2 else (1,)
        ticks = [m * 10.0**d for d in range(d0, d1 + 1, step) for m in mults]
        return [t for t in ticks if lo <= t <= hi]
    raw = (hi - lo) / max(want, 1) or 1.0
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def tick_label(value: float) -> str:
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e6:
        return f"{value:.6g}"
    return f"{value:.0e}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")


def axis_ticks(axis: object, lo: float, hi: float, log: bool) -> list[tuple[float, str]]:
    ticker = getattr(axis, "ticker", None)
    fixed = getattr(ticker, "ticks", None)
    ticks = [float(t) for t in fixed] if fixed else nice_ticks(lo, hi, log)
    overrides = dict(getattr(axis, "major_label_overrides", {}) or {})
    out = []
    for t in ticks:
        if not (min(lo, hi) <= t <= max(lo, hi)):
            continue
        key = next((k for k in overrides if _same_tick(k, t)), None)
        out.append((t, str(overrides[key]) if key is not None else tick_label(t)))
    return out


def _same_tick(key: object, tick: float) -> bool:
    if not isinstance(key, SupportsFloat | str):
        return False
    try:
        return math.isclose(float(key), tick, rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return False


# --- glyphs ------------------------------------------------------------------------------


@dataclass
class Shapes:
    """One figure's drawing, in pixels, as SVG fragments; counts the shapes it holds."""

    parts: list[str]
    count: int = 0
    limit: int = MAX_SHAPES  # what the renderer being drawn may reach

    @property
    def room(self) -> int:
        return max(0, self.limit - self.count)

    def add(self, part: str, n: int = 1) -> None:
        self.parts.append(part)
        self.count += n


def paint_attrs(
    fill: tuple[str, float], line: tuple[str, float] | None = None, width: float = 1
) -> str:
    out = f'fill="{esc(fill[0])}"'
    if fill[0] != "none" and fill[1] < 1:
        out += f' fill-opacity="{fill[1]:.2f}"'
    if line is not None and line[0] != "none" and width > 0:
        out += f' stroke="{esc(line[0])}" stroke-width="{num(width)}"'
        if line[1] < 1:
            out += f' stroke-opacity="{line[1]:.2f}"'
    return out


def merge_boxes(
    x0: Floats, x1: Floats, y0: Floats, y1: Floats, budget: int
) -> list[tuple[float, ...]]:
    """Pixel boxes with equal rows merged where they touch (within half a pixel), then the
    ``budget`` widest kept: a timeline lane of 100k events becomes one box per visible run."""
    boxes = sorted(zip(np.round(y0), np.round(y1), x0, x1, strict=True))
    merged: list[list[float]] = []
    for b0, b1, a0, a1 in boxes:
        last = merged[-1] if merged else None
        if last is not None and last[0] == b0 and last[1] == b1 and a0 <= last[3] + 0.5:
            last[3] = max(last[3], a1)
        else:
            merged.append([b0, b1, a0, a1])
    if len(merged) > budget:
        merged.sort(key=lambda b: (b[3] - b[2]) * abs(b[1] - b[0]), reverse=True)
        merged = merged[:budget]
    return [tuple(b) for b in merged]


def draw_boxes(out: Shapes, cols: GlyphColumns, px: tuple[Floats, Floats, Floats, Floats]) -> None:
    x0, x1, y0, y1 = (np.asarray(a) for a in px)
    lo_x, hi_x = np.minimum(x0, x1), np.maximum(x0, x1)
    lo_y, hi_y = np.minimum(y0, y1), np.maximum(y0, y1)
    hi_x = np.maximum(hi_x, lo_x + 0.5)  # a very short bar still shows
    ok = np.isfinite(lo_x) & np.isfinite(hi_x) & np.isfinite(lo_y) & np.isfinite(hi_y)
    fills, lines = cols.style("fill"), cols.style("line")
    width = float(np.nanmax(cols.num("line_width", 1.0), initial=1.0))
    groups: dict[tuple[tuple[str, float], tuple[str, float]], list[int]] = {}
    for i in np.flatnonzero(ok).tolist():
        groups.setdefault((fills[i], lines[i]), []).append(i)
    for (fill, line), rows in groups.items():
        idx = np.asarray(rows)
        budget = max(1, out.room)
        boxes = merge_boxes(lo_x[idx], hi_x[idx], lo_y[idx], hi_y[idx], budget)
        d = "".join(
            f"M{num(a0)} {num(b0)}H{num(a1)}V{num(b1)}H{num(a0)}Z" for b0, b1, a0, a1 in boxes
        )
        stroke = line if len(boxes) < 400 else None  # outlines of thousands of bars blur
        out.add(f'<path d="{d}" {paint_attrs(fill, stroke, width)}/>', len(boxes))


def _quad(out: Shapes, c: GlyphColumns, sx: Scale, sy: Scale) -> None:
    draw_boxes(
        out, c, (sx(c.num("left")), sx(c.num("right")), sy(c.num("bottom")), sy(c.num("top")))
    )


def _centered(out: Shapes, c: GlyphColumns, sx: Scale, sy: Scale, kind: str) -> None:
    if kind == "Rect":
        x, y, w, h = c.num("x"), c.num("y"), c.num("width"), c.num("height")
        left, right, bottom, top = x - w / 2, x + w / 2, y - h / 2, y + h / 2
    elif kind == "HBar":
        y, h = c.num("y"), c.num("height")
        left, right, bottom, top = c.num("left", 0.0), c.num("right"), y - h / 2, y + h / 2
    else:  # VBar
        x, w = c.num("x"), c.num("width")
        left, right, bottom, top = x - w / 2, x + w / 2, c.num("bottom", 0.0), c.num("top")
    draw_boxes(out, c, (sx(left), sx(right), sy(bottom), sy(top)))


def thin_polyline(x: Floats, y: Floats) -> tuple[Floats, Floats]:
    """Drop points closer than half a pixel to the last kept one (finite points only)."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size <= 2:
        return x, y
    keep = [0]
    for i in range(1, x.size - 1):
        j = keep[-1]
        if abs(x[i] - x[j]) >= 0.5 or abs(y[i] - y[j]) >= 0.5:
            keep.append(i)
    keep.append(x.size - 1)
    return x[keep], y[keep]


def stroke_attrs(c: GlyphColumns, i: int = 0) -> str:
    color, alpha = c.style("line")[i]
    width = c.num("line_width", 1.0)[i] * current_look.get().stroke
    dash = getattr(c.model, "line_dash", None)
    pattern = (
        _DASHES.get(dash, "")
        if isinstance(dash, str)
        else " ".join(str(int(d)) for d in dash or [])
    )
    width = width if math.isfinite(width) else 1.0
    out = f'fill="none" stroke="{esc(color)}" stroke-width="{num(width)}"'
    out += f' stroke-opacity="{alpha:.2f}"' if alpha < 1 else ""
    return out + (f' stroke-dasharray="{pattern}"' if pattern else "")


def _path(xs: Floats, ys: Floats) -> str:
    x, y = thin_polyline(xs, ys)
    return "".join(
        ("M" if i == 0 else "L") + f"{num(a)} {num(b)}"
        for i, (a, b) in enumerate(zip(x, y, strict=True))
    )


def _line(out: Shapes, c: GlyphColumns, sx: Scale, sy: Scale) -> None:
    if c.n:
        out.add(f'<path d="{_path(sx(c.num("x")), sy(c.num("y")))}" {stroke_attrs(c)}/>')


def _multi_line(out: Shapes, c: GlyphColumns, sx: Scale, sy: Scale) -> None:
    for i, (xs, ys) in enumerate(zip(c.seq("xs"), c.seq("ys"), strict=False)):
        if out.room <= 0:
            return
        d = _path(sx(np.asarray(xs, float)), sy(np.asarray(ys, float)))
        out.add(f'<path d="{d}" {stroke_attrs(c, i)}/>')


def _patches(out: Shapes, c: GlyphColumns, sx: Scale, sy: Scale) -> None:
    fills, lines = c.style("fill"), c.style("line")
    widths = c.num("line_width", 1.0)
    for i, (xs, ys) in enumerate(zip(c.seq("xs"), c.seq("ys"), strict=False)):
        if out.room <= 0:
            return
        x, y = sx(np.asarray(xs, float)), sy(np.asarray(ys, float))
        ok = np.isfinite(x) & np.isfinite(y)
        if np.count_nonzero(ok) >= 3:
            d = _path(x[ok], y[ok]) + "Z"
            out.add(f'<path d="{d}" {paint_attrs(fills[i], lines[i], float(widths[i]))}/>')


def _segment(out: Shapes, c: GlyphColumns, sx: Scale, sy: Scale) -> None:
    x0, x1, y0, y1 = sx(c.num("x0")), sx(c.num("x1")), sy(c.num("y0")), sy(c.num("y1"))
    ok = np.flatnonzero(np.isfinite(x0 + x1 + y0 + y1))[: out.room]
    if ok.size:
        d = "".join(f"M{num(x0[i])} {num(y0[i])}L{num(x1[i])} {num(y1[i])}" for i in ok)
        out.add(f'<path d="{d}" {stroke_attrs(c, int(ok[0]))}/>', int(ok.size))


def _polygon(points: Sequence[tuple[float, float]]) -> str:
    return "M" + "L".join(f"{num(x)} {num(y)}" for x, y in points) + "Z"


def marker_path(marker: str, x: float, y: float, r: float) -> str:
    """An SVG path of a bokeh marker centred on (x, y) with half-size ``r`` (a circle if
    the marker has no drawing here)."""
    h = r * 0.87
    if marker == "square":
        return _polygon([(x - r, y - r), (x + r, y - r), (x + r, y + r), (x - r, y + r)])
    if marker in ("triangle", "inverted_triangle"):
        s = 1 if marker == "triangle" else -1
        return _polygon([(x, y - s * r), (x + h, y + s * r / 2), (x - h, y + s * r / 2)])
    if marker == "diamond":
        return _polygon([(x, y - r), (x + r, y), (x, y + r), (x - r, y)])
    if marker == "cross":
        return f"M{num(x - r)} {num(y)}h{num(2 * r)}M{num(x)} {num(y - r)}v{num(2 * r)}"
    if marker == "x":
        a, b = (
            f"{num(2 * h)} {num(2 * h)}",
            f"{num(2 * h)} {num(-2 * h)}",
        )
        return f"M{num(x - h)} {num(y - h)}l{a}M{num(x - h)} {num(y + h)}l{b}"
    arc = f"a{num(r)} {num(r)} 0 1 0"
    return f"M{num(x - r)} {num(y)}{arc} {num(2 * r)} 0{arc} {num(-2 * r)} 0Z"


def _scatter(out: Shapes, c: GlyphColumns, sx: Scale, sy: Scale, kind: str) -> None:
    x, y = sx(c.num("x")), sy(c.num("y"))
    if kind == "Circle":
        r = np.abs(sx(c.num("x") + c.num("radius", 0.0)) - x)
        markers = ["circle"] * c.n
    else:
        r = c.num("size", 4.0) / 2 * current_look.get().marker
        markers = [str(m) for m in c.seq("marker")]
    fills, lines = c.style("fill"), c.style("line")
    seen: set[tuple[int, int, str]] = set()
    for i in np.flatnonzero(np.isfinite(x) & np.isfinite(y) & np.isfinite(r)).tolist():
        key = (round(x[i]), round(y[i]), markers[i])
        if key in seen or out.room <= 0:
            continue
        seen.add(key)
        d = marker_path(markers[i], x[i], y[i], max(float(r[i]), 0.5))
        fill = fills[i] if markers[i] not in ("cross", "x") else ("none", 1.0)
        out.add(f'<path d="{d}" {paint_attrs(fill, lines[i], 1)}/>')


class TextProps(TypedDict, total=False):
    """How :func:`text_element` sets a text (bokeh's names; a size may be a bokeh value)."""

    align: str
    baseline: str
    size: object
    color: object
    angle: float


def text_element(x: float, y: float, text: str, props: TextProps) -> str:
    anchor = {"left": "start", "center": "middle", "right": "end"}.get(
        props.get("align", "left"), "start"
    )
    base = {"top": "hanging", "middle": "central", "bottom": "auto"}.get(
        props.get("baseline", "bottom"), "auto"
    )
    size = _font_px(props.get("size", "12px"))
    color = _color(props.get("color", "#444444"))
    angle = props.get("angle", 0.0) or 0.0
    rot = f' transform="rotate({-math.degrees(angle):.1f} {num(x)} {num(y)})"' if angle else ""
    return (
        f'<text x="{num(x)}" y="{num(y)}" text-anchor="{anchor}" dominant-baseline="{base}"'
        f' font-size="{size:.0f}" fill="{esc(color)}"{rot}>{esc(text)}</text>'
    )


def _font_px(size: object) -> float:
    text = str(getattr(size, "value", size) or "12px")
    m = re.fullmatch(r"\s*([0-9.]+)\s*(px|pt|em)?\s*", text)
    if not m:
        return 12.0
    value = float(m.group(1))
    return {"pt": value * 4 / 3, "em": value * 16}.get(m.group(2) or "px", value)


def draw_text(out: Shapes, c: GlyphColumns, sx: Scale, sy: Scale) -> None:
    x, y = sx(c.num("x")), sy(c.num("y"))
    dx, dy = c.num("x_offset", 0.0), c.num("y_offset", 0.0)
    texts, colors = c.seq("text"), c.style("text")
    angles = c.num("angle", 0.0)
    for i in np.flatnonzero(np.isfinite(x) & np.isfinite(y)).tolist()[: out.room]:
        props: TextProps = {
            "align": getattr(c.model, "text_align", "left"),
            "baseline": getattr(c.model, "text_baseline", "bottom"),
            "size": getattr(c.model, "text_font_size", "12px"),
            "color": colors[i][0],
            "angle": angles[i] if math.isfinite(angles[i]) else 0.0,
        }
        out.add(text_element(x[i] + _finite(dx[i]), y[i] - _finite(dy[i]), str(texts[i]), props))


def _finite(v: float) -> float:
    return v if math.isfinite(v) else 0.0


DRAW = {
    "Quad": _quad,
    "Line": _line,
    "MultiLine": _multi_line,
    "Patches": _patches,
    "Segment": _segment,
    "Text": draw_text,
}


def draw_glyph(
    out: Shapes, glyph: object, data: Mapping[str, object], sx: Scale, sy: Scale
) -> None:
    kind = type(glyph).__name__
    cols = GlyphColumns(glyph, data)
    if kind in DRAW:
        DRAW[kind](out, cols, sx, sy)
    elif kind in ("Rect", "HBar", "VBar"):
        _centered(out, cols, sx, sy, kind)
    elif kind in ("Scatter", "Circle"):
        _scatter(out, cols, sx, sy, kind)
