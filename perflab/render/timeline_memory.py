"""The timeline's memory lane: a step-area plot under the lanes, on their time axis, of the
bytes allocated (filled) and reserved (a line) on each device of a trace recorded with
``profile_memory=True``, the peak marked with its op. The curves are those of
:func:`perflab.analysis.memory.memory_report`; hover says the bytes in binary units and the op
that set them (where :func:`perflab.analysis.memory_attribution.places` puts each event).

A device with more than :data:`MAX_POINTS` events is thinned for the page: per time bin its
first and last event and those that reached the bin's highest and lowest, so the envelope and
the peak stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.memory import OUTSIDE, DeviceMemory, MemoryReport, memory_report
from perflab.analysis.memory_attribution import places
from perflab.model.trace import Trace
from perflab.model.units import format_bytes, format_ns, shorten
from perflab.render.memory_view import _byte_ticks as byte_ticks
from perflab.render.timeline_data import short_name

I64 = npt.NDArray[np.int64]
MAX_POINTS = 20_000  # events per device drawn; past it, thinned per time bin
# per device: allocated fill, reserved line
COLORS = (("#6a9fd4", "#1f4e8c"), ("#e39a5b", "#a24f0b"), ("#7fbf7b", "#2f6b2b"))
HEIGHT = 150


@dataclass
class MemoryCurve:
    """One device's curve as the page draws it: the analysis' points (``index`` into its
    curve: all of them, or the thinned ones), their times (ms since the page's zero), bytes
    allocated and reserved (reserved -1: not tracked), the op of each point's event, and the
    peak."""

    label: str
    index: I64
    t_ms: npt.NDArray[np.float64]
    allocated: I64
    reserved: I64
    ops: list[str]
    peak_ms: float
    peak_bytes: int
    peak_op: str
    reserved_known: bool


def memory_curves(
    trace: Trace, origin_ns: int, report: MemoryReport | None = None
) -> list[MemoryCurve]:
    """Each device's curve of ``trace`` (none without memory events)."""
    memory = trace.memory_events
    if len(memory) == 0:
        return []
    report = report or memory_report(trace)
    op_names = _op_names(trace)
    out = []
    for d in report.devices:
        rows = np.flatnonzero(
            (memory["device_type"] == d.device_type) & (memory["device_id"] == d.device_id)
        )
        keep = thinned(d.time_ns, d.allocated, MAX_POINTS)
        ops = [op_names[i] for i in rows[keep].tolist()] if len(rows) == len(d.time_ns) else []
        out.append(_curve(d, keep, ops or ["?"] * len(keep), origin_ns))
    return out


def _op_names(trace: Trace) -> list[str]:
    """Per memory event: the name of its op (as the memory report names it)."""
    op = places(trace, trace.memory_events).op
    return [
        short_name(trace.strings[int(trace.name[i])]) if i >= 0 else OUTSIDE for i in op.tolist()
    ]


def _curve(d: DeviceMemory, keep: I64, ops: list[str], origin_ns: int) -> MemoryCurve:
    return MemoryCurve(
        label=d.label,
        index=keep,
        t_ms=(d.time_ns[keep] - origin_ns).astype(np.float64) / 1e6,
        allocated=d.allocated[keep],
        reserved=d.reserved[keep],
        ops=ops,
        peak_ms=(d.peak_ns - origin_ns) / 1e6,
        peak_bytes=d.peak_allocated,
        peak_op=short_name(d.peak_op),
        reserved_known=d.reserved_at_peak >= 0,
    )


def thinned(t: I64, value: I64, most: int) -> I64:
    """Indices of the points kept: all when at most ``most``; else per time bin (a quarter
    of ``most`` bins) the first, last, highest and lowest point."""
    n = len(t)
    if n <= most:
        return np.arange(n, dtype=np.int64)
    bins = max(most // 4, 1)
    span = max(int(t[-1]) - int(t[0]), 1)
    b = np.minimum((t - t[0]) * bins // span, bins - 1).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], n] - 1
    high = np.lexsort((-value, b))  # by bin, then highest first (time order within ties)
    low = np.lexsort((value, b))
    first_of_bin = np.searchsorted(b[high], b[starts])
    picked = np.concatenate([starts, ends, high[first_of_bin], low[first_of_bin]])
    return np.unique(picked).astype(np.int64)


def describe(curves: list[MemoryCurve]) -> str:
    """A line of the timeline's text view."""
    peaks = "; ".join(
        f"{c.label} peak {format_bytes(c.peak_bytes)} at {format_ns(c.peak_ms * 1e6)} "
        f"in {c.peak_op}"
        for c in curves
    )
    return f"memory lane (allocated, reserved): {peaks}"


def _columns(c: MemoryCurve, end_ms: float) -> dict[str, Any]:
    """A device's step areas: one box per point, from its time to the next point's."""
    right = np.r_[c.t_ms[1:], max(end_ms, float(c.t_ms[-1]))]
    reserved = [format_bytes(r) if c.reserved_known else "not tracked" for r in c.reserved.tolist()]
    return {
        "left": c.t_ms,
        "right": right,
        "top": c.allocated.astype(np.float64),
        "reserved_y": c.reserved.astype(np.float64),
        "device": [c.label] * len(c.t_ms),
        "allocated": [format_bytes(v) for v in c.allocated.tolist()],
        "reserved": reserved,
        "op": c.ops,
        "at": [format_ns(v * 1e6) for v in c.t_ms.tolist()],
    }


POINT_ROWS = [
    ("device", "device"),
    ("allocated", "allocated"),
    ("reserved", "reserved"),
    ("op", "op"),
    ("at", "at"),
]
PEAK_ROWS = [("peak of", "device"), ("allocated", "allocated"), ("op", "op"), ("at", "at")]


def memory_figure(curves: list[MemoryCurve], x_range: Any, width: int, end_ms: float) -> Any:
    """The memory lane: per device, allocated bytes as a step area, reserved as a step line,
    the peak as a marker with its bytes and op; sharing the lanes' ``x_range``."""
    from bokeh.models import FixedTicker, HoverTool, Range1d
    from bokeh.plotting import figure

    from perflab.render.timeline_figure import tooltip_template

    top = max(max(int(c.allocated.max()), int(c.reserved.max()), 1) for c in curves)
    fig = figure(
        width=width,
        height=HEIGHT,
        sizing_mode="stretch_width",
        x_range=x_range,
        y_range=Range1d(start=0, end=top * 1.35),  # room above the peak for its label
        tools="",
        toolbar_location=None,
        title="memory: allocated (filled) and reserved (dashed) per device",
        min_border_left=10,
    )
    ticks = byte_ticks(top)
    fig.yaxis.ticker = FixedTicker(ticks=ticks)
    fig.yaxis.major_label_overrides = {t: format_bytes(t) for t in ticks}
    fig.xaxis.visible = False
    drawn = [_draw_device(fig, c, COLORS[k % len(COLORS)], end_ms) for k, c in enumerate(curves)]
    areas: list[Any] = [area for area, _ in drawn]
    marks: list[Any] = [mark for _, mark in drawn]
    fig.add_tools(HoverTool(renderers=areas, tooltips=tooltip_template(POINT_ROWS)))
    fig.add_tools(HoverTool(renderers=marks, tooltips=tooltip_template(PEAK_ROWS)))
    fig.legend.location = "top_left"
    fig.legend.orientation = "horizontal"
    fig.legend.label_text_font_size = "11px"
    fig.legend.background_fill_alpha = 0.6
    return fig


def _draw_device(
    fig: Any, c: MemoryCurve, colors: tuple[str, str], end_ms: float
) -> tuple[Any, Any]:
    """One device's area, reserved line and peak marker; returns the area's and the
    marker's renderers (each has a hover)."""
    from bokeh.models import ColumnDataSource

    fill, line = colors
    src = ColumnDataSource(_columns(c, end_ms))
    # the peak's label on the side of the marker with room for it
    leftward = c.peak_ms > end_ms / 2
    # the area as one glyph; over it, a box per point (invisible) that hover reads
    fig.varea_step(
        x="left", y1=0, y2="top", source=src, step_mode="after", fill_color=fill,
        fill_alpha=0.55, legend_label=c.label,
    )  # fmt: skip
    area = fig.quad(
        left="left",
        right="right",
        bottom=0,
        top="top",
        source=src,
        fill_alpha=0,
        line_color=None,
    )
    fig.step(x="left", y="top", source=src, mode="after", line_color=line, line_width=1)
    if c.reserved_known:
        fig.step(
            x="left",
            y="reserved_y",
            source=src,
            mode="after",
            line_color=line,
            line_dash="dashed",
            line_width=1.5,
        )
    said = format_bytes(c.peak_bytes)
    peak = ColumnDataSource(
        {
            "x": [c.peak_ms],
            "y": [float(c.peak_bytes)],
            "device": [c.label],
            "allocated": [said],
            "op": [c.peak_op],
            "at": [format_ns(c.peak_ms * 1e6)],
            "text": [f"peak {said} · {shorten(c.peak_op, 60)}"],
        }
    )
    mark = fig.scatter(
        x="x", y="y", source=peak, marker="inverted_triangle", size=10, color="#d62728"
    )
    fig.text(
        x="x",
        y="y",
        text="text",
        source=peak,
        x_offset=-8 if leftward else 8,
        y_offset=-2,
        text_align="right" if leftward else "left",
        text_font_size="11px",
        text_color="#8a1c1c",
        text_baseline="bottom",
    )
    return area, mark
