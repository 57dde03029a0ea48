"""Plateau detection on synthetic curves with known levels, and naming by cache size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflab.analysis.plateaus import detect_plateaus, name_levels
from perflab.model.machine import Level

KIB = 1 << 10
MIB = 1 << 20


def staircase(values: list[float], per_level: int, noise: float = 0.0, seed: int = 0):
    """Sizes doubling from 4 KiB, ``per_level`` points at each value, multiplicative noise."""
    rng = np.random.default_rng(seed)
    y = np.repeat(values, per_level) * (1 + noise * rng.uniform(-1, 1, len(values) * per_level))
    x = 4 * KIB * 2.0 ** np.arange(y.size)
    return x, y


def test_clean_staircase_gives_each_level_and_its_range():
    x, y = staircase([1.4, 4.0, 15.0, 150.0], per_level=4)
    levels = detect_plateaus(x, y)
    assert [lv.value for lv in levels] == pytest.approx([1.4, 4.0, 15.0, 150.0])
    assert [lv.points for lv in levels] == [4, 4, 4, 4]
    assert levels[0].x_min == 4 * KIB and levels[0].x_max == 32 * KIB
    assert levels[1].x_min == 64 * KIB


def test_noisy_staircase_values_within_noise():
    x, y = staircase([2.0, 8.0, 40.0], per_level=5, noise=0.05, seed=3)
    levels = detect_plateaus(x, y)
    assert len(levels) == 3
    for level, true in zip(levels, [2.0, 8.0, 40.0], strict=True):
        assert level.value == pytest.approx(true, rel=0.06)


def test_single_transition_points_are_dropped():
    # L1, one point half-way, L2: the lone point is a transition, not a level
    x = 4 * KIB * 2.0 ** np.arange(7)
    y = np.array([1.0, 1.0, 1.0, 2.2, 5.0, 5.0, 5.0])
    levels = detect_plateaus(x, y)
    assert [lv.value for lv in levels] == [1.0, 5.0]


def test_slow_climb_is_split_by_max_spread():
    # a steady 20% climb per point never jumps, but spans 1 -> ~9x: not one level
    x = 4 * KIB * 2.0 ** np.arange(13)
    y = 1.2 ** np.arange(13)
    levels = detect_plateaus(x, y, max_spread=2.0)
    assert len(levels) >= 3
    for lv in levels:
        inside = y[(x >= lv.x_min) & (x <= lv.x_max)]
        assert inside.max() / inside.min() <= 2.0


def test_decreasing_bandwidth_curve_works_too():
    x, y = staircase([200.0, 100.0, 40.0], per_level=3)
    assert [lv.value for lv in detect_plateaus(x, y)] == pytest.approx([200.0, 100.0, 40.0])


def test_unsorted_input_and_non_finite_points_are_handled():
    x, y = staircase([1.0, 10.0], per_level=3)
    order = np.array([5, 0, 3, 1, 4, 2])
    y_bad = y.copy()
    y_bad[0] = np.nan  # dropped, leaving two points in the first level
    levels = detect_plateaus(x[order], y_bad[order])
    assert [lv.value for lv in levels] == [1.0, 10.0]
    assert levels[0].points == 2


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="x has 3 values but y has 2"):
        detect_plateaus([1, 2, 3], [1, 2])
    with pytest.raises(ValueError):
        detect_plateaus([1, 2], [1, 2], jump=0)
    assert detect_plateaus([], []) == []


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(0.5, 2.0), min_size=2, max_size=5),
    per_level=st.integers(3, 6),
    seed=st.integers(0, 1000),
)
def test_separated_levels_are_all_found(values, per_level, seed):
    # levels at least 3x apart (each step multiplies by 3..6), noise under 5%
    true = list(np.cumprod([1.0] + [3.0 * v for v in values[1:]]) * values[0])
    x, y = staircase(true, per_level, noise=0.04, seed=seed)
    levels = detect_plateaus(x, y)
    assert len(levels) == len(true)
    for level, expected in zip(levels, true, strict=True):
        assert level.value == pytest.approx(expected, rel=0.05)
        assert level.points == per_level


CPU_CACHES = {"L1": 48 * KIB, "L2": 1 * MIB, "L3": 32 * MIB}


def level(x_min: float, x_max: float, value: float, points: int = 3) -> Level:
    return Level("level", x_min, x_max, value, points)


def test_levels_named_by_the_cache_that_holds_them():
    levels = [
        level(4 * KIB, 32 * KIB, 1.3),
        level(64 * KIB, 512 * KIB, 4.0),
        level(2 * MIB, 4 * MIB, 15.0),
        level(8 * MIB, 256 * MIB, 150.0),
    ]
    named = name_levels(levels, CPU_CACHES, memory="DRAM")
    assert [lv.name for lv in named] == ["L1", "L2", "L3", "DRAM"]
    assert levels[0].name == "level"  # the input is not modified


def test_same_cache_twice_merges_unless_a_suffix_is_asked_for():
    levels = [
        level(256 * KIB, 2 * MIB, 260.0, 5),
        level(4 * MIB, 30 * MIB, 400.0, 2),
        level(64 * MIB, 1024 * MIB, 650.0),
    ]
    gpu = {"L1": 256 * KIB, "L2": 50 * MIB}
    merged = name_levels(levels, gpu, memory="HBM")
    assert [(lv.name, lv.value, lv.points) for lv in merged] == [
        ("L2", 260.0, 7),
        ("HBM", 650.0, 3),
    ]
    assert merged[0].x_max == 30 * MIB
    apart = name_levels(levels, gpu, memory="HBM", repeat_suffix=" far")
    assert [lv.name for lv in apart] == ["L2", "L2 far", "HBM"]


def test_without_capacities_generic_names_stay():
    levels = detect_plateaus(*staircase([1.0, 5.0], per_level=3))
    assert [lv.name for lv in name_levels(levels, {}, memory="DRAM")] == ["level 1", "level 2"]
