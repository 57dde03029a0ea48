"""The dependency graph of a whole job (:mod:`perflab.analysis.critical_path`): every rank's
graph on the job's clock, and each collective matched across the ranks
(:mod:`perflab.analysis.collective_match`) split on every rank into its arrival and its
transfer, tied through one node per instance that is ready when its last rank arrived.

Ranks that are not one job on one clock (:func:`perflab.analysis.job.job_alignment`) are not
tied: each collective stays whole on its rank, and a warning says why."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.collective_match import match_collectives
from perflab.analysis.critical_graph import Graph, RankGraph, build_graph, rank_graph
from perflab.analysis.job import job_alignment
from perflab.model.job import Job

I64 = npt.NDArray[np.int64]


def job_graph(job: Job) -> tuple[Graph, list[str]]:
    """The job's graph and what to say about how it was tied."""
    doubts = job_alignment(job) if len(job) > 1 else []
    if doubts or len(job) < 2:
        parts = [rank_graph(r.trace, r.rank, r.clock_offset_ns) for r in job]
        why = [f"collectives are not tied across ranks: {d}" for d in doubts]
        return build_graph(parts), why
    collectives = match_collectives(job)
    ranks = list(job)
    rows = collectives.rows  # instances x ranks of collectives.ranks
    column = {r: j for j, r in enumerate(collectives.ranks)}
    arrival = np.full(rows.shape, np.iinfo(np.int64).min, np.int64)
    for r in ranks:
        j = column.get(r.rank)
        if j is None:
            continue
        took = rows[:, j] >= 0
        arrival[took, j] = r.trace.start_ns[rows[took, j]] + np.int64(r.clock_offset_ns)
    peak = arrival.max(axis=1) if rows.size else np.zeros(0, np.int64)
    parts = []
    for r in ranks:
        j = column.get(r.rank)
        taking: I64 = np.zeros(0, np.int64)
        mine: I64 = np.zeros(0, np.int64)
        if j is not None:
            taking = np.flatnonzero(rows[:, j] >= 0)
            mine = rows[taking, j]
        order = np.argsort(mine, kind="stable")
        split = gpu.TiedCollectives(
            mine[order], peak[taking][order] - r.clock_offset_ns, taking[order]
        )
        parts.append(rank_graph(r.trace, r.rank, r.clock_offset_ns, split))
    peers = _peer_edges(parts)
    notes = [f"collectives: {w}" for w in collectives.warnings]
    return build_graph(parts, peers, peak), notes


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
