"""Charts of microbenchmark sweeps: latency ladders, bandwidth, launch overhead, host-to-device
copies, matmul throughput and collectives, as log-log bokeh figures.

What each chart shows: every series as a line with its points (hover: the size and the value,
formatted like the tables), the plateaus the analysis found as dashed segments labelled with
their level and value, and, for a device in the spec table, its cache sizes as vertical lines
(L1/shared per SM, L2). The axes are log with ticks at powers of two (bytes) or of ten, each
labelled in the data's units ("64 KiB", "1.2 ns", "850 GB/s"); the legend sits outside the
plot area, so it never hides a point.

Why bokeh directly and not holoviews: every chart output goes through one embedding path
(:func:`perflab.render.bokeh_embed.notebook_bundle`: BokehJS once per session, a static SVG
picture for viewers that run no script), which takes a bokeh model. The chart needs fixed tick
positions with labels in the data's units, spans and label sets placed in data coordinates and
a legend outside the frame: a handful of bokeh models, where holoviews would mean options on
top of the same models plus its own renderer and notebook extension (which loads BokehJS
again and would bypass that path), and an import of a second or more per chart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from perflab.analysis.specs import CACHE_LABELS, find_spec
from perflab.model.machine import Series
from perflab.model.units import format_bytes
from perflab.render.labels import CANDIDATES, LabelPlacer, log_ticks, text_px

if TYPE_CHECKING:
    from bokeh.models import Axis
    from bokeh.models.annotations import LegendItem
    from bokeh.models.glyph import Glyph
    from bokeh.models.renderers import GlyphRenderer
    from bokeh.plotting import figure as Figure

COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")
WIDTH, HEIGHT = 760, 380
Formatter = Callable[[float], str]


def _axis_range(values: np.ndarray, pad: float = 1.25) -> tuple[float, float]:
    v = values[np.isfinite(values) & (values > 0)]
    if v.size == 0:
        return 1.0, 10.0
    lo, hi = float(v.min()), float(v.max())
    return (lo / pad, hi * pad) if lo < hi else (lo / 2, hi * 2)


def _plottable(s: Series) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isfinite(s.x) & np.isfinite(s.y) & (s.x > 0) & (s.y > 0)
    return s.x[keep], s.y[keep]


def _ticks(axis: Axis, lo: float, hi: float, base: int, fmt: Formatter) -> None:
    from bokeh.models import FixedTicker

    ticks = log_ticks(lo, hi, base=base)
    axis.ticker = FixedTicker(ticks=ticks, minor_ticks=[])
    axis.major_label_overrides = {t: fmt(t) for t in ticks}


def _series(fig: Figure, s: Series, colour: str, x_fmt: Formatter, y_fmt: Formatter) -> LegendItem:
    """One series as a line and points with a hover box; returns its legend item."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.models.annotations import LegendItem

    x, y = _plottable(s)
    source = ColumnDataSource(
        {"x": x, "y": y, "xs": [x_fmt(v) for v in x], "ys": [y_fmt(v) for v in y]}
    )
    line = fig.line("x", "y", source=source, color=colour, line_width=2)
    dots = fig.scatter("x", "y", source=source, color=colour, size=6)
    tips = [("series", s.name), ("at", "@xs"), ("value", "@ys")]
    fig.add_tools(HoverTool(renderers=[dots], tooltips=tips))
    # bokeh's stubs type a renderer by its glyph, and a legend item's list by the base glyph
    drawn = [cast("GlyphRenderer[Glyph]", r) for r in (line, dots)]
    return LegendItem(label=s.name, renderers=drawn)


def _levels(fig: Figure, s: Series, colour: str, y_fmt: Formatter, placer: LabelPlacer) -> None:
    """Plateaus as dashed segments over their range, each labelled with level and value
    (centred above its segment, or the nearest free spot)."""
    from bokeh.models import ColumnDataSource
    from bokeh.models.annotations import LabelSet

    levels = [lv for lv in s.levels if lv.value > 0 and 0 < lv.x_min <= lv.x_max]
    if not levels:
        return
    mids = [math.sqrt(lv.x_min * lv.x_max) for lv in levels]
    texts = [f"{lv.name} ≈ {y_fmt(lv.value)}" for lv in levels]
    spots = []
    for mid, lv, text in zip(mids, levels, texts, strict=True):
        half = text_px(text) / 2
        around = [(-half, 5, False), (-half, -17, False), (6, 5, False), (-6, 5, True)]
        spots.append(placer.place(mid, lv.value, text, [*around, *CANDIDATES]))
    fig.segment(
        x0=[lv.x_min for lv in levels], y0=[lv.value for lv in levels],
        x1=[lv.x_max for lv in levels], y1=[lv.value for lv in levels], color=colour,
        line_dash="dashed", line_width=1.5,
    )  # fmt: skip
    for left in (False, True):
        rows = [i for i, spot in enumerate(spots) if spot.left == left]
        if not rows:
            continue
        source = ColumnDataSource(
            {
                "x": [mids[i] for i in rows],
                "y": [levels[i].value for i in rows],
                "text": [texts[i] for i in rows],
                "dx": [spots[i].dx for i in rows],
                "dy": [spots[i].dy for i in rows],
            }
        )
        fig.add_layout(
            LabelSet(
                x="x", y="y", text="text", source=source, x_offset="dx", y_offset="dy",
                text_align="right" if left else "left", text_font_size="9pt", text_color=colour,
            )
        )  # fmt: skip


