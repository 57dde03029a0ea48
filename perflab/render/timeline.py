"""Interactive timeline of a :class:`~perflab.model.trace.Trace` (bokeh, imported lazily).

Lanes are grouped by rank: each CPU thread (with its NVTX/annotation ranges in a lane of
their own), then each GPU stream. A strip above the lanes shows the GPU busy fraction (for a
trace without GPU work, the CPU threads' one). Lanes are named from the trace's thread names
where the importer kept them; a lane whose events are all too short to see in the whole-trace
view says how many it holds.

Scaling: the figure never holds one glyph per event. :func:`perflab.analysis.lod.build_pyramid`
pre-computes levels of detail (the longest intervals of each tile, and a busy fraction per
lane and bin); a small script in the page picks the level that fits the visible range and
draws those intervals as bars with hover, and the busy fraction as shaded bars behind them.
The arrays travel as bokeh binary buffers, so the page needs no server and no network.

Launch links: tapping an event highlights its link (same rank and correlation id): the
runtime call on its CPU thread and the GPU work it launched, with an arrow between them. The
page carries every linked partner of every drawable event, so this works offline.

Live refinement (``live=True``): in a running kernel, a range change reaches Python, which
sends the largest events of the new range among all events plus the busy fraction at that
range's resolution; the page draws them as one more level (see :class:`LiveRefresh`).

Safety: names and labels reach the page only as data of bokeh models (escaped by bokeh in
the document JSON) and are shown by ``@{field}`` tooltip placeholders (which bokeh escapes)
and canvas text, never as markup.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from perflab.analysis.lod import Pyramid, WindowIndex, build_pyramid
from perflab.errors import InputError
from perflab.model.serialize import write_text
from perflab.model.trace import (
    GPU_WORK_KINDS,
    MEMCPY_DIRECTIONS,
    EventKind,
    Trace,
    TrackKind,
    distinct,
    unique_rows,
)
from perflab.model.units import counted, format_ns, shorten
from perflab.render import timeline_info as info
from perflab.render.bokeh_embed import notebook_bundle, standalone_html
from perflab.render.html import esc, printable, static_text

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
    """Which lane each event is drawn in, and what each lane is. Each group of lanes (a
    process's threads, a GPU's streams) sits under a header lane of its own, which holds no
    events (``header``); ``labels`` name lanes in full, ``short`` as the axis shows them."""

    of_event: npt.NDArray[np.int64]
    labels: list[str]
    gpu: npt.NDArray[np.bool_]
    notes: npt.NDArray[np.bool_]  # the lane holds a track's annotation (NVTX) ranges
    short: list[str] = field(default_factory=list)
    group: list[str] = field(default_factory=list)
    header: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))

    def counts(self) -> npt.NDArray[np.int64]:
        """Events per lane."""
        return np.bincount(self.of_event, minlength=len(self.labels)).astype(np.int64)

    @property
    def work(self) -> npt.NDArray[np.int64]:
        """The lanes that hold events (every lane but the group headers)."""
        return np.flatnonzero(~self.header) if self.header.size else np.arange(len(self.labels))


def assign_lanes(trace: Trace) -> Lanes:
    """One lane per track, plus one per track for its annotation (NVTX) ranges, under a
    header per group (rank, CPU process or GPU) of more than one lane. Order: by rank, CPU
    tracks before GPU tracks, then device/process and stream/thread."""
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
    multi_rank = ntr > 0 and int(tracks["rank"].min()) != int(tracks["rank"].max())
    names = track_names(trace)
    threads = _names(trace.meta.get("thread_names"))
    processes = _names(trace.meta.get("process_names"))
    lane_of_cand = np.full(used.size, -1, dtype=np.int64)
    labels: list[str] = []
    short: list[str] = []
    group: list[str] = []
    gpu: list[bool] = []
    header: list[bool] = []
    notes: list[bool] = []
    headings = [info.group_name(trace, c // 2, processes, multi_rank) for c in cand.tolist()]
    members = {h: headings.count(h) for h in headings}
    for c, heading in zip(cand.tolist(), headings, strict=True):
        t = c // 2
        on_gpu = bool(tracks["kind"][t] == TrackKind.GPU)
        alone = members[heading] == 1  # a group of one lane: named in the lane, no header
        if not alone and (not group or group[-1] != heading):  # a new group: header first
            labels.append(heading)
            short.append(heading)
            group.append(heading)
            gpu.append(on_gpu)
            header.append(True)
            notes.append(False)
        lane_of_cand[c] = len(labels)
        label = f"rank {int(tracks['rank'][t])} {names[t]}" if multi_rank else names[t]
        brief = info.short_track_name(trace, t, threads)
        brief = f"{heading} · {brief}" if alone else brief
        labels.append(label + (" · ranges" if c % 2 else ""))
        short.append(brief + (" · ranges" if c % 2 else ""))
        group.append(heading)
        gpu.append(on_gpu)
        header.append(False)
        notes.append(c % 2 == 1)
    return Lanes(
        lane_of_cand[key],
        labels,
        np.array(gpu, dtype=bool),
        np.array(notes, dtype=bool),
        short,
        group,
        np.array(header, dtype=bool),
    )


def track_lanes(trace: Trace, lanes: Lanes) -> npt.NDArray[np.int64]:
    """Per track, the lane its work (not its annotation ranges) is drawn in; -1 for a track
    that holds only ranges."""
    out = np.full(len(trace.tracks), -1, dtype=np.int64)
    work = np.flatnonzero(trace.kind != EventKind.ANNOTATION)
    out[trace.track[work]] = lanes.of_event[work]
    return out


def track_names(trace: Trace) -> list[str]:
    """Per track, the name to show: for a CPU thread, its name from the trace's metadata
    (``meta["thread_names"]``: ``{"<pid>:<tid>": name}``; ``meta["process_names"]``:
    ``{"<pid>": name}`` names the process of a thread without one) when the importer kept
    them; otherwise, and for GPU streams, the track's own label."""
    threads = _names(trace.meta.get("thread_names"))
    processes = _names(trace.meta.get("process_names"))
    tracks = trace.tracks
    out = []
    for t in range(len(tracks)):
        label = trace.track_label(t)
        if tracks["kind"][t] == TrackKind.CPU:
            pid, tid = int(tracks["device"][t]), int(tracks["stream"][t])
            thread, process = threads.get(f"{pid}:{tid}"), processes.get(str(pid))
            if thread:
                label = thread
            elif process:
                label = f"{process} {pid} · thread {tid} (no name in the trace)"
        out.append(_short(label))
    return out


