"""The rules behind :mod:`perflab.analysis.idle_causes` (read its docstring first): gaps in
each device's busy time, the launch that ended each, the cause code of each gap, and the host
events that serve as evidence. All vectorised: a few sorts of the trace's rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from perflab.analysis.copies import MEMORY_KINDS, host_memory_codes
from perflab.analysis.host_stacks import (
    HostStacks,
    last_at_or_before,
)
from perflab.model.trace import (
    GPU_WORK_KINDS,
    MEMCPY_DIRECTIONS,
    EventKind,
    Trace,
    TrackKind,
    distinct,
    kind_mask,
)
from perflab.model.trace_keys import device_pairs

I64 = npt.NDArray[np.int64]

CAUSES = (
    "host-busy",
    "after-sync",
    "launch-overhead",
    "launch-blocked",
    "gpu-dependency",
    "unknown",
)
HOST_BUSY, AFTER_SYNC, LAUNCH_OVERHEAD, LAUNCH_BLOCKED, GPU_DEPENDENCY, UNKNOWN = range(len(CAUSES))

SYNC_SLACK_NS = 10_000  # a sync "returned at about the gap's start": within 10 us of it
LAUNCH_PATH_NS = 10_000  # host time between two launches that is only the launch path
QUEUED_START_NS = 5_000  # a queued same-stream start this soon is the device's own latency
QUEUE_WAIT_NS = 50_000  # work that sat queued on an idle GPU this long waited on the GPU side
# a launch call returns in microseconds; one this long waited inside the launch path (a full
# launch queue, the driver, lazy loading of a module), not on the thread's own work
LAUNCH_BLOCKED_NS = 100_000
TOP_WORK = 3  # host events named per gap, longest first

# host events that say what a thread did (runtime calls say only what it asked of CUDA)
HOST_WORK_KINDS = (EventKind.CPU_OP, EventKind.PYTHON, EventKind.ANNOTATION, EventKind.OTHER)
_SYNC_CALL = re.compile(r"^(cuda|cu)(stream|device|event|ctx)synchronize$")
_BLOCKING_COPY_CALL = re.compile(r"^(cudamemcpy(2d|3d)?(peer)?(tosymbol|fromsymbol)?|cumemcpy\w*)$")
SYNC_OPS = frozenset({"aten::item", "aten::_local_scalar_dense"})
# copy directions with a host side (and "unknown"): the ones a copy call can block on
_HOST_DIRECTIONS = [MEMCPY_DIRECTIONS.index(d) for d in ("unknown", "HtoD", "DtoH", "HtoH")]
_VERSION = re.compile(r"_v\d+$")  # nsys names calls with their API version: _v3020
_STREAM_WAIT = re.compile(r"^(cuda|cu)streamwaitevent$")
_LAUNCH_CALL = re.compile(r"^(cuda|cu)(launch\w*|graphlaunch)$")


def call_name(name: str) -> str:
    """A runtime call's name without nsys's version suffix, lower-case:
    ``"cudaStreamSynchronize_v3020"`` -> ``"cudastreamsynchronize"``."""
    bare = name
    while _VERSION.search(bare):
        bare = _VERSION.sub("", bare)
    return bare.lower()


@dataclass
class GapColumns:
    """Per gap (numpy columns of one length): device pair, start, end, the work before and
    after (event rows), the next work's launch call, its thread (track), cause code, the
    sync and copy found (rows, -1 if none), the thread's previous launch, the stretch of
    host time examined for evidence with how much of it recorded events cover, and how long
    launch calls of at least :data:`LAUNCH_BLOCKED_NS` ran between the GPU going idle and
    the next work's launch returning, with the longest of them (-1 if none, or where that
    is not the cause)."""

    device: I64
    start: I64
    end: I64
    prev: I64
    next: I64
    launch: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    thread: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    cause: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(0, np.int8))
    sync: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_after: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    copy: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    previous_launch: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    stream_wait: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    host_from: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    host_to: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    traced_ns: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    blocked_ns: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    blocked_call: I64 = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.start)

    def take(self, rows: npt.NDArray[np.integer]) -> GapColumns:
        n = len(self)  # columns not filled in yet (empty) stay empty
        return GapColumns(**{k: v[rows] if len(v) == n else v for k, v in vars(self).items()})


@dataclass
class HostEvidence:
    """Host events named as evidence: per entry the gap (index), the event row, its role
    (``within`` outermost covering, ``inside`` innermost covering, ``work`` ran in the
    stretch) and how much of the stretch it covers (ns)."""

    gap: I64
    row: I64
    index: I64  # in HostStacks' order
    role: npt.NDArray[np.int8]
    overlap: I64


WITHIN, INSIDE, WORK = 0, 1, 2
_ROLE_NAMES = ("within", "inside", "work")


def find_gaps(trace: Trace, min_ns: int = 0, window: tuple[int, int] | None = None) -> GapColumns:
    """Every gap longer than ``min_ns`` in each device's busy time (union of its kernels,
    copies and memsets), with the work before (the event whose end began the gap) and after
    (the first to start when it ended); with ``window``, only gaps inside it."""
    work = trace.mask(*GPU_WORK_KINDS) & (trace.event_device() >= 0)
    _, pair_of_track = device_pairs(trace)
    dev_key = pair_of_track[trace.track]
    parts: list[tuple[I64, ...]] = []
    for key in distinct(dev_key[work]).tolist():
        rows = np.flatnonzero(work & (dev_key == key))
        rows = rows[np.argsort(trace.start_ns[rows], kind="stable")]
        s, e = trace.start_ns[rows], _ends(trace, rows)
        reach = np.maximum.accumulate(e)
        at = np.flatnonzero(s[1:] - reach[:-1] > min_ns)
        g0, g1 = reach[at], s[at + 1]
        # reach is non-decreasing: where it first took its value is the event that set it
        prev = rows[np.searchsorted(reach, g0, side="left")]
        parts.append((np.full(len(at), key, np.int64), g0, g1, prev, rows[at + 1]))
    if not parts:
        empty = np.zeros(0, np.int64)
        return GapColumns(empty, empty, empty, empty, empty)
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    return GapColumns(*cols)


def _named(trace: Trace, rows: I64, test: Callable[[str], object]) -> I64:
    """The rows among ``rows`` whose name passes ``test``, decided once per distinct name."""
    if len(rows) == 0:
        return rows
    ids = trace.name[rows]
    names = distinct(ids)
    passed = np.zeros(len(trace.strings), dtype=bool)
    passed[names] = [bool(test(trace.strings[i])) for i in names.tolist()]
    return rows[passed[ids]]


def _ends(trace: Trace, rows: I64) -> I64:
    """End times of ``rows`` (Trace.end_ns adds the whole columns)."""
    return np.asarray(trace.start_ns[rows] + trace.dur_ns[rows], dtype=np.int64)


def _pick_end(trace: Trace, rows: I64, fill: int = -1) -> I64:
    """End of each of ``rows`` where rows >= 0, ``fill`` elsewhere."""
    at = np.maximum(rows, 0)
    return np.where(rows >= 0, trace.start_ns[at] + trace.dur_ns[at], fill)


def _on_cpu(trace: Trace) -> npt.NDArray[np.bool_]:
    if len(trace) == 0:
        return np.zeros(0, dtype=bool)
    return np.asarray(trace.tracks["kind"][trace.track] == TrackKind.CPU)


def sync_calls(trace: Trace, links: I64) -> I64:
    """The rows of host calls that wait for the GPU (see the module docstring)."""
    on_cpu = _on_cpu(trace)
    runtime = np.flatnonzero((trace.kind == EventKind.RUNTIME) & on_cpu)
    ops = np.flatnonzero((trace.kind == EventKind.CPU_OP) & on_cpu)
    calls = np.concatenate(
        [
            _named(trace, runtime, lambda n: _SYNC_CALL.match(call_name(n))),
            _named(trace, ops, lambda n: n in SYNC_OPS),
            _blocking_copy_calls(trace, links),
        ]
    )
    return distinct(calls[on_cpu[calls]])


def _blocking_copy_calls(trace: Trace, links: I64) -> I64:
    """Copy calls that blocked the host: synchronous by name, or returned after their copy
    finished when the copy touches host memory that is not pinned (a device-to-device or
    pinned copy that finishes during its own call did not make the call wait)."""
    copies = np.flatnonzero((trace.kind == EventKind.MEMCPY) & (links >= 0))
    if len(copies) == 0:
        return copies
    call = links[copies]
    sync_named = np.isin(
        call, _named(trace, call, lambda n: _BLOCKING_COPY_CALL.match(call_name(n)))
    )
    pinned = host_memory_codes(trace)[copies] == MEMORY_KINDS.index("pinned")
    direction = np.zeros(len(trace), dtype=np.int64)
    direction[trace.memcpy["event"]] = trace.memcpy["direction"]
    touches_host = np.isin(direction[copies], _HOST_DIRECTIONS)
    waited = (_ends(trace, call) >= _ends(trace, copies)) & touches_host & ~pinned
    return np.asarray(call[sync_named | waited], dtype=np.int64)


def _first_ending_from(rows: I64, trace: Trace, thread: I64, t: I64) -> I64:
    """Per query: the event of ``rows`` on ``thread`` that ends first at or after ``t``."""
    found = last_at_or_before(trace.track[rows].astype(np.int64), -_ends(trace, rows), thread, -t)
    return _rows_of(rows, found)


def _rows_of(rows: I64, found: I64) -> I64:
    """``rows[found]`` where found >= 0, -1 elsewhere (rows may be empty)."""
    if len(rows) == 0:
        return np.full(len(found), -1, dtype=np.int64)
    return np.where(found >= 0, rows[np.maximum(found, 0)], -1)


def _last_before(rows: I64, trace: Trace, thread: I64, t: I64, by_end: bool = True) -> I64:
    """Per query: the event of ``rows`` on ``thread`` that ends (or starts) last at or
    before ``t``."""
    time = _ends(trace, rows) if by_end else trace.start_ns[rows]
    found = last_at_or_before(trace.track[rows].astype(np.int64), time, thread, t)
    return _rows_of(rows, found)


def _pick(values: npt.NDArray[np.integer], rows: I64, fill: int = -1) -> I64:
    """``values[rows]`` where rows >= 0, ``fill`` elsewhere."""
    return np.where(rows >= 0, values[np.maximum(rows, 0)], fill)


def classify(trace: Trace, gaps: GapColumns, links: I64, evidence: bool = True) -> GapColumns:
    """Fill in each gap's launch, thread, cause and the rows its evidence names
    (``links``: :func:`perflab.model.trace_keys.launch_links` of the trace); without
    ``evidence``, the copy waited for and the stream waits are not looked up (-1)."""
    g0, g1 = gaps.start, gaps.end
    launch = links[gaps.next]
    has = launch >= 0
    thread = np.where(has, trace.track[np.maximum(launch, 0)], -1).astype(np.int64)
    ls, le = _pick(trace.start_ns, launch), _pick_end(trace, launch)
    syncs = sync_calls(trace, links)
    # a blocking copy call queues its copy when it begins, then waits for it
    queued_at = np.where(has & np.isin(launch, syncs), ls, le)

    queued = has & (queued_at <= g0)
    # launched during the gap, yet started long after its launch returned: the GPU held it
    waited = has & (g1 - np.maximum(queued_at, g0) > QUEUE_WAIT_NS)
    same_stream = trace.track[gaps.prev] == trace.track[gaps.next]
    device_start = queued & same_stream & (g1 - g0 <= QUEUED_START_NS)

    sync, sync_after = _syncs_at_gap_start(trace, syncs, thread, g0, ls, le)
    sync = np.where(has & (sync != launch), sync, -1)
    sync_after = np.where(sync >= 0, sync_after, -1)

    launches = distinct(links[links >= 0])
    previous = _last_before(launches, trace, thread, ls - 1, by_end=False)
    previous = np.where(previous == launch, -1, previous)
    back_to_back = (previous >= 0) & (ls - _pick_end(trace, previous, 0) <= LAUNCH_PATH_NS)
    under_way = has & (ls <= g0) & (le > g0)

    # long launch calls for most of the time from g0 to the next launch's return: blocked
    returned = np.minimum(np.maximum(le, g0), g1)
    blocked_ns, blocked_call = _long_launch_calls(
        trace, _launch_calls(trace, launches, syncs), thread, g0, returned
    )
    blocked = has & (returned > g0) & (2 * blocked_ns >= returned - g0)

    recorded = _records_host_work(trace)[np.maximum(thread, 0)] & (thread >= 0)
    cause = np.select(
        [~has, device_start, queued | waited, sync >= 0, blocked, under_way | back_to_back],
        [UNKNOWN, LAUNCH_OVERHEAD, GPU_DEPENDENCY, AFTER_SYNC, LAUNCH_BLOCKED, LAUNCH_OVERHEAD],
        default=np.where(recorded, HOST_BUSY, UNKNOWN),
    ).astype(np.int8)

    host_from = np.maximum(
        g0, np.maximum(_pick_end(trace, sync, 0), _pick_end(trace, sync_after, 0))
    )
    examined = has & np.isin(cause, (HOST_BUSY, AFTER_SYNC, LAUNCH_BLOCKED, UNKNOWN))
    host_to = np.where(examined, np.minimum(np.maximum(ls, host_from), g1), host_from)
    return GapColumns(
        device=gaps.device,
        start=g0,
        end=g1,
        prev=gaps.prev,
        next=gaps.next,
        launch=launch,
        thread=thread,
        cause=cause,
        sync=sync,
        sync_after=sync_after,
        copy=_copy_waited_for(trace, gaps, sync, links) if evidence else np.full_like(sync, -1),
        previous_launch=previous,
        stream_wait=(
            _stream_wait(trace, thread, ls, previous, queued | waited)
            if evidence
            else np.full_like(sync, -1)
        ),
        host_from=host_from,
        host_to=host_to,
        traced_ns=np.zeros(len(g0), np.int64),
        blocked_ns=blocked_ns,
        blocked_call=np.where(cause == LAUNCH_BLOCKED, blocked_call, -1),
    )


def _launch_calls(trace: Trace, launches: I64, syncs: I64) -> I64:
    """The runtime calls that launch GPU work: those linked to work (``launches``) and
    those named so (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch...), less the ones
    that wait for the GPU (``syncs``: a blocking copy waits by design)."""
    runtime = np.flatnonzero((trace.kind == EventKind.RUNTIME) & _on_cpu(trace))
    named = _named(trace, runtime, lambda n: _LAUNCH_CALL.match(call_name(n)))
    calls = distinct(np.concatenate([launches, named]))
    return np.asarray(calls[~np.isin(calls, syncs)], dtype=np.int64)


def _long_launch_calls(trace: Trace, calls: I64, thread: I64, a: I64, b: I64) -> tuple[I64, I64]:
    """Per stretch ``[a, b)`` of ``thread``: how long launch calls of at least
    :data:`LAUNCH_BLOCKED_NS` ran in it (at most its length), and the one of them that ran
    longest in it (-1 if none). Such calls are few: they are listed per stretch."""
    covered = np.zeros(len(a), np.int64)
    longest = np.full(len(a), -1, np.int64)
    long_calls = calls[trace.dur_ns[calls] >= LAUNCH_BLOCKED_NS]
    track = trace.track[long_calls]
    for th in distinct(track).tolist():
        mine = long_calls[track == th]
        mine = mine[np.argsort(trace.start_ns[mine], kind="stable")]
        reach = np.maximum.accumulate(_ends(trace, mine))  # rises with the starts
        q = np.flatnonzero((thread == th) & (b > a))
        first = np.searchsorted(reach, a[q], side="right")  # the first that ends after a
        count = np.maximum(np.searchsorted(trace.start_ns[mine], b[q]) - first, 0)
        query = np.repeat(np.arange(q.size), count)
        rows = mine[
            np.arange(query.size)
            - np.repeat(np.cumsum(count) - count, count)
            + np.repeat(first, count)
        ]
        ends = np.minimum(_ends(trace, rows), b[q][query])
        ran = np.maximum(ends - np.maximum(trace.start_ns[rows], a[q][query]), 0)
        total = np.bincount(query, weights=ran, minlength=q.size).astype(np.int64)
        covered[q] = np.minimum(total, b[q] - a[q])
        order = np.lexsort((-ran, query))  # per stretch, the longest first
        lead = order[np.r_[True, query[order][1:] != query[order][:-1]]] if order.size else order
        longest[q[query[lead]]] = rows[lead]
    return covered, longest


def _syncs_at_gap_start(
    trace: Trace, syncs: I64, thread: I64, g0: I64, ls: I64, le: I64
) -> tuple[I64, I64]:
    """Per gap: the synchronising call its thread was blocked in when the GPU went idle
    (the first to end at or after ``g0 - SYNC_SLACK_NS``, begun by ``g0 + SYNC_SLACK_NS``,
    ended before the launch returned, and, if it returned before ``g0``, lasting at least
    ``SYNC_SLACK_NS``; -1 if none), and a sync that followed it at once
    (begun within the slack of its end, ending later, before the launch; -1 if none)."""
    start = trace.start_ns
    sync = _first_ending_from(syncs, trace, thread, g0 - SYNC_SLACK_NS)
    sync_end = _pick_end(trace, sync)
    # one that returned before the GPU went idle waited for it only if it lasted a while: a
    # 0.3 us aten::_local_scalar_dense that returned while kernels still ran did not block
    waited = (sync_end >= g0) | (sync_end - _pick(start, sync) >= SYNC_SLACK_NS)
    blocked = (sync >= 0) & (_pick(start, sync) <= g0 + SYNC_SLACK_NS) & (sync_end <= le) & waited
    sync = np.where(blocked, sync, -1)
    after = _last_before(syncs, trace, thread, ls)
    follows = (
        blocked
        & (after >= 0)
        & (after != sync)
        & (_pick(start, after) <= sync_end + SYNC_SLACK_NS)
        & (_pick_end(trace, after) > sync_end)
    )
    return sync, np.where(follows, after, -1)


def _stream_wait(
    trace: Trace, thread: I64, ls: I64, previous: I64, queued: npt.NDArray[np.bool_]
) -> I64:
    """Per queued gap: a stream-wait call its thread made between its previous launch and
    the next work's launch (-1 if none)."""
    runtime = np.flatnonzero(trace.kind == EventKind.RUNTIME)
    waits = _named(trace, runtime, lambda n: _STREAM_WAIT.match(call_name(n)))
    found = _last_before(waits, trace, thread, ls)
    since_previous = _pick(trace.start_ns, found) >= _pick_end(trace, previous, 0)
    return np.where(queued & (found >= 0) & since_previous, found, -1)


