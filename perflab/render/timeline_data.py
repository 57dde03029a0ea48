"""What the interactive timeline's page is given: the lanes, the events' labels and launch
links, the levels of detail encoded for the page, and the text that describes them.

:mod:`perflab.render.timeline` draws these with bokeh; nothing here imports bokeh, so the
page's data can be built and tested on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

import numpy as np
import numpy.typing as npt

from perflab.analysis.lod import Pyramid
from perflab.model.trace import (
    GPU_WORK_KINDS,
    EventKind,
    Trace,
    TrackKind,
    distinct,
    unique_rows,
)
from perflab.model.units import counted, format_ns, shorten
from perflab.render import timeline_info as info
from perflab.render.html import printable

MAX_NAME = 300  # hover shows at most this many characters of a name


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

    def group_heads(self) -> list[int]:
        """Per lane, its group's header lane (a header: itself; a lane in no group: -1): what
        the page collapses together."""
        heads: list[int] = []
        current = -1
        for k, heading in enumerate(self.group or [""] * len(self.labels)):
            if self.header.size and self.header[k]:
                current = k
            elif current >= 0 and self.group[current] != heading:
                current = -1  # a lane alone in its group follows another group's lanes
            heads.append(current)
        return heads

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
        out.append(short_name(label))
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
    op: npt.NDArray[np.int32]

    @classmethod
    def of(cls, trace: Trace) -> EventFacts:
        return cls(info.event_classes(trace), info.launch_ops(trace))


class SideIndex:
    """Which row of a side table (the kernels' launch details, the copies' bytes) belongs
    to an event: the table's event ids sorted once, so that a lookup costs a binary search
    per event asked about, not a column as long as the trace."""

    def __init__(self, events: npt.NDArray[np.int64]) -> None:
        events = np.asarray(events, dtype=np.int64)
        ordered = bool((events[1:] > events[:-1]).all())  # as the importers write them
        self.order = None if ordered else np.argsort(events, kind="stable")
        self.events = events if self.order is None else events[self.order]

    def rows_of(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Per event of ``rows``, its row in the side table, or -1."""
        at = np.minimum(np.searchsorted(self.events, rows), max(self.events.size - 1, 0))
        found = self.events[at] == rows if self.events.size else np.zeros(rows.size, bool)
        hit = at if self.order is None else self.order[at]
        return np.where(found, hit, -1).astype(np.int64)


def side_indexes(trace: Trace) -> tuple[SideIndex, SideIndex]:
    """The :class:`SideIndex` of the trace's kernels and of its copies."""
    return SideIndex(trace.kernels["event"]), SideIndex(trace.memcpy["event"])


def _detail_matrix(
    trace: Trace,
    rows: npt.NDArray[np.int64],
    facts: EventFacts | None = None,
    sides: tuple[SideIndex, SideIndex] | None = None,
) -> npt.NDArray[np.int64]:
    """Per row: name, kind, :data:`DETAIL_COLUMNS` (-1 where unknown), then
    :data:`FACT_COLUMNS`. ``sides``: the trace's :func:`side_indexes`, when kept."""
    facts = facts or EventFacts.of(trace)
    kernels, copies = sides or side_indexes(trace)
    out = np.full((rows.size, 2 + len(DETAIL_COLUMNS) + len(FACT_COLUMNS)), -1, dtype=np.int64)
    out[:, 0] = trace.name[rows]
    out[:, 1] = trace.kind[rows]
    out[:, -2] = facts.cls[rows]
    out[:, -1] = facts.op[rows]
    for side, index, cols, first in (
        (trace.kernels, kernels, DETAIL_COLUMNS[:8], 2),
        (trace.memcpy, copies, ("bytes", "direction"), 10),
    ):
        hit = index.rows_of(rows)
        found = hit >= 0
        for j, col in enumerate(cols):
            out[found, first + j] = side[col][hit[found]]
    return out


def short_name(name: str) -> str:
    """``name`` as the hover shows it: at most :data:`MAX_NAME` characters."""
    return shorten(name, MAX_NAME)


LINK_CAP = 64  # events of one launch link kept for highlighting (a graph launch has many)


def launch_groups(trace: Trace) -> npt.NDArray[np.int32]:
    """Per event: the id of its launch link, or -1. A link joins the CUDA runtime/driver
    call on a CPU thread and the GPU work it launched (same rank and correlation id)."""
    is_cpu_side = trace.kind == EventKind.RUNTIME
    linkable = np.flatnonzero(
        (trace.mask(*GPU_WORK_KINDS) | is_cpu_side) & (trace.correlation >= 0)
    )
    out = np.full(len(trace), -1, dtype=np.int32)  # a link's id: fewer than the events
    if linkable.size == 0:
        return out
    rank = trace.tracks["rank"][trace.track[linkable]].astype(np.int64)
    group, keys = _link_keys(rank, trace.correlation[linkable].astype(np.int64))
    cpu_count = np.bincount(group, weights=is_cpu_side[linkable], minlength=keys)
    gpu_count = np.bincount(group, minlength=keys) - cpu_count
    both = (cpu_count > 0) & (gpu_count > 0)  # a link needs a launch and what it launched
    renumber = np.cumsum(both) - 1
    keep = both[group]
    out[linkable[keep]] = renumber[group[keep]]
    return out