def cache_marks(device: str) -> tuple[list[tuple[str, float]], str]:
    """The cache sizes of ``device`` from the spec table, and a sentence saying what is
    marked or why nothing is."""
    spec = find_spec(device)
    if spec is None:
        return [], (
            f"no cache sizes marked: {device} is not in the spec table (for a CPU, the "
            "plateaus found are its cache levels)"
        )
    known = spec.cache_bytes()
    marks = [(f"{CACHE_LABELS[k]} {format_bytes(v)}", v) for k, v in known.items()]
    missing = [CACHE_LABELS[k] for k, f in spec.caches.items() if f.value is None]
    note = f"cache sizes of {spec.name} from the spec table"
    if missing:
        note += f"; not published: {', '.join(missing)}"
    return marks, note


def _cache_spans(
    fig: Figure, marks: Sequence[tuple[str, float]], y_bottom: float, placer: LabelPlacer
) -> None:
    """Vertical lines at the cache sizes, each labelled beside its line at the lowest height
    where the label covers no point and no other label."""
    from bokeh.models.annotations import Label, Span

    for label, size in marks:
        fig.add_layout(Span(location=size, dimension="height", line_color="#999999"))
        heights = [(3, 4 + 13 * k, False) for k in range(12)]
        spot = placer.place(
            size, y_bottom, label, [*heights, *[(-3, dy, True) for _, dy, _ in heights]]
        )
        fig.add_layout(
            Label(
                x=size, y=y_bottom, text=label, x_offset=spot.dx, y_offset=spot.dy,
                text_align="right" if spot.left else "left", text_font_size="9pt",
                text_color="#666666",
            )
        )  # fmt: skip


def sweep_figure(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    x_fmt: Formatter,
    y_fmt: Formatter,
    device: str = "",
) -> Figure:
    """A log-log chart of ``series`` with their plateaus and the device's cache sizes."""
    from bokeh.models import Range1d
    from bokeh.models.annotations import Legend
    from bokeh.plotting import figure

    usable = [s for s in series if len(_plottable(s)[0])]
    xs = np.concatenate([_plottable(s)[0] for s in usable]) if usable else np.ones(1)
    ys = np.concatenate([_plottable(s)[1] for s in usable]) if usable else np.ones(1)
    x_lo, x_hi = _axis_range(xs)
    y_lo, y_hi = _axis_range(ys, pad=1.6)
    fig = figure(
        width=WIDTH, height=HEIGHT, title=title, x_axis_type="log", y_axis_type="log",
        x_range=Range1d(start=x_lo, end=x_hi), y_range=Range1d(start=y_lo, end=y_hi),
        x_axis_label=x_label, y_axis_label=y_label, tools="pan,wheel_zoom,box_zoom,reset",
        toolbar_location="above",
    )  # fmt: skip
    by_bytes = usable[0].x_unit == "bytes" if usable else False
    _ticks(fig.xaxis[0], x_lo, x_hi, 2 if by_bytes else 10, x_fmt)
    _ticks(fig.yaxis[0], y_lo, y_hi, 10, y_fmt)
    legend_px = 50 + max((text_px(s.name) for s in usable), default=0)
    placer = LabelPlacer((x_lo, x_hi), (y_lo, y_hi), WIDTH, HEIGHT, right=legend_px)
    for s in usable:
        for x, y in zip(*_plottable(s), strict=True):
            placer.take_marker(float(x), float(y), radius=4)
    items = []
    for i, s in enumerate(usable):
        colour = COLOURS[i % len(COLOURS)]
        items.append(_series(fig, s, colour, x_fmt, y_fmt))
        _levels(fig, s, colour, y_fmt, placer)
    if by_bytes and device:
        marks = [(label, size) for label, size in cache_marks(device)[0] if x_lo < size < x_hi]
        _cache_spans(fig, marks, y_lo, placer)
    if items:
        fig.add_layout(
            Legend(items=items, location="top_left", label_text_font_size="9pt"), "right"
        )
    return fig
