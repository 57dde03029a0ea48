"""What a timing result warns about: samples that read no time, a median within a few
empty windows or an interval as narrow as the clock's tick, noisy samples, host-bound
samples, and which calls ran with a cold cache. Pure functions of the samples, for
:mod:`perflab.capture.timer`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from perflab.model import stats
from perflab.model.units import format_ns

NOISE_IQR_FRACTION = 0.10
WORST_OVER_BEST = 4.0
EMPTY_WINDOW_FACTOR = 5.0  # a median within 5 empty windows is mostly timing overhead


def nothing_timed(window_ns: npt.NDArray[np.float64], clock_name: str) -> str:
    """Why a run whose every sample read 0 ns (or no time at all) has no result."""
    hint = (
        "the code may put no work on the current CUDA stream (time host code with "
        "--backend cpu), or each sample is shorter than one step of the events (batch calls "
        "with -n or --hot)"
        if clock_name == "cuda"
        else "batch calls with -n or --hot"
    )
    return (
        f"every one of the {window_ns.size} samples read {_readings(window_ns)}: nothing "
        f"measurable ran between the timer's marks; {hint}"
    )


def unmeasured_warning(window_ns: npt.NDArray[np.float64], measured: npt.NDArray[np.bool_]) -> str:
    left_out = window_ns[~measured]
    return (
        f"{left_out.size} of {window_ns.size} samples read {_readings(left_out)} and are left "
        "out (a window of 0 ns is shorter than one step of the clock), so the median leans "
        "high: batch calls with -n or --hot"
    )


def _readings(window_ns: npt.NDArray[np.float64]) -> str:
    if (window_ns == 0).all():
        return "0 ns"
    return "0 ns or no time at all" if (window_ns == 0).any() else "no time a timer reports"


def timer_warnings(
    per_call: npt.NDArray[np.float64],
    number: int,
    empty_window_ns: float | None,
    tick_ns: float | None,
) -> list[str]:
    """What an empty sample's window and the clock's tick do to these samples: a median
    within EMPTY_WINDOW_FACTOR empty windows, and a tick comparable to the median's
    interval (which :attr:`TimingResult.ci95_ns` widens by one tick per call)."""
    warnings = []
    median = stats.median(per_call) * number
    if empty_window_ns is not None and median < EMPTY_WINDOW_FACTOR * empty_window_ns:
        warnings.append(
            f"the median is within {EMPTY_WINDOW_FACTOR:g}x an empty sample's window "
            f"({format_ns(empty_window_ns)} per sample, the timer's marks around nothing): "
            "the number is dominated by timing overhead; use -n to batch calls or --hot"
        )
    if tick_ns is not None:
        step = tick_ns / number
        lo, hi = stats.median_ci95(per_call)
        if 2 * step >= hi - lo:
            warnings.append(
                f"the timer's tick ({format_ns(tick_ns)} per sample, "
                f"{format_ns(step)} per call) is comparable to the median's 95% interval "
                f"({format_ns(hi - lo)} wide from the samples alone): the interval is widened "
                f"by {format_ns(step)} on each side; use -n to batch calls or --hot"
            )
    return warnings


def host_bound_warnings(
    flagged: npt.NDArray[np.bool_], undecided: npt.NDArray[np.bool_], back_to_back_ns: float | None
) -> list[str]:
    """What :func:`perflab.capture.sampling.idle_in_window` found: the samples the device
    waited for the host in, and those it may have waited in with nothing to compare."""
    warnings = []
    if flagged.any():
        versus = f", {format_ns(back_to_back_ns)}" if back_to_back_ns is not None else ""
        warnings.append(
            f"host-bound: in {int(flagged.sum())} of {flagged.size} samples the GPU waited "
            "for the host inside the timed window (it reached the window before the host had "
            "issued it, and the window was over 5% longer than the same calls queued back to "
            f"back{versus}); these samples time the host's loop: use --graph, or -n to batch "
            "calls"
        )
    if undecided.any():
        warnings.append(
            f"{int(undecided.sum())} of {undecided.size} samples may include GPU time spent "
            "waiting for the host: the GPU reached their windows before the host had issued "
            "them, and the same calls could not be timed queued back to back to compare "
            "(no queue filler, or more launches than the queue holds)"
        )
    return warnings


def noise_warnings(samples: np.ndarray, min_samples: int) -> list[str]:
    warnings = []
    med = float(np.median(samples))
    q1, q3 = np.percentile(samples, [25, 75])
    if med > 0 and (q3 - q1) / med > NOISE_IQR_FRACTION:
        warnings.append(f"noisy: IQR is {100 * (q3 - q1) / med:.0f}% of the median (> 10%)")
    best, worst = float(samples.min()), float(samples.max())
    if best > 0 and worst > WORST_OVER_BEST * best:
        warnings.append(
            f"worst sample is {worst / best:.1f}x the best (> 4x): caching, clocks or "
            "other work may have interfered"
        )
    if samples.size < min_samples:
        warnings.append(f"only {samples.size} samples: the budget allowed no more")
    return warnings


def cold_calls(flushes: bool, calls_per_sample: int, graph: bool, hot: bool = False) -> str:
    """Which calls ran with a cold cache: the flush precedes each sample, never each
    call inside one (a graph replay or ``-n`` calls share the sample's flush)."""
    if not flushes:
        return f"none (hot: {calls_per_sample:,} calls back to back per sample)" if hot else "none"
    if calls_per_sample == 1:
        return "every call"
    where = "graph replay" if graph else "sample"
    return f"first call of each {where} (1 of {calls_per_sample}; the rest ran warm)"
