"""What host threads were doing at many moments and over many intervals, in a few sorts.

Host events (CPU ops, Python functions, user ranges, runtime calls: every event with a
duration on a CPU track) nest on their thread: a runtime call inside an op inside a
``ProfilerStep#N`` range. :class:`HostStacks` sorts them once per thread by start (longer
first at equal starts) and gives each its depth, the number of events on its thread that
contain its start. Then the events containing a time ``t`` are, at each depth ``d`` below
the number of events containing ``t``, the last event of depth ``d`` that starts at or
before ``t``; no tree of Python objects is built. Events that overlap without nesting
(clock rounding) are tolerated: every answer is checked against the times, and one that
fails is dropped rather than guessed.

The grouped lookups below (:func:`last_at_or_before`, :func:`count_at_or_before`) answer
many queries at once by one lexsort of items and queries together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.model.trace import EventKind, TrackKind, kind_mask

if TYPE_CHECKING:
    from perflab.model.trace import Trace

I64 = npt.NDArray[np.int64]
MAX_CHAIN = 12  # levels main_descendants follows down (a crafted nesting can be far deeper)

#: event kinds that are host activity when they sit on a CPU track
HOST_KINDS = (
    EventKind.CPU_OP,
    EventKind.RUNTIME,
    EventKind.ANNOTATION,
    EventKind.SYNC,
    EventKind.OTHER,
    EventKind.PYTHON,
)


def _merged(
    item_group: I64, item_time: I64, query_group: I64, query_time: I64, inclusive: bool
) -> tuple[I64, I64]:
    """Items and queries sorted together by (group, time); at equal times items come
    first when ``inclusive`` (a query then sees items at its own time), else last. Returns
    the merged order (indices: items first, then queries) and each query's position."""
    n = len(item_group)
    group = np.concatenate([item_group, query_group])
    time = np.concatenate([item_time, query_time])
    tie = np.empty(len(group), dtype=np.int8)
    tie[:n], tie[n:] = (0, 1) if inclusive else (1, 0)
    order = np.lexsort((tie, time, group))
    where = np.empty(len(order), dtype=np.int64)
    where[order] = np.arange(len(order))
    return order, where[n:]


def last_at_or_before(item_group: I64, item_time: I64, query_group: I64, query_time: I64) -> I64:
    """Per query: the index of the last item of its group (by time, then by index) whose
    time is at or before the query's; -1 where none."""
    n = len(item_group)
    if n == 0 or len(query_group) == 0:
        return np.full(len(query_group), -1, dtype=np.int64)
    order, at = _merged(item_group, item_time, query_group, query_time, inclusive=True)
    seen = np.maximum.accumulate(np.where(order < n, np.arange(len(order)), -1))
    found_pos = seen[at]
    found = np.where(found_pos >= 0, order[np.maximum(found_pos, 0)], -1)
    same = found >= 0
    same[same] = item_group[found[same]] == query_group[same]
    return np.where(same, found, -1)


