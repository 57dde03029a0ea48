"""What a critical path's host stretches were: each cut where its lane's events begin or end,
and each piece named by the innermost event around it (its own time), or as untraced host time
where no event covers it. A launch call's own time is a launch; the rest is host time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.critical_host import host_rows
from perflab.analysis.host_stacks import HostStacks
from perflab.model.trace import Trace, distinct

I64 = npt.NDArray[np.int64]
UNTRACED = "(untraced host time)"


@dataclass
class Pieces:
    """Named pieces of host stretches: per piece the stretch it belongs to, its event row
    (-1: untraced), and its start and end (the trace's clock); in stretch order, then time."""

    stretch: I64
    row: I64
    start: I64
    end: I64


def host_pieces(trace: Trace, lane_of_track: I64, lane: I64, a: I64, b: I64) -> Pieces:
    """The stretches ``[a[i], b[i])`` of host lane ``lane[i]``, cut and named (module
    docstring); consecutive pieces of one event are joined."""
    rows = host_rows(trace)
    row_lane = lane_of_track[trace.track[rows]]
    parts: list[tuple[I64, I64, I64]] = []
    for one in distinct(lane).tolist():
        mine = rows[row_lane == one]
        bounds = distinct(np.concatenate([trace.start_ns[mine], trace.end_ns[mine]]))
        which = np.flatnonzero(lane == one)
        lo = np.searchsorted(bounds, a[which], side="right")
        hi = np.searchsorted(bounds, b[which], side="left")
        count = np.maximum(hi - lo, 0) + 1  # pieces per stretch: its inner bounds cut it
        stretch = np.repeat(which, count)
        k = np.arange(len(stretch)) - np.repeat(np.cumsum(count) - count, count)
        first, pieces = np.repeat(lo, count), np.repeat(count, count)
        piece_start = np.where(k == 0, a[stretch], _at(bounds, first + k - 1))
        piece_end = np.where(k == pieces - 1, b[stretch], _at(bounds, first + k))
        parts.append((stretch, piece_start, piece_end))
    if not parts:
        empty = np.zeros(0, np.int64)
        return Pieces(empty, empty, empty, empty)
    stretch, start, end = (np.concatenate(c).astype(np.int64) for c in zip(*parts, strict=True))
    order = np.lexsort((start, stretch))
    stretch, start, end = stretch[order], start[order], end[order]
    row = _innermost(trace, lane_of_track, lane[stretch], (start + end) // 2)
    return _joined(Pieces(stretch, row, start, end))


def _at(values: I64, index: I64) -> I64:
    """``values[index]`` with ``index`` clipped into range (0 where ``values`` is empty)."""
    if len(values) == 0:
        return np.zeros(len(index), np.int64)
    return values[np.clip(index, 0, len(values) - 1)]


def _innermost(trace: Trace, lane_of_track: I64, lane: I64, t: I64) -> I64:
    """Per query: the innermost host event of the lane's threads around ``t`` (the one that
    began last), -1 where none."""
    stacks = HostStacks(trace)
    best = np.full(len(t), -1, np.int64)
    if len(stacks) == 0:  # only events of no length: every piece is untraced
        return best
    best_start = np.full(len(t), np.iinfo(np.int64).min, np.int64)
    for track in np.flatnonzero(lane_of_track >= 0).tolist():
        which = np.flatnonzero(lane == lane_of_track[track])
        if len(which) == 0:
            continue
        on = np.full(len(which), track, np.int64)
        depth = stacks.depth_at(on, t[which])
        inside = depth > 0
        found = np.full(len(which), -1, np.int64)
        found[inside] = stacks.at_level(on[inside], t[which][inside], depth[inside] - 1)
        hit = found >= 0
        start = np.where(hit, stacks.start[np.maximum(found, 0)], np.iinfo(np.int64).min)
        better = hit & (start >= best_start[which])
        best[which[better]] = stacks.rows[found[better]]
        best_start[which[better]] = start[better]
    return best


def _joined(p: Pieces) -> Pieces:
    """Consecutive pieces of one stretch and one event as one piece."""
    if len(p.row) == 0:
        return p
    new = np.ones(len(p.row), bool)
    new[1:] = (p.stretch[1:] != p.stretch[:-1]) | (p.row[1:] != p.row[:-1])
    at = np.flatnonzero(new)
    return Pieces(p.stretch[at], p.row[at], p.start[at], np.maximum.reduceat(p.end, at))
