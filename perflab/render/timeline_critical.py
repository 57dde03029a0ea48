"""The critical path of each ``ProfilerStep#N`` as the timeline page draws it: every stretch of
:func:`perflab.analysis.critical_path.critical_path` placed on the lane of the event it was,
with its kind and its time on the path. The page may hold only some events (levels of detail);
the stretches travel on their own, so the highlight holds at every zoom.

A stretch is placed by its name and time: the event of that name (GPU work for GPU kinds, a
host event for host kinds) that runs over the stretch's last nanosecond, the innermost such
one. Stretches that are no event (a launch's latency, a gap no dependency explains, untraced
host time) take the lane of the nearest placed stretch of their step: the one after them (the
work a latency or a gap held up), or for untraced host time the nearest host stretch.

The page draws them (:func:`draw_critical`, bokeh imported there) behind a toggle,
``static/timeline-critical.js``: on, the stretches in view are outlined over their lanes (work
filled, waiting hatched) and the other events dimmed; off, the page is as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.critical_host import host_rows
from perflab.analysis.critical_path import CriticalPaths, critical_path
from perflab.analysis.critical_walk import KINDS, PathColumns
from perflab.analysis.steps import profiler_steps
from perflab.errors import InputError
from perflab.model.trace import GPU_WORK_KINDS, Trace
from perflab.model.units import counted, format_ns
from perflab.render.timeline_data import Lanes, short_name

I64 = npt.NDArray[np.int64]
HOST_K, LAUNCH_K = KINDS.index("host"), KINDS.index("launch")
COLLECTIVE_K, UNEXPLAINED_K = KINDS.index("collective"), KINDS.index("unexplained")
GPU_KINDS = frozenset({"kernel", "copy", "collective", "collective transfer"})
#: what the page calls each kind; a launch that is no event is the latency to the work
LABELS = {
    "host": "host work",
    "launch": "launch call",
    "kernel": "kernel",
    "copy": "copy",
    "collective": "collective (waiting for its peers, then moving the data)",
    "collective transfer": "collective transfer",
    "unexplained": "blocked: a gap no recorded dependency explains",
}
LATENCY = "launch latency: waiting for the launched work to start"
SEGMENT_BUDGET = 40_000  # stretches the page carries; past it, runs on one lane are joined
BACK = 8  # same-named events tried before a stretch is left to its neighbours


@dataclass
class CriticalSegments:
    """The page's critical path: per stretch its step (index into ``steps``), start (ms since
    the page's zero), length (ns), lane (-1: none found), kind (index into ``kinds``), name
    (index into ``names``) and whether it is waiting rather than work (``wait``). Per step:
    its name and duration (ns). ``total``: stretches of the analysis (more than the page
    holds when runs were joined)."""

    step: npt.NDArray[np.int32]
    start_ms: npt.NDArray[np.float64]
    dur_ns: I64
    lane: I64
    kind: npt.NDArray[np.int8]
    name: npt.NDArray[np.int32]
    wait: npt.NDArray[np.bool_]
    names: list[str]
    kinds: list[str]
    steps: list[str]
    step_ns: list[int]
    total: int
    complete: bool = True  # False: the page holds only the longest (joined) stretches

    def take(self, rows: I64) -> CriticalSegments:
        """Only stretches ``rows`` (in their order); the page no longer holds every one."""
        return CriticalSegments(
            self.step[rows], self.start_ms[rows], self.dur_ns[rows], self.lane[rows],
            self.kind[rows], self.name[rows], self.wait[rows], self.names, self.kinds,
            self.steps, self.step_ns, self.total, complete=False,
        )  # fmt: skip

    def columns(self) -> dict[str, npt.NDArray[np.generic]]:
        """What the page's source of stretches holds."""
        return {
            "start": self.start_ms,
            "dur": self.dur_ns.astype(np.float64) / 1e6,
            "lane": self.lane.astype(np.int32),
            "kind": self.kind,
            "name": self.name,
            "step": self.step,
            "wait": self.wait.astype(np.int8),
        }

    def describe(self) -> str:
        """A line of the timeline's text view."""
        held = "" if self.total == len(self.dur_ns) else f" (joined into {len(self.dur_ns):,})"
        if not self.complete:
            held = f" (the page holds the longest {len(self.dur_ns):,} runs of them)"
        mean = format_ns(float(np.mean(self.step_ns))) if self.step_ns else "no time"
        return (
            f"critical path: {counted(len(self.steps), 'step')} (mean {mean}), "
            f"{self.total:,} {'stretch' if self.total == 1 else 'stretches'}{held}; "
            "the page's 'critical path' toggle highlights them"
        )


