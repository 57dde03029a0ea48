"""The dependency graph of a whole job (:mod:`perflab.analysis.critical_path`): every rank's
graph on the job's clock, and each collective matched across the ranks
(:mod:`perflab.analysis.collective_match`) split on every rank into its arrival and its
transfer, tied through one node per instance that is ready when its last rank arrived.

Ranks that are not one job on one clock (:func:`perflab.analysis.job.alignment_doubts`) are
not tied: each collective stays whole on its rank, and a warning says why.

The work comes in three steps, so that a cluster can do the middle one where each rank's trace
is (:mod:`perflab.job_dask`): :func:`tie_ranks` matches the collectives from each rank's NCCL
kernels (a few numbers per kernel); :func:`perflab.analysis.critical_graph.rank_graph` builds
each rank's graph with its share of the ties (:func:`portable` keeps of its trace only what
the paths are named from); :func:`join_ranks` joins the ranks' graphs into the job's."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.collective_match import CommKernels, match_kernels, trace_comm_kernels
from perflab.analysis.critical_graph import Graph, RankGraph, build_graph, rank_graph
from perflab.analysis.critical_host import host_rows
from perflab.analysis.job import RankClock, alignment_doubts, rank_clocks
from perflab.analysis.trace_summary import RankOrigin, rank_origin
from perflab.model.job import Job
from perflab.model.trace import Table, Trace

I64 = npt.NDArray[np.int64]


@dataclass
class RankSide:
    """What tying a rank's collectives to the other ranks' needs of it: its NCCL kernels
    (its own clock) and where its trace came from. Small: a few numbers per kernel."""

    comm: CommKernels
    origin: RankOrigin


@dataclass
class Ties:
    """The job's collectives tied across ranks: per rank its share (None: not tied), each
    instance's last arrival on the job's clock (None: nothing tied), and what to say of it."""

    splits: dict[int, gpu.TiedCollectives] = field(default_factory=dict)
    peak: I64 | None = None
    notes: list[str] = field(default_factory=list)

    def split(self, rank: int) -> gpu.TiedCollectives | None:
        return self.splits.get(rank)


def job_graph(job: Job) -> tuple[Graph, list[str]]:
    """The job's graph and what to say: what looked wrong while loading it (ranks
    missing or left out, clocks guessed) and how it was tied."""
    ties = tie_ranks({r.rank: rank_side(r.trace) for r in job}, rank_clocks(job))
    parts = [rank_graph(r.trace, r.rank, r.clock_offset_ns, ties.split(r.rank)) for r in job]
    g, notes = join_ranks(parts, ties)
    return g, [*job.warnings, *notes]


def rank_side(trace: Trace) -> RankSide:
    return RankSide(trace_comm_kernels(trace), rank_origin(trace))


def tie_ranks(sides: dict[int, RankSide], clocks: dict[int, RankClock]) -> Ties:
    """The collectives of the ranks (``sides`` and ``clocks`` by rank number) matched, and
    each rank's share: its matched kernels' rows, each instance's last arrival and number."""
    ranks = sorted(sides)
    doubts = alignment_doubts({r: sides[r].origin for r in ranks}, clocks) if len(ranks) > 1 else []
    if doubts or len(ranks) < 2:
        return Ties(notes=[f"collectives are not tied across ranks: {d}" for d in doubts])
    offsets = {r: clocks[r].offset_ns for r in ranks}
    collectives = match_kernels({r: sides[r].comm.shifted(offsets[r]) for r in ranks})
    rows = collectives.rows  # instances x ranks of collectives.ranks
    column = {r: j for j, r in enumerate(collectives.ranks)}
    arrival = np.full(rows.shape, np.iinfo(np.int64).min, np.int64)
    for r in ranks:
        j = column.get(r)
        if j is None:
            continue
        took = rows[:, j] >= 0
        arrival[took, j] = _starts(sides[r].comm, rows[took, j]) + np.int64(offsets[r])
    peak = arrival.max(axis=1) if rows.size else np.zeros(0, np.int64)
    splits = {}
    for r in ranks:
        j = column.get(r)
        taking: I64 = np.zeros(0, np.int64)
        mine: I64 = np.zeros(0, np.int64)
        if j is not None:
            taking = np.flatnonzero(rows[:, j] >= 0)
            mine = rows[taking, j]
        order = np.argsort(mine, kind="stable")
        splits[r] = gpu.TiedCollectives(
            mine[order], peak[taking][order] - offsets[r], taking[order]
        )
    return Ties(splits, peak, [f"collectives: {w}" for w in collectives.warnings])