def _names(value: object) -> dict[str, str]:
    """A ``{key: name}`` table from trace metadata; entries that are not text are skipped."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str) and v.strip()}


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


# after the details: the colour class and, for a launch call, its CPU op (a name)
FACT_COLUMNS = ("cls", "op")
OP_COLUMN = 2 + len(DETAIL_COLUMNS) + 1


@dataclass
class EventFacts:
    """Per event of a trace: its colour class (:func:`timeline_info.event_classes`) and,
    for a launch call, the name (string id) of its CPU op (-1 if none)."""

    cls: npt.NDArray[np.int16]
    op: npt.NDArray[np.int64]

    @classmethod
    def of(cls, trace: Trace) -> EventFacts:
        return cls(info.event_classes(trace), info.launch_ops(trace))


def _detail_matrix(
    trace: Trace, rows: npt.NDArray[np.int64], facts: EventFacts | None = None
) -> npt.NDArray[np.int64]:
    """Per row: name, kind, :data:`DETAIL_COLUMNS` (-1 where unknown), then
    :data:`FACT_COLUMNS`."""
    facts = facts or EventFacts.of(trace)
    out = np.full((rows.size, 2 + len(DETAIL_COLUMNS) + len(FACT_COLUMNS)), -1, dtype=np.int64)
    out[:, 0] = trace.name[rows]
    out[:, 1] = trace.kind[rows]
    out[:, -2] = facts.cls[rows]
    out[:, -1] = facts.op[rows]
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
    return shorten(name, MAX_NAME)


LINK_CAP = 64  # events of one launch link kept for highlighting (a graph launch has many)


def launch_groups(trace: Trace) -> npt.NDArray[np.int64]:
    """Per event: the id of its launch link, or -1. A link joins the CUDA runtime/driver
    call on a CPU thread and the GPU work it launched (same rank and correlation id)."""
    is_cpu_side = trace.kind == EventKind.RUNTIME
    linkable = np.flatnonzero(
        (trace.mask(*GPU_WORK_KINDS) | is_cpu_side) & (trace.correlation >= 0)
    )
    out = np.full(len(trace), -1, dtype=np.int64)
    if linkable.size == 0:
        return out
    rank = trace.tracks["rank"][trace.track[linkable]].astype(np.int64)
    keys, group = unique_rows(np.stack([rank, trace.correlation[linkable]], axis=1))
    cpu_count = np.bincount(group, weights=is_cpu_side[linkable], minlength=len(keys))
    gpu_count = np.bincount(group, minlength=len(keys)) - cpu_count
    both = (cpu_count > 0) & (gpu_count > 0)  # a link needs a launch and what it launched
    renumber = np.cumsum(both) - 1
    keep = both[group]
    out[linkable[keep]] = renumber[group[keep]]
    return out


def link_members(groups: npt.NDArray[np.int64], rows: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """The events (up to :data:`LINK_CAP` per link) of every link that one of ``rows``
    belongs to: what a tap on one of them highlights."""
    linked = np.flatnonzero(groups >= 0)
    wanted = distinct(groups[rows])
    wanted = wanted[wanted >= 0]
    if wanted.size == 0:
        return np.zeros(0, np.int64)
    by_group = linked[np.argsort(groups[linked], kind="stable")]
    first = np.searchsorted(groups[by_group], wanted, side="left")
    count = np.minimum(np.searchsorted(groups[by_group], wanted, side="right") - first, LINK_CAP)
    step = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    members: npt.NDArray[np.int64] = by_group[np.repeat(first, count) + step]
    return members


@dataclass
class Labels:
    """Hover labels: per event row, an index into ``table`` (name, kind,
    :data:`DETAIL_COLUMNS`); ``names`` holds the (shortened) names the table refers to,
    ``name_ids`` their indices in ``trace.strings``."""

    of_row: npt.NDArray[np.int64]
    table: npt.NDArray[np.int64]
    names: list[str]
    name_ids: npt.NDArray[np.int64]

    @classmethod
    def of(
        cls, trace: Trace, rows: npt.NDArray[np.int64], facts: EventFacts | None = None
    ) -> Labels:
        """One label per distinct (name, kind, launch details, colour class, CPU op) among
        ``rows``; names (of events and of CPU ops) are renumbered to those used."""
        distinct, row_inverse = np.unique(rows, return_inverse=True)
        table, inverse = unique_rows(_detail_matrix(trace, distinct, facts))
        has_op = table[:, OP_COLUMN] >= 0
        used = np.unique(np.concatenate([table[:, 0], table[has_op, OP_COLUMN]]))
        table[:, 0] = np.searchsorted(used, table[:, 0])
        table[has_op, OP_COLUMN] = np.searchsorted(used, table[has_op, OP_COLUMN])
        names = [_short(trace.strings[int(i)]) for i in used]
        of_row = inverse.reshape(-1)[row_inverse].astype(np.int64)
        return cls(of_row, table, names, used.astype(np.int64))

    def name_columns(self, trace: Trace) -> dict[str, Any]:
        """The page's name list: each name and how many events of the trace carry it."""
        counts = np.bincount(trace.name, minlength=len(trace.strings))
        return {"text": self.names, "count": counts[self.name_ids].astype(np.int32)}


