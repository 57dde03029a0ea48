"""Interval arithmetic on numpy arrays: unions, their lengths, intersections, coverage.

Intervals are half-open ``[start, end)`` in integer nanoseconds. All functions are
vectorised (sort + cumulative max), so a million intervals take milliseconds.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


def merge(start: npt.NDArray[np.integer], end: npt.NDArray[np.integer]) -> tuple[I64, I64]:
    """The union of intervals as disjoint, sorted ``(starts, ends)``; touching intervals
    (one ends where the next starts) are joined."""
    if len(start) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(start, kind="stable")
    s = np.asarray(start, dtype=np.int64)[order]
    e = np.maximum.accumulate(np.asarray(end, dtype=np.int64)[order])
    # a new block begins where a start lies beyond every earlier end
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > e[:-1]
    last_of_block = np.empty(len(s), dtype=bool)
    last_of_block[:-1] = new_block[1:]
    last_of_block[-1] = True
    return s[new_block], e[last_of_block]


def union_length(start: npt.NDArray[np.integer], end: npt.NDArray[np.integer]) -> int:
    s, e = merge(start, end)
    return exact_sum(e - s)


def exact_sum(values: npt.NDArray[np.integer]) -> int:
    """The exact sum of int64 values as a Python int: numpy's int64 sum wraps silently.
    Each value is split into a high and a low 32-bit half, whose int64 sums cannot wrap for
    fewer than 2**31 values; the halves are joined in Python's unbounded integers."""
    v = np.asarray(values, dtype=np.int64)
    if len(v) >= 1 << 31:  # pragma: no cover - more values than any trace holds
        return sum(exact_sum(v[i : i + (1 << 30)]) for i in range(0, len(v), 1 << 30))
    high = int(np.sum(v >> 32, dtype=np.int64))
    low = int(np.sum(v & 0xFFFFFFFF, dtype=np.int64))
    return (high << 32) + low


def coverage(starts: I64, ends: I64, t: npt.NDArray[np.integer]) -> I64:
    """For disjoint sorted intervals: total covered length before each time in ``t``."""
    if len(starts) == 0:
        return np.zeros(len(t), np.int64)
    lengths = ends - starts
    before = np.concatenate([[0], np.cumsum(lengths)])
    t = np.asarray(t, dtype=np.int64)
    k = np.searchsorted(starts, t, side="right") - 1  # last interval starting at or before t
    inside = np.clip(t - starts[np.maximum(k, 0)], 0, lengths[np.maximum(k, 0)])
    return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)


def intersection_length(a: tuple[I64, I64], b: tuple[I64, I64]) -> int:
    """Length of (union a) ∩ (union b), both given as merged ``(starts, ends)``."""
    a_s, a_e = a
    if len(a_s) == 0 or len(b[0]) == 0:
        return 0
    return int((coverage(*b, a_e) - coverage(*b, a_s)).sum())


def overlap_per_interval(
    start: npt.NDArray[np.integer], end: npt.NDArray[np.integer], other: tuple[I64, I64]
) -> I64:
    """For each interval ``[start, end)``: how much of it ``other`` (merged) covers."""
    return coverage(*other, end) - coverage(*other, start)