def _starts(comm: CommKernels, rows: I64) -> I64:
    """The starts (the rank's own clock) of its NCCL kernels at trace rows ``rows``."""
    by_row = np.argsort(comm.rows, kind="stable")
    found: I64 = comm.start[by_row[np.searchsorted(comm.rows, rows, sorter=by_row)]]
    return found


def join_ranks(parts: list[RankGraph], ties: Ties) -> tuple[Graph, list[str]]:
    """The job's graph from its ranks' graphs (built with their shares of ``ties``)."""
    if ties.peak is None:
        return build_graph(parts), list(ties.notes)
    return build_graph(parts, _peer_edges(parts), ties.peak), list(ties.notes)


def portable(part: RankGraph) -> RankGraph:
    """``part`` with only the events of its trace that a path is named from (its host
    events and its GPU work) and the names they use, without the side tables and meta, its
    rows and names renumbered in order: what a cluster worker sends back of a rank instead
    of its whole trace. Joining, walking and replaying give the same answers with it."""
    trace = part.trace
    referenced = [part.host.row, part.gpu.row, part.launch_call, part.split.rows]
    keep = np.union1d(
        np.union1d(host_rows(trace), part.gpu.work),
        np.concatenate([r[r >= 0] for r in referenced]),
    ).astype(np.int64)
    new_row = np.full(len(trace) + 1, -1, np.int64)  # the last entry: -1 stays -1
    new_row[keep] = np.arange(len(keep))
    slim = _kept_names(Trace(trace.events.take(keep), trace.tracks, trace.strings))
    return replace(
        part,
        trace=slim,
        host=replace(part.host, row=new_row[part.host.row]),
        gpu=replace(part.gpu, row=new_row[part.gpu.row], work=new_row[part.gpu.work]),
        launch_call=new_row[part.launch_call],
        split=replace(part.split, rows=new_row[part.split.rows]),
    )


def _kept_names(trace: Trace) -> Trace:
    """``trace`` with only the strings its events and tracks name, in their order (so
    names sorted by their number keep their order)."""
    used = np.union1d(trace.name, trace.tracks["label"]).astype(np.int64)
    new_name = np.full(len(trace.strings), -1, np.int64)
    new_name[used] = np.arange(len(used))
    events = Table(trace.events.schema, {**trace.events.columns, "name": new_name[trace.name]})
    labels = new_name[trace.tracks["label"]]
    tracks = Table(trace.tracks.schema, {**trace.tracks.columns, "label": labels})
    return Trace(events, tracks, [trace.strings[i] for i in used.tolist()])


def _peer_edges(parts: list[RankGraph]) -> gpu.Edges:
    """Every rank's arrival -> its instance (written ``-1 - instance``) -> its transfer, in
    the numbering :func:`build_graph` gives the parts' nodes."""
    sizes = [len(p) for p in parts]
    base = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    src: list[I64] = []
    dst: list[I64] = []
    for p, part in enumerate(parts):
        split = part.split
        if len(split.rows) == 0:
            continue
        by_row = np.argsort(part.gpu.work, kind="stable")
        at = by_row[np.searchsorted(part.gpu.work, split.rows, sorter=by_row)]
        first = base[p] + len(part.host) + part.gpu.first[at]
        last = base[p] + len(part.host) + part.gpu.last[at]
        instance = -1 - split.instance
        src += [first, instance]
        dst += [instance, last]
    if not src:
        return gpu.Edges.of(np.zeros(0, np.int64), np.zeros(0, np.int64), gpu.PEER)
    return gpu.Edges.of(np.concatenate(src), np.concatenate(dst), gpu.PEER)