@dataclass
class Encoded:
    """The pyramid as compact arrays for the page.

    ``events`` are the distinct events any level draws plus the members of their launch
    links; each level lists indices into them, tile by tile (``tile_offsets``)."""

    event_rows: npt.NDArray[np.int64]  # trace rows of the events table
    rows: npt.NDArray[np.int32]
    tile_offsets: npt.NDArray[np.int32]
    busy: npt.NDArray[np.uint8]
    levels: dict[str, list[int]]


def busy_cells(busy: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.uint8]:
    """Busy fractions as bytes (0-255); any work at all is at least 1, so that the page
    marks a bin of very short events instead of rounding it away."""
    cells = np.rint(np.clip(busy, 0.0, 1.0) * 255)
    return np.where(busy > 0, np.maximum(cells, 1), 0).astype(np.uint8)


def encode(pyramid: Pyramid, groups: npt.NDArray[np.int64]) -> Encoded:
    level_rows = [level.rows for level in pyramid.levels]
    drawn = distinct(np.concatenate(level_rows)) if level_rows else np.zeros(0, np.int64)
    event_rows = distinct(np.concatenate([drawn, link_members(groups, drawn)]).astype(np.int64))
    offsets: list[npt.NDArray[Any]] = []
    busy: list[npt.NDArray[np.uint8]] = []
    levels: dict[str, list[int]] = {k: [] for k in ("tiles", "tile_base", "bins", "busy_base")}
    row_base = tile_base = 0
    # the finer levels share one bin count (the pyramid's max_bins) and so one busy summary:
    # stored once (two thirds of a large page's busy cells), every level pointing at it
    busy_base_of: dict[int, int] = {}
    for level in pyramid.levels:
        offsets.append(level.offsets[:-1] + row_base)
        if level.bins not in busy_base_of:
            busy_base_of[level.bins] = sum(b.size for b in busy)
            busy.append(busy_cells(level.busy).ravel())
        values = (level.tiles, tile_base, level.bins, busy_base_of[level.bins])
        for key, value in zip(levels, values, strict=True):
            levels[key].append(value)
        tile_base += level.tiles
        row_base += int(level.rows.size)
    offsets.append(np.array([row_base]))
    rows = np.searchsorted(event_rows, np.concatenate(level_rows)) if level_rows else drawn
    return Encoded(
        event_rows=event_rows,
        rows=rows.astype(np.int32),
        tile_offsets=np.concatenate(offsets).astype(np.int32),
        busy=np.concatenate(busy) if busy else np.zeros(0, np.uint8),
        levels=levels,
    )


