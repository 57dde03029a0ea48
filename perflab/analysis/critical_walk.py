"""Critical paths walked back through a dependency graph (:mod:`perflab.analysis.critical_graph`),
every step's at once, and turned into named stretches.

From the node that ends a step, each step goes back through the input that set the node's
recorded start (its binding input) until it reaches the step's start: a node's stretch, then the
lag before it (a launch's latency; a stream gap, whose default share joins the node after it and
whose rest no dependency explains), then the input's node, and so on; the first stretch is cut
at the step's start. The walks advance together, one node per round, as columns of numbers.

Then each stretch gets its name and kind: GPU work by its event, a launch by its call and the
work it launched, host stretches cut at their lane's events and named by the innermost one
(:mod:`perflab.analysis.critical_names`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.critical_graph import INSTANCE, Graph, RankGraph
from perflab.analysis.critical_host import HOST, START, SYNC
from perflab.analysis.critical_names import UNTRACED, host_pieces
from perflab.model.trace import distinct, unique_rows

I64 = npt.NDArray[np.int64]
KINDS = ("host", "launch", "kernel", "copy", "collective", "collective transfer", "unexplained")
HOST_K, LAUNCH_K, KERNEL_K, COPY_K, COLLECTIVE_K, TRANSFER_K, UNEXPLAINED_K = range(len(KINDS))
# the path kind of each node kind (critical_host's, critical_gpu's, critical_graph's INSTANCE)
KIND_OF_NODE = np.array(
    [HOST_K, HOST_K, HOST_K, KERNEL_K, COPY_K, COLLECTIVE_K, TRANSFER_K, TRANSFER_K, TRANSFER_K],
    dtype=np.int8,
)
NODE, LAUNCH, GAP, BEFORE = 0, 1, 2, 3  # stretch types: a node, a launch's latency, a gap
# no dependency explains, the time before a lane's first recorded node
BEFORE_NAME = "(before the recording of its lane)"


@dataclass
class Stretches:
    """Stretches of every walk: walk, node (the one a lag precedes), start, end (job clock),
    type, and the order within the walk (higher: earlier)."""

    walk: I64
    node: I64
    start: I64
    end: I64
    type: npt.NDArray[np.int8]
    seq: I64

    def take(self, rows: I64) -> Stretches:
        return Stretches(
            *(getattr(self, f)[rows] for f in ("walk", "node", "start", "end", "type", "seq"))
        )


def walk_paths(g: Graph, last: I64, since: I64) -> Stretches:
    """The walks back from nodes ``last[i]`` to times ``since[i]`` (recorded times)."""
    via, pred, lag, base = _binding(g)
    cur = last.astype(np.int64).copy()
    walk = np.arange(len(cur))
    parts: list[tuple[I64, ...]] = []
    seq = 0
    while len(cur):
        start, floor = g.start[cur], since[walk]
        go = start > floor
        before = go & (via[cur] == -3)
        lagging = go & ~before
        edge = np.maximum(via[cur], 0)
        launch = (
            lagging
            & (via[cur] >= 0)
            & (g.edge_kind[edge] == gpu.LAUNCH if len(g.edge_kind) else False)
        )
        fold = lagging & ~launch
        ready = start - lag[cur]
        cut = np.where(before, floor, np.maximum(ready, floor))
        # a lag's default share joins the node after it; a launch's stays a stretch of its own
        joined = np.where(fold, np.minimum(base[cur], start - cut), 0)
        node_start = np.maximum(start, floor) - joined
        parts.append(_columns(walk, cur, node_start, g.end[cur], NODE, seq))
        kept = np.flatnonzero(go)
        lag_type = np.select([before, launch], [BEFORE, LAUNCH], GAP)
        parts.append(
            _columns(walk[kept], cur[kept], cut[kept], node_start[kept], lag_type[kept], seq + 1)
        )
        onward = lagging & (ready > floor)
        walk, cur = walk[onward], pred[cur[onward]]
        seq += 2
    if not parts:
        empty = np.zeros(0, np.int64)
        return Stretches(empty, empty, empty, empty, empty.astype(np.int8), empty)
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    return Stretches(cols[0], cols[1], cols[2], cols[3], cols[4].astype(np.int8), cols[5])


def _columns(
    walk: I64, node: I64, start: I64, end: I64, type_: object, seq: int
) -> tuple[I64, ...]:
    n = len(walk)
    return (
        walk,
        node,
        np.asarray(start, np.int64),
        np.asarray(end, np.int64),
        np.broadcast_to(np.asarray(type_, np.int64), (n,)).copy(),
        np.full(n, seq, np.int64),
    )


def _binding(g: Graph) -> tuple[I64, I64, I64, I64]:
    """Per node: how its recorded start was set (edge number, -2: its lane, -3: nothing
    before it), the node before it on the path, the lag and the lag's default share."""
    nodes = np.arange(len(g))
    by_edge = g.bind_edge >= 0
    via = np.where(by_edge, g.bind_edge, np.where(g.link & ~g.anchored, -2, -3))
    edge = np.maximum(g.bind_edge, 0)
    src = g.src[edge] if len(g.src) else np.zeros(len(g), np.int64)
    pred = np.where(by_edge, src, np.where(via == -2, nodes - 1, -1))
    lag = np.where(by_edge, g.lag[edge] if len(g.lag) else 0, np.where(via == -2, g.chain_lag, 0))
    base = np.where(
        by_edge, g.lag_base[edge] if len(g.lag) else 0, np.where(via == -2, g.chain_base, 0)
    )
    return via, pred, lag, base


