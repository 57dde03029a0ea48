"""One round of samples on a clock, and whether the device waited for the host inside them.

:func:`take_samples` issues samples as the timing engine (:mod:`perflab.capture.timer`)
takes them and reads back, per sample, its window, the host's time to issue it, the device
time of the queue filler before it, whether the device had reached its start mark by the
time the host finished issuing it, and where the window lay in host time.

Host-bound samples. A sample is flagged only on the device's own evidence that it waited
for the host inside the timed window (:func:`idle_in_window`), all three of:

1. the device had already reached the sample's start mark when the host finished issuing
   the sample (a non-blocking event query right after the end mark is enqueued). If it had
   not, every call was queued before the device got to it, so the device cannot have
   waited inside the window: this is what a full launch queue gives, however long the host
   was held back enqueueing;
2. the host's time leaves room for a wait longer than ``HOST_BOUND_FRACTION`` of the
   window: the device may have idled inside it for at most ``host_ns - lead_ns`` (the
   host's time to issue the sample less the filler ahead of it);
3. the window is longer than the same calls take queued back to back by more than
   ``HOST_BOUND_FRACTION`` of it: idle time inside a window adds to it. The back-to-back
   window is the median window of the samples that the device had not reached (rule 1),
   or, when fewer than ``MIN_BACK_TO_BACK`` of them, of ``REFERENCE_SAMPLES`` samples
   taken behind a filler sized to cover their issue.

A sample that meets 1 and 2 but has no back-to-back window to compare with (no queue
filler, or calls that overflow the launch queue so that no filler can cover them) is
counted as undecided, not flagged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from perflab.capture.clocks import Clock

HOST_BOUND_FRACTION = 0.05  # the GPU may have idled > 5% of a sample: flag it
LEAD_FACTOR = 2.0  # the queue filler lasts twice the host's cost of issuing a sample
LEAD_MARGIN_NS = 20_000.0
MAX_LEAD_NS = 50_000_000.0
PROBE_SAMPLES = 3  # samples that measure the host's cost of issuing one (GPU, with filler)
MIN_BACK_TO_BACK = 3  # samples the device had not reached that give a back-to-back window
REFERENCE_SAMPLES = 5  # samples behind a covering filler, when a run has too few


@dataclass
class Samples:
    """Raw samples of one round or run: the window of each sample (all its calls), the
    host's time to issue it, the device time of the filler before it, whether the device
    was still behind the start mark when the host had issued the whole sample
    (``covered``), and the window's start and end in host time (``perf_counter_ns``; the
    device's marks anchored at the sync that ended the round)."""

    window_ns: list[float] = field(default_factory=list)
    host_ns: list[float] = field(default_factory=list)
    lead_ns: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)
    start_at_ns: list[float] = field(default_factory=list)
    end_at_ns: list[float] = field(default_factory=list)

    def extend(self, other: Samples) -> None:
        self.window_ns += other.window_ns
        self.host_ns += other.host_ns
        self.lead_ns += other.lead_ns
        self.covered += other.covered
        self.start_at_ns += other.start_at_ns
        self.end_at_ns += other.end_at_ns


Marks = tuple[object | None, object, object]  # pre (before the filler, or None), start, end


def take_samples(
    clock: Clock,
    step: Callable[[], object],
    steps: int,
    count: int,
    lead_ns: float = 0.0,
    after_issue: Callable[[], None] | None = None,
    flush: bool = True,
) -> Samples:
    """``count`` samples of ``steps`` calls of ``step``, in this order per sample: flush,
    [filler], start mark, the calls, end mark, then ``after_issue`` (a hook called once
    the sample is issued). With a filler, one more goes first. Only the calls lie between
    the marks; one sync at the end."""
    host = time.perf_counter_ns
    marks: list[Marks] = []
    out = Samples()
    calls = range(steps)
    if lead_ns > 0:
        # a head start: after the last round's sync the queue is empty, so the first sample
        # has only its own filler ahead of it, and on an H200 its issue (flush, filler,
        # calls) overran that filler in the first sample of every round; later samples queue
        # behind the ones before them
        clock.hold(lead_ns)
    for _ in range(count):
        if flush:
            clock.flush()
        h0 = host()
        pre = None
        if lead_ns > 0:
            pre = clock.mark()
            clock.hold(lead_ns)
        start = clock.mark()
        for _ in calls:
            step()
        end = clock.mark()
        out.host_ns.append(float(host() - h0))
        # asked once the whole sample is queued: a device not yet at the start mark has
        # every call of the window ahead of it, so it cannot wait for the host inside it
        out.covered.append(not clock.reached(start))
        marks.append((pre, start, end))
        if after_issue is not None:
            after_issue()
    clock.sync()
    _read_marks(clock, marks, float(host()), out)
    return out