def event_columns(
    trace: Trace,
    rows: npt.NDArray[Any],
    *,
    t0: int,
    lanes: Lanes,
    labels: npt.NDArray[np.int64],
    groups: npt.NDArray[np.int64],
) -> dict[str, npt.NDArray[Any]]:
    """The page's columns for events ``rows``: start in ms since ``t0`` (float64, so a
    deep zoom keeps nanosecond placement), duration, lane, hover label and launch link."""
    lane_dtype = np.uint8 if len(lanes.labels) <= 256 else np.uint16
    return {
        "start": (trace.start_ns[rows] - t0).astype(np.float64) / 1e6,
        "dur": (trace.dur_ns[rows] / 1e6).astype(np.float32),
        "lane": lanes.of_event[rows].astype(lane_dtype),
        "label": labels.astype(np.uint16 if labels.max(initial=0) < 65536 else np.uint32),
        "group": groups[rows].astype(np.int32),
    }


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
class Timeline:
    """A rendered timeline: bokeh layout plus what the text view says.

    ``live`` is set when built with ``live=True``: then zooming in a running kernel asks
    Python for the largest events of the new range (see :class:`LiveRefresh`)."""

    layout: Any
    text: str
    live: LiveRefresh | None = None

    def add_to(self, doc: Any) -> None:
        """Move the layout into bokeh document ``doc`` (a bokeh server or panel app)."""
        if self.layout.document is not None:
            self.layout.document.remove_root(self.layout)
        doc.add_root(self.layout)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        if self.live is not None and _in_kernel():
            return self.panel()._repr_mimebundle_(include, exclude)
        return notebook_bundle(self.layout, self.text)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text)

    def panel(self) -> Any:
        """The layout as a panel pane: displayed in a running kernel, it keeps the page and
        Python in sync (panel's notebook comms), so live refinement works there."""
        import panel as pn  # type: ignore[import-untyped]

        pn.extension(inline=True)
        return pn.pane.Bokeh(self.layout)  # type: ignore[no-untyped-call]

    def save(self, path: str | os.PathLike[str], title: str = "perflab timeline") -> Path:
        return write_text(path, standalone_html(self.layout, title))


def _in_kernel() -> bool:
    import sys

    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and getattr(shell, "kernel", None) is not None