def _link_keys(
    rank: npt.NDArray[np.int64], correlation: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], int]:
    """Per event, a key of its (rank, correlation id) that orders as the pairs do, and how
    many keys there can be. Ids run densely in a trace, so the key is usually the pair's
    place in the rank x id grid (no sort); a sparse grid numbers the distinct pairs."""
    low = int(rank.min())
    height = int(correlation.max()) + 1  # ids here are >= 0
    cells = (int(rank.max()) - low + 1) * height
    if cells <= 4 * rank.size + 4096:
        return (rank - low) * height + correlation, cells
    keys, group = unique_rows(np.stack([rank, correlation], axis=1))
    return group, len(keys)


class LinkIndex:
    """The events of every launch link (:func:`launch_groups`), sorted by link once: a live
    view asks for the links of the events it draws on every range change."""

    def __init__(self, groups: npt.NDArray[np.int32]) -> None:
        self.groups = groups
        linked = np.flatnonzero(groups >= 0)
        self.by_group = linked[np.argsort(groups[linked], kind="stable")]
        self.keys = groups[self.by_group]

    def members(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The events (up to :data:`LINK_CAP` per link) of every link that one of ``rows``
        belongs to: what a tap on one of them highlights."""
        wanted = distinct(self.groups[rows])
        wanted = wanted[wanted >= 0]
        if wanted.size == 0:
            return np.zeros(0, np.int64)
        first = np.searchsorted(self.keys, wanted, side="left")
        count = np.minimum(np.searchsorted(self.keys, wanted, side="right") - first, LINK_CAP)
        step = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        members: npt.NDArray[np.int64] = self.by_group[np.repeat(first, count) + step]
        return members


def link_members(
    groups: npt.NDArray[np.int32], rows: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """:meth:`LinkIndex.members` of a link index used once."""
    return LinkIndex(groups).members(rows)


class NameColumns(TypedDict):
    """The page's name list: each (shortened) name and how many events carry it."""

    text: list[str]
    count: npt.NDArray[np.int32]


class EventColumns(TypedDict):
    """The page's columns of events (see :func:`event_columns`)."""

    start: npt.NDArray[np.float64]
    dur: npt.NDArray[np.float32]
    lane: npt.NDArray[np.uint8] | npt.NDArray[np.uint16]
    label: npt.NDArray[np.uint16] | npt.NDArray[np.uint32]
    group: npt.NDArray[np.int32]


class Streamed(Protocol):
    """A page data source a live kernel appends rows to (a bokeh ColumnDataSource)."""

    def stream(self, new_data: Mapping[str, object]) -> None: ...


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
        names = [short_name(trace.strings[int(i)]) for i in used]
        of_row = inverse.reshape(-1)[row_inverse].astype(np.int64)
        return cls(of_row, table, names, used.astype(np.int64))

    def name_columns(self, trace: Trace) -> NameColumns:
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


def busy_cells(busy: npt.NDArray[np.float64]) -> npt.NDArray[np.uint8]:
    """Busy fractions as bytes (0-255); any work at all is at least 1, so that the page
    marks a bin of very short events instead of rounding it away."""
    cells = np.rint(np.clip(busy, 0.0, 1.0) * 255)
    return np.where(busy > 0, np.maximum(cells, 1), 0).astype(np.uint8)


def encode(pyramid: Pyramid, groups: npt.NDArray[np.int32]) -> Encoded:
    level_rows = [level.rows for level in pyramid.levels]
    drawn = distinct(np.concatenate(level_rows)) if level_rows else np.zeros(0, np.int64)
    event_rows = distinct(np.concatenate([drawn, link_members(groups, drawn)]).astype(np.int64))
    offsets: list[npt.NDArray[np.int64]] = []
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
    rows: npt.NDArray[np.int64],
    *,
    t0: int,
    lanes: Lanes,
    labels: npt.NDArray[np.int64],
    groups: npt.NDArray[np.int32],
) -> EventColumns:
    """The page's columns for events ``rows``: start in ms since ``t0`` (float64, so a
    deep zoom keeps nanosecond placement), duration, lane, hover label and launch link."""
    lane = lanes.of_event[rows]
    return {  # a literal, so that its keys are checked against EventColumns
        "start": (trace.start_ns[rows] - t0).astype(np.float64) / 1e6,
        "dur": (trace.dur_ns[rows] / 1e6).astype(np.float32),
        "lane": lane.astype(np.uint8) if len(lanes.labels) <= 256 else lane.astype(np.uint16),
        "label": (
            labels.astype(np.uint16) if labels.max(initial=0) < 65536 else labels.astype(np.uint32)
        ),
        "group": groups[rows].astype(np.int32),
    }


