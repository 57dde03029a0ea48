"""Interactive timeline of a :class:`~perflab.model.trace.Trace` (bokeh, imported lazily).

Lanes are grouped by rank: each CPU thread (with its NVTX/annotation ranges in a lane of
their own), then each GPU stream. A strip above the lanes shows the GPU busy fraction.

Scaling: the figure never holds one glyph per event. :func:`perflab.analysis.lod.build_pyramid`
pre-computes levels of detail (the longest intervals of each tile, and a busy fraction per
lane and bin); a small script in the page picks the level that fits the visible range and
draws those intervals as bars with hover, and the busy fraction as shaded bars behind them.
The arrays travel as bokeh binary buffers, so the page needs no server and no network.

Safety: names and labels reach the page only as data of bokeh models (escaped by bokeh in
the document JSON) and are shown by plain ``@field`` tooltips and canvas text, never as
markup.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.lod import Pyramid, build_pyramid
from perflab.model.trace import MEMCPY_DIRECTIONS, EventKind, Trace, TrackKind
from perflab.model.units import format_ns
from perflab.render.html import esc, wrap

MAX_NAME = 300  # hover shows at most this many characters of a name
LANE_PX = 22
# colours per EventKind value (kernel, memcpy, memset, cpu_op, runtime, annotation, sync,
# other, python)
KIND_COLORS = (
    "#4c78a8",
    "#54a24b",
    "#72b7b2",
    "#f58518",
    "#9d9d9d",
    "#b279a2",
    "#e45756",
    "#bab0ac",
    "#eeca3b",
)


@dataclass
class Lanes:
    """Which lane each event is drawn in, and what each lane is."""

    of_event: npt.NDArray[np.int64]
    labels: list[str]
    gpu: npt.NDArray[np.bool_]


def assign_lanes(trace: Trace) -> Lanes:
    """One lane per track, plus one per track for its annotation (NVTX) ranges. Order:
    by rank, CPU tracks before GPU tracks, then device/process and stream/thread."""
    tracks = trace.tracks
    ntr = len(tracks)
    is_note = (trace.kind == EventKind.ANNOTATION).astype(np.int64)
    key = trace.track.astype(np.int64) * 2 + is_note  # lane candidates: track x {work, notes}
    used = np.zeros(2 * max(ntr, 1), dtype=bool)
    used[key] = True
    # sort candidates: rank, CPU first, device, stream, notes lane above work lane
    cand = np.flatnonzero(used)
    tr = cand // 2
    order = np.lexsort(
        (
            1 - cand % 2,
            tracks["stream"][tr],
            tracks["device"][tr],
            tracks["kind"][tr] != TrackKind.CPU,
            tracks["rank"][tr],
        )
    )
    cand = cand[order]
    lane_of_cand = np.full(used.size, -1, dtype=np.int64)
    lane_of_cand[cand] = np.arange(cand.size)
    multi_rank = ntr > 0 and int(tracks["rank"].min()) != int(tracks["rank"].max())
    labels = []
    for c in cand.tolist():
        t = c // 2
        label = trace.track_label(t)
        if multi_rank:
            label = f"rank {int(tracks['rank'][t])} {label}"
        labels.append(label + (" · ranges" if c % 2 else ""))
    gpu = tracks["kind"][cand // 2] == TrackKind.GPU if cand.size else np.zeros(0, bool)
    return Lanes(lane_of_cand[key], labels, np.asarray(gpu, dtype=bool))


DETAIL_COLUMNS = (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers",
    "shared_mem",
    "bytes",
    "direction",
)


def _detail_matrix(trace: Trace, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per row: name, kind, then :data:`DETAIL_COLUMNS` (-1 where unknown)."""
    out = np.full((rows.size, 2 + len(DETAIL_COLUMNS)), -1, dtype=np.int64)
    out[:, 0] = trace.name[rows]
    out[:, 1] = trace.kind[rows]
    for side, cols, first in (
        (trace.kernels, DETAIL_COLUMNS[:8], 2),
        (trace.memcpy, ("bytes", "direction"), 10),
    ):
        where = np.full(len(trace), -1, dtype=np.int64)
        where[side["event"]] = np.arange(len(side))
        hit = where[rows]
        found = hit >= 0
        for j, col in enumerate(cols):
            out[found, first + j] = side[col][hit[found]]
    return out


