"""The static strip of :class:`perflab.analysis.idle_causes.IdleCauses`: each GPU's span
cut into equal bins, each bin coloured by what held most of it (busy, or a cause's gaps)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.idle_classify import CAUSES, GapColumns
from perflab.analysis.steps import idle_in_windows
from perflab.model.trace import GPU_WORK_KINDS, Trace
from perflab.model.trace_keys import event_device_pairs

STRIP_PIXELS = 900  # bins of the static strip picture


@dataclass(frozen=True)
class Strip:
    """Each device's span (or the step's window) cut into ``pixels`` equal bins, and what
    held most of each bin: 0 busy, 1 + the cause code of the gaps that held most of it
    (gaps shorter than the result's ``min_ns`` count as busy). ``state`` has one row per
    device of ``devices``."""

    devices: list[str]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    state: npt.NDArray[np.int8]


def build_strip(
    trace: Trace,
    gaps: GapColumns,
    labels: dict[int, str],
    window: tuple[int, int] | None,
    pixels: int = STRIP_PIXELS,
) -> Strip:
    """The :class:`Strip` of ``gaps``: per device, per bin, the idle time of each cause by
    cumulative sums (no loop over gaps or bins)."""
    work = trace.mask(*GPU_WORK_KINDS)
    pair = event_device_pairs(trace)
    work &= pair >= 0
    devices = np.unique(pair[work])
    start = np.full(len(devices), np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(len(devices), np.iinfo(np.int64).min, dtype=np.int64)
    at = np.searchsorted(devices, pair[work])
    np.minimum.at(start, at, trace.start_ns[work])
    np.maximum.at(end, at, trace.start_ns[work] + trace.dur_ns[work])
    if window is not None:
        start, end = np.maximum(start, window[0]), np.maximum(np.minimum(end, window[1]), start)
    state = np.zeros((len(devices), pixels), dtype=np.int8)
    for row, device in enumerate(devices.tolist()):
        edges = np.linspace(start[row], end[row], pixels + 1).astype(np.int64)
        on = np.flatnonzero(gaps.device == device)
        idle = idle_in_windows(gaps, on, edges[:-1], edges[1:], len(CAUSES))
        busy = (edges[1:] - edges[:-1]) - idle.sum(axis=0)
        state[row] = np.argmax(np.vstack([busy, idle]), axis=0)
    return Strip([labels[d] for d in devices.tolist()], start, end, state)
