"""The levels of detail and the launch links stay within a few dozen bytes per event at their
peak (numpy's allocations as tracemalloc counts them), so the timeline and the idle causes
of a 10M-event trace fit in memory beside it; narrow lane columns give the same levels."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np

from perflab.analysis.lod import build_pyramid
from perflab.model.trace import EVENT_COLUMNS, TRACK_COLUMNS, EventKind, Table, Trace
from perflab.model.trace_keys import launch_links

N = 400_000


def _peak_bytes(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = work()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del result
    return peak


def _intervals() -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    rng = np.random.default_rng(3)
    start = np.sort(rng.uniform(0, 1e9, N))
    return start, start + rng.lognormal(8, 2, N), rng.integers(0, 12, N)


def test_levels_of_detail_peak_within_56_bytes_an_interval() -> None:
    start, end, lane = _intervals()
    peak = _peak_bytes(lambda: build_pyramid(start, end, lane, 12, summary_lanes=[0, 1, 2]))
    assert peak / N <= 56  # was 93, with copies of every column at 64 bits


def test_narrow_lanes_give_the_same_levels() -> None:
    start, end, lane = _intervals()
    wide = build_pyramid(start, end, lane, 12, row_budget=40_000)
    narrow = build_pyramid(start, end, lane.astype(np.int16), 12, row_budget=40_000)
    assert len(wide.levels) == len(narrow.levels) > 2
    for a, b in zip(wide.levels, narrow.levels, strict=True):
        assert np.array_equal(a.rows, b.rows) and np.array_equal(a.offsets, b.offsets)
        assert np.array_equal(a.busy, b.busy)


def _launches(n: int) -> Trace:
    """n kernels on a GPU stream, each launched by a runtime call on a CPU thread."""
    kind = np.repeat([EventKind.RUNTIME, EventKind.KERNEL], n).astype(np.int8)
    events = {
        "start_ns": np.arange(2 * n, dtype=np.int64) * 1000,
        "dur_ns": np.full(2 * n, 500, dtype=np.int64),
        "kind": kind,
        "track": np.repeat([0, 1], n),
        "name": np.zeros(2 * n),
        "correlation": np.tile(np.arange(n) * 2 + 7, 2),
        "external_id": np.full(2 * n, -1),
    }
    tracks = {"rank": [0, 0], "device": [42, 0], "stream": [1, 7], "kind": [1, 0], "label": [0, 0]}
    return Trace(Table(EVENT_COLUMNS, events), Table(TRACK_COLUMNS, tracks), ["x"])


def test_launch_links_peak_within_40_bytes_an_event() -> None:
    trace = _launches(N // 2)
    links = launch_links(trace)
    assert np.array_equal(links[N // 2 :], np.arange(N // 2)) and (links[: N // 2] == -1).all()
    assert _peak_bytes(lambda: launch_links(trace)) / N <= 40  # was 97, through a sort of pairs