@dataclass
class CriticalView:
    """The critical path the page can show, or why it cannot (``reason``)."""

    segments: CriticalSegments | None
    reason: str = ""


def critical_view(trace: Trace, lanes: Lanes, origin_ns: int) -> CriticalView:
    """The page's critical path of ``trace``, or why there is none to show."""
    ranks = np.unique(trace.tracks["rank"]) if len(trace.tracks) else np.zeros(0)
    if len(ranks) > 1:
        return CriticalView(
            None,
            "no critical path here: a job's path crosses ranks (job.critical(), perflab trace "
            "critical)",
        )
    if len(profiler_steps(trace)) == 0:
        return CriticalView(
            None, "no critical path: the trace has no ProfilerStep#N ranges (prof.step())"
        )
    try:
        paths = critical_path(trace)
    except InputError as exc:
        return CriticalView(None, f"no critical path: {exc}")
    return CriticalView(segments_of(trace, lanes, origin_ns, paths))


def segments_of(
    trace: Trace, lanes: Lanes, origin_ns: int, paths: CriticalPaths
) -> CriticalSegments:
    """Every step's stretches of ``paths`` placed on ``lanes`` (module docstring)."""
    parts = [s.path for s in paths.steps]
    names = parts[0].names if parts else []
    step = np.concatenate(
        [np.full(len(p.dur), i, np.int32) for i, p in enumerate(parts)] or [np.zeros(0, np.int32)]
    )
    start, dur, name, kind = (_joined_column(parts, f) for f in ("start", "dur", "name", "kind"))
    row = event_rows(trace, names, name, kind, start + dur)
    lane = np.where(row >= 0, lanes.of_event[np.maximum(row, 0)], -1)
    lane = _borrowed_lanes(lane, step, kind)
    wait = (kind == COLLECTIVE_K) | (kind == UNEXPLAINED_K) | ((kind == LAUNCH_K) & (row < 0))
    labels = [LABELS[k] for k in KINDS] + [LATENCY]
    shown_kind = np.where((kind == LAUNCH_K) & (row < 0), len(KINDS), kind).astype(np.int8)
    segments = CriticalSegments(
        step=step,
        start_ms=(start - origin_ns).astype(np.float64) / 1e6,
        dur_ns=dur,
        lane=lane,
        kind=shown_kind,
        name=name.astype(np.int32),
        wait=wait,
        names=[short_name(n) for n in names],
        kinds=labels,
        steps=[s.step for s in paths.steps],
        step_ns=[s.duration_ns for s in paths.steps],
        total=len(dur),
    )
    return within_budget(segments)


def within_budget(s: CriticalSegments) -> CriticalSegments:
    """At most :data:`SEGMENT_BUDGET` stretches for the page: runs on one lane joined, and
    if that is not enough, the longest runs kept."""
    if len(s.dur_ns) <= SEGMENT_BUDGET:
        return s
    s = joined(s)
    if len(s.dur_ns) <= SEGMENT_BUDGET:
        return s
    return s.take(np.sort(np.argsort(-s.dur_ns, kind="stable")[:SEGMENT_BUDGET]))


