"""Level of detail for timelines with millions of intervals.

At any zoom the largest visible intervals are drawn as glyphs (a few thousand) and everything
is summarised as a busy fraction per pixel (the union of intervals, so nested or overlapping
ones count once). For a static file, :func:`build_pyramid` pre-computes levels: level ``l``
cuts the span into ``factor**l`` tiles and keeps, per tile, the largest intervals that touch
it, within a total row budget; every level also carries a busy-fraction row per lane.

Everything works on plain numpy arrays: ``start`` and ``end`` (any unit, float or int) and a
``lane`` index per interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.model.trace import distinct

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
# rows and tiles held at 32 bits where they fit (numpy's own indices are 64-bit)
Index = npt.NDArray[np.signedinteger[Any]]


def merge_intervals(start: npt.ArrayLike, end: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """The union of intervals as sorted, disjoint ``(start, end)`` arrays."""
    s = np.asarray(start, dtype=np.float64)
    e = np.asarray(end, dtype=np.float64)
    if s.size == 0:
        return s.copy(), e.copy()
    if _ascending(s):  # a lane's events come by start already: the sort would keep them
        reach = np.maximum.accumulate(e)
    else:
        order = np.argsort(s, kind="stable")
        s, reach = s[order], e[order]
        del order
        np.maximum.accumulate(reach, out=reach)
    # a new run starts where an interval begins after everything before it has ended
    new_run = np.empty(s.size, dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    firsts = np.flatnonzero(new_run)
    lasts = np.append(firsts[1:] - 1, s.size - 1)
    return s[firsts], reach[lasts]


def _ascending(values: FloatArray) -> bool:
    """Whether ``values`` never decrease (NaN never counts as in order)."""
    return bool((values[1:] >= values[:-1]).all())


def busy_before(
    merged_start: FloatArray, merged_end: FloatArray, x: FloatArray, done: FloatArray | None = None
) -> FloatArray:
    """Busy time in ``(-inf, x)`` for each ``x``, given disjoint sorted intervals; ``done``
    (:func:`busy_until`, when kept from an earlier call) saves summing them again."""
    if merged_start.size == 0:
        return np.zeros_like(x)
    done = busy_until(merged_start, merged_end) if done is None else done
    j = np.searchsorted(merged_start, x, side="right")  # intervals starting at or before x
    last = np.maximum(j - 1, 0)
    # only the intervals the points fall in: with ``done`` kept, a call costs the points
    length = merged_end[last] - merged_start[last]
    partial = np.where(j > 0, np.clip(x - merged_start[last], 0.0, length), 0.0)
    result: FloatArray = done[last] + partial
    return result


def coverage(
    start: npt.ArrayLike, end: npt.ArrayLike, t0: float, t1: float, bins: int
) -> FloatArray:
    """Busy fraction (0..1) of each of ``bins`` equal bins of ``[t0, t1)``."""
    return _fraction(merge_intervals(start, end), t0, t1, bins)


def busy_until(merged_start: FloatArray, merged_end: FloatArray) -> FloatArray:
    """Busy time before each of disjoint sorted intervals, and in all of them (last)."""
    return np.concatenate(([0.0], np.cumsum(merged_end - merged_start)))


def _fraction(
    merged: tuple[FloatArray, FloatArray],
    t0: float,
    t1: float,
    bins: int,
    done: FloatArray | None = None,
) -> FloatArray:
    if bins < 1 or not t1 > t0:
        raise ValueError(f"need bins >= 1 and t1 > t0 (got {bins}, {t0}, {t1})")
    edges = np.linspace(t0, t1, bins + 1)
    if merged[0].size == 0:
        return np.zeros(bins)
    busy = np.diff(busy_before(merged[0], merged[1], edges, done))
    fraction: FloatArray = np.clip(busy / np.diff(edges), 0.0, 1.0)
    return fraction


def _merged_per_lane(
    s: FloatArray, e: FloatArray, ln: Index, lanes: int
) -> list[tuple[FloatArray, FloatArray]]:
    order = np.argsort(ln, kind="stable")
    if ln.size and int(ln.min()) >= 0:  # each lane's share of ``order``, from counts
        bounds = np.concatenate(([0], np.cumsum(np.bincount(ln, minlength=lanes)[:lanes])))
    else:  # lanes below 0 (drawn in none) sort first
        bounds = np.searchsorted(ln[order], np.arange(lanes + 1))
    return [
        merge_intervals(s[order[bounds[k] : bounds[k + 1]]], e[order[bounds[k] : bounds[k + 1]]])
        for k in range(lanes)
    ]


Unions = list[tuple[FloatArray, FloatArray]]


def lane_unions(
    start: npt.ArrayLike,
    end: npt.ArrayLike,
    lane: npt.ArrayLike,
    lanes: int,
    summary_lanes: npt.ArrayLike | None = None,
) -> Unions:
    """Busy intervals (disjoint, sorted ``(start, end)`` arrays) of each lane, then of the
    union of ``summary_lanes`` (all if None): what :func:`build_pyramid` and
    :class:`WindowIndex` summarise as busy fractions, worked out once for both."""
    s = np.asarray(start, dtype=np.float64)
    e = _ends(np.asarray(end, dtype=np.float64), s)
    return _lane_unions(s, e, _lanes(lane), lanes, summary_lanes)


def _lane_unions(
    s: FloatArray, e: FloatArray, ln: Index, lanes: int, summary_lanes: npt.ArrayLike | None
) -> Unions:
    """Busy intervals of each lane, then of the union of ``summary_lanes`` (all if None).
    The union is merged from the lanes' busy intervals (a union of unions is the union, run
    for run), not from every interval again."""
    merged = _merged_per_lane(s, e, ln, lanes)
    chosen = np.arange(lanes) if summary_lanes is None else np.asarray(summary_lanes, np.int64)
    picked = [merged[k] for k in distinct(chosen[(chosen >= 0) & (chosen < lanes)]).tolist()]
    starts = [m[0] for m in picked] or [np.zeros(0)]
    ends = [m[1] for m in picked] or [np.zeros(0)]
    merged.append(merge_intervals(np.concatenate(starts), np.concatenate(ends)))
    return merged


def lane_coverage(
    start: npt.ArrayLike,
    end: npt.ArrayLike,
    lane: npt.ArrayLike,
    lanes: int,
    t0: float,
    t1: float,
    bins: int,
) -> FloatArray:
    """:func:`coverage` for each lane: an array of shape ``(lanes, bins)``."""
    merged = _merged_per_lane(
        np.asarray(start, dtype=np.float64),
        np.asarray(end, dtype=np.float64),
        np.asarray(lane, dtype=np.int64),
        lanes,
    )
    return np.array([_fraction(m, t0, t1, bins) for m in merged]).reshape(lanes, bins)


def largest_visible(
    start: npt.ArrayLike, end: npt.ArrayLike, t0: float, t1: float, k: int
) -> IntArray:
    """Indices of at most ``k`` intervals touching ``[t0, t1]`` with the longest visible
    part, in index order: what a live view draws as glyphs."""
    s = np.asarray(start, dtype=np.float64)
    e = np.asarray(end, dtype=np.float64)
    seen = np.flatnonzero((e >= t0) & (s <= t1))
    if seen.size > k:
        visible = np.minimum(e[seen], t1) - np.maximum(s[seen], t0)
        seen = np.sort(seen[np.argpartition(-visible, k - 1)[:k]])
    return seen.astype(np.int64)


@dataclass
class PyramidLevel:
    """One level of the pyramid: ``tiles`` equal tiles over the span.

    ``rows`` holds interval indices, tile by tile (tile ``i`` owns
    ``rows[offsets[i]:offsets[i+1]]``, longest first); ``busy`` is ``(lanes + 1, bins)``:
    busy fraction per lane, then of the lanes flagged in ``summary_lanes``.
    """

    tiles: int
    offsets: IntArray
    rows: IntArray
    busy: FloatArray
    per_tile: int

    @property
    def bins(self) -> int:
        return int(self.busy.shape[1])


@dataclass
class Pyramid:
    t0: float
    t1: float
    factor: int
    levels: list[PyramidLevel]

    @property
    def total_rows(self) -> int:
        return sum(int(lv.rows.size) for lv in self.levels)

    def level_for(self, view_width: float) -> int:
        """The finest level whose tiles are at least half the view wide (so a view
        touches at most three tiles)."""
        span = self.t1 - self.t0
        best = 0
        for i, level in enumerate(self.levels):
            if span / level.tiles >= view_width / 2:
                best = i
        return best


class _TileFinder:
    """The first and last tile each interval touches, at any number of tiles, for intervals
    in longest-first order. Their offsets from ``t0`` are kept in that order and the tiles
    worked out a block at a time: a level costs its two small tile columns, not copies of
    the times."""

    BLOCK = 1 << 16  # intervals per block

    def __init__(self, s: FloatArray, e: FloatArray, by_length: Index, t0: float) -> None:
        self.start, self.end = np.empty_like(s), np.empty_like(e)
        for at in range(0, s.size, self.BLOCK):  # numpy widens int32 indices: a block at a time
            rows = by_length[at : at + self.BLOCK].astype(np.intp)
            np.take(s, rows, out=self.start[at : at + rows.size])
            np.take(e, rows, out=self.end[at : at + rows.size])
        self.start -= t0
        self.end -= t0
        self.scratch = np.empty(min(self.start.size, self.BLOCK))

    def tiles(self, width: float, tiles: int) -> tuple[Index, Index]:
        # a multiply and a cast (floor for the non-negative offsets that survive the clip)
        # cost a tenth of numpy's float floor division
        scale = 1.0 / width
        dtype = np.int32 if tiles <= np.iinfo(np.int32).max else np.int64
        out: list[Index] = []
        for offset in (self.start, self.end):
            tile: Index = np.empty(offset.size, dtype=dtype)
            for at in range(0, offset.size, self.BLOCK):
                block = self.scratch[: min(self.BLOCK, offset.size - at)]
                np.multiply(offset[at : at + block.size], scale, out=block)
                np.clip(block, 0, tiles - 1, out=block)
                tile[at : at + block.size] = block  # the cast truncates, as astype does
            out.append(tile)
        return out[0], out[1]


def _select_level(
    by_length: Index, finder: _TileFinder, span: float, tiles: int, per_tile: int
) -> tuple[IntArray, IntArray, bool]:
    """Per tile, the ``per_tile`` longest intervals touching it (CSR: offsets, rows), and
    whether that is every interval of every tile. ``finder`` holds the intervals in
    ``by_length`` order (longest first).

    Most intervals are short and lie in tiles that longer ones fill already: the longest
    few are ranked first, and later intervals only where they touch a tile not yet full."""
    first, last = finder.tiles(span / tiles, tiles)
    n = by_length.size
    head = min(n, 4 * tiles * per_tile)
    _, _, head_counts = _longest_per_tile(first[:head], last[:head], tiles, per_tile)
    full = head_counts >= per_tile
    tail_first, tail_last = first[head:], last[head:]
    later = np.flatnonzero(~full[tail_first] | (tail_last > tail_first))
    del tail_first, tail_last
    later += head
    candidates = np.concatenate(
        [np.arange(head, dtype=by_length.dtype), later], dtype=by_length.dtype
    )
    del later
    first, last = first[candidates], last[candidates]
    offsets, picked, counts = _longest_per_tile(first, last, tiles, per_tile)
    # with intervals beyond the quick pass, some tile holds 4 x per_tile of the first ones
    # (pigeonhole), so the counts over the candidates already say "incomplete"
    complete = bool(counts.max(initial=0) <= per_tile)
    return offsets, by_length[candidates[picked]].astype(np.int64), complete


def _longest_per_tile(
    first: Index, last: Index, tiles: int, per_tile: int
) -> tuple[IntArray, IntArray, IntArray]:
    """For intervals in longest-first order touching tiles ``first..last``: per tile the
    first ``per_tile`` of them (CSR offsets, positions in the input) and how many touch it."""
    copies = last - first + 1
    total = int(copies.sum(dtype=np.int64))
    index = np.int32 if total < np.iinfo(np.int32).max else np.int64
    if total == first.size:  # each in one tile (the common case): no listing to build
        position, tile = np.arange(first.size, dtype=index), first
    else:  # an interval spanning several tiles is listed in each (long ones are few)
        position = np.repeat(np.arange(first.size, dtype=index), copies)
        step = np.arange(total, dtype=index) - np.repeat(
            (np.cumsum(copies) - copies).astype(index), copies
        )
        tile = first[position] + step
        del step
    del copies
    # stable: keeps longest-first within a tile; small integer keys get numpy's radix sort
    key = tile.astype(np.int16) if tiles <= np.iinfo(np.int16).max else tile
    order = np.argsort(key, kind="stable")
    del key
    position, tile = position[order], tile[order]
    del order
    counts = np.bincount(tile, minlength=tiles)
    begin = np.concatenate(([0], np.cumsum(counts)[:-1]))
    keep = np.less(np.arange(position.size, dtype=index) - begin[tile], per_tile)
    offsets = np.concatenate(([0], np.cumsum(np.minimum(counts, per_tile)))).astype(np.int64)
    return offsets, position[keep].astype(np.int64), counts


def _lanes(lane: npt.ArrayLike) -> Index:
    """The lane column as given when it holds integers (int32 lanes are not widened: a copy
    of 8 bytes an interval), else as int64."""
    ln = np.asarray(lane)
    return ln if np.issubdtype(ln.dtype, np.signedinteger) else ln.astype(np.int64)


def _ends(end: FloatArray, s: FloatArray) -> FloatArray:
    """``max(end, start)`` per interval; ``end`` itself (no copy) when no end is earlier."""
    earlier = bool(np.less(end, s).any())
    return np.maximum(end, s) if earlier else end


def _longest_first(s: FloatArray, e: FloatArray) -> Index:
    """Interval indices, longest first."""
    negative_length = np.subtract(s, e)
    # ties in length may come in any (deterministic) order, so the faster unstable sort will do
    order = np.argsort(negative_length)
    del negative_length
    # rows held as int32 while the levels are chosen: half the memory of numpy's indices
    narrow: Index = order.astype(np.int32) if order.size < np.iinfo(np.int32).max else order
    return narrow


def build_pyramid(
    start: npt.ArrayLike,
    end: npt.ArrayLike,
    lane: npt.ArrayLike,
    lanes: int,
    *,
    summary_lanes: npt.ArrayLike | None = None,
    factor: int = 4,
    finest: float = 1 / 1024,
    max_per_tile: int = 2000,
    row_budget: int = 150_000,
    base_bins: int = 1024,
    max_bins: int = 8192,
    unions: Unions | None = None,
) -> Pyramid:
    """Pre-computed levels for a static timeline.

    Levels go down to tiles of ``finest`` x span. Each level may hold about
    ``row_budget / levels`` rows (at most ``max_per_tile`` per tile); rows a level does not
    need are left to finer levels. Level ``l`` summarises busy time in
    ``min(base_bins * factor**l, max_bins)`` bins over the whole span. ``unions``: the
    :func:`lane_unions` of these intervals, when the caller keeps them for a live view too.
    """
    s = np.asarray(start, dtype=np.float64)
    ln = _lanes(lane)
    if not (s.shape == np.shape(end) == ln.shape):
        raise ValueError("start, end and lane must have the same length")
    if factor < 2 or not 0 < finest <= 1:
        raise ValueError("need factor >= 2 and 0 < finest <= 1")
    if s.size and (int(ln.min()) < 0 or int(ln.max()) >= lanes):
        raise ValueError(f"lane indices must lie in 0..{lanes - 1}")
    e = _ends(np.asarray(end, dtype=np.float64), s)
    t0 = float(s.min()) if s.size else 0.0
    t1 = float(e.max()) if s.size else 1.0
    if not t1 > t0:
        t1 = t0 + 1.0
    span = t1 - t0
    depth = max(0, math.ceil(math.log(1 / finest, factor) - 1e-9))
    bins = [int(min(base_bins * factor**i, max_bins)) for i in range(depth + 1)]
    # every level's busy fractions first: the lanes' busy intervals and their sorts are let
    # go of before the levels' columns exist
    merged = _lane_unions(s, e, ln, lanes, summary_lanes) if unions is None else unions
    busy = {b: np.array([_fraction(m, t0, t1, b) for m in merged]) for b in dict.fromkeys(bins)}
    del merged
    by_length = _longest_first(s, e)
    finder = _TileFinder(s, e, by_length, t0)
    levels: list[PyramidLevel] = []
    budget_left = row_budget
    for depth_i in range(depth + 1):
        tiles = factor**depth_i
        share = budget_left // (depth + 1 - depth_i)
        per_tile = int(min(max_per_tile, max(1, share // tiles)))
        offsets, rows, complete = _select_level(by_length, finder, span, tiles, per_tile)
        budget_left = max(0, budget_left - int(rows.size))
        levels.append(PyramidLevel(tiles, offsets, rows, busy[bins[depth_i]], per_tile))
        if complete:
            break  # every interval is drawn at this level: finer levels add nothing
    return Pyramid(t0, t1, factor, levels)


@dataclass
class Window:
    """What a live view draws for the visible range ``[t0, t1]``: the intervals with the
    longest visible part (indices, in index order) and ``busy``, shaped ``(lanes + 1, bins)``
    like :attr:`PyramidLevel.busy`."""

    t0: float
    t1: float
    rows: IntArray
    busy: FloatArray


class WindowIndex:
    """Answers "what is visible in ``[t0, t1]``" from all intervals, for a live view that
    refines on every range change; each lane's busy time is merged (and summed) once.

    The intervals are sorted by start within classes of length (each class spans a factor
    of :attr:`CLASS_RATIO`), so that a query scans, per class, only the intervals that start
    within that class's longest length before the range: one long interval (a profiler
    step spanning the trace) no longer makes every query scan every interval before it."""

    CLASS_RATIO = 4  # lengths within one class differ by at most this factor

    def __init__(
        self,
        start: npt.ArrayLike,
        end: npt.ArrayLike,
        lane: npt.ArrayLike,
        lanes: int,
        *,
        summary_lanes: npt.ArrayLike | None = None,
        unions: Unions | None = None,
    ) -> None:
        self.start = np.asarray(start, dtype=np.float64)
        self.end = _ends(np.asarray(end, dtype=np.float64), self.start)
        if unions is None:
            unions = _lane_unions(self.start, self.end, _lanes(lane), lanes, summary_lanes)
        self._merged = unions
        self._done = [busy_until(*m) for m in unions]
        self._order, self._bounds, self._reach = _by_length_class(self.start, self.end)
        self._sorted_start = self.start[self._order]

    def near(self, t0: float, t1: float) -> Index:
        """Every interval that may touch ``[t0, t1]`` (a few more at the edges), by class."""
        parts = []
        for k, reach in enumerate(self._reach.tolist()):
            first, last = int(self._bounds[k]), int(self._bounds[k + 1])
            starts = self._sorted_start[first:last]
            lo = first + int(np.searchsorted(starts, t0 - reach, side="left"))
            hi = first + int(np.searchsorted(starts, t1, side="right"))
            parts.append(self._order[lo:hi])
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def window(self, t0: float, t1: float, *, glyphs: int = 3000, bins: int = 1500) -> Window:
        near = self.near(t0, t1)
        picked = near[largest_visible(self.start[near], self.end[near], t0, t1, glyphs)]
        merged = zip(self._merged, self._done, strict=True)
        busy = np.array([_fraction(m, t0, t1, bins, done) for m, done in merged])
        return Window(t0, t1, np.sort(picked).astype(np.int64), busy)


def _by_length_class(start: FloatArray, end: FloatArray) -> tuple[Index, IntArray, FloatArray]:
    """Interval indices sorted by class of length, then by start; each class's share of
    them (bounds, CSR) and its longest length. A class holds the lengths whose binary
    exponents fall in one pair: a factor of at most 4 (:attr:`WindowIndex.CLASS_RATIO`)."""
    length = end - start
    exponent = np.frexp(length)[1]  # length = m * 2**exponent, 0.5 <= m < 1 (0 for 0)
    del length
    low = int(exponent.min(initial=0))
    classes = ((exponent - low) // 2).astype(np.int16)  # a handful of small keys: radix sort
    del exponent
    if _ascending(start):  # events come by start already: order by class keeps that
        order = np.argsort(classes, kind="stable")
    else:
        by_start = np.argsort(start, kind="stable")
        order = by_start[np.argsort(classes[by_start], kind="stable")]
        del by_start
    count = np.bincount(classes, minlength=1)
    bounds = np.concatenate(([0], np.cumsum(count))).astype(np.int64)
    lengths = end[order] - start[order]
    reach = np.zeros(count.size)
    filled = np.flatnonzero(count)
    if filled.size:
        reach[filled] = np.maximum.reduceat(lengths, bounds[filled])
    narrow: Index = order.astype(np.int32) if order.size < np.iinfo(np.int32).max else order
    return narrow, bounds, reach
