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

What the page is given (the lanes, labels, launch links and encoded levels) is built in
:mod:`perflab.render.timeline_data`; this module draws it.

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

import importlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict, Unpack

import numpy as np

from perflab.analysis.lod import WindowIndex, build_pyramid, lane_unions
from perflab.errors import InputError
from perflab.model.serialize import write_text
from perflab.model.trace import Trace, distinct
from perflab.model.units import counted
from perflab.render import timeline_info as info
from perflab.render.bokeh_embed import notebook_bundle, standalone_html
from perflab.render.timeline_critical import critical_view

# the page's data (lanes, labels, levels of detail) has its own module; re-exported here
from perflab.render.timeline_data import DETAIL_COLUMNS as DETAIL_COLUMNS
from perflab.render.timeline_data import Encoded as Encoded
from perflab.render.timeline_data import EventFacts as EventFacts
from perflab.render.timeline_data import Labels as Labels
from perflab.render.timeline_data import Lanes as Lanes
from perflab.render.timeline_data import LinkIndex as LinkIndex
from perflab.render.timeline_data import LiveLabels as LiveLabels
from perflab.render.timeline_data import assign_lanes as assign_lanes
from perflab.render.timeline_data import busy_cells as busy_cells
from perflab.render.timeline_data import encode as encode
from perflab.render.timeline_data import event_columns as event_columns
from perflab.render.timeline_data import label_columns as label_columns
from perflab.render.timeline_data import lane_details as lane_details
from perflab.render.timeline_data import lane_ticks as lane_ticks
from perflab.render.timeline_data import launch_groups as launch_groups
from perflab.render.timeline_data import link_members as link_members
from perflab.render.timeline_data import strip_lanes as strip_lanes
from perflab.render.timeline_data import strip_title as strip_title
from perflab.render.timeline_data import timeline_text as timeline_text
from perflab.render.timeline_data import track_lanes as track_lanes
from perflab.render.timeline_figure import BUDGET_HINTS, MadeBy, Page, PageData, figure_of
from perflab.render.timeline_figure import tooltip_template as tooltip_template
from perflab.render.timeline_memory import describe as describe_memory
from perflab.render.timeline_memory import memory_curves

# what drawing and saving the page import: a third of a large page's build when imported in turn
BOKEH_MODULES = (
    "bokeh.document",
    "bokeh.events",
    "bokeh.layouts",
    "bokeh.models",
    "bokeh.plotting",
    "bokeh.embed",
    "bokeh.resources",
)


# the most events one live answer holds: the page draws about this many bars in a second (on
# a loaded two-core machine; 150,000 took 8 to 15 s, and a few such zooms stalled the page)
LIVE_ROWS = 20_000


def _import_bokeh_meanwhile() -> threading.Thread:
    """Import bokeh in a thread while the page's data is computed: the import is Python
    bytecode, the data mostly numpy, which lets the thread run between its array passes.
    A failed import is left to the drawing code, which raises it where it is used."""

    def load() -> None:
        for name in BOKEH_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:
                return

    thread = threading.Thread(target=load, name="perflab-bokeh-import", daemon=True)
    thread.start()
    return thread


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

    def _repr_mimebundle_(
        self, include: object = None, exclude: object = None
    ) -> dict[str, str] | tuple[dict[str, str], dict[str, object]]:
        if self.live is not None and _in_kernel():
            bundle: dict[str, str] | tuple[dict[str, str], dict[str, object]]
            bundle = self.panel()._repr_mimebundle_(include, exclude)  # panel: data, metadata
            return bundle
        return notebook_bundle(self.layout, self.text)

    def _repr_pretty_(self, p: PrettyPrinter, cycle: bool) -> None:
        p.text(self.text)

    def panel(self) -> Any:
        """The layout as a panel pane: displayed in a running kernel, it keeps the page and
        Python in sync (panel's notebook comms), so live refinement works there."""
        import panel as pn  # type: ignore[import-untyped]

        pn.extension(inline=True)
        return pn.pane.Bokeh(self.layout)  # type: ignore[no-untyped-call]

    def save(self, path: str | os.PathLike[str], title: str = "perflab timeline") -> Path:
        return write_text(path, standalone_html(self.layout, title))


