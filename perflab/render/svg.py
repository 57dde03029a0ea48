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
page); :func:`_timeline_sources` reads them the way that script does for the whole range.

Every string (titles, labels, kernel names) goes through :func:`_esc`.
"""

from __future__ import annotations

import html
import math
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.model.trace import distinct
from perflab.model.units import shorten

MAX_SHAPES = 3000
FONT = 'font-family="Helvetica,Arial,sans-serif"'
GRID = "#e5e5e5"
Y_LABEL_CHARS = 40  # the left margin fits this many; longer tick labels end in "…"
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
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
_look: ContextVar[Look] = ContextVar("look", default=PLAIN)


def _esc(value: object) -> str:
    """Text for an SVG attribute or element: escaped, and without characters XML forbids."""
    return html.escape(_BAD_XML.sub("\ufffd", str(value)), quote=True)


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


# --- data access -----------------------------------------------------------------------


class Columns:
    """A renderer's data: each glyph property as an array, whether it names a column, holds
    a value or is left unset."""

    def __init__(self, model: Any, data: dict[str, Any]):
        self.model = model
        self.data = data
        lengths = [len(v) for v in data.values() if hasattr(v, "__len__")]
        self.n = max(lengths) if lengths else 1

    def _raw(self, name: str) -> Any:
        spec = getattr(self.model, name, None)
        field = getattr(spec, "field", None)
        if field is None and isinstance(spec, str) and spec in self.data:
            field = spec
        if field is not None:
            return list(self.data.get(field, [None] * self.n))
        value = getattr(spec, "value", spec)
        return [value] * self.n

    def num(self, name: str, default: float = math.nan) -> Floats:
        out = np.full(self.n, default, dtype=np.float64)
        for i, v in enumerate(self._raw(name)):
            if isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
                out[i] = float(v)
        return out

    def seq(self, name: str) -> list[Any]:
        return list(self._raw(name))

    def style(self, kind: str) -> list[tuple[str, float]]:
        """(colour, alpha) of ``kind`` ("fill", "line" or "text") per row; "none" if unset."""
        colors = self._raw(f"{kind}_color")
        alphas = self.num(f"{kind}_alpha", 1.0)
        return [
            (_color(c), float(a) if math.isfinite(a) else 1.0)
            for c, a in zip(colors, alphas, strict=False)
        ]


def _color(value: Any) -> str:
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


def _source(renderer: Any) -> dict[str, Any]:
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

    def _t(self, v: Any) -> Any:
        return np.log10(np.clip(v, 1e-300, None)) if self.log else v

    def __call__(self, values: Any) -> Floats:
        v = np.asarray(values, dtype=np.float64)
        s, e = self._t(self.start), self._t(self.end)
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


def _bound(value: Any, log: bool) -> float | None:
    """A range end set by the figure, or None (unset, NaN, or not positive on a log axis)."""
    if isinstance(value, (int, float)) and math.isfinite(value) and (not log or value > 0):
        return float(value)
    return None


def _range(rng: Any, data: Sequence[Floats], log: bool) -> tuple[float, float]:
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


def _axis_ticks(axis: Any, lo: float, hi: float, log: bool) -> list[tuple[float, str]]:
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


def _same_tick(key: Any, tick: float) -> bool:
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


def _paint(fill: tuple[str, float], line: tuple[str, float] | None = None, width: float = 1) -> str:
    out = f'fill="{_esc(fill[0])}"'
    if fill[0] != "none" and fill[1] < 1:
        out += f' fill-opacity="{fill[1]:.2f}"'
    if line is not None and line[0] != "none" and width > 0:
        out += f' stroke="{_esc(line[0])}" stroke-width="{_num(width)}"'
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


def _boxes(out: Shapes, cols: Columns, px: tuple[Floats, Floats, Floats, Floats]) -> None:
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
            f"M{_num(a0)} {_num(b0)}H{_num(a1)}V{_num(b1)}H{_num(a0)}Z" for b0, b1, a0, a1 in boxes
        )
        stroke = line if len(boxes) < 400 else None  # outlines of thousands of bars blur
        out.add(f'<path d="{d}" {_paint(fill, stroke, width)}/>', len(boxes))


def _quad(out: Shapes, c: Columns, sx: Scale, sy: Scale) -> None:
    _boxes(out, c, (sx(c.num("left")), sx(c.num("right")), sy(c.num("bottom")), sy(c.num("top"))))


def _centered(out: Shapes, c: Columns, sx: Scale, sy: Scale, kind: str) -> None:
    if kind == "Rect":
        x, y, w, h = c.num("x"), c.num("y"), c.num("width"), c.num("height")
        left, right, bottom, top = x - w / 2, x + w / 2, y - h / 2, y + h / 2
    elif kind == "HBar":
        y, h = c.num("y"), c.num("height")
        left, right, bottom, top = c.num("left", 0.0), c.num("right"), y - h / 2, y + h / 2
    else:  # VBar
        x, w = c.num("x"), c.num("width")
        left, right, bottom, top = x - w / 2, x + w / 2, c.num("bottom", 0.0), c.num("top")
    _boxes(out, c, (sx(left), sx(right), sy(bottom), sy(top)))


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


def _stroke(c: Columns, i: int = 0) -> str:
    color, alpha = c.style("line")[i]
    width = c.num("line_width", 1.0)[i] * _look.get().stroke
    dash = getattr(c.model, "line_dash", None)
    pattern = (
        _DASHES.get(dash, "")
        if isinstance(dash, str)
        else " ".join(str(int(d)) for d in dash or [])
    )
    width = width if math.isfinite(width) else 1.0
    out = f'fill="none" stroke="{_esc(color)}" stroke-width="{_num(width)}"'
    out += f' stroke-opacity="{alpha:.2f}"' if alpha < 1 else ""
    return out + (f' stroke-dasharray="{pattern}"' if pattern else "")


def _path(xs: Floats, ys: Floats) -> str:
    x, y = thin_polyline(xs, ys)
    return "".join(
        ("M" if i == 0 else "L") + f"{_num(a)} {_num(b)}"
        for i, (a, b) in enumerate(zip(x, y, strict=True))
    )


def _line(out: Shapes, c: Columns, sx: Scale, sy: Scale) -> None:
    if c.n:
        out.add(f'<path d="{_path(sx(c.num("x")), sy(c.num("y")))}" {_stroke(c)}/>')


def _multi_line(out: Shapes, c: Columns, sx: Scale, sy: Scale) -> None:
    for i, (xs, ys) in enumerate(zip(c.seq("xs"), c.seq("ys"), strict=False)):
        if out.room <= 0:
            return
        d = _path(sx(np.asarray(xs, float)), sy(np.asarray(ys, float)))
        out.add(f'<path d="{d}" {_stroke(c, i)}/>')


def _patches(out: Shapes, c: Columns, sx: Scale, sy: Scale) -> None:
    fills, lines = c.style("fill"), c.style("line")
    widths = c.num("line_width", 1.0)
    for i, (xs, ys) in enumerate(zip(c.seq("xs"), c.seq("ys"), strict=False)):
        if out.room <= 0:
            return
        x, y = sx(np.asarray(xs, float)), sy(np.asarray(ys, float))
        ok = np.isfinite(x) & np.isfinite(y)
        if np.count_nonzero(ok) >= 3:
            d = _path(x[ok], y[ok]) + "Z"
            out.add(f'<path d="{d}" {_paint(fills[i], lines[i], float(widths[i]))}/>')


def _segment(out: Shapes, c: Columns, sx: Scale, sy: Scale) -> None:
    x0, x1, y0, y1 = sx(c.num("x0")), sx(c.num("x1")), sy(c.num("y0")), sy(c.num("y1"))
    ok = np.flatnonzero(np.isfinite(x0 + x1 + y0 + y1))[: out.room]
    if ok.size:
        d = "".join(f"M{_num(x0[i])} {_num(y0[i])}L{_num(x1[i])} {_num(y1[i])}" for i in ok)
        out.add(f'<path d="{d}" {_stroke(c, int(ok[0]))}/>', int(ok.size))


def _polygon(points: Sequence[tuple[float, float]]) -> str:
    return "M" + "L".join(f"{_num(x)} {_num(y)}" for x, y in points) + "Z"


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
        return f"M{_num(x - r)} {_num(y)}h{_num(2 * r)}M{_num(x)} {_num(y - r)}v{_num(2 * r)}"
    if marker == "x":
        a, b = f"{_num(2 * h)} {_num(2 * h)}", f"{_num(2 * h)} {_num(-2 * h)}"
        return f"M{_num(x - h)} {_num(y - h)}l{a}M{_num(x - h)} {_num(y + h)}l{b}"
    arc = f"a{_num(r)} {_num(r)} 0 1 0"
    return f"M{_num(x - r)} {_num(y)}{arc} {_num(2 * r)} 0{arc} {_num(-2 * r)} 0Z"


def _scatter(out: Shapes, c: Columns, sx: Scale, sy: Scale, kind: str) -> None:
    x, y = sx(c.num("x")), sy(c.num("y"))
    if kind == "Circle":
        r = np.abs(sx(c.num("x") + c.num("radius", 0.0)) - x)
        markers = ["circle"] * c.n
    else:
        r = c.num("size", 4.0) / 2 * _look.get().marker
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
        out.add(f'<path d="{d}" {_paint(fill, lines[i], 1)}/>')


def text_element(x: float, y: float, text: str, props: dict[str, Any]) -> str:
    anchor = {"left": "start", "center": "middle", "right": "end"}.get(
        props.get("align", "left"), "start"
    )
    base = {"top": "hanging", "middle": "central", "bottom": "auto"}.get(
        props.get("baseline", "bottom"), "auto"
    )
    size = _font_px(props.get("size", "12px"))
    color = _color(props.get("color", "#444444"))
    angle = props.get("angle", 0.0) or 0.0
    rot = f' transform="rotate({-math.degrees(angle):.1f} {_num(x)} {_num(y)})"' if angle else ""
    return (
        f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}" dominant-baseline="{base}"'
        f' font-size="{size:.0f}" fill="{_esc(color)}"{rot}>{_esc(text)}</text>'
    )


def _font_px(size: Any) -> float:
    text = str(getattr(size, "value", size) or "12px")
    m = re.fullmatch(r"\s*([0-9.]+)\s*(px|pt|em)?\s*", text)
    if not m:
        return 12.0
    value = float(m.group(1))
    return {"pt": value * 4 / 3, "em": value * 16}.get(m.group(2) or "px", value)


def _text(out: Shapes, c: Columns, sx: Scale, sy: Scale) -> None:
    x, y = sx(c.num("x")), sy(c.num("y"))
    dx, dy = c.num("x_offset", 0.0), c.num("y_offset", 0.0)
    texts, colors = c.seq("text"), c.style("text")
    angles = c.num("angle", 0.0)
    for i in np.flatnonzero(np.isfinite(x) & np.isfinite(y)).tolist()[: out.room]:
        props = {
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
    "Text": _text,
}


def _draw_glyph(out: Shapes, glyph: Any, data: dict[str, Any], sx: Scale, sy: Scale) -> None:
    kind = type(glyph).__name__
    cols = Columns(glyph, data)
    if kind in DRAW:
        DRAW[kind](out, cols, sx, sy)
    elif kind in ("Rect", "HBar", "VBar"):
        _centered(out, cols, sx, sy, kind)
    elif kind in ("Scatter", "Circle"):
        _scatter(out, cols, sx, sy, kind)


# --- the timeline's page-filled sources ---------------------------------------------------


def _script_args(fig: Any, names: set[str]) -> dict[str, Any] | None:
    """The arguments of the first script on ``fig``'s time axis that takes all of
    ``names``, if any."""
    callbacks = getattr(fig.x_range, "js_property_callbacks", {}) or {}
    for items in callbacks.values():
        for cb in items:
            args = getattr(cb, "args", {}) or {}
            if names <= set(args):
                return dict(args)
    return None


def _timeline_args(fig: Any) -> dict[str, Any] | None:
    """The arguments of a timeline page script (bars filled in the browser), if any."""
    return _script_args(fig, {"events", "levels", "rows", "tiles", "busy", "meta"})


def _timeline_sources(args: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """What the page script draws for the whole range: the coarsest level's events as bars
    and its busy fractions as the strip (see ``timeline-refresh.js``), keyed by the id of
    the source the script would fill."""
    lv = args["levels"].data
    level = max((i for i, t in enumerate(lv["tiles"]) if t <= 2), default=0)
    offsets = np.asarray(args["tiles"].data["offsets"])
    base, tiles = int(lv["tile_base"][level]), int(lv["tiles"][level])
    rows = np.asarray(args["rows"].data["rows"])[offsets[base] : offsets[base + tiles]]
    ev = args["events"].data
    meta = args["meta"]
    label_table = args["labels"].data
    classes = np.asarray(label_table.get("cls", label_table["kind"]))  # the colour class
    picked = distinct(rows)
    start = np.asarray(ev["start"], np.float64)[picked]
    lane = np.asarray(ev["lane"], np.float64)[picked]
    colors = list(meta["colors"])
    kind = classes[np.asarray(ev["label"])[picked]]
    bars = {
        "left": start,
        "right": start + np.asarray(ev["dur"], np.float64)[picked],
        "bottom": lane + 0.38,
        "top": lane - 0.38,
        "color": [colors[k] if 0 <= k < len(colors) else "#bab0ac" for k in kind.tolist()],
    }
    bins = int(lv["bins"][level])
    nl = len(meta["lanes"])
    cells = np.asarray(args["busy"].data["cells"])
    base = int(lv["busy_base"][level])
    frac = cells[base : base + (nl + 1) * bins].astype(np.float64).reshape(nl + 1, bins) / 255
    edges = np.linspace(0, float(meta["span"]), bins + 1)
    cover = _outlines(
        busy_outline(edges, frac[k], k + 0.4, k + 0.4 - 0.8 * np.maximum(frac[k], 0.25))
        for k in range(nl)
    )
    strip = _outlines([busy_outline(edges, frac[nl], 0.0, frac[nl])])
    return {id(args["shown"]): bars, id(args["summary"]): strip, id(args["cover"]): cover}


def _collective_args(fig: Any) -> dict[str, Any] | None:
    """The arguments of a job timeline's collectives script (lines filled in the browser),
    when it draws on ``fig`` (the strip shares the time axis, not the lanes)."""
    args = _script_args(fig, {"inst", "cells", "links", "late", "cmeta", "main"})
    return args if args is not None and args["main"] is fig else None


def _collective_sources(fig: Any) -> dict[int, dict[str, Any]]:
    """A job timeline's collectives as ``timeline-collectives.js`` draws them for the whole
    range: per few pixels the most skewed instance, a line through its ranks' kernel starts
    and a marker on the last arrival (red when that is the straggler)."""
    args = _collective_args(fig)
    if args is None:
        return {}
    inst, cells, meta = args["inst"].data, args["cells"].data, args["cmeta"]
    first = np.asarray(inst["first"], np.float64)
    ranks = len(meta["ranks"])
    if first.size == 0 or ranks == 0:
        return {}
    lo, hi = float(fig.x_range.start), float(fig.x_range.end)
    bins = max(1, int(float(fig.width or 600) / float(meta["px_per_link"])))
    which = np.clip(((first - lo) / max(hi - lo, 1e-12) * bins).astype(np.int64), 0, bins - 1)
    skew = np.asarray(inst["skew"], np.float64)
    order = np.lexsort((-skew, which))  # per bin, the most skewed first
    best = order[np.r_[True, which[order][1:] != which[order][:-1]]]
    off = np.asarray(cells["off"], np.float64).reshape(-1, ranks)
    lane = np.asarray(cells["lane"], np.int64).reshape(-1, ranks)
    lines: dict[str, list[Any]] = {"xs": [], "ys": [], "color": []}
    marks: dict[str, list[Any]] = {"x": [], "y": [], "color": []}
    for i in best.tolist():
        took = (lane[i] >= 0) & np.isfinite(off[i])
        if np.count_nonzero(took) < 2:
            continue
        by_lane = np.argsort(lane[i][took], kind="stable")
        last = int(inst["last"][i])
        late = meta["ranks"][last] == meta["straggler"]
        color = "#d62728" if late else "#4a5a70"
        lines["xs"].append((first[i] + off[i][took][by_lane]).tolist())
        lines["ys"].append(lane[i][took][by_lane].tolist())
        lines["color"].append(color)
        marks["x"].append(float(first[i] + off[i][last]))
        marks["y"].append(int(lane[i][last]))
        marks["color"].append(color)
    return {id(args["links"]): lines, id(args["late"]): marks}


def _outlines(outlines: Iterable[tuple[list[float], list[float]]]) -> dict[str, list[list[float]]]:
    """Patches columns of the outlines that hold any point."""
    kept = [(xs, ys) for xs, ys in outlines if xs]
    return {"xs": [xs for xs, _ in kept], "ys": [ys for _, ys in kept]}


def busy_outline(
    edges: Floats, frac: Floats, baseline: float, tops: Floats
) -> tuple[list[float], list[float]]:
    """Busy time as the page draws it (``timeline-refresh.js``): one outline along
    ``baseline``, a step up to ``tops[i]`` for each bin ``i`` (``edges[i]`` to
    ``edges[i + 1]``) with any work (``frac > 0``). Empty lists when no bin has work."""
    xs: list[float] = []
    ys: list[float] = []
    end = -math.inf
    busy = np.flatnonzero(frac > 0)
    for i, top in zip(busy.tolist(), np.asarray(tops)[busy].tolist(), strict=True):
        left, right = float(edges[i]), float(edges[i + 1])
        if left > end:  # after a gap: down to the baseline, along it, up again
            if xs:
                xs.append(end)
                ys.append(baseline)
            xs.append(left)
            ys.append(baseline)
        xs += [left, right]
        ys += [top, top]
        end = right
    if xs:
        xs.append(end)
        ys.append(baseline)
    return xs, ys


# --- one figure ----------------------------------------------------------------------------


@dataclass
class Box:
    """The plot area of a figure (``ox``: the figure's own left edge)."""

    x: float
    y: float
    w: float
    h: float
    ox: float


def _glyph_renderers(fig: Any) -> Iterator[Any]:
    for r in fig.renderers:
        if type(r).__name__ == "GlyphRenderer" and r.visible and r.glyph is not None:
            yield r


def _data_of(fig: Any, filled: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    out = {}
    for r in _glyph_renderers(fig):
        out[id(r)] = filled.get(id(r.data_source)) or _source(r)
    return out


X_PROPS = ("x", "left", "right", "x0", "x1")
Y_PROPS = ("y", "top", "bottom", "y0", "y1")


def _data_values(fig: Any, data: dict[int, dict[str, Any]], props: Sequence[str]) -> list[Floats]:
    values = []
    for r in _glyph_renderers(fig):
        cols = Columns(r.glyph, data[id(r)])
        for p in props:
            if getattr(r.glyph, p, None) is not None and p in type(r.glyph).properties():
                values.append(cols.num(p))
        for p in ("xs" if props is X_PROPS else "ys",):
            if p in type(r.glyph).properties():
                values += [np.asarray(v, float) for v in cols.seq(p)]
    return values


def _scales(fig: Any, frame: Box, data: dict[int, dict[str, Any]]) -> tuple[Scale, Scale]:
    xlog = type(fig.x_scale).__name__ == "LogScale"
    ylog = type(fig.y_scale).__name__ == "LogScale"
    x0, x1 = _range(fig.x_range, _data_values(fig, data, X_PROPS), xlog)
    y0, y1 = _range(fig.y_range, _data_values(fig, data, Y_PROPS), ylog)
    sx = Scale(x0, x1, xlog, frame.x, frame.x + frame.w)
    sy = Scale(y0, y1, ylog, frame.y + frame.h, frame.y)
    return sx, sy


def _visible_axes(models: Sequence[Any]) -> list[Any]:
    return [a for a in models if "Axis" in type(a).__name__ and a.visible]


def _axis_title(text: str, x: float, y: float, vertical: bool) -> str:
    props: dict[str, Any] = {"align": "center", "size": "12px", "color": "#333333"}
    props.update({"baseline": "middle", "angle": math.pi / 2} if vertical else {})
    return text_element(x, y, text, props)


def _axes(out: list[str], fig: Any, frame: Box, sx: Scale, sy: Scale) -> None:
    """Grid lines, tick labels and axis titles (bottom and left axes)."""
    bottom, right = frame.y + frame.h, frame.x + frame.w
    size = f"{_look.get().tick_px:g}px"
    tick_x = {"align": "center", "baseline": "top", "size": size}
    tick_y = {"align": "right", "baseline": "middle", "size": size}
    for axis in _visible_axes(fig.below):
        for t, label in _axis_ticks(axis, sx.start, sx.end, sx.log):
            px = float(sx([t])[0])
            out.append(f'<path d="M{_num(px)} {_num(frame.y)}V{_num(bottom)}" stroke="{GRID}"/>')
            out.append(text_element(px, bottom + 4, label, tick_x))
        if axis.axis_label:
            out.append(_axis_title(axis.axis_label, frame.x + frame.w / 2, bottom + 40, False))
    for axis in _visible_axes(fig.left):
        for t, label in _axis_ticks(axis, sy.start, sy.end, sy.log):
            py = float(sy([t])[0])
            out.append(f'<path d="M{_num(frame.x)} {_num(py)}H{_num(right)}" stroke="{GRID}"/>')
            out.append(text_element(frame.x - 4, py, shorten(label, Y_LABEL_CHARS), tick_y))
        if axis.axis_label:
            out.append(_axis_title(axis.axis_label, frame.ox + 12, frame.y + frame.h / 2, True))


def _rect(box: Box, paint: str) -> str:
    where = f'x="{_num(box.x)}" y="{_num(box.y)}" width="{_num(box.w)}" height="{_num(box.h)}"'
    return f"<rect {where} {paint}/>"


def frame_margin(fig: Any) -> tuple[float, float, float, float]:
    """Left, top, right, bottom space around the plot area, as bokeh leaves roughly."""
    has = {
        side: any("Axis" in type(a).__name__ and a.visible for a in getattr(fig, side))
        for side in ("left", "below")
    }
    labels = [str(getattr(a, "major_label_overrides", {}) or "") for a in fig.left]
    left = 70.0 + (20.0 if any(len(s) > 60 for s in labels) else 0.0) if has["left"] else 10.0
    char_px = 6.5 * _look.get().tick_px / PLAIN.tick_px
    left = max(left, _longest_y_label(fig) * char_px + 30) if has["left"] else left
    top = 28.0 if getattr(fig.title, "text", "") else 10.0
    right = 10.0 + (_legend_width(fig) if _outside_legends(fig) else 0.0)
    bottom = 48.0 if has["below"] else 10.0
    return left, top, right, bottom


def _longest_y_label(fig: Any) -> int:
    longest = 0
    for axis in fig.left:
        for value in (getattr(axis, "major_label_overrides", {}) or {}).values():
            longest = max(longest, min(len(str(value)), Y_LABEL_CHARS))
    return longest


def _outside_legends(fig: Any) -> list[Any]:
    return [m for m in fig.right if type(m).__name__ == "Legend"]


def _legend_entries(
    fig: Any, legend: Any, data: dict[int, dict[str, Any]]
) -> list[tuple[str, Any]]:
    entries = []
    for item in legend.items:
        if not item.renderers:
            continue
        label = item.label
        field = getattr(label, "field", None)
        r = item.renderers[0]
        if field is not None:
            for value in dict.fromkeys(str(v) for v in data.get(id(r), {}).get(field, [])):
                entries.append((value, r))
        else:
            entries.append((str(getattr(label, "value", label)), r))
    return entries


def _legend_width(fig: Any) -> float:
    longest = 0
    for legend in fig.legend:
        for item in legend.items:
            longest = max(longest, len(str(getattr(item.label, "value", item.label) or "")))
    return 40.0 + 6.5 * min(longest, 60)


def _swatch(r: Any, x: float, y: float) -> str:
    glyph = r.glyph
    cols = Columns(glyph, _source(r))
    kind = type(glyph).__name__
    if kind in ("Line", "MultiLine", "Segment"):
        return f'<path d="M{_num(x)} {_num(y)}h18" {_stroke(cols)}/>'
    fill = cols.style("fill")[0] if cols.n else ("#888888", 1.0)
    if kind in ("Scatter", "Circle"):
        marker = str(cols.seq("marker")[0]) if kind == "Scatter" else "circle"
        return (
            f'<path d="{marker_path(marker, x + 9, y, 5)}" {_paint(fill, cols.style("line")[0])}/>'
        )
    return f'<path d="M{_num(x + 2)} {_num(y - 5)}h14v10h-14Z" {_paint(fill)}/>'


def _legends(out: list[str], fig: Any, frame: Box, data: dict[int, dict[str, Any]]) -> None:
    outside = {id(m) for m in _outside_legends(fig)}
    for legend in fig.legend:
        if not legend.visible:
            continue
        entries = _legend_entries(fig, legend, data)[:30]
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


def _span(out: Shapes, m: Any, frame: Box, sx: Scale, sy: Scale) -> None:
    if m.location is None:
        return
    if m.dimension == "height":
        px = _num(float(sx([m.location])[0]))
        d = f"M{px} {_num(frame.y)}V{_num(frame.y + frame.h)}"
    else:
        py = _num(float(sy([m.location])[0]))
        d = f"M{_num(frame.x)} {py}H{_num(frame.x + frame.w)}"
    out.add(f'<path d="{d}" {_stroke(Columns(m, {}))}/>')


def _label(out: Shapes, m: Any, sx: Scale, sy: Scale) -> None:
    props = {
        "align": m.text_align, "baseline": m.text_baseline, "size": m.text_font_size,
        "color": m.text_color, "angle": m.angle,
    }  # fmt: skip
    px = float(sx([m.x])[0]) + (m.x_offset or 0)
    py = float(sy([m.y])[0]) - (m.y_offset or 0)
    out.add(text_element(px, py, str(m.text), props))


def _box_annotation(out: Shapes, m: Any, sx: Scale, sy: Scale) -> None:
    def at(value: Any, edge: float) -> float:  # unset or a frame edge (a Node): that edge
        return float(value) if isinstance(value, (int, float)) else edge

    left, right = at(m.left, sx.start), at(m.right, sx.end)
    bottom, top = at(m.bottom, sy.start), at(m.top, sy.end)
    _boxes(out, Columns(m, {}), (sx([left]), sx([right]), sy([bottom]), sy([top])))


def _annotations(out: Shapes, fig: Any, frame: Box, sx: Scale, sy: Scale) -> None:
    for m in fig.center:
        kind = type(m).__name__
        if not getattr(m, "visible", True):
            continue
        if kind == "Span":
            _span(out, m, frame, sx, sy)
        elif kind == "Label":
            _label(out, m, sx, sy)
        elif kind == "LabelSet":
            _text(out, Columns(m, _source_of(m)), sx, sy)
        elif kind == "BoxAnnotation":
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


def _source_of(model: Any) -> dict[str, Any]:
    return dict(getattr(getattr(model, "source", None), "data", {}) or {})


def figure_svg_parts(
    fig: Any, x: float, y: float, filled: dict[int, dict[str, Any]], min_left: float = 0.0
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
    caps = share_budget([Columns(r.glyph, data[id(r)]).n for r in renderers], MAX_SHAPES)
    for r, cap in zip(renderers, caps, strict=True):
        shapes.limit = shapes.count + cap
        _draw_glyph(shapes, r.glyph, data[id(r)], sx, sy)
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
                {"size": f"{_look.get().title_px:g}px", "color": "#222222", "baseline": "auto"},
            )
        )
    _legends(out, fig, frame, data)
    return out


# --- layouts -------------------------------------------------------------------------------


def _place(model: Any, x: float, y: float) -> tuple[list[tuple[Any, float, float]], float, float]:
    """Figures of ``model`` with their positions, and the size taken (columns stack down,
    rows across; other models such as Div take no space)."""
    kind = type(model).__name__
    if kind in ("Column", "Row"):
        placed: list[tuple[Any, float, float]] = []
        w = h = 0.0
        for child in model.children:
            cx, cy = (x, y + h) if kind == "Column" else (x + w, y)
            items, cw, ch = _place(child, cx, cy)
            placed += items
            w, h = (max(w, cw), h + ch) if kind == "Column" else (w + cw, max(h, ch))
        return placed, w, h
    if hasattr(model, "renderers") and hasattr(model, "x_range"):
        return [(model, x, y)], float(model.width or 600), float(model.height or 600)
    return [], 0.0, 0.0


def layout_svg(layout: Any, title: str = "") -> str:
    """An SVG document drawing every figure of bokeh ``layout`` (a figure, a column or a
    row of them); other models are left out."""
    placed, width, height = _place(layout, 0.0, 0.0)
    parts: list[str] = []
    looks = [TIMELINE if _timeline_args(fig) is not None else PLAIN for fig, _, _ in placed]
    left = 0.0
    for (fig, _, _), look in zip(placed, looks, strict=True):
        token = _look.set(look)
        left = max(left, frame_margin(fig)[0])
        _look.reset(token)
    for (fig, x, y), look in zip(placed, looks, strict=True):
        args = _timeline_args(fig)
        filled = _timeline_sources(args) if args is not None else {}
        filled.update(_collective_sources(fig))
        token = _look.set(look)
        try:
            parts += figure_svg_parts(fig, x, y, filled, left)
        finally:
            _look.reset(token)
    width, height = max(width, 10.0), max(height, 10.0)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(width)}" height="{_num(height)}" '
        f'viewBox="0 0 {_num(width)} {_num(height)}" {FONT} font-size="11">'
    )
    label = f"<title>{_esc(title)}</title>" if title else ""
    return (
        head
        + label
        + f'<rect width="{_num(width)}" height="{_num(height)}" fill="#ffffff"/>'
        + "".join(parts)
        + "</svg>"
    )