def _records_host_work(trace: Trace) -> npt.NDArray[np.bool_]:
    """Per track: whether it holds host work other than runtime calls (a CPU op, Python
    function, user or NVTX range) that lasts."""
    work = kind_mask(trace.kind, HOST_WORK_KINDS) & (trace.dur_ns > 0) & _on_cpu(trace)
    out = np.zeros(len(trace.tracks), dtype=bool)
    out[trace.track[work]] = True
    return out


def _copy_waited_for(trace: Trace, gaps: GapColumns, sync: I64, links: I64) -> I64:
    """Per gap with a sync: the copy it waited for: the blocking copy call's own copy, the
    work before the gap if it is a copy, or the copy on the device that finished last
    while the sync was waiting."""
    copy = np.full(len(sync), -1, dtype=np.int64)
    copies = np.flatnonzero(trace.kind == EventKind.MEMCPY)
    if len(copies) == 0:
        return copy
    own = np.full(len(trace), -1, dtype=np.int64)
    linked = copies[links[copies] >= 0]
    own[links[linked]] = linked
    copy = np.where(sync >= 0, own[np.maximum(sync, 0)], -1)
    prev_is_copy = trace.kind[gaps.prev] == EventKind.MEMCPY
    copy = np.where((copy < 0) & (sync >= 0) & prev_is_copy, gaps.prev, copy)
    _, pair_of_track = device_pairs(trace)
    group = pair_of_track[trace.track[copies]].astype(np.int64)
    last = last_at_or_before(group, _ends(trace, copies), gaps.device, gaps.start)
    last = _rows_of(copies, last)
    waited = (last >= 0) & (sync >= 0) & (_pick_end(trace, last) >= _pick(trace.start_ns, sync))
    return np.where((copy < 0) & waited, last, copy)


