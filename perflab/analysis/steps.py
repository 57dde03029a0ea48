"""Training steps: the ``ProfilerStep#<n>`` ranges torch.profiler records on the host, and
which GPU work and which idle gaps belong to each.

A step's host range is where its ``ProfilerStep#<n>`` events lie (their earliest start to
latest end; several ranks of a merged trace are joined). GPU work belongs to the step whose
host range contains the start of the runtime call that launched it; a gap belongs to the
step that launched the work ending it (work with no launch call: the step that launched the
first work after it on the device). So every gap has one step at most, and a step's GPU
window (the gap before its first work, through the end of its last work) follows the
previous step's without overlap when the GPU runs work in launch order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.model.trace import GPU_WORK_KINDS, Trace
from perflab.model.trace_part import no_such_step, step_ranges

if TYPE_CHECKING:
    from perflab.analysis.idle_classify import GapColumns

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Steps:
    """The steps of a trace, sorted by host start: number, host range [start, end)."""

    number: I64
    start: I64
    end: I64

    def __len__(self) -> int:
        return len(self.number)

    def index_of(self, step: int) -> int:
        """The position of step ``step``; a perflab error naming the steps there are if
        the trace has none of that number."""
        found = np.flatnonzero(self.number == step)
        if len(found) == 0:
            raise InputError(no_such_step(step, self.number.tolist()))
        return int(found[0])

    def containing(self, t: I64) -> I64:
        """Per time: the index of the step whose host range contains it, -1 if none."""
        at = np.searchsorted(self.start, t, side="right") - 1
        inside = (at >= 0) & (t < self.end[np.maximum(at, 0)]) if len(self) else at >= 0
        return np.where(inside, at, -1)


def profiler_steps(trace: Trace) -> Steps:
    """The ``ProfilerStep#<n>`` host ranges of ``trace`` (names matched once each)."""
    ranges = step_ranges(trace)
    numbers = np.array(sorted(ranges), dtype=np.int64)
    start = np.array([ranges[n][0] for n in numbers.tolist()], dtype=np.int64)
    end = np.array([ranges[n][1] for n in numbers.tolist()], dtype=np.int64)
    order = np.argsort(start, kind="stable")
    return Steps(numbers[order], start[order], end[order])


def work_steps(trace: Trace, steps: Steps, links: I64) -> I64:
    """Per event: the step (index) that launched it, -1 for events no step launched."""
    out = np.full(len(trace), -1, dtype=np.int64)
    work = np.flatnonzero(trace.mask(*GPU_WORK_KINDS) & (links >= 0))
    if len(work) and len(steps):
        out[work] = steps.containing(trace.start_ns[links[work]])
    return out


def step_windows(trace: Trace, steps: Steps, launched_by: I64) -> tuple[I64, I64]:
    """Per step: the first start and last end of the GPU work it launched (the host range
    where it launched none)."""
    first, last = steps.start.copy(), steps.end.copy()
    rows = np.flatnonzero(launched_by >= 0)
    if len(rows):
        seen = np.zeros(len(steps), dtype=bool)
        seen[launched_by[rows]] = True
        first[seen], last[seen] = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        np.minimum.at(first, launched_by[rows], trace.start_ns[rows])
        np.maximum.at(last, launched_by[rows], trace.end_ns[rows])
    return first, last


def gap_steps(trace: Trace, steps: Steps, gaps: GapColumns, links: I64) -> I64:
    """Per gap: the step (index) that launched the work ending it; for work with no launch,
    the step that launched the first work after it on the device; -1 where no step did."""
    from perflab.analysis.host_stacks import last_at_or_before
    from perflab.model.trace_keys import device_pairs

    launched_by = work_steps(trace, steps, links)
    out = launched_by[gaps.next] if len(gaps) else np.zeros(0, np.int64)
    orphan = np.flatnonzero(links[gaps.next] < 0) if len(gaps) else np.zeros(0, np.int64)
    owned = np.flatnonzero(launched_by >= 0)
    if len(orphan) and len(owned):
        _, pair_of_track = device_pairs(trace)
        device = pair_of_track[trace.track[owned]].astype(np.int64)
        # the first owned work starting at or after the gap's end: the last by negated time
        found = last_at_or_before(
            device, -trace.start_ns[owned], gaps.device[orphan], -gaps.end[orphan]
        )
        out[orphan] = np.where(found >= 0, launched_by[owned[np.maximum(found, 0)]], -1)
    return np.asarray(out, dtype=np.int64)


