"""The host side of a step's dependency graph (:mod:`perflab.analysis.critical_path`): host
threads grouped into program-order lanes, and each lane cut into nodes at the moments other
work depends on.

Lanes: a thread is a lane, except that the threads of one process that run PyTorch ops
(``cpu_op`` events) and take turns rather than run at the same time (their op and call time
overlaps by at most 5% of the smaller one's) form one lane: the autograd engine's thread runs
the backward pass while the main thread waits in ``backward()``, so the two are one program
in one order (as Holistic Trace Analysis merges its forward and backward threads).

Nodes: a lane runs from its first event's start to its last event's end without a break (time
no event covers is untraced host work), cut where something depends on it: the start of every
call that launched GPU work (the launched work may start only after it), the start and end of
every call that waited for the GPU (a sync, or a copy call that blocked until its copy was
done), and the edges of each ``ProfilerStep#N`` range. Each lane begins with a node of no
length at its first event, so every launch call has a node that ends where it starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.copies import MEMORY_KINDS, host_memory_codes
from perflab.analysis.host_stacks import HOST_KINDS, last_at_or_before
from perflab.analysis.idle_classify import sync_calls
from perflab.model.trace import EventKind, Trace, TrackKind, distinct, kind_mask, unique_rows

I64 = npt.NDArray[np.int64]

# node kinds of the whole graph (host ones here, the GPU's in critical_gpu)
START, HOST, SYNC = 0, 1, 2
MERGE_OVERLAP_SHARE = 0.05  # threads whose busy time overlaps less than this take turns
BUSY_KINDS = (EventKind.CPU_OP, EventKind.RUNTIME, EventKind.PYTHON)  # annotations wrap these
PROFILER_STEP = re.compile(r"ProfilerStep#(\d{1,18})")


@dataclass
class HostNodes:
    """One rank's host nodes, sorted by (lane, start): lane, recorded start and end (the
    trace's clock), kind (START, HOST or SYNC) and, for a sync, the call's row (-1 else)."""

    lane: I64
    start: I64
    end: I64
    kind: npt.NDArray[np.int8]
    row: I64
    lane_of_track: I64  # per track: its lane, -1 for tracks without host events

    def __len__(self) -> int:
        return len(self.start)

    def ending_at(self, track: I64, t: I64) -> I64:
        """Per query: the node of ``track``'s lane that ends at ``t``, -1 where none."""
        lane = self.lane_of_track[track] if len(track) else np.zeros(0, np.int64)
        found = last_at_or_before(self.lane, self.end, lane, t)
        ok = (found >= 0) & (lane >= 0)
        ok[ok] = self.end[found[ok]] == t[ok]
        return np.where(ok, found, -1)


@dataclass
class StepRanges:
    """The ``ProfilerStep#N`` ranges of one trace: number, host start and end, and the
    track of the event that opens each."""

    number: I64
    start: I64
    end: I64
    track: I64

    def __len__(self) -> int:
        return len(self.number)


def step_ranges(trace: Trace) -> StepRanges:
    """Every ProfilerStep#N range on a CPU track (the earliest start and latest end of its
    events, the track of the earliest)."""
    number_of_name = np.full(len(trace.strings), -1, dtype=np.int64)
    for i, text in enumerate(trace.strings):
        found = PROFILER_STEP.fullmatch(text)
        if found:
            number_of_name[i] = int(found.group(1))
    numbers = number_of_name[trace.name] if len(trace.strings) else np.full(len(trace), -1)
    rows = np.flatnonzero((numbers >= 0) & _on_cpu(trace))
    rows = rows[np.lexsort((rows, trace.start_ns[rows], numbers[rows]))]
    if len(rows) == 0:
        empty = np.zeros(0, np.int64)
        return StepRanges(empty, empty, empty, empty)
    first = np.concatenate(([True], numbers[rows][1:] != numbers[rows][:-1]))
    at = np.flatnonzero(first)
    end = np.maximum.reduceat(trace.end_ns[rows], at)
    picked = rows[at]
    order = np.argsort(trace.start_ns[picked], kind="stable")
    return StepRanges(
        numbers[picked][order],
        trace.start_ns[picked][order],
        end[order],
        trace.track[picked][order].astype(np.int64),
    )


