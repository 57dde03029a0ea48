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

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def merge_intervals(start: npt.ArrayLike, end: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """The union of intervals as sorted, disjoint ``(start, end)`` arrays."""
    s = np.asarray(start, dtype=np.float64)
    e = np.asarray(end, dtype=np.float64)
    if s.size == 0:
        return s.copy(), e.copy()
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # a new run starts where an interval begins after everything before it has ended
    new_run = np.empty(s.size, dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    firsts = np.flatnonzero(new_run)
    lasts = np.append(firsts[1:] - 1, s.size - 1)
    return s[firsts], reach[lasts]


def busy_before(merged_start: FloatArray, merged_end: FloatArray, x: FloatArray) -> FloatArray:
    """Busy time in ``(-inf, x)`` for each ``x``, given disjoint sorted intervals."""
    lengths = merged_end - merged_start
    done = np.concatenate(([0.0], np.cumsum(lengths)))
    j = np.searchsorted(merged_start, x, side="right")  # intervals starting at or before x
    last = np.maximum(j - 1, 0)
    partial = np.where(j > 0, np.clip(x - merged_start[last], 0.0, lengths[last]), 0.0)
    result: FloatArray = done[last] + partial if lengths.size else np.zeros_like(x)
    return result


def coverage(
    start: npt.ArrayLike, end: npt.ArrayLike, t0: float, t1: float, bins: int
) -> FloatArray:
    """Busy fraction (0..1) of each of ``bins`` equal bins of ``[t0, t1)``."""
    return _fraction(merge_intervals(start, end), t0, t1, bins)


def _fraction(merged: tuple[FloatArray, FloatArray], t0: float, t1: float, bins: int) -> FloatArray:
    if bins < 1 or not t1 > t0:
        raise ValueError(f"need bins >= 1 and t1 > t0 (got {bins}, {t0}, {t1})")
    edges = np.linspace(t0, t1, bins + 1)
    if merged[0].size == 0:
        return np.zeros(bins)
    busy = np.diff(busy_before(merged[0], merged[1], edges))
    fraction: FloatArray = np.clip(busy / np.diff(edges), 0.0, 1.0)
    return fraction


def _merged_per_lane(
    s: FloatArray, e: FloatArray, ln: IntArray, lanes: int
) -> list[tuple[FloatArray, FloatArray]]:
    order = np.argsort(ln, kind="stable")
    bounds = np.searchsorted(ln[order], np.arange(lanes + 1))
    return [
        merge_intervals(s[order[bounds[k] : bounds[k + 1]]], e[order[bounds[k] : bounds[k + 1]]])
        for k in range(lanes)
    ]


def _lane_unions(
    s: FloatArray, e: FloatArray, ln: IntArray, lanes: int, summary_lanes: npt.ArrayLike | None
) -> list[tuple[FloatArray, FloatArray]]:
    """Busy intervals of each lane, then of the union of ``summary_lanes`` (all if None)."""
    merged = _merged_per_lane(s, e, ln, lanes)
    chosen = np.arange(lanes) if summary_lanes is None else np.asarray(summary_lanes, np.int64)
    mask = np.isin(ln, chosen)
    merged.append(merge_intervals(s[mask], e[mask]))
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


def _tiles_of(
    s: FloatArray, e: FloatArray, t0: float, width: float, tiles: int
) -> tuple[IntArray, IntArray]:
    """The first and last tile each interval touches."""
    # a multiply and a cast (floor for the non-negative offsets that survive the clip) cost
    # a tenth of numpy's float floor division
    scale = 1.0 / width
    first = np.clip((s - t0) * scale, 0, tiles - 1).astype(np.int64)
    last = np.clip((e - t0) * scale, 0, tiles - 1).astype(np.int64)
    return first, last


def _select_level(
    by_length: IntArray,
    s: FloatArray,
    e: FloatArray,
    t0: float,
    span: float,
    tiles: int,
    per_tile: int,
) -> tuple[IntArray, IntArray, bool]:
    """Per tile, the ``per_tile`` longest intervals touching it (CSR: offsets, rows), and
    whether that is every interval of every tile. ``s`` and ``e`` are in ``by_length``
    order (longest first).

    Most intervals are short and lie in tiles that longer ones fill already: the longest
    few are ranked first, and later intervals only where they touch a tile not yet full."""
    first, last = _tiles_of(s, e, t0, span / tiles, tiles)
    n = by_length.size
    head = min(n, 4 * tiles * per_tile)
    _, _, head_counts = _longest_per_tile(first[:head], last[:head], tiles, per_tile)
    full = head_counts >= per_tile
    tail_first, tail_last = first[head:], last[head:]
    later = head + np.flatnonzero(~full[tail_first] | (tail_last > tail_first))
    candidates = np.concatenate([np.arange(head), later])
    offsets, picked, counts = _longest_per_tile(
        first[candidates], last[candidates], tiles, per_tile
    )
    # with intervals beyond the quick pass, some tile holds 4 x per_tile of the first ones
    # (pigeonhole), so the counts over the candidates already say "incomplete"
    complete = bool(counts.max(initial=0) <= per_tile)
    return offsets, by_length[candidates[picked]], complete


def _longest_per_tile(
    first: IntArray, last: IntArray, tiles: int, per_tile: int
) -> tuple[IntArray, IntArray, IntArray]:
    """For intervals in longest-first order touching tiles ``first..last``: per tile the
    first ``per_tile`` of them (CSR offsets, positions in the input) and how many touch it."""
    copies = last - first + 1
    # an interval spanning several tiles is listed in each (long ones are few)
    position = np.repeat(np.arange(first.size), copies)
    step = np.arange(position.size) - np.repeat(np.cumsum(copies) - copies, copies)
    tile = first[position] + step
    # stable: keeps longest-first within a tile; small integer keys get numpy's radix sort
    key = tile.astype(np.int16) if tiles <= np.iinfo(np.int16).max else tile
    order = np.argsort(key, kind="stable")
    position, tile = position[order], tile[order]
    counts = np.bincount(tile, minlength=tiles)
    begin = np.concatenate(([0], np.cumsum(counts)[:-1]))
    keep = np.arange(position.size) - begin[tile] < per_tile
    offsets = np.concatenate(([0], np.cumsum(np.minimum(counts, per_tile)))).astype(np.int64)
    return offsets, position[keep].astype(np.int64), counts


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
) -> Pyramid:
    """Pre-computed levels for a static timeline.

    Levels go down to tiles of ``finest`` x span. Each level may hold about
    ``row_budget / levels`` rows (at most ``max_per_tile`` per tile); rows a level does not
    need are left to finer levels. Level ``l`` summarises busy time in
    ``min(base_bins * factor**l, max_bins)`` bins over the whole span.
    """
    s = np.asarray(start, dtype=np.float64)
    e = np.maximum(np.asarray(end, dtype=np.float64), s)
    ln = np.asarray(lane, dtype=np.int64)
    if not (s.shape == e.shape == ln.shape):
        raise ValueError("start, end and lane must have the same length")
    if factor < 2 or not 0 < finest <= 1:
        raise ValueError("need factor >= 2 and 0 < finest <= 1")
    if s.size and (int(ln.min()) < 0 or int(ln.max()) >= lanes):
        raise ValueError(f"lane indices must lie in 0..{lanes - 1}")
    t0 = float(s.min()) if s.size else 0.0
    t1 = float(e.max()) if s.size else 1.0
    if not t1 > t0:
        t1 = t0 + 1.0
    span = t1 - t0
    # ties in length may come in any (deterministic) order, so the faster unstable sort will do
    by_length = np.argsort(-(e - s)).astype(np.int64)
    s_by_length, e_by_length = s[by_length], e[by_length]
    depth = max(0, math.ceil(math.log(1 / finest, factor) - 1e-9))
    merged = _lane_unions(s, e, ln, lanes, summary_lanes)
    levels: list[PyramidLevel] = []
    budget_left = row_budget
    for depth_i in range(depth + 1):
        tiles = factor**depth_i
        share = budget_left // (depth + 1 - depth_i)
        per_tile = int(min(max_per_tile, max(1, share // tiles)))
        offsets, rows, complete = _select_level(
            by_length, s_by_length, e_by_length, t0, span, tiles, per_tile
        )
        budget_left = max(0, budget_left - int(rows.size))
        bins = int(min(base_bins * factor**depth_i, max_bins))
        if levels and levels[-1].bins == bins:  # the same bins: the same fractions
            busy = levels[-1].busy
        else:
            busy = np.array([_fraction(m, t0, t1, bins) for m in merged])
        levels.append(PyramidLevel(tiles, offsets, rows, busy, per_tile))
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
    refines on every range change: the intervals are sorted by start and each lane's busy
    time merged once, so a query scans only the intervals that can touch the range."""

    def __init__(
        self,
        start: npt.ArrayLike,
        end: npt.ArrayLike,
        lane: npt.ArrayLike,
        lanes: int,
        *,
        summary_lanes: npt.ArrayLike | None = None,
    ) -> None:
        self.start = np.asarray(start, dtype=np.float64)
        self.end = np.maximum(np.asarray(end, dtype=np.float64), self.start)
        ln = np.asarray(lane, dtype=np.int64)
        self._by_start = np.argsort(self.start, kind="stable")
        self._sorted_start = self.start[self._by_start]
        self._longest = float((self.end - self.start).max()) if self.start.size else 0.0
        self._merged = _lane_unions(self.start, self.end, ln, lanes, summary_lanes)

    def window(self, t0: float, t1: float, *, glyphs: int = 3000, bins: int = 1500) -> Window:
        # an interval touching [t0, t1] starts in [t0 - longest, t1]
        lo = np.searchsorted(self._sorted_start, t0 - self._longest, side="left")
        hi = np.searchsorted(self._sorted_start, t1, side="right")
        near = self._by_start[lo:hi]
        picked = near[largest_visible(self.start[near], self.end[near], t0, t1, glyphs)]
        busy = np.array([_fraction(m, t0, t1, bins) for m in self._merged])
        return Window(t0, t1, np.sort(picked).astype(np.int64), busy)
