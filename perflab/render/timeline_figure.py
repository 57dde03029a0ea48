"""The bokeh figure of a timeline page: the lanes' figure and the busy strip above it, their
data sources, hover and tap tools, and the page scripts (``static/timeline-*.js``) attached
with the page's metadata. What the page shows, lanes, labels and levels of detail, is
computed in :mod:`perflab.render.timeline_data`; :mod:`perflab.render.timeline` puts the two
together."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import numpy as np
import numpy.typing as npt

from perflab.analysis.lod import Pyramid
from perflab.model.trace import MEMCPY_DIRECTIONS, EventKind
from perflab.render import timeline_critical as critical
from perflab.render import timeline_info as info
from perflab.render.html import esc, static_text
from perflab.render.timeline_data import (
    Encoded,
    EventColumns,
    Labels,
    Lanes,
    NameColumns,
    label_columns,
    lane_details,
    lane_notes,
    lane_ticks,
    strip_title,
)
from perflab.render.timeline_data import short_name as _short
from perflab.render.timeline_memory import MemoryCurve, memory_figure

LANE_PX = 22
MadeBy = Literal["python", "cli"]
# how a page that holds only some events says what holds more, where it was made
BUDGET_HINTS: dict[MadeBy, str] = {
    "python": "a larger row_budget (timeline(row_budget=...)) holds more",
    "cli": "a larger --rows holds more",
}
TIME_AXIS = "ms since trace start"
# the gaps before GPU work that the page holds (:meth:`timeline_info.IdleBefore.on_page`)
IdleColumns = dict[str, npt.NDArray[np.int32] | npt.NDArray[np.float32] | npt.NDArray[np.int8]]


def _page_script(*names: str) -> str:
    """A page script: the body of a bokeh CustomJS callback, from files in static/."""
    return "\n".join(static_text(name) for name in names)


SHOWN_COLUMNS = (
    "left", "right", "bottom", "top", "name", "detail", "cat", "color", "dur", "at", "lane",
    "lane_i", "ev", "src", "group",
)  # fmt: skip
LINK_COLUMNS = (
    "left", "right", "bottom", "top", "x", "y", "name", "detail", "cat", "dur", "at", "lane",
    "lane_i", "role", "group",
)  # fmt: skip
EVENT_FIELDS = ("start", "dur", "lane", "label", "group")


@dataclass
class Page:
    """The bokeh models the page scripts and a live kernel read and write."""

    layout: Any
    x_range: Any
    live: Any
    live_busy: Any
    live_level: Any
    labels: Any
    names: Any
    main: Any = None  # the lanes' figure


def tooltip_template(rows: list[tuple[str, str]]) -> str:
    """Hover HTML: one line per (label, column). Bokeh escapes each ``@{column}`` value; the
    styles (static/timeline.css) wrap long names inside a box never wider than about half
    the window, so bokeh can always place it beside the cursor, fully in view."""
    lines = "".join(
        f'<div class="pl-row"><span class="pl-key">{esc(label)}</span> @{{{column}}}</div>'
        for label, column in rows
    )
    return f'<div class="pl-tip"><style>{static_text("timeline.css")}</style>{lines}</div>'


def _empty(columns: tuple[str, ...]) -> Any:
    from bokeh.models import ColumnDataSource

    return ColumnDataSource({k: [] for k in columns})


@dataclass
class PageSources:
    """The data sources the page scripts fill: what is drawn now (``shown``, the highlighted
    ``links`` and their ``arrows``, the search matches ``found``, the busy ``cover`` behind
    the lanes and the ``summary`` strip), what the search box asks for (``query``) and what
    a live kernel sends (``live``, ``live_busy``, ``live_level``)."""

    shown: Any
    links: Any
    cover: Any
    summary: Any
    arrows: Any
    live: Any
    live_busy: Any
    live_level: Any
    found: Any
    query: Any
    headers: Any
    gpu_lanes: Any

    @classmethod
    def empty(cls) -> PageSources:
        return cls(
            _empty(SHOWN_COLUMNS),
            _empty(LINK_COLUMNS),
            _empty(("xs", "ys")),
            _empty(("xs", "ys")),
            _empty(("x0", "y0", "x1", "y1")),
            _empty(EVENT_FIELDS),
            _empty(("cells",)),
            _empty(("t0", "t1", "bins", "n")),
            _empty(("left", "right", "bottom", "top", "color")),
            _empty(("label", "current")),
            _empty(("bottom", "top")),
            _empty(("bottom", "top")),
        )


@dataclass
class PageData:
    """What the page carries: the encoded levels, the events they draw, their labels and
    names, the lanes, the gaps before GPU work (``idle``: :meth:`IdleBefore.on_page`),
    whether the page holds every event of the trace, how many the trace has, and where the
    page was made (``made_by``: ``"python"`` or ``"cli"``, which name the row budget
    differently); the critical path (``critical``: None when not asked for) and the memory
    curves (``memory``: none without memory events)."""

    enc: Encoded
    events: EventColumns
    labels: Labels
    names: NameColumns
    lanes: Lanes
    pyramid: Pyramid
    idle: IdleColumns
    complete: bool
    total_events: int
    made_by: MadeBy
    critical: critical.CriticalView | None = None
    memory: list[MemoryCurve] = field(default_factory=list)


def _x_range(span_ms: float) -> Any:
    """The time axis shared by the strip and the lanes: the whole trace, a little margin
    to pan into, and a zoom that stops at a nanosecond or 1e-7 of the trace."""
    from bokeh.models import Range1d

    return Range1d(
        start=0,
        end=span_ms,
        bounds=(-span_ms * 0.02, span_ms * 1.02),
        min_interval=max(span_ms * 1e-7, 1e-6),
    )


def _page_title(title: str) -> str:
    return _short(title)[:150]


def _lanes_figure(
    data: PageData, src: PageSources, x_range: Any, width: int, title: str
) -> tuple[Any, Any]:
    """The lanes: events as bars with hover, search matches and the highlighted launch link
    over them, and each lane named on the axis. The figure takes the width it is given (a
    page, a notebook's output area) and follows it; ``width`` is its size where nothing
    gives one (the static picture)."""
    from bokeh.models import FixedTicker, Range1d
    from bokeh.plotting import figure

    lanes = data.lanes
    nl = len(lanes.labels)
    main = figure(
        width=width,
        height=max(160, nl * LANE_PX + 60),
        sizing_mode="stretch_width",
        x_range=x_range,
        title=_page_title(title),
        y_range=Range1d(start=nl - 0.5, end=-0.5),
        tools="xpan,xwheel_zoom,xbox_zoom,reset",
        active_drag="xpan",
        active_scroll="xwheel_zoom",
        # the keys' hint is added by the page script (timeline-ui.js): a static picture of
        # this figure (SVG, PNG) answers no keys
        x_axis_label=TIME_AXIS,
        output_backend="canvas",
        min_border_left=10,
    )
    _draw_lane_backgrounds(main, lanes, src, x_range.end)
    bars = main.quad(
        left="left",
        right="right",
        bottom="bottom",
        top="top",
        source=src.shown,
        fill_color="color",
        line_color="color",
        line_width=0.5,
        nonselection_fill_alpha=0.45,
        nonselection_line_alpha=0.45,
    )
    _outlines(main, src.found, "color", 2)  # search matches, whatever the level of detail draws
    marked = _draw_link(main, src)
    _add_hovers(main, bars, marked)
    main.yaxis.ticker = FixedTicker(ticks=list(range(nl)))
    main.yaxis.major_label_overrides = dict(enumerate(lane_ticks(lanes, data.pyramid)))
    main.yaxis.major_label_text_font_size = "11px"
    main.ygrid.grid_line_color = None
    return main, bars


def _draw_lane_backgrounds(main: Any, lanes: Lanes, src: PageSources, span_ms: float) -> None:
    """Behind the events: the group headers' bands, idle GPU time, and the busy fraction
    (``cover``) of each lane. The bands' rows are data (``headers``, ``gpu_lanes``), which
    the page moves when a group is collapsed or expanded."""
    headers = np.flatnonzero(lanes.header) if lanes.header.size else np.zeros(0, np.int64)
    src.headers.data = {"bottom": (headers + 0.5).tolist(), "top": (headers - 0.5).tolist()}
    main.quad(  # each group's header row: a band across the plot
        left=-span_ms,
        right=2 * span_ms,
        bottom="bottom",
        top="top",
        source=src.headers,
        fill_color="#dde3ea",
        line_color=None,
    )
    gpu_lanes = np.flatnonzero(lanes.gpu & ~lanes.header)
    src.gpu_lanes.data = {"bottom": (gpu_lanes - 0.45).tolist(), "top": (gpu_lanes + 0.45).tolist()}
    main.quad(  # idle GPU time shows as this background (one glyph for every GPU lane)
        left=-span_ms,
        right=2 * span_ms,
        bottom="bottom",
        top="top",
        source=src.gpu_lanes,
        fill_color="#eef2f7",
        line_color=None,
    )
    main.patches(  # one outline per lane (see timeline-refresh.js)
        xs="xs", ys="ys", source=src.cover, fill_color="#9db4cf", fill_alpha=0.8, line_color=None
    )


def _outlines(main: Any, source: Any, line_color: str, line_width: float) -> Any:
    """Unfilled boxes around the rows of ``source`` (its left, right, bottom and top)."""
    return main.quad(
        left="left",
        right="right",
        bottom="bottom",
        top="top",
        source=source,
        fill_alpha=0,
        line_color=line_color,
        line_width=line_width,
    )


def _draw_link(main: Any, src: PageSources) -> Any:
    """The tapped launch link: its events outlined, an arrow from the launch to the work,
    and a marker on each; returns the outlines' renderer (it has a hover of its own)."""
    marked = _outlines(main, src.links, "#d62728", 2.5)
    main.segment(
        x0="x0",
        y0="y0",
        x1="x1",
        y1="y1",
        source=src.arrows,
        line_color="#d62728",
        line_dash="dashed",
    )
    main.scatter(  # a marker keeps a short launch visible at any zoom
        x="x", y="y", source=src.links, marker="inverted_triangle", size=9, color="#d62728"
    )
    return marked


HOVER_ROWS = (
    ("name", "name"),
    ("category", "cat"),
    ("duration", "dur"),
    ("start", "at"),
    ("lane", "lane"),
)


def _add_hovers(main: Any, bars: Any, marked: Any) -> None:
    """Hover on the events, and on the highlighted link's (which also says its role)."""
    from bokeh.models import HoverTool

    main.add_tools(HoverTool(renderers=[bars], tooltips=tooltip_template(list(HOVER_ROWS))))
    main.add_tools(
        HoverTool(
            renderers=[marked], tooltips=tooltip_template([("highlighted", "role"), *HOVER_ROWS])
        )
    )


def _strip_figure(lanes: Lanes, src: PageSources, x_range: Any, width: int) -> Any:
    """The busy-fraction strip above the lanes (see :func:`strip_title`)."""
    from bokeh.models import FixedTicker, Range1d
    from bokeh.plotting import figure

    strip = figure(
        width=width,
        height=70,
        sizing_mode="stretch_width",
        x_range=x_range,
        y_range=Range1d(start=0, end=1),
        tools="",
        toolbar_location=None,
        title=strip_title(lanes),
        min_border_left=10,
    )
    # one outline (see timeline-refresh.js)
    strip.patches(xs="xs", ys="ys", source=src.summary, fill_color="#4c78a8", line_color=None)
    strip.xaxis.visible = False
    strip.yaxis.ticker = FixedTicker(ticks=[0, 1])
    return strip


class PageMeta(TypedDict):
    """What the page scripts read as ``meta`` (see :func:`_page_meta`)."""

    span: float
    kinds: list[str]
    colors: list[str]
    classes: list[str]
    legend: list[list[str]]
    directions: list[str]
    lanes: list[str]
    ticks: list[str]
    tick_notes: list[str]
    lane_info: list[str]
    headers: list[bool]
    group_of: list[int]
    lane_px: int
    gpu: list[bool]
    max_bins: int
    title: str
    causes: list[str]
    complete: bool
    total_events: int
    budget_hint: str


def _page_meta(data: PageData, span_ms: float, title: str) -> PageMeta:
    """What the page scripts need to know besides the data: span, kinds, colour classes
    (and the legend of those the page shows), lanes (full names, axis names, tooltips,
    group headers), idle causes, and whether every event of the trace is on the page."""
    lanes = data.lanes
    classes = info.color_classes()
    shown_classes = sorted(set(data.labels.table[:, -2].tolist()))
    return {
        "span": span_ms,
        "kinds": [k.name.lower() for k in EventKind],
        "colors": [color for _, color in classes],
        "classes": [name for name, _ in classes],
        "legend": [[classes[c][0], classes[c][1]] for c in shown_classes if 0 <= c < len(classes)],
        "directions": list(MEMCPY_DIRECTIONS),
        "lanes": lanes.labels,
        "ticks": lane_ticks(lanes, data.pyramid, chars=200, notes=False),
        "tick_notes": lane_notes(lanes, data.pyramid),
        "lane_info": lane_details(lanes, data.pyramid),
        "headers": lanes.header.tolist(),
        "group_of": lanes.group_heads(),
        "lane_px": LANE_PX,
        "gpu": lanes.gpu.tolist(),
        "max_bins": 1500,
        "title": _page_title(title),
        "causes": list(info.IDLE_CAUSES),
        "complete": data.complete,
        "total_events": data.total_events,
        "budget_hint": BUDGET_HINTS[data.made_by],
    }


def _attach_critical(
    view: critical.CriticalView, common: dict[str, object], x_range: Any, main: Any, bars: Any
) -> None:
    """The critical path's toggle and drawing (timeline-critical.js): run after the ui
    script has built the controls, and again on every range change."""
    from bokeh.models import ColumnDataSource, CustomJS

    segments = view.segments
    script = CustomJS(
        args={
            **common,
            "crit": ColumnDataSource(segments.columns() if segments else {}),
            "crit_shown": critical.draw_critical(main),
            "cmeta": critical.page_meta(view),
            "bars": bars,
            "xr": x_range,
            "main": main,
        },
        code=_page_script("timeline-helpers.js", "timeline-critical.js"),
    )
    x_range.js_on_change("start", script)
    x_range.js_on_change("end", script)
    main.js_on_change("inner_width", script)


def _attach_scripts(
    data: PageData, common: dict[str, object], src: PageSources, x_range: Any, main: Any
) -> None:
    """The page's scripts: ``refresh`` redraws the level that fits the visible range (on
    each range change, live level, search and resize), ``tap`` highlights a launch link and
    fills the details panel, ``ui`` builds the keys, search box, legend, lane tooltips,
    area selection and panels around the plot (once, on its first layout).
    ``common`` holds the arguments all read."""
    from bokeh.events import Tap
    from bokeh.models import ColumnDataSource, CustomJS

    enc = data.enc
    events = ColumnDataSource(data.events)
    idle = ColumnDataSource(data.idle)
    refresh = CustomJS(
        args={
            **common,
            "events": events,
            "rows": ColumnDataSource({"rows": enc.rows}),
            "tiles": ColumnDataSource({"offsets": enc.tile_offsets}),
            "busy": ColumnDataSource({"cells": enc.busy}),
            "levels": ColumnDataSource(enc.levels),
            "live": src.live,
            "live_busy": src.live_busy,
            "live_level": src.live_level,
            "cover": src.cover,
            "summary": src.summary,
            "found": src.found,
            "query": src.query,
            "xr": x_range,
            "main": main,
        },
        code=_page_script("timeline-helpers.js", "timeline-refresh.js"),
    )
    tap = CustomJS(
        args={
            **common,
            "events": events,
            "live": src.live,
            "arrows": src.arrows,
            "idle": idle,
            "main": main,
        },
        code=_page_script("timeline-helpers.js", "timeline-tap.js"),
    )
    ui = CustomJS(
        args={
            **common,
            "events": events,
            "live": src.live,
            "idle": idle,
            "arrows": src.arrows,
            "query": src.query,
            "xr": x_range,
            "main": main,
            "bands": src.headers,
            "gpu_bands": src.gpu_lanes,
            "css": static_text("timeline.css"),
            # the search's regex matcher, started from this text as a Web Worker
            "worker_code": static_text("timeline-search-worker.js"),
        },
        code=_page_script("timeline-helpers.js", "timeline-ui.js"),
    )
    x_range.js_on_change("start", refresh)
    x_range.js_on_change("end", refresh)
    src.live_level.js_on_change("data", refresh)
    src.query.js_on_change("data", refresh)
    # the first layout (in any embedding: file, notebook, server, panel) and any resize
    main.js_on_change("inner_width", ui)
    main.js_on_change("inner_width", refresh)
    main.js_on_event(Tap, tap)


def figure_of(data: PageData, width: int, title: str) -> Page:
    """The page: the busy strip above the lanes, in a document of their own, with the
    scripts that draw the level of detail fitting the visible range."""
    from bokeh.document import Document
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource

    span_ms = (data.pyramid.t1 - data.pyramid.t0) / 1e6
    src = PageSources.empty()
    x_range = _x_range(span_ms)
    main, bars = _lanes_figure(data, src, x_range, width, title)
    strip = _strip_figure(data.lanes, src, x_range, width)
    label_source = ColumnDataSource(label_columns(data.labels.table))
    name_source = ColumnDataSource(data.names)
    common: dict[str, object] = {
        "labels": label_source,
        "name_list": name_source,
        "meta": _page_meta(data, span_ms, title),
        "shown": src.shown,
        "links": src.links,
    }
    _attach_scripts(data, common, src, x_range, main)
    if data.critical is not None:  # after the ui script, which builds the controls
        _attach_critical(data.critical, common, x_range, main, bars)
    figures = [strip, main]
    if data.memory:
        figures.append(memory_figure(data.memory, x_range, width, span_ms))
    layout = column(*figures, sizing_mode="stretch_width")
    doc = Document()
    doc.add_root(layout)
    return Page(
        layout, x_range, src.live, src.live_busy, src.live_level, label_source, name_source, main
    )
