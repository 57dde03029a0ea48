"""Replaying a dependency graph (:mod:`perflab.analysis.critical_graph`) with other durations.

Replay: every node starts when the last of its inputs is ready and runs for its duration. Along
a lane this is a running maximum: with ``P`` the lane's cumulative (lag + duration) and ``x``
the time a node's inputs from other lanes are ready, a node ends at ``P + max(x - P + dur)``
over the lane so far, which numpy computes for every lane at once. The inputs from other lanes
come from the previous round; rounds repeat until no end moves, which takes as many rounds as
the longest chain of lane changes that matter (a few per sync), and every round is exact once
its inputs are. A graph that would take more than ``MAX_ROUNDS`` is replayed node by node in
its order instead (slower, as exact).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.critical_graph import NO_TIME, TIER, Graph

I64 = npt.NDArray[np.int64]
MAX_ROUNDS = 64
_ROOM = 1 << 62  # a running maximum's lanes are lifted apart within this


def replay(g: Graph, dur: I64) -> tuple[I64, I64]:
    """Start and end of every node when node ``i`` lasts ``dur[i]`` (the lags as
    recorded): a fixed point of the graph's equations, from the recorded ends."""
    lanes = _Lanes(g, dur)
    end = g.end.copy()
    firsts = (
        np.flatnonzero(np.concatenate(([True], g.dst[1:] != g.dst[:-1]))) if len(g.dst) else g.dst
    )
    for _ in range(MAX_ROUNDS):
        ready = _inputs(g, end, firsts)
        new_end = lanes.ends(ready)
        if np.array_equal(new_end, end):
            return new_end - dur, new_end
        end = new_end
    return replay_in_order(g, dur)


def _inputs(g: Graph, end: I64, firsts: I64) -> I64:
    """Per node: when its inputs from other lanes are ready (its recorded start where it
    has none and no lane before it; NO_TIME where it has none)."""
    ready = np.where(g.anchored, g.start, NO_TIME)
    if len(g.dst):
        ready[g.dst[firsts]] = np.maximum.reduceat(end[g.src] + g.lag, firsts)
    return ready


@dataclass
class _Lanes:
    """The lane recurrence of :func:`replay` for fixed durations."""

    g: Graph
    dur: I64

    def __post_init__(self) -> None:
        first = ~self.g.link
        self.segment = np.cumsum(first) - 1
        self.segments = int(self.segment[-1]) + 1 if len(first) else 0
        step = np.where(self.g.link, self.g.chain_lag, 0) + self.dur
        total = np.cumsum(step)  # wraps past int64 in huge what-ifs; the differences do not
        before = (total - step)[np.flatnonzero(first)]
        self.prefix = total - before[self.segment]

    def ends(self, ready: I64) -> I64:
        known = ready != NO_TIME
        values = np.where(known, ready + self.dur - self.prefix, 0)
        out: I64 = self.prefix + _segment_max(values, known, self.segment, self.segments)
        return out


def _segment_max(values: I64, known: npt.NDArray[np.bool_], segment: I64, segments: int) -> I64:
    """The running maximum of ``values`` within each segment (every segment's first value
    known; unknown values count as the lowest)."""
    if len(values) == 0:
        return values
    low = int(values[known].min())
    width = int(values[known].max()) - low + 1
    out = np.empty_like(values)
    per_chunk = max(1, _ROOM // width)
    bounds = np.searchsorted(segment, np.arange(0, segments + per_chunk, per_chunk))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if a == b:
            continue
        lift = (segment[a:b] - segment[a]) * width
        shifted = np.where(known[a:b], values[a:b] - low, 0) + lift
        out[a:b] = np.maximum.accumulate(shifted) - lift + low
    return out


def replay_in_order(g: Graph, dur: I64) -> tuple[I64, I64]:
    """:func:`replay` node by node in the graph's order (every input before its node)."""
    order = np.lexsort((np.arange(len(g)), TIER[g.kind], g.start)).tolist()
    firsts = np.searchsorted(g.dst, np.arange(len(g) + 1))
    src, lag, first = g.src.tolist(), g.lag.tolist(), firsts.tolist()
    link, chain_lag = g.link.tolist(), g.chain_lag.tolist()
    anchored, recorded, durs = g.anchored.tolist(), g.start.tolist(), dur.tolist()
    end = [0] * len(g)
    start = [0] * len(g)
    for v in order:
        t = recorded[v] if anchored[v] else NO_TIME
        if link[v]:
            t = max(t, end[v - 1] + chain_lag[v])
        for e in range(first[v], first[v + 1]):
            t = max(t, end[src[e]] + lag[e])
        start[v], end[v] = t, t + durs[v]
    return np.asarray(start, np.int64), np.asarray(end, np.int64)
