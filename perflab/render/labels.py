"""Placing text labels on a log-log chart so that none covers another or a marker.

Positions are worked out in pixels before the chart is drawn (bokeh does not move labels),
from the figure's ranges and an estimate of its plot area; each label takes the first of a
few candidate spots beside its point that is free, and the spot is then taken.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

CHAR_PX = 6.5  # average glyph width of 9pt text
LINE_PX = 12.0  # height of one line of 9pt text
LEFT_PX, BOTTOM_PX = 90.0, 70.0  # axis space bokeh takes: y tick labels, x ticks and title
TOP_PX, RIGHT_PX = 30.0, 20.0
# (x offset, y offset, text to the left of the point): right and above first
CANDIDATES = ((8, 3, False), (8, -14, False), (-8, 3, True), (-8, -14, True), (8, 16, False),
              (8, -27, False), (-8, 16, True), (-8, -27, True))  # fmt: skip
Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels, y upwards
MAX_TICKS = 9


def stack(heights: list[float], gap: float = LINE_PX + 1) -> list[float]:
    """Offsets that keep labels at pixel ``heights`` at least ``gap`` apart: the highest
    stays, the next go down as needed."""
    out = [0.0] * len(heights)
    floor = math.inf  # the lowest height used so far
    for i in sorted(range(len(heights)), key=lambda i: -heights[i]):
        placed = min(heights[i], floor - gap)
        out[i] = placed - heights[i]
        floor = placed
    return out


def text_px(text: str) -> float:
    """The width of ``text`` in 9pt type, estimated."""
    return len(text) * CHAR_PX


def overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@dataclass
class Spot:
    """Where a label goes: offsets from its point in pixels, and on which side."""

    dx: float
    dy: float
    left: bool
    box: Box


@dataclass
class LabelPlacer:
    """Free space of a log-log plot area of ``width`` x ``height`` pixels (the figure's
    size; the axes' space is taken off) over the given data ranges."""

    x_range: tuple[float, float]
    y_range: tuple[float, float]
    width: float
    height: float
    right: float = RIGHT_PX  # more when a legend sits outside the plot
    taken: list[Box] = field(default_factory=list)

    @property
    def plot_size(self) -> tuple[float, float]:
        """Width and height of the plot area in pixels: the figure less the axes' space."""
        return self.width - LEFT_PX - self.right, self.height - BOTTOM_PX - TOP_PX

    def px(self, x: float, y: float) -> tuple[float, float]:
        (x0, x1), (y0, y1) = self.x_range, self.y_range
        w, h = self.plot_size
        fx = (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))
        fy = (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0))
        return fx * w, fy * h

    def inside(self, box: Box) -> bool:
        w, h = self.plot_size
        return box[0] >= 0 and box[1] >= 0 and box[2] <= w and box[3] <= h

    def take_marker(self, x: float, y: float, radius: float = 6) -> None:
        px, py = self.px(x, y)
        self.taken.append((px - radius, py - radius, px + radius, py + radius))

    def take_text(self, x: float, y: float, text: str, dx: float, dy: float, left: bool) -> Box:
        box = self.box(x, y, text, dx, dy, left)
        self.taken.append(box)
        return box

    def box(self, x: float, y: float, text: str, dx: float, dy: float, left: bool) -> Box:
        px, py = self.px(x, y)
        w = text_px(text)
        x0 = px + dx - w if left else px + dx
        return (x0, py + dy, x0 + w, py + dy + LINE_PX)

    def _within(self, box: Box, dx: float, dy: float) -> tuple[float, float]:
        """Offsets moved just enough that ``box`` lies inside the plot area (a label by the
        last point of a series would otherwise run past the edge and be cut off)."""
        w, h = self.plot_size
        return dx + _shift_into(box[0], box[2], w), dy + _shift_into(box[1], box[3], h)

    def place(
        self,
        x: float,
        y: float,
        text: str,
        candidates: Sequence[tuple[float, float, bool]] = CANDIDATES,
    ) -> Spot:
        """The first free spot for ``text`` among ``candidates`` (offsets from point (x, y)
        and side, each moved inside the plot where it would cross an edge), taken; if none
        is free, the one that overlaps least."""
        best: Spot | None = None
        best_hits = math.inf
        for want_dx, want_dy, left in candidates:
            dx, dy = self._within(self.box(x, y, text, want_dx, want_dy, left), want_dx, want_dy)
            box = self.box(x, y, text, dx, dy, left)
            hits = sum(overlap(box, t) for t in self.taken) + (0 if self.inside(box) else 0.5)
            if hits < best_hits:
                best, best_hits = Spot(dx, dy, left, box), hits
            if hits == 0:
                break
        assert best is not None
        self.taken.append(best.box)
        return best


def _shift_into(lo: float, hi: float, size: float) -> float:
    """How far to move [lo, hi] to lie within [0, size] (it keeps its start if too long)."""
    if lo < 0 or hi - lo > size:
        return -lo
    return min(0.0, size - hi)


def log_ticks(lo: float, hi: float, *, base: int) -> list[float]:
    """Tick positions on a log axis from ``lo`` to ``hi``: powers of ``base`` (2 for bytes,
    10 otherwise), every k-th so that at most :data:`MAX_TICKS` remain; over less than 2.5
    decades, the 1-2-5 steps inside them."""
    if not (0 < lo < hi and math.isfinite(hi)):
        return []
    if base == 10 and math.log10(hi / lo) < 2.5:
        d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        steps = [m * 10.0**d for d in range(d0, d1 + 1) for m in (1, 2, 5)]
        return [t for t in steps if lo <= t <= hi]
    p0, p1 = math.ceil(math.log(lo, base) - 1e-9), math.floor(math.log(hi, base) + 1e-9)
    every = max(1, math.ceil((p1 - p0 + 1) / MAX_TICKS))
    if base == 2:  # land on even powers (1 KiB, 4 KiB, ...) when skipping
        every += every % 2
        p0 += p0 % 2 if every > 1 else 0
    return [float(base) ** p for p in range(p0, p1 + 1, every)]