def _read_marks(clock: Clock, marks: list[Marks], synced_ns: float, out: Samples) -> None:
    """Each sample's window and filler time, and its window in host time: the last end
    mark is where the device stood when the sync returned (``synced_ns``), and every
    other mark lies the device time between them before it."""
    if not marks:
        return
    last_end = marks[-1][2]
    for pre, start, end in marks:
        window = clock.elapsed_ns(start, end)
        out.window_ns.append(window)
        out.lead_ns.append(clock.elapsed_ns(pre, start) if pre is not None else 0.0)
        end_at = synced_ns - clock.elapsed_ns(end, last_end)
        out.end_at_ns.append(end_at)
        out.start_at_ns.append(end_at - window)


def lead_for(host_issue_ns: float) -> float:
    """Queue-filler length for samples the host issues in ``host_issue_ns``."""
    return min(MAX_LEAD_NS, LEAD_FACTOR * host_issue_ns + LEAD_MARGIN_NS)


def queue_lead(clock: Clock, step: Callable[[], object], steps: int, flush: bool = True) -> float:
    """The queue filler for samples of ``steps`` calls of ``step``, sized from the host's
    cost of issuing PROBE_SAMPLES of them (after a first hold, which calibrates it)."""
    clock.hold(1.0)
    probe = take_samples(clock, step, steps, PROBE_SAMPLES, flush=flush)
    return lead_for(float(np.max(probe.host_ns)))


# --- did the device wait for the host inside the window? ----------------------------------


def host_bound(
    window_ns: npt.ArrayLike, host_ns: npt.ArrayLike, lead_ns: npt.ArrayLike
) -> npt.NDArray[np.bool_]:
    """Samples whose host time leaves room for the device to have waited for the host.

    A sample's work is issued within ``host_ns`` of its filler being enqueued; the filler
    keeps the device busy for ``lead_ns``. So the device can have idled inside the timed
    window for at most ``host_ns - lead_ns``; a sample is counted when that bound exceeds
    HOST_BOUND_FRACTION of its window (``window_ns``: the time of all its calls).

    This is a bound from host time alone, and a loose one: a host held back by a full
    launch queue has a long ``host_ns`` while the device never waits. The engine's flag
    (:func:`idle_in_window`) also asks the device."""
    window = np.asarray(window_ns, dtype=np.float64)
    idle_bound = np.maximum(
        0.0, np.asarray(host_ns, dtype=np.float64) - np.asarray(lead_ns, dtype=np.float64)
    )
    return np.asarray(idle_bound > HOST_BOUND_FRACTION * window, dtype=np.bool_)


def suspects(samples: Samples) -> npt.NDArray[np.bool_]:
    """Samples that rules 1 and 2 leave open (the device reached the window before the
    host had issued it, and the host's time leaves room for a wait)."""
    covered = np.asarray(samples.covered, dtype=np.bool_)
    return ~covered & host_bound(samples.window_ns, samples.host_ns, samples.lead_ns)


def back_to_back_ns(samples: Samples) -> float | None:
    """The median window of the samples the device had not reached when their issue
    ended (their calls ran back to back), or None with fewer than MIN_BACK_TO_BACK."""
    covered = np.asarray(samples.covered, dtype=np.bool_)
    if int(covered.sum()) < MIN_BACK_TO_BACK:
        return None
    return float(np.median(np.asarray(samples.window_ns, dtype=np.float64)[covered]))


@dataclass(frozen=True)
class IdleCheck:
    """Which samples the device waited in (``flagged``), which it may have waited in
    without a back-to-back window to tell (``undecided``), and that window."""

    flagged: npt.NDArray[np.bool_]
    undecided: npt.NDArray[np.bool_]
    back_to_back_ns: float | None = None

    @classmethod
    def none(cls, n: int) -> IdleCheck:
        """Nothing flagged or undecided: the host clock, where the host is the device."""
        return cls(np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.bool_))


def idle_in_window(samples: Samples, back_to_back: float | None) -> IdleCheck:
    """The samples in which the device waited for the host inside the timed window: rules
    1 and 2 (:func:`suspects`) and a window longer than ``back_to_back`` (the same calls'
    window queued back to back) by over HOST_BOUND_FRACTION of it."""
    open_ = suspects(samples)
    if back_to_back is None:
        return IdleCheck(np.zeros(open_.size, dtype=np.bool_), open_)
    window = np.asarray(samples.window_ns, dtype=np.float64)
    longer = window - back_to_back > HOST_BOUND_FRACTION * window
    return IdleCheck(open_ & longer, np.zeros(open_.size, dtype=np.bool_), back_to_back)


def check_idle(clock: Clock, step: Callable[[], object], steps: int, samples: Samples) -> IdleCheck:
    """:func:`idle_in_window` for a run's samples, taking REFERENCE_SAMPLES more behind a
    covering filler when a suspect sample needs a back-to-back window that the run's own
    samples do not give."""
    reference = back_to_back_ns(samples)
    if reference is None and suspects(samples).any() and clock.can_fill:
        lead = queue_lead(clock, step, steps)
        reference = back_to_back_ns(take_samples(clock, step, steps, REFERENCE_SAMPLES, lead))
    return idle_in_window(samples, reference)
