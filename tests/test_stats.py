from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflab.model import stats


def test_median_and_iqr_match_numpy() -> None:
    x = np.arange(1, 101, dtype=float)
    assert stats.median(x) == 50.5
    assert stats.iqr(x) == pytest.approx(np.percentile(x, 75) - np.percentile(x, 25))


def test_ci_covers_true_median_about_95_percent() -> None:
    # Coverage check of the order-statistic interval on a skewed distribution.
    rng = np.random.default_rng(1)
    true_median = math.log(2)  # exponential(1)
    hits = 0
    trials = 2000
    for _ in range(trials):
        lo, hi = stats.median_ci95(rng.exponential(size=51))
        hits += lo <= true_median <= hi
    assert 0.93 <= hits / trials <= 0.985


@given(st.lists(st.floats(1.0, 1e9), min_size=1, max_size=300))
@settings(max_examples=200, deadline=None)
def test_ci_brackets_sample_median(values: list[float]) -> None:
    lo, hi = stats.median_ci95(values)
    med = stats.median(values)
    assert min(values) <= lo <= med <= hi <= max(values)


def test_ratio_detects_a_real_difference_and_not_a_fake_one() -> None:
    rng = np.random.default_rng(2)
    base = rng.normal(100, 2, 200)
    slower = rng.normal(120, 2, 200)
    same = rng.normal(100, 2, 200)
    r = stats.median_ratio(slower, base)
    assert r.significant and r.low > 1.15 and r.high < 1.25
    assert not stats.median_ratio(same, base).significant


def test_ratio_rejects_empty() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        stats.median_ratio([], [1.0])


def test_chunked_bootstrap_draws_the_same_resamples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drawing the resamples in chunks (bounded memory) gives exactly the interval that one
    big draw gives: the generator's stream is consumed in the same order."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(10, 1, 500), rng.normal(12, 1, 400)
    whole = stats.median_ratio(a, b)
    monkeypatch.setattr(stats, "BOOTSTRAP_CHUNK_VALUES", 1000)  # two resamples per chunk
    chunked = stats.median_ratio(a, b)
    assert (chunked.ratio, chunked.low, chunked.high) == (whole.ratio, whole.low, whole.high)
    assert "subsample" not in chunked.method


@pytest.mark.parametrize(
    ("a", "b"),
    [([0.0, 0.0], [1.0]), ([1.0], [0.0, 0.0]), ([math.nan], [1.0]), ([1.0], [-2.0])],
)
def test_ratio_refuses_samples_without_a_ratio(a: list[float], b: list[float]) -> None:
    """A median of 0 gave a ratio of inf and an interval of nan."""
    with pytest.raises(ValueError, match="finite samples above 0"):
        stats.median_ratio(a, b)


def test_ratio_beyond_float_range_is_refused() -> None:
    with pytest.raises(ValueError, match="beyond the range"):
        stats.median_ratio([1e300], [1e-300])