LabelColumn = (
    npt.NDArray[np.int8] | npt.NDArray[np.int16] | npt.NDArray[np.int32] | npt.NDArray[np.float64]
)
WIDE_DETAILS = ("shared_mem", "bytes")  # byte counts: past int32 (float64 holds them exactly)


def label_columns(table: npt.NDArray[np.int64]) -> dict[str, LabelColumn]:
    """The page's label table: name, kind, :data:`DETAIL_COLUMNS`, colour class, CPU op."""
    out: dict[str, LabelColumn] = {
        "name": table[:, 0].astype(np.int32),
        "kind": table[:, 1].astype(np.int8),
    }
    for j, c in enumerate(DETAIL_COLUMNS):
        column = table[:, 2 + j]
        out[c] = column.astype(np.float64) if c in WIDE_DETAILS else column.astype(np.int32)
    out["cls"] = table[:, -2].astype(np.int16)
    out["op"] = table[:, -1].astype(np.int32)
    return out


class LiveLabels:
    """The page's label table as a live kernel extends it: labels (and names) of events it
    sends that the page has not seen yet are appended (streamed) before the events."""

    def __init__(
        self,
        trace: Trace,
        labels: Labels,
        table_source: Streamed,
        name_source: Streamed,
        facts: EventFacts | None = None,
    ):
        self.trace = trace
        self.facts = facts or EventFacts.of(trace)
        self.sides = side_indexes(trace)
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
        """The page's label of each of ``rows``, streaming the labels and names it lacks.
        Rows share a few distinct labels: each of those is looked up once."""
        distinct_rows, inverse = unique_rows(
            _detail_matrix(self.trace, rows, self.facts, self.sides)
        )
        labels = np.empty(len(distinct_rows), np.int64)
        new_labels: list[list[int]] = []
        new_names: list[int] = []
        for i, row in enumerate(distinct_rows.tolist()):
            label = self.index.get(tuple(row))
            if label is None:
                label = self.index[tuple(row)] = len(self.index)
                op = row[OP_COLUMN]
                entry = [self._name(row[0], new_names), *row[1:]]
                entry[OP_COLUMN] = self._name(op, new_names) if op >= 0 else -1
                new_labels.append(entry)
            labels[i] = label
        out: npt.NDArray[np.int64] = labels[inverse]
        if new_names:
            self.name_source.stream(
                {
                    "text": [short_name(self.trace.strings[s]) for s in new_names],
                    "count": np.asarray(self.counts[new_names], np.int32),
                }
            )
        if new_labels:
            table = np.array(new_labels, dtype=np.int64)
            self.table_source.stream(label_columns(table))
        return out


def strip_lanes(lanes: Lanes) -> npt.NDArray[np.int64]:
    """The lanes whose union the strip above the lanes shows: the GPU streams' work lanes
    (their annotation lanes are ranges someone named, not work the GPU did), or in a
    CPU-only trace every thread's work lane."""
    work = ~lanes.notes & ~lanes.header
    gpu_work = np.flatnonzero(lanes.gpu & work)
    return gpu_work if gpu_work.size else np.flatnonzero(work)


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


def lane_notes(lanes: Lanes, pyramid: Pyramid) -> list[str]:
    """Per lane, what its axis name adds: for a lane none of whose events the whole-trace
    view draws (it draws the trace's longest), how many it holds and how they show there:
    ``"42 events (shaded)"``, as busy shading; "" for every other lane."""
    return [
        f"{hidden:,} {'event' if hidden == 1 else 'events'} (shaded)" if hidden else ""
        for hidden in hidden_counts(lanes, pyramid).tolist()
    ]


def lane_ticks(
    lanes: Lanes, pyramid: Pyramid, chars: int = TICK_CHARS, notes: bool = True
) -> list[str]:
    """Lane names for the axis: short (a thread's name, ``stream 7``), a group's header in
    capitals-free bold-less text with a marker, each cut to ``chars`` with an ellipsis. A
    lane none of whose events the whole-trace view draws says how many it holds (its
    :func:`lane_notes`), so it never looks empty without a word (the note is kept whole;
    the name gives way); ``notes=False`` leaves the notes to the page."""
    out = []
    for k, (name, said) in enumerate(
        zip(lanes.short or lanes.labels, lane_notes(lanes, pyramid), strict=True)
    ):
        if lanes.header.size and lanes.header[k]:
            out.append(fit_label(name + ":", chars))
            continue
        note = f" · {said}" if said and notes else ""
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
            lines.append(
                "the whole-trace view draws none of them (it draws the trace's longest "
                "events): they show as shaded busy time; zoom in to see each"
            )
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
