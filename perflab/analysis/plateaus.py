"""Plateaus in a sweep: the flat stretches of latency or bandwidth against working-set size
that reveal the levels of a memory hierarchy (L1, L2, L3 or HBM...).

The curve is read in log space from the smallest working set up. A plateau ends where the
next point jumps by more than ``jump`` (relative) from the previous one, or lies more than
``max_spread`` times away from the plateau's first point (so a slow climb does not merge two
levels). Stretches shorter than ``min_points`` are transitions between levels and are
dropped. A plateau's value is the median of its points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from perflab.model.machine import Level

DEFAULT_JUMP = 0.25
DEFAULT_MAX_SPREAD = 2.0
DEFAULT_MIN_POINTS = 2


def _runs(log_y: npt.NDArray[np.float64], jump: float, spread: float) -> list[tuple[int, int]]:
    """``[start, end)`` index ranges of stretches without a jump or too wide a spread."""
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, log_y.size):
        step = abs(log_y[i] - log_y[i - 1])
        drift = abs(log_y[i] - log_y[start])
        if step > jump or drift > spread:
            runs.append((start, i))
            start = i
    runs.append((start, log_y.size))
    return runs


def detect_plateaus(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    jump: float = DEFAULT_JUMP,
    max_spread: float = DEFAULT_MAX_SPREAD,
    min_points: int = DEFAULT_MIN_POINTS,
) -> list[Level]:
    """Plateaus of ``y`` (positive) over increasing ``x``, in order of ``x``.

    ``jump`` is the relative step between neighbours that starts a new level (0.25: 25%);
    ``max_spread`` the largest ratio allowed within one level. Levels are named
    ``"level 1"``, ``"level 2"``...; see :func:`name_levels` for hierarchy names.
    """
    xs = np.asarray(x, dtype=np.float64).reshape(-1)
    ys = np.asarray(y, dtype=np.float64).reshape(-1)
    if xs.size != ys.size:
        raise ValueError(f"x has {xs.size} values but y has {ys.size}")
    if jump <= 0 or max_spread <= 1 or min_points < 1:
        raise ValueError("need jump > 0, max_spread > 1 and min_points >= 1")
    keep = np.isfinite(xs) & np.isfinite(ys) & (ys > 0)
    xs, ys = xs[keep], ys[keep]
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    if xs.size == 0:
        return []
    log_y = np.log(ys)
    runs = _runs(log_y, math.log1p(jump), math.log(max_spread))
    levels: list[Level] = []
    for start, end in runs:
        if end - start < min_points:
            continue
        levels.append(
            Level(
                name=f"level {len(levels) + 1}",
                x_min=float(xs[start]),
                x_max=float(xs[end - 1]),
                value=float(np.median(ys[start:end])),
                points=end - start,
            )
        )
    return levels


def name_levels(
    levels: Sequence[Level],
    capacities: Mapping[str, float],
    *,
    memory: str,
    repeat_suffix: str | None = None,
) -> list[Level]:
    """Name plateaus after the hierarchy by where they end: a plateau is named after the
    smallest cache in ``capacities`` (``{"L1": 48K, "L2": 1M, "L3": 32M}``) that holds
    its largest working set, and ``memory`` (``"DRAM"``, ``"HBM"``) when none does.

    Neighbouring plateaus that get the same name are merged (the level keeps the value
    of its longer stretch), unless ``repeat_suffix`` is given: then the second one is
    kept apart under ``name + repeat_suffix`` (``" far"`` for the far L2 partition of a
    GPU). Without capacities every plateau keeps its generic name.
    """
    if not capacities:
        return [Level(lv.name, lv.x_min, lv.x_max, lv.value, lv.points) for lv in levels]
    ordered = sorted(capacities.items(), key=lambda item: item[1])
    named: list[Level] = []
    for lv in levels:
        name = next((cache for cache, size in ordered if lv.x_max <= size), memory)
        previous = named[-1] if named else None
        if previous is not None and previous.name.startswith(name):
            if repeat_suffix is None or previous.name != name:
                _merge_into(previous, lv)
                continue
            name += repeat_suffix
        named.append(Level(name, lv.x_min, lv.x_max, lv.value, lv.points))
    return named


def _merge_into(kept: Level, other: Level) -> None:
    if other.points > kept.points:
        kept.value = other.value
    kept.x_max = other.x_max
    kept.points += other.points