class Overlay(Protocol):
    """More glyphs drawn over the lanes (e.g. a job's collectives linked across ranks), given
    the page, the lanes and the page's zero (ns)."""

    def draw(self, page: Page, lanes: Lanes, origin_ns: int) -> None: ...

    def describe(self) -> list[str]: ...


def timeline(
    trace: Trace,
    *,
    row_budget: int = 150_000,
    width: int = 1100,
    title: str | None = None,
    live: bool = False,
    overlay: Overlay | None = None,
) -> Timeline:
    """The interactive timeline of ``trace`` (``trace.timeline()``).

    Static by default: pre-computed levels of detail, so it works in any saved page. With
    ``live=True`` a running kernel also refines on every range change, from all events.
    ``overlay`` draws more over the lanes (see :class:`Overlay`)."""
    if len(trace) == 0:  # the same error as `perflab timeline` gives
        source = trace.meta.get("source")
        raise InputError("the trace has no events to draw", source=str(source) if source else None)
    lanes = assign_lanes(trace)
    # times relative to the first event before going to float: epoch nanoseconds (~1.7e18)
    # as float64 would round to 256 ns
    origin = int(trace.start_ns.min())
    start = (trace.start_ns - origin).astype(np.float64)
    end = start + trace.dur_ns
    gpu_lanes = np.flatnonzero(lanes.gpu & ~lanes.header)
    # the strip above the lanes: GPU streams busy, or (a CPU-only trace) threads busy
    summary = gpu_lanes if gpu_lanes.size else np.flatnonzero(~lanes.notes & ~lanes.header)
    pyramid = build_pyramid(
        start, end, lanes.of_event, len(lanes.labels), summary_lanes=summary, row_budget=row_budget
    )
    groups = launch_groups(trace)
    enc = encode(pyramid, groups)
    facts = EventFacts.of(trace)
    labels = Labels.of(trace, enc.event_rows, facts)
    events = event_columns(
        trace, enc.event_rows, t0=origin, lanes=lanes, labels=labels.of_row, groups=groups
    )
    if title is None:
        source = Path(str(trace.meta.get("source") or "trace")).name
        title = f"{source}: {counted(len(trace), 'event')}, {counted(lanes.work.size, 'lane')}"
    data = PageData(
        enc,
        events,
        labels,
        labels.name_columns(trace),
        lanes,
        pyramid,
        info.IdleBefore.of(trace).on_page(enc.event_rows),
        complete=enc.event_rows.size >= len(trace),
    )
    page = _figure(data, width, title)
    if overlay is not None:
        overlay.draw(page, lanes, origin)
    refresh = None
    if live:
        index = WindowIndex(start, end, lanes.of_event, len(lanes.labels), summary_lanes=summary)
        known = LiveLabels(trace, labels, page.labels, page.names, facts)
        refresh = LiveRefresh(trace, lanes, known, groups, origin, index, page)
        refresh.attach()
    text = timeline_text(trace, lanes, pyramid)
    if overlay is not None:
        text = "\n".join([text, *overlay.describe()])
    return Timeline(page.layout, text, refresh)


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