def _short(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


@dataclass
class Encoded:
    """The pyramid as compact arrays for the page (one entry per tile row)."""

    start: npt.NDArray[np.float32]  # ms from the tile's start
    dur: npt.NDArray[np.float32]  # ms
    lane: npt.NDArray[Any]
    label: npt.NDArray[Any]
    label_table: npt.NDArray[np.int64]  # per label: name, kind, DETAIL_COLUMNS
    names: list[str]
    tile_offsets: npt.NDArray[np.int32]
    busy: npt.NDArray[np.uint8]
    levels: list[dict[str, int]]


def encode(trace: Trace, lanes: Lanes, pyramid: Pyramid) -> Encoded:
    t0, span = pyramid.t0, pyramid.t1 - pyramid.t0
    starts, durs, rows_all, offsets, busy, levels = [], [], [], [], [], []
    row_base = busy_base = tile_base = 0
    for level in pyramid.levels:
        width = span / level.tiles
        tile_of_row = np.repeat(np.arange(level.tiles), np.diff(level.offsets))
        rel = trace.start_ns[level.rows].astype(np.float64) - t0 - tile_of_row * width
        starts.append((rel / 1e6).astype(np.float32))
        durs.append((trace.dur_ns[level.rows] / 1e6).astype(np.float32))
        rows_all.append(level.rows)
        offsets.append(level.offsets[:-1] + row_base)
        cells = np.rint(level.busy * 255).astype(np.uint8)
        busy.append(cells.ravel())
        levels.append(
            {
                "tiles": level.tiles,
                "tile_base": tile_base,
                "bins": level.bins,
                "busy_base": busy_base,
            }
        )
        tile_base += level.tiles
        row_base += int(level.rows.size)
        busy_base += int(cells.size)
    offsets.append(np.array([row_base]))
    rows = np.concatenate(rows_all) if rows_all else np.zeros(0, np.int64)
    label, table, names = _labels(trace, rows)
    lane_dtype = np.uint8 if len(lanes.labels) <= 256 else np.uint16
    label_dtype = np.uint16 if len(table) <= 65536 else np.uint32
    return Encoded(
        start=np.concatenate(starts) if starts else np.zeros(0, np.float32),
        dur=np.concatenate(durs) if durs else np.zeros(0, np.float32),
        lane=lanes.of_event[rows].astype(lane_dtype),
        label=label.astype(label_dtype),
        label_table=table,
        names=names,
        tile_offsets=np.concatenate(offsets).astype(np.int32),
        busy=np.concatenate(busy) if busy else np.zeros(0, np.uint8),
        levels=levels,
    )


def _labels(
    trace: Trace, rows: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[str]]:
    """One label per distinct (name, kind, launch details) among ``rows``; the page builds
    hover text from it. Names are renumbered to those used."""
    unique_rows, row_inverse = np.unique(rows, return_inverse=True)
    matrix = _detail_matrix(trace, unique_rows)
    table, inverse = np.unique(matrix, axis=0, return_inverse=True)
    used, table[:, 0] = np.unique(table[:, 0], return_inverse=True)
    names = [_short(trace.strings[int(i)]) for i in used]
    return inverse.reshape(-1)[row_inverse].astype(np.int64), table, names


_REFRESH_JS = """
const d = store.data, lv_all = meta.levels, span = meta.span;
const v0 = xr.start, v1 = xr.end, vw = Math.max(v1 - v0, 1e-12);
let L = 0;
for (let i = 0; i < lv_all.length; i++) { if (span / lv_all[i].tiles >= vw / 2) L = i; }
const lv = lv_all[L], w = span / lv.tiles, offs = tiles.data.offsets;
const a = Math.max(0, Math.floor(v0 / w)), b = Math.min(lv.tiles - 1, Math.floor(v1 / w));
const left = [], right = [], bottom = [], top = [], name = [], detail = [], dur = [],
      at = [], lane = [], color = [], seen = new Set();
function fmt(ms) {
  const ns = ms * 1e6, units = [[1e9, " s"], [1e6, " ms"], [1e3, " us"], [1, " ns"]];
  for (const [s, u] of units) { if (Math.abs(ns) >= s) return (ns / s).toPrecision(3) + u; }
  return ns.toPrecision(3) + " ns";
}
const lt = labels.data;
function bytes(n) {
  const u = [[1099511627776, " TiB"], [1073741824, " GiB"], [1048576, " MiB"], [1024, " KiB"]];
  for (const [s, x] of u) { if (n >= s) return (n / s).toPrecision(3) + x; }
  return n + " B";
}
function describe(lab) {
  const parts = [meta.kinds[lt.kind[lab]] || "other"];
  const dims = (p) => "(" + [lt[p + "x"][lab], lt[p + "y"][lab], lt[p + "z"][lab]].join(", ") + ")";
  if (lt.grid_x[lab] >= 0) parts.push("grid " + dims("grid_"));
  if (lt.block_x[lab] >= 0) parts.push("block " + dims("block_"));
  if (lt.registers[lab] >= 0) parts.push(lt.registers[lab] + " registers/thread");
  if (lt.shared_mem[lab] > 0) parts.push(bytes(lt.shared_mem[lab]) + " shared/block");
  if (lt.direction[lab] >= 0) parts.push(meta.directions[lt.direction[lab]] || "?");
  if (lt.bytes[lab] >= 0) parts.push(bytes(lt.bytes[lab]));
  return parts.join(", ");
}
for (let t = a; t <= b; t++) {
  const r0 = offs[lv.tile_base + t], r1 = offs[lv.tile_base + t + 1];
  for (let r = r0; r < r1; r++) {
    const l = t * w + d.start[r], rr = l + d.dur[r];
    if (rr < v0 || l > v1) continue;
    const key = l.toFixed(6) + ":" + d.lane[r];
    if (seen.has(key)) continue;
    seen.add(key);
    const lab = d.label[r], kind = lt.kind[lab];
    left.push(l); right.push(Math.max(rr, l + vw * 1e-4));
    bottom.push(d.lane[r] + 0.38); top.push(d.lane[r] - 0.38);
    name.push(meta.names[lt.name[lab]]); detail.push(describe(lab));
    color.push(meta.colors[kind] || "#bab0ac");
    dur.push(fmt(d.dur[r])); at.push(fmt(l)); lane.push(meta.lanes[d.lane[r]]);
  }
}
shown.data = {left, right, bottom, top, name, detail, color, dur, at, lane};
const B = lv.bins, bw = span / B, cells = busy.data.cells;
const i0 = Math.max(0, Math.floor(v0 / bw)), i1 = Math.min(B - 1, Math.floor(v1 / bw));
const step = Math.max(1, Math.ceil((i1 - i0 + 1) / meta.max_bins));
const nl = meta.lanes.length;
const cl = [], cr = [], cb = [], ct = [], sl = [], sr = [], st = [];
for (let i = i0; i <= i1; i += step) {
  const hi = Math.min(i + step, i1 + 1);
  for (let k = 0; k <= nl; k++) {
    let m = 0;
    for (let j = i; j < hi; j++) m += cells[lv.busy_base + k * B + j];
    m /= 255 * (hi - i);
    if (m <= 0) continue;
    if (k === nl) { sl.push(i * bw); sr.push(hi * bw); st.push(m); }
    else { cl.push(i * bw); cr.push(hi * bw); cb.push(k + 0.4); ct.push(k + 0.4 - 0.8 * m); }
  }
}
cover.data = {left: cl, right: cr, bottom: cb, top: ct};
summary.data = {left: sl, right: sr, top: st};
main.title.text = meta.title + "  [detail level " + L + ": " + left.length + " events drawn]";
"""


@dataclass
class Timeline:
    """A rendered timeline: bokeh layout plus what the text view says."""

    layout: Any
    text: str

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": notebook_html(self.layout, self.text)}

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text)

    def save(self, path: str | os.PathLike[str], title: str = "perflab timeline") -> Path:
        target = Path(path)
        target.write_text(standalone_html(self.layout, title), encoding="utf-8")
        return target


