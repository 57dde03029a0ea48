"""Sample statistics for timings: medians, spreads and distribution-free intervals.

These live in the model layer because they define what a TimingResult *is*
(its median and interval); analysis re-exports them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_CHUNK_VALUES = 4_000_000  # values drawn at once: 32 MB of float64
BOOTSTRAP_MAX_SAMPLES = 50_000  # larger sets are subsampled (the method says so)


def median(samples: npt.ArrayLike) -> float:
    return float(np.median(np.asarray(samples, dtype=np.float64)))


def iqr(samples: npt.ArrayLike) -> float:
    q1, q3 = np.percentile(np.asarray(samples, dtype=np.float64), [25, 75])
    return float(q3 - q1)


def median_ci95(samples: npt.ArrayLike) -> tuple[float, float]:
    """Order-statistic 95% interval of the median (no normality assumed).

    Ranks come from the binomial(n, 1/2) distribution by its normal approximation;
    with fewer than 6 samples the interval is the sample range.
    """
    ordered = np.sort(np.asarray(samples, dtype=np.float64))
    n = ordered.size
    if n == 0:
        return (math.nan, math.nan)
    if n < 6:
        return (float(ordered[0]), float(ordered[-1]))
    half_width = Z95 * math.sqrt(n) / 2.0
    lo = max(0, math.floor(n / 2.0 - half_width) - 1)
    hi = min(n - 1, math.ceil(n / 2.0 + half_width))
    return (float(ordered[lo]), float(ordered[hi]))


@dataclass(frozen=True)
class Ratio:
    """``other / self`` style ratio of medians with a bootstrap 95% interval; ``method``
    says how the interval was computed."""

    ratio: float
    low: float
    high: float
    method: str = ""

    @property
    def significant(self) -> bool:
        """True when the interval excludes 1 (no change)."""
        return self.low > 1.0 or self.high < 1.0


def _bootstrap_medians(
    values: npt.NDArray[np.float64], rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Medians of BOOTSTRAP_RESAMPLES resamples, drawn in chunks of about
    BOOTSTRAP_CHUNK_VALUES values, so memory stays bounded whatever the sample count."""
    rows = max(1, BOOTSTRAP_CHUNK_VALUES // values.size)
    out = np.empty(BOOTSTRAP_RESAMPLES, dtype=np.float64)
    for first in range(0, BOOTSTRAP_RESAMPLES, rows):
        count = min(rows, BOOTSTRAP_RESAMPLES - first)
        out[first : first + count] = np.median(
            rng.choice(values, size=(count, values.size)), axis=1
        )
    return out


def _bounded(values: npt.NDArray[np.float64], rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """At most BOOTSTRAP_MAX_SAMPLES of ``values``, drawn at random without replacement."""
    if values.size <= BOOTSTRAP_MAX_SAMPLES:
        return values
    return rng.choice(values, size=BOOTSTRAP_MAX_SAMPLES, replace=False)


def median_ratio(numerator: npt.ArrayLike, denominator: npt.ArrayLike, *, seed: int = 0) -> Ratio:
    """Ratio of medians ``median(numerator) / median(denominator)`` with a bootstrap CI.

    Resamples are drawn in chunks (memory stays near BOOTSTRAP_CHUNK_VALUES values); a
    set of more than BOOTSTRAP_MAX_SAMPLES samples is bootstrapped from a random subsample
    of that size, which widens the interval (conservative); ``method`` says which.
    The point estimate always uses every sample. Samples must be finite and above 0 (a
    median of 0 has no ratio); a ValueError says so.
    """
    a = np.asarray(numerator, dtype=np.float64).reshape(-1)
    b = np.asarray(denominator, dtype=np.float64).reshape(-1)
    if a.size == 0 or b.size == 0:
        raise ValueError("both sample sets must be non-empty")
    for values in (a, b):
        if not (np.isfinite(values).all() and (values > 0).all()):
            raise ValueError("a ratio of medians needs finite samples above 0")
    rng = np.random.default_rng(seed)
    sub_a, sub_b = _bounded(a, rng), _bounded(b, rng)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
        ratios = _bootstrap_medians(sub_a, rng) / _bootstrap_medians(sub_b, rng)
        point = float(np.median(a) / np.median(b))
        low, high = np.percentile(ratios, [2.5, 97.5])
    if not np.isfinite([point, low, high]).all():
        raise ValueError("the ratio of medians is beyond the range of a float")
    method = f"bootstrap of the medians, {BOOTSTRAP_RESAMPLES} resamples"
    if sub_a.size < a.size or sub_b.size < b.size:
        method += (
            f", from random subsamples of at most {BOOTSTRAP_MAX_SAMPLES:,} samples per set "
            f"({a.size:,} and {b.size:,} given; the interval is wider than the full sets')"
        )
    return Ratio(point, float(low), float(high), method)
