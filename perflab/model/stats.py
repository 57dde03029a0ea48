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
    """``other / self`` style ratio of medians with a bootstrap 95% interval."""

    ratio: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        """True when the interval excludes 1 (no change)."""
        return self.low > 1.0 or self.high < 1.0


def median_ratio(numerator: npt.ArrayLike, denominator: npt.ArrayLike, *, seed: int = 0) -> Ratio:
    """Ratio of medians ``median(numerator) / median(denominator)`` with a bootstrap CI."""
    a = np.asarray(numerator, dtype=np.float64)
    b = np.asarray(denominator, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("both sample sets must be non-empty")
    rng = np.random.default_rng(seed)
    boot_a = np.median(rng.choice(a, size=(BOOTSTRAP_RESAMPLES, a.size)), axis=1)
    boot_b = np.median(rng.choice(b, size=(BOOTSTRAP_RESAMPLES, b.size)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = boot_a / boot_b
        point = float(np.median(a) / np.median(b))
    low, high = np.percentile(ratios, [2.5, 97.5])
    return Ratio(point, float(low), float(high))