def timeline(
    trace: Trace, *, row_budget: int = 150_000, width: int = 1100, title: str | None = None
) -> Timeline:
    """The interactive timeline of ``trace`` (``trace.timeline()``)."""
    if len(trace) == 0:
        raise ValueError("the trace has no events to draw")
    lanes = assign_lanes(trace)
    start = trace.start_ns.astype(np.float64)
    end = start + trace.dur_ns
    gpu_lanes = np.flatnonzero(lanes.gpu)
    pyramid = build_pyramid(
        start,
        end,
        lanes.of_event,
        len(lanes.labels),
        summary_lanes=gpu_lanes if gpu_lanes.size else None,
        row_budget=row_budget,
    )
    enc = encode(trace, lanes, pyramid)
    if title is None:
        source = Path(str(trace.meta.get("source") or "trace")).name
        title = f"{source}: {len(trace)} events, {len(lanes.labels)} lanes"
    layout = _figure(enc, lanes, pyramid, width, title)
    return Timeline(layout, timeline_text(trace, lanes, pyramid))


def timeline_text(trace: Trace, lanes: Lanes, pyramid: Pyramid) -> str:
    span = pyramid.t1 - pyramid.t0
    lines = [trace.describe(), f"{len(lanes.labels)} lanes:"]
    lines += [
        f"  {'GPU' if g else 'CPU'}  {label}"
        for label, g in zip(lanes.labels, lanes.gpu.tolist(), strict=True)
    ]
    lines.append(
        f"levels of detail: {len(pyramid.levels)} (finest tile "
        f"{format_ns(span / pyramid.levels[-1].tiles)}), "
        f"{pyramid.total_rows} drawable rows"
    )
    return "\n".join(lines)


