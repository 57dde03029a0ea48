"""The GPU side of a step's dependency graph (:mod:`perflab.analysis.critical_path`): a node per
kernel, copy, memset or collective, each stream a lane in start order, and the edges that tie
GPU work to the host and to other streams.

- Launch: work may start only after the runtime call that launched it began (by correlation
  id; a ``cudaGraphLaunch`` launches every kernel of its graph, which share its id), plus the
  device's launch latency.
- Syncs: a sync call returns only after the work it waits for ends: a copy call that blocked
  waits for its copy; a ``cudaStreamSynchronize`` for the last work launched on its stream
  before it (the stream named by the trace's ``Stream Sync`` event; without one, the stream
  whose last work ended last before the call returned); a device or context sync for the last
  work of every stream; an event sync for the work that ended last while it waited.
- Cross-stream waits: where the trace has ``Stream Wait Event`` records, the first work
  launched on the waiting stream after the ``cudaStreamWaitEvent`` call waits for the last work
  launched on another stream before the ``cudaEventRecord`` that preceded the call on its
  thread. Elsewhere a wait is inferred: work that started later than its stream and its launch
  explain, within 10 us of the end of work on another stream of its device, waits for that work.

Defaults, per trace: the launch latency is the median time from a launch call's start to its
work's start where the stream was idle when the call began; the stream gap is the median time
between two works of a stream where the second was queued before the first ended.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import is_comm_name
from perflab.analysis.critical_host import SYNC, HostNodes
from perflab.analysis.host_stacks import last_at_or_before
from perflab.analysis.idle_classify import call_name
from perflab.model.trace import GPU_WORK_KINDS, EventKind, Trace, TrackKind, distinct

I64 = npt.NDArray[np.int64]

KERNEL, COPY, COLLECTIVE, ARRIVE, TRANSFER = 3, 4, 5, 6, 7
# edge kinds
LAUNCH, SYNC_WAIT, STREAM_WAIT, INFERRED_WAIT, PEER = 0, 1, 2, 3, 4
COINCIDE_NS = 10_000  # a start this soon after another stream's end is taken to wait for it
EXPLAIN_SLACK_NS = 1_000  # a start this much later than its stream and launch explain
WAIT_EVENT = "Stream Wait Event"
_DEVICE_SYNCS = frozenset({"cudadevicesynchronize", "cuctxsynchronize"})
_RECORD_CALLS = frozenset({"cudaeventrecord", "cueventrecord", "cudaeventrecordwithflags"})


@dataclass
class TiedCollectives:
    """Collectives matched across ranks: their kernels' rows in this trace, sorted, and per
    kernel the moment its last rank arrived (this trace's clock) and the instance."""

    rows: I64
    peak: I64
    instance: I64


@dataclass
class GpuNodes:
    """One trace's GPU nodes, sorted by (track, start); ``work`` the GPU work rows in that
    order, ``first``/``last`` per work its first and last node (a matched collective has two:
    its arrival, of no length, and its transfer from the last rank's arrival to its end)."""

    lane: I64
    start: I64
    end: I64
    kind: npt.NDArray[np.int8]
    row: I64
    work: I64
    first: I64
    last: I64

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class Edges:
    """Edges of a graph: source and destination nodes and the kind of each."""

    src: I64
    dst: I64
    kind: npt.NDArray[np.int8]

    @staticmethod
    def of(src: I64, dst: I64, kind: int) -> Edges:
        return Edges(src, dst, np.full(len(src), kind, np.int8))

    @staticmethod
    def join(parts: list[Edges]) -> Edges:
        return Edges(
            np.concatenate([p.src for p in parts]).astype(np.int64),
            np.concatenate([p.dst for p in parts]).astype(np.int64),
            np.concatenate([p.kind for p in parts]).astype(np.int8),
        )


def gpu_work(trace: Trace) -> I64:
    """Kernels, copies and memsets on GPU tracks, sorted by (track, start, row)."""
    on_gpu = trace.tracks["kind"][trace.track] == TrackKind.GPU if len(trace) else None
    mask = trace.mask(*GPU_WORK_KINDS)
    if on_gpu is not None:
        mask &= on_gpu
    rows = np.flatnonzero(mask)
    return rows[np.lexsort((rows, trace.start_ns[rows], trace.track[rows]))]


def gpu_nodes(trace: Trace, work: I64, split: TiedCollectives) -> GpuNodes:
    """The nodes of ``work`` (see :class:`GpuNodes`)."""
    kind = np.full(len(work), KERNEL, np.int8)
    kind[trace.kind[work] != EventKind.KERNEL] = COPY
    comm = is_comm_name(trace.strings)[trace.name[work]] if trace.strings else np.zeros(0, bool)
    kind[comm & (trace.kind[work] == EventKind.KERNEL)] = COLLECTIVE
    at = np.searchsorted(split.rows, work)
    is_split = np.zeros(len(work), bool)
    if len(split.rows):
        is_split = split.rows[np.minimum(at, len(split.rows) - 1)] == work
    counts = 1 + is_split.astype(np.int64)
    last = np.cumsum(counts) - 1
    first = last - is_split
    start, end = trace.start_ns[work], trace.end_ns[work]
    node_start = np.repeat(start, counts)
    node_end = np.repeat(end, counts)
    node_kind = np.repeat(kind, counts)
    split_at = np.flatnonzero(is_split)
    peak = split.peak[at[split_at]]
    node_end[first[split_at]] = start[split_at]  # the arrival has no length
    node_kind[first[split_at]] = ARRIVE
    node_start[last[split_at]] = np.clip(peak, start[split_at], end[split_at])
    node_kind[last[split_at]] = TRANSFER
    return GpuNodes(
        np.repeat(trace.track[work].astype(np.int64), counts),
        node_start,
        node_end,
        node_kind,
        np.repeat(work, counts),
        work,
        first,
        last,
    )


def previous_on_track(trace: Trace, work: I64) -> I64:
    """Per work (sorted by track): the position of the work before it on its track, -1
    for the first."""
    track = trace.track[work]
    prev = np.arange(len(work)) - 1
    first = np.concatenate(([True], track[1:] != track[:-1])) if len(work) else np.zeros(0, bool)
    return np.where(first, -1, prev)


def launch_defaults(
    trace: Trace, work: I64, call: I64, waited: npt.NDArray[np.bool_]
) -> tuple[int, int]:
    """The trace's launch latency and stream gap (module docstring), in ns (0 without
    samples), from the work that ``waited`` for no other stream."""
    prev = previous_on_track(trace, work)
    start = trace.start_ns[work]
    prev_end = np.where(prev >= 0, trace.end_ns[work[np.maximum(prev, 0)]], np.iinfo(np.int64).min)
    has_call = call >= 0
    call_start = np.where(has_call, trace.start_ns[np.maximum(call, 0)], 0)
    idle = has_call & ~waited & (prev_end <= call_start) & (start >= call_start)
    latency = _median(start[idle] - call_start[idle])
    queued = ~waited & (prev >= 0) & (~has_call | (call_start + latency <= prev_end))
    gap = _median(np.maximum(start[queued] - prev_end[queued], 0))
    return latency, gap


def _median(values: I64) -> int:
    return round(float(np.median(values))) if len(values) else 0


def launch_edges(trace: Trace, g: GpuNodes, host: HostNodes, call: I64) -> Edges:
    """Per launched work: the host node that ends where its call begins -> its first node."""
    has = np.flatnonzero(call >= 0)
    src = host.ending_at(trace.track[call[has]].astype(np.int64), trace.start_ns[call[has]])
    ok = src >= 0
    return Edges.of(src[ok], g.first[has[ok]], LAUNCH)


def sync_edges(trace: Trace, g: GpuNodes, host: HostNodes, call: I64) -> Edges:
    """The work each sync node waited for -> the sync node (module docstring)."""
    node = np.flatnonzero(host.kind == SYNC)
    rows = host.row[node]
    # a copy call that blocked waits for its own copy
    copies = np.flatnonzero((call >= 0) & np.isin(call, rows))
    copy_src = g.last[copies]
    by_row = np.argsort(rows, kind="stable")
    copy_dst = node[by_row[np.searchsorted(rows, call[copies], sorter=by_row)]]
    others = node[~np.isin(rows, call[copies])]
    src, dst = _waited_for(trace, g, call, host.row[others])
    return Edges.join(
        [Edges.of(copy_src, copy_dst, SYNC_WAIT), Edges.of(src, others[dst], SYNC_WAIT)]
    )


def _waited_for(trace: Trace, g: GpuNodes, call: I64, syncs: I64) -> tuple[I64, I64]:
    """(GPU node, index into ``syncs``) pairs: the work each explicit sync waited for."""
    launched = np.flatnonzero(call >= 0)
    tracks = distinct(trace.track[g.work[launched]].astype(np.int64))
    if len(syncs) == 0 or len(tracks) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    launch_time = trace.start_ns[call[launched]]
    work_track = trace.track[g.work[launched]].astype(np.int64)
    order = np.lexsort((launch_time, work_track))
    launched, launch_time, work_track = launched[order], launch_time[order], work_track[order]
    gpu_sync = _gpu_sync_events(trace)
    s_start, s_end = trace.start_ns[syncs], trace.end_ns[syncs]
    # per (sync, track): the last work launched on the track before the sync began
    q_sync = np.repeat(np.arange(len(syncs)), len(tracks))
    q_track = np.tile(tracks, len(syncs))
    found = last_at_or_before(work_track, launch_time, q_track, s_start[q_sync])
    work_pos = np.where(found >= 0, launched[np.maximum(found, 0)], -1)
    end = np.where(work_pos >= 0, trace.end_ns[g.work[np.maximum(work_pos, 0)]], -1)
    ok = (work_pos >= 0) & (end <= s_end[q_sync])
    src: list[int] = []
    dst: list[int] = []
    for i, row in enumerate(syncs.tolist()):
        mine = np.flatnonzero(ok & (q_sync == i))
        if len(mine) == 0:
            continue
        event = gpu_sync.get(int(trace.correlation[row]), (None, -1))
        name, event_track = event
        if call_name(trace.strings[trace.name[row]]) in _DEVICE_SYNCS or name == "Context Sync":
            picked = mine
        elif name == "Stream Sync" and event_track >= 0:
            picked = mine[q_track[mine] == event_track]
        else:  # the stream (or event) it waited for: what ended last before it returned
            picked = mine[[int(np.argmax(end[mine]))]]
        src += g.last[work_pos[picked]].tolist()
        dst += [i] * len(picked)
    return np.asarray(src, np.int64), np.asarray(dst, np.int64)


def _gpu_sync_events(trace: Trace) -> dict[int, tuple[str, int]]:
    """The GPU's records of sync calls, by correlation id: (name, track)."""
    on_gpu = trace.tracks["kind"][trace.track] == TrackKind.GPU if len(trace) else None
    if on_gpu is None:
        return {}
    rows = np.flatnonzero((trace.kind == EventKind.SYNC) & on_gpu & (trace.correlation >= 0))
    return {
        int(c): (trace.strings[n], int(t))
        for c, n, t in zip(
            trace.correlation[rows].tolist(),
            trace.name[rows].tolist(),
            trace.track[rows].tolist(),
            strict=True,
        )
    }


def stream_wait_edges(trace: Trace, g: GpuNodes, call: I64) -> Edges:
    """Waits the trace records (``Stream Wait Event``; module docstring)."""
    on_gpu = trace.tracks["kind"][trace.track] == TrackKind.GPU if len(trace) else None
    if on_gpu is None:
        return Edges.of(np.zeros(0, np.int64), np.zeros(0, np.int64), STREAM_WAIT)
    names = np.array([s == WAIT_EVENT for s in trace.strings], dtype=bool)
    waits = np.flatnonzero((trace.kind == EventKind.SYNC) & on_gpu & names[trace.name])
    if len(waits) == 0:
        return Edges.of(np.zeros(0, np.int64), np.zeros(0, np.int64), STREAM_WAIT)
    runtime = np.flatnonzero(trace.kind == EventKind.RUNTIME)
    call_of_corr = dict(zip(trace.correlation[runtime].tolist(), runtime.tolist(), strict=True))
    is_record = np.array([call_name(n) in _RECORD_CALLS for n in trace.strings], dtype=bool)
    records = runtime[is_record[trace.name[runtime]]] if len(trace.strings) else runtime
    launched = np.flatnonzero(call >= 0)
    by_thread = _launches_by_thread(trace, g, call, launched)
    src: list[int] = []
    dst: list[int] = []
    for w in waits.tolist():
        wait_call = call_of_corr.get(int(trace.correlation[w]))
        if wait_call is None:
            continue
        thread, at = int(trace.track[wait_call]), int(trace.start_ns[wait_call])
        mine = records[trace.track[records] == thread]
        before = mine[trace.start_ns[mine] <= at]
        waiting = int(trace.track[w])
        if len(before) == 0:
            continue
        recorded_at = int(trace.start_ns[before].max())
        source = _last_launched_elsewhere(by_thread.get(thread), recorded_at, waiting, trace, g)
        target = _first_launched_on(trace, g, call, launched, waiting, at)
        if source >= 0 and target >= 0:
            src.append(int(g.last[source]))
            dst.append(int(g.first[target]))
    return Edges.of(np.asarray(src, np.int64), np.asarray(dst, np.int64), STREAM_WAIT)


def _launches_by_thread(
    trace: Trace, g: GpuNodes, call: I64, launched: I64
) -> dict[int, tuple[I64, I64]]:
    """Per launching thread: its launched work (positions in ``g.work``) and their launch
    times, by launch time."""
    thread = trace.track[call[launched]]
    out = {}
    for t in distinct(thread.astype(np.int64)).tolist():
        pos = launched[thread == t]
        times = trace.start_ns[call[pos]]
        order = np.argsort(times, kind="stable")
        out[t] = (pos[order], times[order])
    return out


def _last_launched_elsewhere(
    launches: tuple[I64, I64] | None, t: int, track: int, trace: Trace, g: GpuNodes
) -> int:
    """The last work launched (by ``launches``' thread) at or before ``t`` on another
    track than ``track`` of the same device; -1 if none."""
    if launches is None:
        return -1
    pos, times = launches
    device = trace.tracks["device"][track]
    k = int(np.searchsorted(times, t, side="right")) - 1
    while k >= 0:
        other = int(trace.track[g.work[pos[k]]])
        if other != track and trace.tracks["device"][other] == device:
            return int(pos[k])
        k -= 1
    return -1


def _first_launched_on(
    trace: Trace, g: GpuNodes, call: I64, launched: I64, track: int, t: int
) -> int:
    """The first work on ``track`` launched at or after ``t``; -1 if none."""
    mine = launched[trace.track[g.work[launched]] == track]
    times = trace.start_ns[call[mine]]
    later = np.flatnonzero(times >= t)
    if len(later) == 0:
        return -1
    return int(mine[later[np.argmin(times[later])]])


def inferred_wait_edges(
    trace: Trace, g: GpuNodes, call: I64, latency: int, gap: int, explained: I64
) -> Edges:
    """Waits inferred from coincidence (module docstring); ``explained`` per work: the
    latest recorded wait already known for it (-inf: none)."""
    work = g.work
    start, end = trace.start_ns[work], trace.end_ns[work]
    prev = previous_on_track(trace, work)
    low = np.iinfo(np.int64).min // 4
    ready = np.maximum(np.where(prev >= 0, end[np.maximum(prev, 0)] + gap, low), explained)
    ready = np.maximum(
        ready, np.where(call >= 0, trace.start_ns[np.maximum(call, 0)] + latency, low)
    )
    open_ = np.flatnonzero(start - ready > EXPLAIN_SLACK_NS)
    if len(open_) == 0:
        return Edges.of(np.zeros(0, np.int64), np.zeros(0, np.int64), INFERRED_WAIT)
    track = trace.track[work].astype(np.int64)
    device = trace.tracks["device"][track]
    best = np.full(len(open_), -1, np.int64)
    best_end = np.maximum(start[open_] - COINCIDE_NS, ready[open_])
    for t in distinct(track).tolist():
        items = np.flatnonzero(track == t)
        by_end = items[np.argsort(end[items], kind="stable")]
        queries = np.flatnonzero((track[open_] != t) & (device[open_] == device[items[0]]))
        if len(queries) == 0:
            continue
        found = last_at_or_before(
            np.zeros(len(by_end), np.int64),
            end[by_end],
            np.zeros(len(queries), np.int64),
            start[open_[queries]],
        )
        hit = found >= 0
        cand = np.where(hit, by_end[np.maximum(found, 0)], -1)
        cand_end = np.where(hit, end[np.maximum(cand, 0)], low)
        better = hit & (cand_end >= best_end[queries])
        best[queries[better]] = cand[better]
        best_end[queries[better]] = cand_end[better]
    found_at = np.flatnonzero(best >= 0)
    return Edges.of(g.last[best[found_at]], g.first[open_[found_at]], INFERRED_WAIT)
