"""Interval arithmetic on numpy arrays: unions, their lengths, intersections, coverage.

Intervals are half-open ``[start, end)`` in integer nanoseconds. All functions are
vectorised (sort + cumulative max), so a million intervals take milliseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


def merge(start: npt.NDArray[Any], end: npt.NDArray[Any]) -> tuple[I64, I64]:
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


def union_length(start: npt.NDArray[Any], end: npt.NDArray[Any]) -> int:
    s, e = merge(start, end)
    return int((e - s).sum())


def coverage(starts: I64, ends: I64, t: npt.NDArray[Any]) -> I64:
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
    start: npt.NDArray[Any], end: npt.NDArray[Any], other: tuple[I64, I64]
) -> I64:
    """For each interval ``[start, end)``: how much of it ``other`` (merged) covers."""
    return coverage(*other, end) - coverage(*other, start)