def count_at_or_before(
    item_group: I64, item_time: I64, query_group: I64, query_time: I64, inclusive: bool = True
) -> I64:
    """Per query: how many items of its group have a time at or before (``inclusive``) or
    strictly before the query's."""
    n = len(item_group)
    if n == 0 or len(query_group) == 0:
        return np.zeros(len(query_group), dtype=np.int64)
    order, at = _merged(item_group, item_time, query_group, query_time, inclusive)
    group = np.concatenate([item_group, query_group])[order]
    is_item = order < n
    items_so_far = np.cumsum(is_item)  # items at or before each merged position
    first = np.ones(len(order), dtype=bool)
    first[1:] = group[1:] != group[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    before_group: I64 = items_so_far[group_start] - is_item[group_start]
    return np.asarray(items_so_far[at] - before_group[at], dtype=np.int64)


class HostStacks:
    """The host events of a trace, sorted by (thread, start, longer first), with depths.

    ``rows`` are event rows; ``track``, ``start``, ``end`` and ``depth`` are per sorted
    event; ``first_of_track[t]`` is where thread ``t``'s events begin in that order."""

    def __init__(self, trace: Trace) -> None:
        on_cpu = trace.tracks["kind"][trace.track] == TrackKind.CPU if len(trace) else None
        host = kind_mask(trace.kind, HOST_KINDS) & (trace.dur_ns > 0)
        if on_cpu is not None:
            host &= on_cpu
        rows = np.flatnonzero(host)
        start, end = trace.start_ns[rows], trace.end_ns[rows]
        track = trace.track[rows].astype(np.int64)
        order = np.lexsort((rows, -end, start, track))
        self.rows = rows[order]
        self.track, self.start, self.end = track[order], start[order], end[order]
        counts = np.bincount(self.track, minlength=len(trace.tracks)) if len(rows) else None
        first = np.zeros(len(trace.tracks) + 1, dtype=np.int64)
        if counts is not None:
            first[1:] = np.cumsum(counts)
        self.first_of_track = first
        rank = np.arange(len(self.rows)) - first[self.track]
        ended = count_at_or_before(self.track, self.end, self.track, self.start)
        self.depth = np.maximum(rank - ended, 0)
        self.levels = int(self.depth.max()) + 1 if len(self.rows) else 1

    def __len__(self) -> int:
        return len(self.rows)

    def depth_at(self, track: I64, t: I64) -> I64:
        """Per query: how many events of thread ``track[j]`` contain time ``t[j]``."""
        started = count_at_or_before(self.track, self.start, track, t)
        ended = count_at_or_before(self.track, self.end, track, t)
        return np.asarray(np.maximum(started - ended, 0), dtype=np.int64)

    def at_level(self, track: I64, t: I64, level: I64) -> I64:
        """Per query: the event (sorted index) of depth ``level[j]`` on thread ``track[j]``
        that contains ``t[j]``, or -1 (also where nesting is broken and the event found by
        its depth does not contain ``t``)."""
        if len(track) == 0:
            return np.zeros(0, dtype=np.int64)
        groups = self.track * self.levels + self.depth
        found = last_at_or_before(groups, self.start, track * self.levels + level, t)
        ok = found >= 0
        ok[ok] = (self.start[found[ok]] <= t[ok]) & (self.end[found[ok]] > t[ok])
        return np.where(ok, found, -1)

    def containing(self, track: I64, t: I64) -> tuple[I64, I64, I64]:
        """Every event containing each time ``t[j]`` on thread ``track[j]`` (start <= t <
        end): ``(query j, sorted index, depth)`` triples, outermost first per query. Their
        number is the sum of the depths: for tests and small sets of queries."""
        depth = self.depth_at(track, t)
        query = np.repeat(np.arange(len(t)), depth)
        level = np.arange(len(query)) - np.repeat(np.cumsum(depth) - depth, depth)
        found = self.at_level(track[query], t[query], level)
        ok = found >= 0
        return query[ok], found[ok], level[ok]

    def starting_within(self, track: I64, a: I64, b: I64) -> tuple[I64, I64]:
        """The events of thread ``track[j]`` that start inside ``(a[j], b[j])``:
        ``(query j, sorted index)`` pairs."""
        lo = count_at_or_before(self.track, self.start, track, a, inclusive=True)
        hi = count_at_or_before(self.track, self.start, track, b, inclusive=False)
        n = np.maximum(hi - lo, 0)
        query = np.repeat(np.arange(len(a)), n)
        offset = np.arange(len(query)) - np.repeat(np.cumsum(n) - n, n)
        base = self.first_of_track[np.maximum(track, 0)] + lo
        return query, base[query] + offset

    def main_descendants(self, index: int, a: int, b: int, share: float = 0.5) -> list[int]:
        """Below event ``index`` (sorted), the chain of its longest child over [a, b), then
        that child's longest child, ... while each covers at least ``share`` of its
        parent's time in [a, b), at most ``MAX_CHAIN`` deep. For one event at a time: the
        views call it for the gaps they show."""
        chain: list[int] = []
        parent = index
        while len(chain) < MAX_CHAIN:
            covered = min(int(self.end[parent]), b) - max(int(self.start[parent]), a)
            lo = parent + 1
            track = int(self.track[parent])
            track_end = int(self.first_of_track[track + 1])
            block_start = self.start[lo:track_end]
            hi = lo + int(np.searchsorted(block_start, self.end[parent], side="left"))
            children = np.arange(lo, hi)[self.depth[lo:hi] == self.depth[parent] + 1]
            if len(children) == 0 or covered <= 0:
                return chain
            over = np.minimum(self.end[children], b) - np.maximum(self.start[children], a)
            best = int(np.argmax(over))
            if over[best] < share * covered:
                return chain
            parent = int(children[best])
            chain.append(parent)
        return chain