INSTANCE_NAME = "(a collective's last arrival)"


@dataclass
class PathColumns:
    """Named stretches of every walk, each walk's in time order: walk, rank (-1: a single
    trace), name (an index into ``names``), kind (an index into :data:`KINDS`), start on its
    trace's own clock, and length (ns)."""

    walk: I64
    rank: I64
    name: I64
    kind: npt.NDArray[np.int8]
    start: I64
    dur: I64
    names: list[str]

    def take(self, rows: I64) -> PathColumns:
        return PathColumns(
            self.walk[rows],
            self.rank[rows],
            self.name[rows],
            self.kind[rows],
            self.start[rows],
            self.dur[rows],
            self.names,
        )


def path_columns(g: Graph, s: Stretches, job: bool) -> PathColumns:
    """The stretches ``s`` named (module docstring), zero-length ones left out."""
    names = _Names(g)
    node_kind = g.kind[s.node]
    is_host = (s.type == NODE) & np.isin(node_kind, (START, HOST, SYNC))
    name = np.full(len(s.node), -1, np.int64)
    kind = np.full(len(s.node), UNEXPLAINED_K, np.int8)
    on_node = s.type == NODE
    kind[on_node] = KIND_OF_NODE[node_kind[on_node]]
    name[:] = names.of_nodes(s.node)
    name[s.type == BEFORE] = names.add(BEFORE_NAME)
    launch = np.flatnonzero(s.type == LAUNCH)
    kind[launch] = LAUNCH_K
    name[launch] = names.launches(s.node[launch])
    plain = np.flatnonzero(~is_host)
    cols: list[tuple[I64, ...]] = [
        (
            s.walk[plain],
            s.seq[plain],
            np.zeros(len(plain), np.int64),
            s.node[plain],
            name[plain],
            kind[plain].astype(np.int64),
            s.start[plain],
            s.end[plain],
        )
    ]
    cols += _host_columns(g, s.take(np.flatnonzero(is_host)), names)
    walk, seq, sub, node, nm, kd, start, end = (np.concatenate(c) for c in zip(*cols, strict=True))
    keep = np.flatnonzero(end != start)
    order = keep[np.lexsort((sub[keep], -seq[keep], walk[keep]))]
    part = g.part[node[order]]
    offsets = np.array([p.offset for p in g.parts] + [0], np.int64)[part]
    ranks = (
        np.array([p.rank for p in g.parts] + [-1], np.int64)[part]
        if job
        else np.full(len(order), -1)
    )
    return PathColumns(
        walk[order],
        ranks,
        nm[order],
        kd[order].astype(np.int8),
        start[order] - offsets,
        end[order] - start[order],
        names.table,
    )