def _figure(enc: Encoded, lanes: Lanes, pyramid: Pyramid, width: int, title: str) -> Any:
    from bokeh.document import Document
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, CustomJS, FixedTicker, HoverTool, Range1d
    from bokeh.plotting import figure

    span_ms = (pyramid.t1 - pyramid.t0) / 1e6
    nl = len(lanes.labels)
    store = ColumnDataSource(
        {"start": enc.start, "dur": enc.dur, "lane": enc.lane, "label": enc.label}
    )
    tiles = ColumnDataSource({"offsets": enc.tile_offsets})
    busy = ColumnDataSource({"cells": enc.busy})
    shown = ColumnDataSource(
        {
            k: []
            for k in (
                "left",
                "right",
                "bottom",
                "top",
                "name",
                "detail",
                "color",
                "dur",
                "at",
                "lane",
            )
        }
    )
    cover = ColumnDataSource({k: [] for k in ("left", "right", "bottom", "top")})
    summary = ColumnDataSource({k: [] for k in ("left", "right", "top")})
    x_range = Range1d(
        start=0,
        end=span_ms,
        bounds=(-span_ms * 0.02, span_ms * 1.02),
        min_interval=max(span_ms * 1e-7, 1e-6),
    )
    height = max(160, nl * LANE_PX + 60)
    main = figure(
        width=width,
        height=height,
        x_range=x_range,
        title=_short(title)[:150],
        y_range=Range1d(start=nl - 0.5, end=-0.5),
        tools="xpan,xwheel_zoom,xbox_zoom,reset,tap",
        active_scroll="xwheel_zoom",
        x_axis_label="ms since trace start",
        output_backend="canvas",
    )
    for k in np.flatnonzero(lanes.gpu).tolist():  # idle GPU time shows as this background
        main.quad(
            left=-span_ms,
            right=2 * span_ms,
            bottom=k - 0.45,
            top=k + 0.45,
            fill_color="#eef2f7",
            line_color=None,
        )
    main.quad(
        left="left",
        right="right",
        bottom="bottom",
        top="top",
        source=cover,
        fill_color="#9db4cf",
        fill_alpha=0.8,
        line_color=None,
    )
    bars = main.quad(
        left="left",
        right="right",
        bottom="bottom",
        top="top",
        source=shown,
        fill_color="color",
        line_color="color",
        line_width=0.5,
    )
    main.add_tools(
        HoverTool(
            renderers=[bars],
            tooltips=[
                ("name", "@name"),
                ("kind/details", "@detail"),
                ("duration", "@dur"),
                ("start", "@at"),
                ("lane", "@lane"),
            ],
        )
    )
    main.yaxis.ticker = FixedTicker(ticks=list(range(nl)))
    main.yaxis.major_label_overrides = {
        i: _short(label)[:60] for i, label in enumerate(lanes.labels)
    }
    main.ygrid.grid_line_color = None
    strip = figure(
        width=width,
        height=70,
        x_range=x_range,
        y_range=Range1d(start=0, end=1),
        tools="",
        toolbar_location=None,
        title="GPU busy fraction",
    )
    strip.quad(
        left="left",
        right="right",
        bottom=0,
        top="top",
        source=summary,
        fill_color="#4c78a8",
        line_color=None,
    )
    strip.xaxis.visible = False
    strip.yaxis.ticker = FixedTicker(ticks=[0, 1])
    lt = enc.label_table
    labels = ColumnDataSource(
        {
            "name": lt[:, 0].astype(np.int32),
            "kind": lt[:, 1].astype(np.int8),
            **{
                c: lt[:, 2 + j].astype(np.float64 if c in ("shared_mem", "bytes") else np.int32)
                for j, c in enumerate(DETAIL_COLUMNS)
            },
        }
    )
    meta = {
        "levels": enc.levels,
        "span": span_ms,
        "names": enc.names,
        "kinds": [k.name.lower() for k in EventKind],
        "colors": list(KIND_COLORS),
        "directions": list(MEMCPY_DIRECTIONS),
        "lanes": lanes.labels,
        "max_bins": 1500,
        "title": _short(title)[:150],
    }
    refresh = CustomJS(
        args={
            "store": store,
            "tiles": tiles,
            "busy": busy,
            "shown": shown,
            "cover": cover,
            "summary": summary,
            "xr": x_range,
            "meta": meta,
            "main": main,
            "labels": labels,
        },
        code=_REFRESH_JS,
    )
    x_range.js_on_change("start", refresh)
    x_range.js_on_change("end", refresh)
    layout = column(strip, main)
    doc = Document()
    doc.add_root(layout)
    doc.js_on_event("document_ready", refresh)  # first fill, without waiting for a zoom
    return layout


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


def timeline_bundle(trace: Trace, **options: Any) -> dict[str, str]:
    """MIME bundle (text/html + text/plain) of :func:`timeline`."""
    return timeline(trace, **options)._repr_mimebundle_()


def save_timeline(trace: Trace, path: str | os.PathLike[str], **options: Any) -> Path:
    title = str(trace.meta.get("source") or "perflab timeline")
    return timeline(trace, **options).save(path, title=f"perflab timeline: {title}")
