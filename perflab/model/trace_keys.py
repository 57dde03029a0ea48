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
    rows = np.concatenate([runtime, gpu])
    # the rank of only these rows: a per-event rank column cost 8 bytes an event
    rank = trace.tracks["rank"].astype(np.int64)[trace.track[rows]]
    pair, pairs = _pair_codes(rank, corr[rows])
    del rank
    # rows run in order, so the smallest row of a pair is its first call
    first = np.full(pairs, len(trace), dtype=np.int64)
    np.minimum.at(first, pair[: len(runtime)], runtime)
    call_of_pair = np.where(first < len(trace), first, -1)
    out[gpu] = call_of_pair[pair[len(runtime) :]]
    return out


def _pair_codes(
    rank: npt.NDArray[np.int64], corr: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], int]:
    """A code per (rank, correlation id) pair (equal pairs, equal codes) and how many codes
    there can be. Ids run densely in a trace, so the code is usually the pair's place in the
    rank x id grid, with no sort and no copy of the pairs; a sparse grid numbers the
    distinct pairs."""
    low = int(rank.min())
    height = int(corr.max()) + 1  # ids here are >= 0
    cells = (int(rank.max()) - low + 1) * height
    if cells <= 4 * rank.size + 4096:
        rank -= low
        rank *= height
        rank += corr
        return rank, cells
    distinct_pairs, pair = unique_rows(np.stack([rank, corr], axis=1))
    return pair, len(distinct_pairs)