def host_evidence(gaps: GapColumns, stacks: HostStacks) -> HostEvidence:
    """The host events that say what each gap's thread did over its examined stretch
    [host_from, host_to): the outermost and innermost events covering all of it, and the
    ``TOP_WORK`` longest events directly below those (which partition the recorded time);
    fills ``gaps.traced_ns`` with the time those cover. A few lookups per gap, whatever the
    depth of the nesting."""
    todo = np.flatnonzero((gaps.host_to > gaps.host_from) & (gaps.thread >= 0))
    a, b, thread = gaps.host_from[todo], gaps.host_to[todo], gaps.thread[todo]
    q_new, i_new = stacks.starting_within(thread, a, b)
    covering = _covering_levels(stacks, thread, a, b, q_new, i_new)
    # one lookup for the three levels of every stretch
    found = stacks.at_level(
        np.tile(thread, 3),
        np.tile(a, 3),
        np.concatenate([np.zeros_like(covering), np.maximum(covering - 1, 0), covering]),
    )
    outer, inner, running = np.split(found, 3)
    outer = np.where((covering >= 1) & (outer >= 0), outer, -1)
    inner = np.where((covering >= 2) & (inner >= 0), inner, -1)
    # the work below the covering events: the one running at a, and those starting after
    work_q = np.concatenate([np.flatnonzero(running >= 0), q_new])
    work_i = np.concatenate([running[running >= 0], i_new])
    keep = stacks.depth[work_i] == covering[work_q]
    work_q, work_i = work_q[keep], work_i[keep]
    overlap = np.minimum(stacks.end[work_i], b[work_q]) - np.maximum(
        stacks.start[work_i], a[work_q]
    )
    traced = np.bincount(work_q, weights=np.maximum(overlap, 0), minlength=len(todo))
    gaps.traced_ns[todo] = np.minimum(traced.astype(np.int64), b - a)
    top = _longest_per_query(work_q, overlap)

    full = b - a
    parts = [
        (np.flatnonzero(outer >= 0), outer[outer >= 0], WITHIN, full[outer >= 0]),
        (np.flatnonzero(inner >= 0), inner[inner >= 0], INSIDE, full[inner >= 0]),
        (work_q[top], work_i[top], WORK, overlap[top]),
    ]
    return HostEvidence(
        gap=todo[np.concatenate([p[0] for p in parts])],
        row=stacks.rows[np.concatenate([p[1] for p in parts])],
        index=np.concatenate([p[1] for p in parts]),
        role=np.concatenate([np.full(len(p[0]), p[2], np.int8) for p in parts]),
        overlap=np.concatenate([p[3] for p in parts]).astype(np.int64),
    )


def _covering_levels(
    stacks: HostStacks, thread: I64, a: I64, b: I64, q_new: I64, i_new: I64
) -> I64:
    """Per stretch [a, b): how many events cover all of it. With events nested, that is the
    least of the depth at a, the depth at b - 1 and the depth of every event starting in
    between (an event that ends inside leaves its level empty, or a new event takes it)."""
    ends = stacks.depth_at(np.tile(thread, 2), np.concatenate([a, b - 1]))
    least = np.minimum(ends[: len(a)], ends[len(a) :])
    np.minimum.at(least, q_new, stacks.depth[i_new])
    return np.asarray(least, dtype=np.int64)


def _longest_per_query(query: I64, overlap: I64) -> I64:
    """Indices of the ``TOP_WORK`` entries of longest overlap per query."""
    ranked = np.lexsort((-overlap, query))
    q = query[ranked]
    if len(q) == 0:
        return ranked
    first_of = np.concatenate(([0], np.flatnonzero(q[1:] != q[:-1]) + 1))
    rank = np.arange(len(q)) - np.repeat(first_of, np.diff(np.append(first_of, len(q))))
    return np.asarray(ranked[rank < TOP_WORK], dtype=np.int64)