class PrettyPrinter(Protocol):
    """What IPython's pretty printer gives ``_repr_pretty_``."""

    def text(self, obj: str) -> None: ...


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
    made_by: MadeBy = "python",
    critical: bool = False,
    memory: bool = True,
    live_rows: int = LIVE_ROWS,
) -> Timeline:
    """The interactive timeline of ``trace`` (``trace.timeline()``).

    Static by default: pre-computed levels of detail, so it works in any saved page. With
    ``live=True`` a running kernel also refines on every range change, from all events:
    each answer holds the ``live_rows`` events with the longest visible part, so a window
    holding fewer events than that shows every one of them.
    ``overlay`` draws more over the lanes (see :class:`Overlay`). ``made_by`` says where the
    page is made, so that it names the right knob for more events: ``"python"`` (a notebook
    or script: ``row_budget``) or ``"cli"`` (``perflab timeline``: ``--rows``).

    ``critical=True`` adds a toggle that highlights each ``ProfilerStep#N``'s critical path
    (:mod:`perflab.render.timeline_critical`; disabled, saying why, where there is none).
    ``memory`` (on unless told): a trace with memory events gets a lane of the bytes allocated
    and reserved per device under the others (:mod:`perflab.render.timeline_memory`)."""
    if made_by not in BUDGET_HINTS:
        raise InputError(f"made_by is 'python' or 'cli', not {made_by!r}")
    if isinstance(live_rows, bool) or not isinstance(live_rows, int) or live_rows < 1:
        raise InputError(f"live_rows is a number of events (1 or more), not {live_rows!r}")
    if len(trace) == 0:  # the same error as `perflab timeline` gives
        source = trace.meta.get("source")
        raise InputError("the trace has no events to draw", source=str(source) if source else None)
    bokeh_import = _import_bokeh_meanwhile()
    lanes = assign_lanes(trace)
    # times relative to the first event before going to float: epoch nanoseconds (~1.7e18)
    # as float64 would round to 256 ns
    origin = int(trace.start_ns.min())
    start = (trace.start_ns - origin).astype(np.float64)
    end = start + trace.dur_ns
    summary = strip_lanes(lanes)  # GPU streams busy, or (a CPU-only trace) threads busy
    # a live view keeps the lanes' busy intervals: worked out once, for the levels and it
    unions = lane_unions(start, end, lanes.of_event, len(lanes.labels), summary) if live else None
    # the pyramid first, then the launch links, colours and idle gaps: run side by side,
    # their peaks of memory added up (on 10M events, a fifth more than either alone)
    pyramid = build_pyramid(
        start,
        end,
        lanes.of_event,
        len(lanes.labels),
        summary_lanes=summary,
        row_budget=row_budget,
        unions=unions,
    )
    groups = launch_groups(trace)
    facts = EventFacts.of(trace)
    idle = info.IdleBefore.of(trace)
    enc = encode(pyramid, groups)
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
        idle.on_page(enc.event_rows),
        complete=enc.event_rows.size >= len(trace),
        total_events=len(trace),
        made_by=made_by,
        critical=critical_view(trace, lanes, origin) if critical else None,
        memory=memory_curves(trace, origin) if memory else [],
    )
    bokeh_import.join()
    page = figure_of(data, width, title)
    if overlay is not None:
        overlay.draw(page, lanes, origin)
    refresh = None
    if live:
        index = WindowIndex(start, end, lanes.of_event, len(lanes.labels), unions=unions)
        known = LiveLabels(trace, labels, page.labels, page.names, facts)
        links = LinkIndex(groups)
        refresh = LiveRefresh(trace, lanes, known, links, origin, index, page, glyphs=live_rows)
        refresh.attach()
    text = "\n".join([timeline_text(trace, lanes, pyramid), *_more_text(data)])
    if overlay is not None:
        text = "\n".join([text, *overlay.describe()])
    return Timeline(page.layout, text, refresh)


def _more_text(data: PageData) -> list[str]:
    """What the text view says of the critical path and the memory lane, when drawn."""
    lines = []
    if data.critical is not None:
        said = data.critical.segments
        lines.append(said.describe() if said else data.critical.reason)
    if data.memory:
        lines.append(describe_memory(data.memory))
    return lines


@dataclass
class LiveRefresh:
    """In a running kernel, answers each range change with the largest events of the new
    range among all events (not only the pre-computed ones) and the busy fraction at the
    resolution of that range; the page draws them as one more level of detail.

    A range holding fewer than ``glyphs`` events (the timeline's ``live_rows``) gets every
    one of them. Each answer replaces the one before, so the page holds one live level
    whatever the number of zooms."""

    trace: Trace
    lanes: Lanes
    labels: LiveLabels
    links: LinkIndex
    t0: int  # ns, the page's zero (the index counts from it too)
    index: WindowIndex
    page: Page
    glyphs: int = LIVE_ROWS
    bins: int = 1500
    last: tuple[float, float] | None = None

    def attach(self) -> None:
        self.page.x_range.on_change("start", self.on_range)
        self.page.x_range.on_change("end", self.on_range)

    def on_range(self, attr: str, old: object, new: object) -> None:
        self.refine(float(self.page.x_range.start), float(self.page.x_range.end))

    def refine(self, v0: float, v1: float) -> None:
        """Send the page the level for ``[v0, v1]`` (ms since the trace start)."""
        if not v1 > v0 or (v0, v1) == self.last:
            return
        self.last = (v0, v1)
        win = self.index.window(v0 * 1e6, v1 * 1e6, glyphs=self.glyphs, bins=self.bins)
        members = distinct(self.links.members(win.rows))
        partners = members[~np.isin(members, win.rows)]  # np.setdiff1d, by distinct's sort
        rows = np.concatenate([win.rows, partners])  # glyphs first, then link partners
        self.page.live.data = event_columns(
            self.trace,
            rows,
            t0=self.t0,
            lanes=self.lanes,
            labels=self.labels.of(rows),
            groups=self.links.groups,
        )
        self.page.live_busy.data = {"cells": busy_cells(win.busy).ravel()}
        # the page redraws when this last one arrives
        self.page.live_level.data = {
            "t0": [v0],
            "t1": [v1],
            "bins": [self.bins],
            "n": [int(win.rows.size)],
        }


class TimelineOptions(TypedDict, total=False):
    """The keyword arguments of :func:`timeline`."""

    row_budget: int
    width: int
    title: str | None
    live: bool
    overlay: Overlay | None
    made_by: MadeBy
    critical: bool
    memory: bool
    live_rows: int


def timeline_bundle(trace: Trace, **options: Unpack[TimelineOptions]) -> dict[str, str]:
    """MIME bundle (text/html + text/plain) of :func:`timeline` (static: no ``live``)."""
    view = timeline(trace, **options)
    return notebook_bundle(view.layout, view.text)


def save_timeline(
    trace: Trace, path: str | os.PathLike[str], **options: Unpack[TimelineOptions]
) -> Path:
    title = str(trace.meta.get("source") or "perflab timeline")
    return timeline(trace, **options).save(path, title=f"perflab timeline: {title}")
