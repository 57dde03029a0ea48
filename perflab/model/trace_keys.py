"""Keys that join a trace's rows across ranks: the (rank, GPU) pair of a track and the
(rank, correlation id) that ties GPU work to the runtime call that launched it.

Ranks of a merged trace reuse device numbers and correlation ids, so both keys are pairs;
they are factorised here (no ``rank * 2**k + id`` packing, which merges ids that differ by
``2**k``) and every analysis, view and exporter reads them from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.model.trace import GPU_WORK_KINDS, EventKind, TrackKind, unique_rows

if TYPE_CHECKING:
    from perflab.model.trace import Trace


def device_pairs(trace: Trace) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct (rank, device) pairs of the tracks, sorted, and the pair of every
    track (whole 64-bit device ids: ids that differ in their high bits stay apart)."""
    tracks = trace.tracks
    rows = np.stack([tracks["rank"].astype(np.int64), tracks["device"]], axis=1)
    return unique_rows(rows)


def event_device_pairs(trace: Trace) -> npt.NDArray[np.int64]:
    """Per event: the number of its (rank, GPU) pair in :func:`device_pairs`, -1 on CPU
    tracks."""
    _, pair_of_track = device_pairs(trace)
    key = np.where(trace.tracks["kind"] == TrackKind.GPU, pair_of_track, -1)
    return np.asarray(key[trace.track], dtype=np.int64)


def device_pair_label(rank: int, device: int) -> str:
    """``"<device>"`` on rank 0, ``"<rank>:<device>"`` on the others."""
    return f"{rank}:{device}" if rank else str(device)


def launch_links(trace: Trace) -> npt.NDArray[np.int64]:
    """Per event: the row of the runtime call that launched it (same rank and correlation
    id; the first such call), or -1. Runtime calls themselves and CPU events get -1."""
    corr = trace.correlation
    runtime = np.flatnonzero((trace.kind == EventKind.RUNTIME) & (corr >= 0))
    gpu = np.flatnonzero(trace.mask(*GPU_WORK_KINDS) & (corr >= 0))
    out = np.full(len(trace), -1, dtype=np.int64)
    if len(runtime) == 0 or len(gpu) == 0:
        return out
    codes = _PairCodes(trace, runtime, gpu)
    # rows run in order, so the smallest row of a pair is its first call
    first = np.full(codes.count, len(trace), dtype=np.int64)
    np.minimum.at(first, codes.of(runtime, 0), runtime)
    call = first[codes.of(gpu, len(runtime))]
    del first
    out[gpu] = np.where(call < len(trace), call, -1)
    return out


class _PairCodes:
    """A code per (rank, correlation id) pair of the given rows (equal pairs, equal codes),
    and how many codes there can be. Ids run densely in a trace, so a code is usually the
    pair's place in the rank x id grid, worked out for one group of rows at a time with no
    sort; a sparse grid numbers the distinct pairs of all the rows (a sort)."""

    def __init__(self, trace: Trace, *groups: npt.NDArray[np.intp]) -> None:
        self.corr = trace.correlation
        self.rank_of_track = trace.tracks["rank"].astype(np.int64)
        self.track = trace.track
        ranks = [self.rank_of_track[self.track[rows]] for rows in groups]
        self.low = min(int(r.min()) for r in ranks)
        self.height = max(int(self.corr[rows].max()) for rows in groups) + 1  # ids are >= 0
        self.count = (max(int(r.max()) for r in ranks) - self.low + 1) * self.height
        self.sparse: npt.NDArray[np.int64] | None = None
        if self.count > 4 * sum(r.size for r in groups) + 4096:
            rows = np.concatenate(groups)
            pairs = np.stack([np.concatenate(ranks), self.corr[rows]], axis=1)
            distinct_pairs, self.sparse = unique_rows(pairs)
            self.count = len(distinct_pairs)

    def of(self, rows: npt.NDArray[np.intp], at: int) -> npt.NDArray[np.int64]:
        """The codes of ``rows``, which start at position ``at`` of the rows given."""
        if self.sparse is not None:
            return self.sparse[at : at + rows.size]
        code = self.rank_of_track[self.track[rows]]
        code -= self.low
        code *= self.height
        code += self.corr[rows]
        return code