class LiveLabels:
    """The page's label table as a live kernel extends it: labels (and names) of events it
    sends that the page has not seen yet are appended (streamed) before the events."""

    def __init__(
        self,
        trace: Trace,
        labels: Labels,
        table_source: Any,
        name_source: Any,
        facts: EventFacts | None = None,
    ):
        self.trace = trace
        self.facts = facts or EventFacts.of(trace)
        self.table_source, self.name_source = table_source, name_source
        self.name_index = {int(s): i for i, s in enumerate(labels.name_ids.tolist())}
        original = labels.table.copy()
        original[:, 0] = labels.name_ids[original[:, 0]]  # keyed by string id
        has_op = original[:, OP_COLUMN] >= 0
        original[has_op, OP_COLUMN] = labels.name_ids[original[has_op, OP_COLUMN]]
        self.index = {tuple(row): i for i, row in enumerate(original.tolist())}
        self.counts = np.bincount(trace.name, minlength=len(trace.strings))

    def _name(self, string: int, new_names: list[int]) -> int:
        """The page's index of string ``string``, appended to ``new_names`` when new."""
        if string not in self.name_index:
            self.name_index[string] = len(self.name_index)
            new_names.append(string)
        return self.name_index[string]

    def of(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        matrix = _detail_matrix(self.trace, rows, self.facts)
        out = np.empty(len(rows), np.int64)
        new_labels: list[list[int]] = []
        new_names: list[int] = []
        for i, row in enumerate(matrix.tolist()):
            label = self.index.get(tuple(row))
            if label is None:
                label = self.index[tuple(row)] = len(self.index)
                op = row[OP_COLUMN]
                entry = [self._name(row[0], new_names), *row[1:]]
                entry[OP_COLUMN] = self._name(op, new_names) if op >= 0 else -1
                new_labels.append(entry)
            out[i] = label
        if new_names:
            self.name_source.stream(
                {
                    "text": [_short(self.trace.strings[s]) for s in new_names],
                    "count": np.asarray(self.counts[new_names], np.int32),
                }
            )
        if new_labels:
            table = np.array(new_labels, dtype=np.int64)
            self.table_source.stream(_label_columns(table))
        return out


@dataclass
class LiveRefresh:
    """In a running kernel, answers each range change with the largest events of the new
    range among all events (not only the pre-computed ones) and the busy fraction at the
    resolution of that range; the page draws them as one more level of detail."""

    trace: Trace
    lanes: Lanes
    labels: LiveLabels
    groups: npt.NDArray[np.int64]
    t0: int  # ns, the page's zero (the index counts from it too)
    index: WindowIndex
    page: Page
    glyphs: int = 3000
    bins: int = 1500
    last: tuple[float, float] | None = None

    def attach(self) -> None:
        self.page.x_range.on_change("start", self.on_range)
        self.page.x_range.on_change("end", self.on_range)

    def on_range(self, attr: str, old: Any, new: Any) -> None:
        self.refine(float(self.page.x_range.start), float(self.page.x_range.end))

    def refine(self, v0: float, v1: float) -> None:
        """Send the page the level for ``[v0, v1]`` (ms since the trace start)."""
        if not v1 > v0 or (v0, v1) == self.last:
            return
        self.last = (v0, v1)
        win = self.index.window(v0 * 1e6, v1 * 1e6, glyphs=self.glyphs, bins=self.bins)
        members = distinct(link_members(self.groups, win.rows))
        partners = members[~np.isin(members, win.rows)]  # np.setdiff1d, by distinct's sort
        rows = np.concatenate([win.rows, partners])  # glyphs first, then link partners
        self.page.live.data = event_columns(
            self.trace,
            rows,
            t0=self.t0,
            lanes=self.lanes,
            labels=self.labels.of(rows),
            groups=self.groups,
        )
        self.page.live_busy.data = {"cells": busy_cells(win.busy).ravel()}
        # the page redraws when this last one arrives
        self.page.live_level.data = {
            "t0": [v0],
            "t1": [v1],
            "bins": [self.bins],
            "n": [int(win.rows.size)],
        }


def strip_title(lanes: Lanes) -> str:
    """What the strip above the lanes shows (see the summary lanes in :func:`timeline`)."""
    if lanes.gpu.any():
        return "GPU busy fraction: any stream busy"
    return "CPU busy fraction: any thread busy (no GPU work in this trace)"


TICK_CHARS = 40  # the axis names before the page fits them to a fifth of its width


def hidden_counts(lanes: Lanes, pyramid: Pyramid) -> npt.NDArray[np.int64]:
    """Per lane: how many events it holds when the whole-trace view draws none of them
    (all far shorter than a pixel there), else 0."""
    coarsest = pyramid.levels[0].rows if pyramid.levels else np.zeros(0, np.int64)
    drawn = np.bincount(lanes.of_event[coarsest], minlength=len(lanes.labels))
    counts = lanes.counts()
    return np.where(drawn == 0, counts, 0).astype(np.int64)


def lane_ticks(lanes: Lanes, pyramid: Pyramid, chars: int = TICK_CHARS) -> list[str]:
    """Lane names for the axis: short (a thread's name, ``stream 7``), a group's header in
    capitals-free bold-less text with a marker, each cut to ``chars`` with an ellipsis. A
    lane none of whose events the whole-trace view draws says how many it holds, so it
    never looks empty without a word (the note is kept whole; the name gives way)."""
    out = []
    for k, (name, hidden) in enumerate(
        zip(lanes.short or lanes.labels, hidden_counts(lanes, pyramid).tolist(), strict=True)
    ):
        if lanes.header.size and lanes.header[k]:
            out.append(fit_label(name + ":", chars))
            continue
        note = f" · {hidden:,} short" if hidden else ""
        out.append(fit_label(name, max(chars - len(note), 8)) + note)
    return out


def fit_label(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters, ending in an ellipsis when cut."""
    text = printable(text)
    return text if len(text) <= chars else text[: max(chars - 1, 1)].rstrip() + "…"


def lane_details(lanes: Lanes, pyramid: Pyramid) -> list[str]:
    """Per lane, what its name's tooltip says: the full name, its group, how many events it
    holds (and that they are too short to see in the whole-trace view, when so)."""
    out = []
    hidden = hidden_counts(lanes, pyramid).tolist()
    counts = lanes.counts().tolist()
    for k, label in enumerate(lanes.labels):
        if lanes.header.size and lanes.header[k]:
            members = sum(1 for j, g in enumerate(lanes.group) if g == label and j != k)
            out.append(f"{label}\n{counted(members, 'lane')} below")
            continue
        where = "GPU stream" if lanes.gpu[k] else "CPU thread"
        lines = [label, f"{where} of {lanes.group[k]}" if lanes.group else where]
        lines.append(counted(counts[k], "event"))
        if hidden[k]:
            lines.append("all shorter than a pixel in the whole-trace view: zoom in")
        out.append("\n".join(lines))
    return out


def timeline_text(trace: Trace, lanes: Lanes, pyramid: Pyramid) -> str:
    span = pyramid.t1 - pyramid.t0
    work = lanes.work
    lanes_line = f"{counted(work.size, 'lane')}, under a strip of {strip_title(lanes)}:"
    lines = [trace.describe(), lanes_line]
    counts = lanes.counts()
    for k in range(len(lanes.labels)):
        if lanes.header.size and lanes.header[k]:
            lines.append(f" {printable(lanes.labels[k])}:")
            continue
        kind = "GPU" if lanes.gpu[k] else "CPU"
        lines.append(f"  {kind}  {printable(lanes.labels[k])}  ({int(counts[k]):,} events)")
    lines.append(
        f"levels of detail: {len(pyramid.levels)} (finest tile "
        f"{format_ns(span / pyramid.levels[-1].tiles)}), "
        f"{pyramid.total_rows} drawable rows"
    )
    return "\n".join(lines)


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
        )


@dataclass
class PageData:
    """What the page carries: the encoded levels, the events they draw, their labels and
    names, the lanes, the gaps before GPU work (``idle``: :meth:`IdleBefore.on_page`) and
    whether the page holds every event of the trace."""

    enc: Encoded
    events: dict[str, npt.NDArray[Any]]
    labels: Labels
    names: dict[str, Any]
    lanes: Lanes
    pyramid: Pyramid
    idle: dict[str, Any]
    complete: bool


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


def _lanes_figure(data: PageData, src: PageSources, x_range: Any, width: int, title: str) -> Any:
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
        x_axis_label="ms since trace start (W/S zoom, A/D pan, Shift+drag: what ran there, "
        "click: details, ?: keys)",
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
    main.quad(  # search matches, outlined whatever the level of detail draws
        left="left",
        right="right",
        bottom="bottom",
        top="top",
        source=src.found,
        fill_alpha=0,
        line_color="color",
        line_width=2,
    )
    marked = _draw_link(main, src)
    _add_hovers(main, bars, marked)
    main.yaxis.ticker = FixedTicker(ticks=list(range(nl)))
    main.yaxis.major_label_overrides = dict(enumerate(lane_ticks(lanes, data.pyramid)))
    main.yaxis.major_label_text_font_size = "11px"
    main.ygrid.grid_line_color = None
    return main


def _draw_lane_backgrounds(main: Any, lanes: Lanes, src: PageSources, span_ms: float) -> None:
    """Behind the events: the group headers' bands, idle GPU time, and the busy fraction
    (``cover``) of each lane."""
    headers = np.flatnonzero(lanes.header) if lanes.header.size else np.zeros(0, np.int64)
    main.quad(  # each group's header row: a band across the plot
        left=-span_ms,
        right=2 * span_ms,
        bottom=(headers + 0.5).tolist(),
        top=(headers - 0.5).tolist(),
        fill_color="#dde3ea",
        line_color=None,
    )
    gpu_lanes = np.flatnonzero(lanes.gpu & ~lanes.header)
    main.quad(  # idle GPU time shows as this background (one glyph for every GPU lane)
        left=-span_ms,
        right=2 * span_ms,
        bottom=(gpu_lanes - 0.45).tolist(),
        top=(gpu_lanes + 0.45).tolist(),
        fill_color="#eef2f7",
        line_color=None,
    )
    main.patches(  # one outline per lane (see timeline-refresh.js)
        xs="xs", ys="ys", source=src.cover, fill_color="#9db4cf", fill_alpha=0.8, line_color=None
    )


def _draw_link(main: Any, src: PageSources) -> Any:
    """The tapped launch link: its events outlined, an arrow from the launch to the work,
    and a marker on each; returns the outlines' renderer (it has a hover of its own)."""
    marked = main.quad(
        left="left",
        right="right",
        bottom="bottom",
        top="top",
        source=src.links,
        fill_alpha=0,
        line_color="#d62728",
        line_width=2.5,
    )
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


def _page_meta(data: PageData, span_ms: float, title: str) -> dict[str, Any]:
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
        "ticks": lane_ticks(lanes, data.pyramid, chars=200),
        "lane_info": lane_details(lanes, data.pyramid),
        "headers": lanes.header.tolist(),
        "gpu": lanes.gpu.tolist(),
        "max_bins": 1500,
        "title": _page_title(title),
        "causes": list(info.IDLE_CAUSES),
        "complete": data.complete,
    }


def _attach_scripts(
    data: PageData, common: dict[str, Any], src: PageSources, x_range: Any, main: Any
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
            "query": src.query,
            "xr": x_range,
            "main": main,
            "css": static_text("timeline.css"),
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


def _figure(data: PageData, width: int, title: str) -> Page:
    """The page: the busy strip above the lanes, in a document of their own, with the
    scripts that draw the level of detail fitting the visible range."""
    from bokeh.document import Document
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource

    span_ms = (data.pyramid.t1 - data.pyramid.t0) / 1e6
    src = PageSources.empty()
    x_range = _x_range(span_ms)
    main = _lanes_figure(data, src, x_range, width, title)
    strip = _strip_figure(data.lanes, src, x_range, width)
    label_source = ColumnDataSource(_label_columns(data.labels.table))
    name_source = ColumnDataSource(data.names)
    common = {
        "labels": label_source,
        "name_list": name_source,
        "meta": _page_meta(data, span_ms, title),
        "shown": src.shown,
        "links": src.links,
    }
    _attach_scripts(data, common, src, x_range, main)
    layout = column(strip, main, sizing_mode="stretch_width")
    doc = Document()
    doc.add_root(layout)
    return Page(
        layout, x_range, src.live, src.live_busy, src.live_level, label_source, name_source, main
    )


def _label_columns(table: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[Any]]:
    return {
        "name": table[:, 0].astype(np.int32),
        "kind": table[:, 1].astype(np.int8),
        **{
            c: table[:, 2 + j].astype(np.float64 if c in ("shared_mem", "bytes") else np.int32)
            for j, c in enumerate(DETAIL_COLUMNS)
        },
        "cls": table[:, -2].astype(np.int16),
        "op": table[:, -1].astype(np.int32),
    }


def timeline_bundle(trace: Trace, **options: Any) -> dict[str, str]:
    """MIME bundle (text/html + text/plain) of :func:`timeline`."""
    bundle: dict[str, str] = timeline(trace, **options)._repr_mimebundle_()
    return bundle


def save_timeline(trace: Trace, path: str | os.PathLike[str], **options: Any) -> Path:
    title = str(trace.meta.get("source") or "perflab timeline")
    return timeline(trace, **options).save(path, title=f"perflab timeline: {title}")