def _joined_column(parts: list[PathColumns], column: str) -> I64:
    """One column of every step's path, end to end."""
    joined_up = [np.asarray(getattr(p, column), np.int64) for p in parts]
    return np.concatenate(joined_up) if joined_up else np.zeros(0, np.int64)


def event_rows(trace: Trace, names: list[str], name: I64, kind: I64, end: I64) -> I64:
    """Per stretch: the trace row of the event it was, -1 where it is no event (see the
    module docstring): same name, same side (GPU work or host), running over ``end - 1``."""
    out = np.full(len(name), -1, np.int64)
    if len(name) == 0 or len(trace) == 0:
        return out
    string_id = {s: i for i, s in enumerate(trace.strings)}
    wanted = np.array([string_id.get(n, -1) for n in names], np.int64)
    on_gpu = np.zeros(len(trace), bool)
    on_gpu[np.flatnonzero(trace.mask(*GPU_WORK_KINDS))] = True
    on_host = np.zeros(len(trace), bool)
    on_host[host_rows(trace)] = True
    gpu_kind = np.isin(kind, [KINDS.index(k) for k in GPU_KINDS])
    for side, events in ((gpu_kind, on_gpu), (~gpu_kind, on_host)):
        ids = wanted[name[side]]
        asked = np.flatnonzero(side)[ids >= 0]
        if len(asked):
            out[asked] = _innermost_named(trace, events, wanted[name[asked]], end[asked] - 1)
    return out


def _innermost_named(trace: Trace, events: npt.NDArray[np.bool_], ids: I64, at: I64) -> I64:
    """Per query: among ``events`` named ``ids[i]``, the one that began last and runs over
    time ``at[i]`` (tried among the :data:`BACK` that began last before it); -1 if none."""
    rows = np.flatnonzero(events & np.isin(trace.name, ids))
    out = np.full(len(ids), -1, np.int64)
    if len(rows) == 0:
        return out
    present, group = np.unique(trace.name[rows].astype(np.int64), return_inverse=True)
    # one sorted key of (name, start): a name's events in a band of their own
    low = int(trace.start_ns[rows].min())
    width = int(trace.start_ns[rows].max()) - low + 2
    if width * len(present) >= 2**62:
        raise InputError("the trace's times span too far to place its critical path")
    key = group.reshape(-1) * width + (trace.start_ns[rows] - low)
    order = np.argsort(key, kind="stable")
    rows, key = rows[order], key[order]
    band = np.searchsorted(present, ids)
    known = (band < len(present)) & (present[np.minimum(band, len(present) - 1)] == ids)
    first = np.searchsorted(key, band * width, side="left")
    asked = band * width + np.clip(at - low, -1, width - 1)
    latest = np.searchsorted(key, asked, side="right") - 1  # starts at or before ``at``
    for back in range(BACK):
        cand = latest - back
        safe = np.clip(cand, 0, len(rows) - 1)
        hit = known & (out < 0) & (cand >= first) & (trace.end_ns[rows[safe]] > at)
        out[hit] = rows[safe[hit]]
    return out


def _borrowed_lanes(lane: I64, step: npt.NDArray[np.int32], kind: I64) -> I64:
    """Lanes for the stretches that are no event: untraced host time takes the nearest host
    stretch's lane in its step, the rest the next placed stretch's (else the one before)."""
    out = lane.copy()
    host_side = (kind == HOST_K) | (kind == LAUNCH_K)
    every = np.ones(len(lane), bool)
    for among, who in ((host_side, kind == HOST_K), (every, every)):
        placed = among & (out >= 0)
        after = _nearest(out, step, placed, after=True)
        near = np.where(after >= 0, after, _nearest(out, step, placed, after=False))
        todo = who & (out < 0)
        out[todo] = near[todo]
    return out