def _host_columns(g: Graph, s: Stretches, names: _Names) -> list[tuple[I64, ...]]:
    """Host stretches cut into their named pieces (per part, all walks at once)."""
    out: list[tuple[I64, ...]] = []
    for p in distinct_parts(g, s.node):
        part = g.parts[p]
        mine = np.flatnonzero(g.part[s.node] == p)
        local = s.node[mine] - int(g.base[p])
        a, b = s.start[mine] - part.offset, s.end[mine] - part.offset
        pieces = host_pieces(part.trace, part.host.lane_of_track, part.host.lane[local], a, b)
        at = mine[pieces.stretch]
        calls = distinct(part.launch_call[part.launch_call >= 0])
        kind = np.where(np.isin(pieces.row, calls), LAUNCH_K, HOST_K).astype(np.int64)
        name = names.of_rows(part, pieces.row)
        out.append(
            (
                s.walk[at],
                s.seq[at],
                pieces.start,
                s.node[at],
                name,
                kind,
                pieces.start + part.offset,
                pieces.end + part.offset,
            )
        )
    return out


def distinct_parts(g: Graph, nodes: I64) -> list[int]:
    return sorted({int(p) for p in distinct(g.part[nodes]).tolist() if p >= 0})


class _Names:
    """One table of the names a path shows, built as they are asked for."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.table: list[str] = []
        self.index: dict[str, int] = {}
        self.gpu = np.full(len(g), -1, np.int64)
        for p, part in enumerate(g.parts):
            first = int(g.base[p]) + len(part.host)
            ids = part.trace.name[part.gpu.row].astype(np.int64)
            self.gpu[first : first + len(part.gpu)] = self._codes(part.trace.strings, ids)
        self.gpu[g.kind == INSTANCE] = self.add(INSTANCE_NAME)
        self.gpu[np.isin(g.kind, (START, HOST, SYNC))] = self.add(UNTRACED)

    def add(self, name: str) -> int:
        code = self.index.get(name)
        if code is None:
            code = self.index[name] = len(self.table)
            self.table.append(name)
        return code

    def _codes(self, strings: list[str], ids: I64) -> I64:
        present = distinct(ids)
        codes = np.array([self.add(strings[i]) for i in present.tolist()], np.int64)
        return codes[np.searchsorted(present, ids)] if len(codes) else np.zeros(0, np.int64)

    def of_nodes(self, nodes: I64) -> I64:
        return self.gpu[nodes]

    def of_rows(self, part: RankGraph, rows: I64) -> I64:
        """Codes of the names of host events ``rows`` of ``part`` (-1: untraced)."""
        out = np.full(len(rows), self.add(UNTRACED), np.int64)
        traced = rows >= 0
        out[traced] = self._codes(
            part.trace.strings, part.trace.name[rows[traced]].astype(np.int64)
        )
        return out

    def launches(self, nodes: I64) -> I64:
        """Codes of ``call -> work`` for GPU nodes ``nodes``: the call that launched each."""
        out = np.zeros(len(nodes), np.int64)
        for p in distinct_parts(self.g, nodes):
            part = self.g.parts[p]
            mine = np.flatnonzero(self.g.part[nodes] == p)
            local = nodes[mine] - int(self.g.base[p]) - len(part.host)
            work = np.minimum(np.searchsorted(part.gpu.last, local), len(part.launch_call) - 1)
            call = part.launch_call[work]
            called = np.where(call >= 0, part.trace.name[np.maximum(call, 0)], -1)
            pairs, inverse = unique_rows(np.stack([called, self.gpu[nodes[mine]]], axis=1))
            codes = [
                self.add(f"{part.trace.strings[c] if c >= 0 else 'launch'} -> {self.table[w]}")
                for c, w in pairs.tolist()
            ]
            out[mine] = np.asarray(codes, np.int64)[inverse]
        return out