def _on_cpu(trace: Trace) -> npt.NDArray[np.bool_]:
    if len(trace) == 0:
        return np.zeros(0, dtype=bool)
    return np.asarray(trace.tracks["kind"][trace.track] == TrackKind.CPU)


def host_rows(trace: Trace) -> I64:
    """The host events: host kinds on CPU tracks."""
    return np.flatnonzero(kind_mask(trace.kind, HOST_KINDS) & _on_cpu(trace))


def lane_of_tracks(trace: Trace, rows: I64) -> I64:
    """Per track: its lane (module docstring), -1 where it has no host events."""
    lane = np.full(len(trace.tracks), -1, dtype=np.int64)
    tracks = distinct(trace.track[rows].astype(np.int64))
    op_tracks = distinct(trace.track[rows[trace.kind[rows] == EventKind.CPU_OP]].astype(np.int64))
    busy = rows[kind_mask(trace.kind[rows], BUSY_KINDS)]
    lanes: list[tuple[int, tuple[I64, I64]]] = []  # (process, busy union) per merged lane
    count = 0
    for track in _by_busy_time(trace, busy, op_tracks):
        process = int(trace.tracks["device"][track])
        mine = _union(trace, busy[trace.track[busy] == track])
        own = int((mine[1] - mine[0]).sum())
        for k, (lane_process, union) in enumerate(lanes):
            if lane_process == process and _overlap(mine, union) <= MERGE_OVERLAP_SHARE * own:
                lane[track] = k
                lanes[k] = (process, _join(mine, union))
                break
        else:
            lane[track] = len(lanes)
            lanes.append((process, mine))
    count = len(lanes)
    for track in tracks.tolist():
        if lane[track] < 0:
            lane[track] = count
            count += 1
    return lane


def _by_busy_time(trace: Trace, busy: I64, tracks: I64) -> list[int]:
    """``tracks``, the busiest first."""
    total = np.bincount(trace.track[busy], weights=trace.dur_ns[busy], minlength=len(trace.tracks))
    return sorted(tracks.tolist(), key=lambda t: (-float(total[t]), t))


def _union(trace: Trace, rows: I64) -> tuple[I64, I64]:
    """The events ``rows`` as disjoint intervals, sorted."""
    start, end = trace.start_ns[rows], trace.end_ns[rows]
    return _merged_intervals(start, end)


def _merged_intervals(start: I64, end: I64) -> tuple[I64, I64]:
    if len(start) == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    new = np.concatenate(([True], start[1:] > reach[:-1]))
    at = np.flatnonzero(new)
    return start[at], np.maximum.reduceat(end, at)


