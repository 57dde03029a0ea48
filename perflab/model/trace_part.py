"""Reading part of a trace: one training step, or a window of time.

A trace too large to hold whole can still be read in part. :func:`find_part` reads the file
once keeping only each complete event's category, name, start and duration (no columns), to
learn the trace's first and last times and where its ``ProfilerStep#N`` ranges lie; the
load then keeps only the events that overlap the part (see :class:`Part`). Memory follows
the events kept, not the file; the file is read twice.

- a window ``A:B`` (times since the trace's first event, as perflab's views count them):
  every event that overlaps it;
- a step ``N``: the host events that overlap ``ProfilerStep#N``'s range (its events'
  earliest start to latest end) and the GPU work that overlaps the time from the step's
  start until the next step begins (the trace's end after the last step), where the work the
  step launched runs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.model.trace import DUR_MAX_NS, Trace, TrackKind

_STEP = re.compile(r"ProfilerStep#(\d{1,18})")
_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = r"(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|ms|s)"
_WINDOW = re.compile(rf"\s*{_TIME}\s*:\s*{_TIME}\s*")


@dataclass(frozen=True)
class Request:
    """What part of a trace to read: ``step`` (ProfilerStep#N) or ``window`` (ns since the
    trace's first event, start and end), exactly one of them."""

    step: int | None = None
    window: tuple[int, int] | None = None

    def described(self) -> str:
        if self.step is not None:
            return f"ProfilerStep#{self.step}"
        assert self.window is not None
        a, b = self.window
        return f"{_seconds(a)} to {_seconds(b)} since the trace's start"


@dataclass(frozen=True)
class Part:
    """The events a partial read keeps: host events that overlap ``[start_ns, end_ns]``,
    GPU events that overlap ``[start_ns, gpu_end_ns]`` (absolute ns)."""

    start_ns: int
    end_ns: int
    gpu_end_ns: int
    label: str

    def keeps(
        self,
        start_ns: npt.NDArray[np.int64],
        dur_ns: npt.NDArray[np.int64],
        on_gpu: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.bool_]:
        """Per event: whether it overlaps the part."""
        stop = np.where(on_gpu, self.gpu_end_ns, self.end_ns)
        return np.asarray((start_ns + dur_ns >= self.start_ns) & (start_ns <= stop))

    def keeps_instants(self, ts_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Per instant event (the allocator's): whether it lies in the part."""
        return np.asarray((ts_ns >= self.start_ns) & (ts_ns <= self.gpu_end_ns))

    def meta(self) -> dict[str, Any]:
        """What ``trace.meta["part"]`` says of a trace read in part."""
        return {
            "label": self.label,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "gpu_end_ns": self.gpu_end_ns,
        }


def request_of(step: int | None, window: str | None) -> Request | None:
    """The part that ``step`` (ProfilerStep#N) or ``window`` (``"A:B"``, see
    :func:`parse_window`) asks for; None when neither is given."""
    if step is not None and window is not None:
        raise InputError("give --step or --window, not both")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise InputError(f"--step must be a step number (0 or more), not {step!r}")
        return Request(step=step)
    return Request(window=parse_window(window)) if window is not None else None


def parse_window(text: str) -> tuple[int, int]:
    """``"30s:32.5s"``, ``"120ms:180ms"`` -> (start, end) in ns; each end needs its unit
    (ns, us, ms or s)."""
    found = _WINDOW.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise InputError(
            f"--window must be two times with their units, such as 120ms:180ms or 30s:32.5s "
            f"(since the trace's first event), not {text!r}"
        )
    a, unit_a, b, unit_b = found.groups()
    start, end = _ns(a, unit_a), _ns(b, unit_b)
    if not start < end <= DUR_MAX_NS:
        raise InputError(f"--window must end after it starts (and within 146 years): {text!r}")
    return start, end


def _ns(number: str, unit: str) -> int:
    value = float(number) * _UNITS[unit]
    return round(value) if math.isfinite(value) and value <= DUR_MAX_NS else DUR_MAX_NS + 1


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:.6g} s"


@dataclass
class Extent:
    """What the first read learns: the first start and last end of the events a load keeps,
    and each step's host range (number -> [earliest start, latest end])."""

    first_ns: int = DUR_MAX_NS
    last_ns: int = -DUR_MAX_NS
    steps: dict[int, list[int]] = field(default_factory=dict)

    def add(
        self,
        names: list[str],
        start_ns: npt.NDArray[np.int64],
        dur_ns: npt.NDArray[np.int64],
        on_gpu: list[bool],
    ) -> None:
        """Events read: their names, times and whether they sit on a GPU track."""
        if len(start_ns) == 0:
            return
        self.first_ns = min(self.first_ns, int(start_ns.min()))
        self.last_ns = max(self.last_ns, int((start_ns + dur_ns).max()))
        for i, name in enumerate(names):
            found = _STEP.fullmatch(name) if name.startswith("ProfilerStep#") else None
            if found and not on_gpu[i]:
                a, b = int(start_ns[i]), int(start_ns[i] + dur_ns[i])
                seen = self.steps.setdefault(int(found.group(1)), [a, b])
                seen[0], seen[1] = min(seen[0], a), max(seen[1], b)

    def part(self, request: Request, source: str) -> Part:
        if self.first_ns > self.last_ns:
            raise InputError("the trace has no events to read part of", source=source)
        if request.window is not None:
            a, b = request.window
            lasts = self.last_ns - self.first_ns
            if a > lasts:
                raise InputError(
                    f"no event overlaps {request.described()}: the trace lasts {_seconds(lasts)}",
                    source=source,
                )
            end = self.first_ns + b
            return Part(self.first_ns + a, end, end, request.described())
        assert request.step is not None
        if request.step not in self.steps:
            raise InputError(no_such_step(request.step, list(self.steps)), source=source)
        start, end = self.steps[request.step]
        later = [a for a, _ in self.steps.values() if a > start]
        gpu_end = max(end, min(later) if later else self.last_ns)
        return Part(start, end, gpu_end, request.described())


def part_of(trace: Trace, request: Request) -> Trace:
    """The events of a trace already loaded that a partial read keeps (``meta["part"]``
    says which)."""
    on_gpu = trace.tracks["kind"][trace.track] == TrackKind.GPU
    extent = Extent(steps=step_ranges(trace))
    if len(trace):
        extent.first_ns, extent.last_ns = int(trace.start_ns.min()), int(trace.end_ns.max())
    window = extent.part(request, str(trace.meta.get("source", "")))
    chosen = trace.select(window.keeps(trace.start_ns, trace.dur_ns, on_gpu))
    inside = window.keeps_instants(trace.memory_events["ts_ns"])
    chosen.memory_events = trace.memory_events.take(np.flatnonzero(inside))
    chosen.meta = {**chosen.meta, "part": window.meta()}
    return chosen


def no_such_step(step: int, numbers: list[int]) -> str:
    """The error for a step the trace lacks, naming the steps it has (the first 20)."""
    if not numbers:
        return f"the trace has no ProfilerStep#{step} range; it has no ProfilerStep ranges at all"
    ordered = sorted(numbers)
    shown = ", ".join(map(str, ordered[:20])) + (" ..." if len(ordered) > 20 else "")
    return f"the trace has no ProfilerStep#{step} range; its steps are {shown}"


def step_ranges(trace: Trace) -> dict[int, list[int]]:
    """Each ``ProfilerStep#N``'s host range: N -> [earliest start, latest end] of its events
    on CPU tracks (names matched once each)."""
    number_of_name = np.full(len(trace.strings), -1, dtype=np.int64)
    for i, text in enumerate(trace.strings):
        found = _STEP.fullmatch(text)
        if found:
            number_of_name[i] = int(found.group(1))
    if len(trace) == 0 or not (number_of_name >= 0).any():
        return {}
    on_cpu = trace.tracks["kind"][trace.track] == TrackKind.CPU
    numbers = number_of_name[trace.name]
    rows = np.flatnonzero((numbers >= 0) & on_cpu)
    if len(rows) == 0:
        return {}
    step_ids, inverse = np.unique(numbers[rows], return_inverse=True)
    start = np.full(len(step_ids), np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(len(step_ids), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(start, inverse, trace.start_ns[rows])
    np.maximum.at(end, inverse, trace.end_ns[rows])
    return {int(n): [int(a), int(b)] for n, a, b in zip(step_ids, start, end, strict=True)}
