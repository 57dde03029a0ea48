"""The dependency graph of a trace or a job (:mod:`perflab.analysis.critical_path` says what it
stands for): every node's recorded start and end on the job's clock, the lanes that order them
(a host lane, a GPU stream), the edges between lanes, and each edge's lag.

A node starts when the last of its inputs is ready: the end of the node before it in its lane
plus the lane's lag, or the end of an edge's source plus the edge's lag; then it runs for its
duration. Each lag is the kind's default (no lag on the host, the stream gap between two works
of a stream, the launch latency after a launch call's start), or less where the recording shows
less; and the input that set a node's recorded start (the binding one: the lane's on a tie)
takes whatever more the recording shows, so that replaying the graph with the recorded
durations gives back every recorded start and end. That extra time is the part of a start that
no dependency explains.

Every edge goes forward in one order of the nodes (recorded start, then host before GPU work
before a collective's last arrival before its transfer, then the node's place in the arrays):
an edge against it is left out, so the graph has no cycle and every replay ends. So is an edge
whose source ended after its destination started, beyond the rounding of the recorded times (1
us; a copy call that returned while its copy's last chunk was in flight may end a little more
before it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.critical_gpu import Edges, GpuNodes, TiedCollectives
from perflab.analysis.critical_host import (
    HOST,
    START,
    SYNC,
    HostNodes,
    StepRanges,
    host_nodes,
    host_rows,
    lane_of_tracks,
    runtime_syncs,
    staged_room,
    step_ranges,
)
from perflab.model.trace import Trace, distinct
from perflab.model.trace_keys import launch_links

I64 = npt.NDArray[np.int64]
INSTANCE = 8
NODE_KINDS = 9
# order of kinds that start at one moment: host, GPU work and arrivals, instances, transfers
TIER = np.array([0, 0, 0, 1, 1, 1, 1, 3, 2], dtype=np.int8)
NO_TIME = np.iinfo(np.int64).min // 4
ROUNDING_NS = 1_000  # times written in microseconds as floats can be this far off each other


@dataclass
class RankGraph:
    """One trace's part of a graph: its host and GPU nodes (host first), edges between them
    (local node numbers), the defaults it measured and its steps."""

    rank: int
    trace: Trace
    offset: int  # added to the trace's times to put them on the job's clock
    host: HostNodes
    gpu: GpuNodes
    edges: Edges
    latency: int
    gap: int
    steps: StepRanges
    step_start_node: I64  # per step: the node that ends where the step begins
    step_end_node: I64  # per step: the host node that ends where its range ends
    gpu_step: I64  # per GPU node: the step whose range holds its launch, -1 if none
    launch_call: I64  # per GPU work (gpu.work order): its launch call row, -1 if none
    split: TiedCollectives  # its collectives matched across a job's ranks

    def __len__(self) -> int:
        return len(self.host) + len(self.gpu)


def rank_graph(
    trace: Trace, rank: int = 0, offset: int = 0, split: gpu.TiedCollectives | None = None
) -> RankGraph:
    """The graph of one trace (``split``: its collectives matched across a job's ranks)."""
    split = split or gpu.TiedCollectives(
        np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    )
    links = launch_links(trace)
    work = gpu.gpu_work(trace)
    call = links[work]
    rows = host_rows(trace)
    lane_of_track = lane_of_tracks(trace, rows)
    call = np.where((call >= 0) & (lane_of_track[trace.track[np.maximum(call, 0)]] >= 0), call, -1)
    syncs = runtime_syncs(trace, links)
    steps = step_ranges(trace)
    host = host_nodes(trace, rows, lane_of_track, distinct(call[call >= 0]), syncs, steps)
    g = gpu.gpu_nodes(trace, work, split)
    waits = gpu.stream_wait_edges(trace, g, call)
    work_of_node = np.repeat(np.arange(len(work)), g.last - g.first + 1)
    explained = np.full(len(work), NO_TIME, np.int64)
    np.maximum.at(explained, work_of_node[waits.dst], g.end[waits.src])
    waited = explained > NO_TIME
    latency, gap = gpu.launch_defaults(trace, work, call, waited)
    inferred = gpu.inferred_wait_edges(trace, g, call, latency, gap, explained)
    if len(inferred.dst):  # measured again without the work that waited for another stream
        waited[work_of_node[inferred.dst]] = True
        latency, gap = gpu.launch_defaults(trace, work, call, waited)
    local = [
        gpu.launch_edges(trace, g, host, call),
        gpu.sync_edges(trace, g, host, call),
        waits,
        inferred,
    ]
    edges = gpu.Edges.join(local)
    n_host = len(host)
    to_gpu = np.isin(edges.kind, (gpu.LAUNCH, gpu.STREAM_WAIT, gpu.INFERRED_WAIT))
    from_gpu = edges.kind != gpu.LAUNCH
    edges.src = np.where(from_gpu, edges.src + n_host, edges.src)
    edges.dst = np.where(to_gpu, edges.dst + n_host, edges.dst)
    starts = host.ending_at(steps.track, steps.start)
    ends = host.ending_at(steps.track, steps.end)
    gpu_step = np.full(len(g), -1, np.int64)
    launched = np.flatnonzero(call >= 0)
    if len(steps) and len(launched):
        t = trace.start_ns[call[launched]]
        at = np.searchsorted(steps.start, t, side="right") - 1
        inside = (at >= 0) & (t < steps.end[np.maximum(at, 0)])
        owner = np.where(inside, at, -1)
        for nodes in (g.first, g.last):
            gpu_step[nodes[launched]] = owner
    return RankGraph(
        rank,
        trace,
        offset,
        host,
        g,
        edges,
        latency,
        gap,
        steps,
        starts,
        ends,
        gpu_step,
        call,
        split,
    )


@dataclass
class Graph:
    """Every node and edge of a trace or job (module docstring). Nodes are the parts' nodes
    in order (each part's host nodes, then its GPU nodes), then one node per collective
    instance; ``base[p]`` is part p's first node. Times on the job's clock."""

    parts: list[RankGraph]
    base: I64
    start: I64
    end: I64
    kind: npt.NDArray[np.int8]
    part: I64
    link: npt.NDArray[np.bool_]  # starts after the node before it (its lane's previous)
    chain_lag: I64
    chain_base: I64  # the default share of chain_lag
    anchored: npt.NDArray[np.bool_]  # no inputs: starts at its recorded start
    src: I64  # edges, sorted by destination
    dst: I64
    edge_kind: npt.NDArray[np.int8]
    lag: I64
    lag_base: I64  # the default share of lag
    bind_edge: I64 = field(default_factory=lambda: np.zeros(0, np.int64))  # per node, -1: none
    dropped: int = 0  # edges against the order, left out

    def __len__(self) -> int:
        return len(self.start)

    @property
    def dur(self) -> I64:
        d: I64 = self.end - self.start
        return d

    def local(self, node: int) -> tuple[RankGraph, int]:
        """The part of ``node`` and its number there."""
        p = int(self.part[node])
        return self.parts[p], node - int(self.base[p])


def build_graph(
    parts: list[RankGraph], peers: gpu.Edges | None = None, peaks: I64 | None = None
) -> Graph:
    """The graph of ``parts`` (one per rank); ``peers``: arrival -> instance -> transfer
    edges, with instance ``i`` numbered ``-1 - i`` (their nodes go last), ``peaks`` each
    instance's last arrival on the job's clock."""
    peaks = np.zeros(0, np.int64) if peaks is None else peaks
    sizes = [len(p) for p in parts]
    base = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    n_parts = int(base[-1])
    start = np.concatenate([_times(p, "start") for p in parts] + [peaks]).astype(np.int64)
    end = np.concatenate([_times(p, "end") for p in parts] + [peaks]).astype(np.int64)
    kind = np.concatenate(
        [np.concatenate([p.host.kind, p.gpu.kind]) for p in parts]
        + [np.full(len(peaks), INSTANCE, np.int8)]
    ).astype(np.int8)
    part = np.concatenate(
        [np.full(s, i, np.int64) for i, s in enumerate(sizes)] + [np.full(len(peaks), -1, np.int64)]
    )
    lane = _job_lanes(parts, len(peaks))
    link = np.zeros(len(start), bool)
    link[1:] = lane[1:] == lane[:-1]
    edges = [
        gpu.Edges(e.src + base[i], e.dst + base[i], e.kind) for i, e in enumerate(_edges(parts))
    ]
    if peers is not None and len(peers.src):
        edges.append(
            gpu.Edges(_instance(peers.src, n_parts), _instance(peers.dst, n_parts), peers.kind)
        )
    e = (
        gpu.Edges.join(edges)
        if edges
        else gpu.Edges.of(np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
    )
    _wait_in_syncs(start, end, kind, e)
    graph = _ordered(parts, base, start, end, kind, part, link, e)
    _set_lags(graph, _chain_default(graph), _edge_default(graph))
    return graph


def _times(p: RankGraph, which: str) -> I64:
    values = np.concatenate([getattr(p.host, which), getattr(p.gpu, which)])
    return np.asarray(values + np.int64(p.offset), dtype=np.int64)


def _job_lanes(parts: list[RankGraph], instances: int) -> I64:
    """Lane numbers across parts: each part's host lanes, then its GPU tracks; each
    instance a lane of its own."""
    out, first = [], 0
    for p in parts:
        host_lanes = int(p.host.lane.max()) + 1 if len(p.host) else 0
        out.append(np.concatenate([p.host.lane, p.gpu.lane + host_lanes]) + first)
        first += host_lanes + len(p.trace.tracks)
    out.append(first + np.arange(instances))
    return np.concatenate(out).astype(np.int64)


def _edges(parts: list[RankGraph]) -> list[gpu.Edges]:
    return [p.edges for p in parts]


def _instance(nodes: I64, first: int) -> I64:
    """Node numbers where instances are written ``-1 - i``."""
    return np.where(nodes < 0, first + (-1 - nodes), nodes)


def _wait_in_syncs(start: I64, end: I64, kind: npt.NDArray[np.int8], e: gpu.Edges) -> None:
    """A sync node starts when the last work it waited for ended (its call's time before
    that was the wait), or at its own end where that work ended a little after it (a staged
    copy: :func:`perflab.analysis.critical_host.runtime_syncs`); a source that ended later
    than that was not waited for."""
    waits = np.flatnonzero(e.kind == gpu.SYNC_WAIT)
    room = staged_room(end[e.src[waits]] - start[e.src[waits]])
    ok = end[e.src[waits]] <= end[e.dst[waits]] + room
    np.maximum.at(start, e.dst[waits[ok]], np.minimum(end[e.src[waits[ok]]], end[e.dst[waits[ok]]]))
    e.kind[waits[~ok]] = -1  # dropped below


def _ordered(
    parts: list[RankGraph],
    base: I64,
    start: I64,
    end: I64,
    kind: npt.NDArray[np.int8],
    part: I64,
    link: npt.NDArray[np.bool_],
    e: gpu.Edges,
) -> Graph:
    """The graph with only the edges (and lane links) that go forward in the order of the
    module docstring and leave their source's end before their destination's start."""
    order = np.lexsort((np.arange(len(start)), TIER[kind], start))
    pos = np.empty(len(start), np.int64)
    pos[order] = np.arange(len(start))
    link &= np.concatenate(([False], pos[1:] > pos[:-1]))
    # a source may end after its destination starts by the clocks' rounding (a microsecond),
    # and a sync may end a little before the copy it waited for
    room = np.where(e.kind == gpu.SYNC_WAIT, staged_room(end[e.src] - start[e.src]), ROUNDING_NS)
    keep = (e.kind >= 0) & (pos[e.src] < pos[e.dst]) & (end[e.src] <= start[e.dst] + room)
    dropped = int((~keep & (e.kind >= 0)).sum())
    src, dst, ek = e.src[keep], e.dst[keep], e.kind[keep]
    by_dst = np.lexsort((src, dst))
    src, dst, ek = src[by_dst], dst[by_dst], ek[by_dst]
    fed = np.zeros(len(start), bool)
    fed[dst] = True
    zeros = np.zeros(len(start), np.int64)
    return Graph(
        parts,
        base,
        start,
        end,
        kind,
        part,
        link,
        zeros,
        zeros.copy(),
        ~link & ~fed,
        src,
        dst,
        ek,
        np.zeros(len(src), np.int64),
        np.zeros(len(src), np.int64),
        dropped=dropped,
    )


def _chain_default(g: Graph) -> I64:
    """Per node: its lane's default lag (the stream gap on a GPU lane, none elsewhere and
    between a collective's arrival and its transfer)."""
    gap = np.array([p.gap for p in g.parts] + [0], np.int64)[g.part]
    on_gpu = np.isin(g.kind, (gpu.KERNEL, gpu.COPY, gpu.COLLECTIVE, gpu.ARRIVE))
    return np.where(on_gpu, gap, 0)


def _edge_default(g: Graph) -> I64:
    """Per edge: its default lag (the launch latency after a launch; a wait inferred from
    coincidence keeps the time it shows; none elsewhere)."""
    latency = np.array([p.latency for p in g.parts] + [0], np.int64)[g.part[g.dst]]
    slack = g.start[g.dst] - g.end[g.src]
    return np.select(
        [g.edge_kind == gpu.LAUNCH, g.edge_kind == gpu.INFERRED_WAIT], [latency, slack], 0
    )


def _set_lags(g: Graph, chain_default: I64, edge_default: I64) -> None:
    """Each lag: its default, or less where the recording shows less; the binding input
    takes the rest of its destination's recorded start (module docstring)."""
    prev_end = np.concatenate(([NO_TIME], g.end[:-1]))
    g.chain_base = np.where(g.link, np.minimum(chain_default, g.start - prev_end), 0)
    g.lag_base = np.minimum(edge_default, g.start[g.dst] - g.end[g.src])
    chain_ready = np.where(g.link, prev_end + g.chain_base, NO_TIME)
    edge_ready = g.end[g.src] + g.lag_base
    ready = chain_ready.copy()
    np.maximum.at(ready, g.dst, edge_ready)
    ready = np.where(g.anchored, g.start, ready)
    extra = g.start - ready
    by_chain = g.link & (chain_ready == ready)
    hit = np.flatnonzero(edge_ready == ready[g.dst])
    bind = np.full(len(g), -1, np.int64)
    # hits are sorted by destination: the first of each
    first_hit = (
        hit[np.concatenate(([True], g.dst[hit][1:] != g.dst[hit][:-1]))] if len(hit) else hit
    )
    bind[g.dst[first_hit]] = first_hit
    bind[by_chain | g.anchored] = -1
    g.chain_lag = g.chain_base + np.where(by_chain, extra, 0)
    g.lag = g.lag_base.copy()
    bound = np.flatnonzero(bind >= 0)
    g.lag[bind[bound]] += extra[bound]
    g.bind_edge = bind


def host_node_kinds() -> tuple[int, ...]:
    return (START, HOST, SYNC)