def _join(a: tuple[I64, I64], b: tuple[I64, I64]) -> tuple[I64, I64]:
    return _merged_intervals(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def _overlap(a: tuple[I64, I64], b: tuple[I64, I64]) -> int:
    """The time two sets of disjoint intervals share."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return 0
    times = np.concatenate([a[0], a[1], b[0], b[1]])
    step = np.concatenate(
        [np.ones(len(a[0])), -np.ones(len(a[1])), np.ones(len(b[0])), -np.ones(len(b[1]))]
    ).astype(np.int64)
    order = np.lexsort((step, times))  # ends before starts at one time: touching is no overlap
    times, cover = times[order], np.cumsum(step[order])
    both = cover[:-1] >= 2
    return int((np.diff(times)[both]).sum())


def runtime_syncs(trace: Trace, links: I64) -> I64:
    """The runtime calls that wait for the GPU: syncs and copy calls that blocked (the ops
    around them, aten::item and the like, wait through these), and copy calls of pageable
    memory that returned while their copy ran, at most :func:`staged_room` before it ended
    (the call stages the data through the driver's pinned buffers while the copy runs: it
    cannot end much before the copy does, whichever of the two is slower)."""
    rows = sync_calls(trace, links)
    staged = _staged_copy_calls(trace, links)
    return distinct(np.concatenate([rows[trace.kind[rows] == EventKind.RUNTIME], staged]))


STAGED_NS = 10_000


def staged_room(copy_dur: I64) -> I64:
    """How long before its copy's end a staging copy call may return: 10 us, or a twentieth
    of the copy (the last of the driver's staging chunks still in flight)."""
    return np.maximum(STAGED_NS, copy_dur // 20)


def _staged_copy_calls(trace: Trace, links: I64) -> I64:
    copies = np.flatnonzero((trace.kind == EventKind.MEMCPY) & (links >= 0))
    call = links[copies]
    pageable = host_memory_codes(trace)[copies] == MEMORY_KINDS.index("pageable")
    call_end, copy_end = trace.end_ns[call], trace.end_ns[copies]
    near = call_end >= copy_end - staged_room(trace.dur_ns[copies])
    during = trace.start_ns[copies] < call_end
    staged = pageable & near & during & (trace.kind[call] == EventKind.RUNTIME)
    return np.asarray(call[staged], np.int64)


def host_nodes(
    trace: Trace, rows: I64, lane_of_track: I64, launches: I64, syncs: I64, steps: StepRanges
) -> HostNodes:
    """The host nodes of every lane (module docstring): ``rows`` the host events,
    ``launches`` the calls that launched work, ``syncs`` the calls that waited for it."""
    lane = lane_of_track[trace.track[rows]]
    n_lanes = int(lane_of_track.max()) + 1 if len(lane_of_track) else 0
    first = np.full(n_lanes, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n_lanes, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, lane, trace.start_ns[rows])
    np.maximum.at(last, lane, trace.end_ns[rows])
    used = np.flatnonzero(first <= last)
    cut_lane = [used, used]
    cut_time = [first[used], last[used]]
    for calls, ends in ((launches, False), (syncs, True)):
        cut_lane.append(lane_of_track[trace.track[calls]])
        cut_time.append(trace.start_ns[calls])
        if ends:
            cut_lane.append(lane_of_track[trace.track[calls]])
            cut_time.append(trace.end_ns[calls])
    step_lane = lane_of_track[steps.track]
    cut_lane += [step_lane, step_lane]
    cut_time += [steps.start, steps.end]
    cuts, _ = unique_rows(
        np.stack([np.concatenate(cut_lane), np.concatenate(cut_time)], axis=1).astype(np.int64)
    )
    cuts = cuts[cuts[:, 0] >= 0]
    inside = (cuts[:, 1] >= first[cuts[:, 0]]) & (cuts[:, 1] <= last[cuts[:, 0]])
    cuts = cuts[inside]
    return _nodes_between(cuts, lane_of_track, trace, syncs)


def _nodes_between(cuts: I64, lane_of_track: I64, trace: Trace, syncs: I64) -> HostNodes:
    """A START node at each lane's first cut, then a node between each two cuts of a lane;
    the node that ends where a sync call ends is that sync's."""
    lane, time = cuts[:, 0], cuts[:, 1]
    opens = np.concatenate(([True], lane[1:] != lane[:-1])) if len(lane) else np.zeros(0, bool)
    # per cut: the node that ends there (a START at a lane's first cut)
    kind = np.where(opens, START, HOST).astype(np.int8)
    start = np.where(opens, time, np.concatenate(([0], time[:-1])) if len(time) else time)
    nodes = HostNodes(lane, start, time.copy(), kind, np.full(len(time), -1), lane_of_track)
    at = nodes.ending_at(trace.track[syncs].astype(np.int64), trace.end_ns[syncs])
    ok = at >= 0
    ok[ok] = nodes.kind[at[ok]] == HOST  # the call's start is a cut: its node is the call
    at, calls = at[ok], syncs[ok]
    nodes.kind[at] = SYNC
    nodes.row[at] = calls
    return nodes