def _nearest(
    lane: I64, step: npt.NDArray[np.int32], placed: npt.NDArray[np.bool_], after: bool
) -> I64:
    """Per stretch: the lane of the nearest ``placed`` stretch of its step after it (or at
    or before it), -1 if none."""
    n = len(lane)
    if after:
        flipped = _nearest(lane[::-1], step[::-1], placed[::-1], after=False)
        return flipped[::-1].copy()
    index = np.maximum.accumulate(np.where(placed, np.arange(n), -1)) if n else np.zeros(0, int)
    found = (index >= 0) & (step[np.maximum(index, 0)] == step)
    return np.where(found, lane[np.maximum(index, 0)], -1).astype(np.int64)


def joined(s: CriticalSegments) -> CriticalSegments:
    """Consecutive stretches of one step on one lane, of one kind, as one: the stretches
    of a step tile it, so a run is one interval and its length the sum of theirs."""
    n = len(s.dur_ns)
    new = np.ones(n, bool)
    new[1:] = (
        (s.step[1:] != s.step[:-1]) | (s.lane[1:] != s.lane[:-1]) | (s.kind[1:] != s.kind[:-1])
    )
    at = np.flatnonzero(new)
    longest = _longest_in_runs(s.dur_ns, at)
    return CriticalSegments(
        step=s.step[at],
        start_ms=s.start_ms[at],
        dur_ns=np.add.reduceat(s.dur_ns, at) if n else s.dur_ns,
        lane=s.lane[at],
        kind=s.kind[at],
        name=s.name[longest],
        wait=s.wait[at],
        names=s.names,
        kinds=s.kinds,
        steps=s.steps,
        step_ns=s.step_ns,
        total=s.total,
    )


def _longest_in_runs(dur: I64, at: I64) -> I64:
    """Per run starting at ``at``: the index of its longest stretch (its name stands for it)."""
    run = np.cumsum(np.isin(np.arange(len(dur)), at)) - 1
    order = np.lexsort((-dur, run))
    first = np.searchsorted(run[order], np.arange(len(at)), side="left")
    picked: I64 = order[first]
    return picked


#: what the page's drawn stretches hold (see timeline-critical.js)
SHOWN_COLUMNS = (
    "left", "right", "bottom", "top", "fill", "alpha", "hatch", "line", "edge", "name", "kind",
    "on_path", "step", "at", "lane",
)  # fmt: skip
HOVER_ROWS = (
    ("critical path", "name"),
    ("kind", "kind"),
    ("on the path", "on_path"),
    ("step", "step"),
    ("from", "at"),
    ("lane", "lane"),
)


def draw_critical(main: Any) -> Any:
    """The drawn stretches over the lanes (empty until the toggle is on), with their hover;
    returns their data source, which the page script fills."""
    from bokeh.models import ColumnDataSource, HoverTool

    from perflab.render.timeline_figure import tooltip_template

    shown = ColumnDataSource({k: [] for k in SHOWN_COLUMNS})
    marked = main.quad(
        left="left",
        right="right",
        bottom="bottom",
        top="top",
        source=shown,
        fill_color="fill",
        fill_alpha="alpha",
        hatch_pattern="hatch",
        hatch_color="line",
        hatch_alpha=0.9,
        hatch_scale=8,
        line_color="line",
        line_alpha="edge",
        line_width=1.5,
    )
    main.add_tools(HoverTool(renderers=[marked], tooltips=tooltip_template(list(HOVER_ROWS))))
    return shown


def page_meta(view: CriticalView) -> dict[str, object]:
    """What the page script knows of the path besides its stretches: names, kinds, steps
    and their durations (ms), how many stretches the analysis gave, or why there is none."""
    s = view.segments
    if s is None:
        return {"reason": view.reason, "names": [], "kinds": [], "steps": [], "step_ms": []}
    return {
        "reason": "",
        "names": s.names,
        "kinds": s.kinds,
        "steps": s.steps,
        "step_ms": [ns / 1e6 for ns in s.step_ns],
        "total": s.total,
        "held": len(s.dur_ns),
        "complete": s.complete,
    }