@dataclass(frozen=True)
class StepSplit:
    """Per (step, device) with work: the step's GPU window on that device (``start`` to
    ``end``: from the gap before its first work, or that work's start, to the end of its
    last), and the window's idle time per cause code (``idle[cause]``, ns; the rest of the
    window is busy)."""

    step: I64
    device: I64
    start: I64
    end: I64
    idle: I64  # shape (causes, rows)


def step_split(trace: Trace, steps: Steps, gaps: GapColumns, links: I64, causes: int) -> StepSplit:
    """Each step's GPU window per device and its idle time by cause, from every gap of the
    trace (classified), clipped to the window: busy + idle = the window, exactly."""
    from perflab.model.trace_keys import device_pairs

    launched_by = work_steps(trace, steps, links)
    work = np.flatnonzero(launched_by >= 0)
    _, pair_of_track = device_pairs(trace)
    devices = int(pair_of_track.max()) + 1 if len(pair_of_track) else 1
    key_of_work = launched_by[work] * devices + pair_of_track[trace.track[work]]
    keys, inverse = np.unique(key_of_work, return_inverse=True)
    start = np.full(len(keys), np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(len(keys), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(start, inverse, trace.start_ns[work])
    np.maximum.at(end, inverse, trace.start_ns[work] + trace.dur_ns[work])
    # the gap before a step's first work is the step's when the step launched what ended it
    owner = gap_steps(trace, steps, gaps, links)
    mine = np.flatnonzero(owner >= 0)
    at = np.searchsorted(keys, owner[mine] * devices + gaps.device[mine])
    found = (at < len(keys)) & (
        keys[np.minimum(at, len(keys) - 1)] == owner[mine] * devices + gaps.device[mine]
    )
    np.minimum.at(start, at[found], gaps.start[mine][found])
    idle = np.zeros((causes, len(keys)), dtype=np.int64)
    device = keys % devices
    for d in np.unique(device).tolist():
        rows = np.flatnonzero(device == d)
        on = np.flatnonzero(gaps.device == d)
        idle[:, rows] = idle_in_windows(gaps, on, start[rows], end[rows], causes)
    return StepSplit(steps.number[keys // devices], device, start, end, idle)


def idle_in_windows(gaps: GapColumns, on: I64, w0: I64, w1: I64, causes: int) -> I64:
    """Per window [w0, w1): the time of the gaps ``on`` (one device's: disjoint, sorted)
    inside it, per cause code, by cumulative sums and the two clipped ends."""
    g0, g1, cause = gaps.start[on], gaps.end[on], gaps.cause[on].astype(np.int64)
    n = len(on)
    per_cause = np.zeros((causes, n + 1), dtype=np.int64)
    if n:
        dur = np.zeros((causes, n), dtype=np.int64)
        dur[cause, np.arange(n)] = g1 - g0
        per_cause[:, 1:] = np.cumsum(dur, axis=1)
    lo = np.searchsorted(g1, w0, side="right")  # first gap ending after the window starts
    hi = np.searchsorted(g0, w1, side="left")  # gaps starting before it ends: [lo, hi)
    out = per_cause[:, hi] - per_cause[:, lo]
    some = np.flatnonzero(hi > lo)
    first, last = lo[some], hi[some] - 1
    np.subtract.at(out, (cause[first], some), np.maximum(w0[some] - g0[first], 0))
    np.subtract.at(out, (cause[last], some), np.maximum(g1[last] - w1[some], 0))
    return np.asarray(out, dtype=np.int64)
