"""The timing engine behind ``perflab.bench`` and ``%%gpuprofile``.

Method (after Triton's ``do_bench`` and nvbench):

1. call once (compilation, allocation), then estimate the cost of a call and of
   issuing one sample from the host;
2. warm up for the warm-up budget, counted in *calls* (a CUDA-graph replay of N calls
   counts N);
3. take samples in rounds until a stopping rule fires (``stop_reason``): the relative
   standard error of the median is below ``max_noise`` (nvbench's noise criterion,
   default 0.5%) after at least ``min_samples``, or the time budget is spent (the
   timeout), or ``max_samples``/``repeat`` is reached. The budget bounds a ``repeat``
   count too (``budget-cut``: the samples taken are kept), and ``number`` calls whose
   one sample would outlast the whole budget are refused before any sample.

One sample is: [cache flush] [queue filler] start-mark, ``number`` calls, end-mark.
The flush and the filler are enqueued before the start mark, so neither is inside the
timed window. On a GPU the filler is a spinning kernel (``torch.cuda._sleep``) sized
from the host's cost of issuing a sample, so the start event and the calls sit in a
full queue and the GPU does not wait for the host inside the window (nvbench's blocking
kernel). The host time of issuing every sample (``host_ns``) is kept too. A sample is
flagged host-bound only on the device's evidence that it waited inside the window: it
had reached the start mark before the host finished issuing the sample, and the window
is longer than the same calls take queued back to back (the rule, in full, is in
:mod:`perflab.capture.sampling`). A host held back by a full launch queue is not
flagged: the device had the whole sample queued ahead of it.

The clock check (:class:`perflab.capture.throttle.ThrottleWatch`) polls NVML from a
background thread while the samples run (SM clock, clock-event reasons, violation
counters), attributes the polls to samples by host time and drops a sample only where
NVML confirms throttling during it and its clock fell below 75% of the default.

An empty sample's window (what the timer reads for a sample of nothing: on a GPU one
empty kernel between the events) and the clock's tick (the step its readings come in)
are measured once per clock and process and stored with every result: a median within a
few empty windows is flagged (the marks' own overhead dominates it; a kernel can read
below it), and the median's interval is widened by one tick per call. ``hot`` batches
calls back to back (no flush between them) until the batch dwarfs both, as nvbench's
hot measurement does.

Every sample is kept; garbage collection is off while timing. CPU backend: the host is
the device (``perf_counter_ns`` marks, no queue, nothing to fill).

Traps guarded against (each tested):
- a persisting-L2 carve-out left by earlier code inflates bandwidth: on a GPU the
  persisting-L2 limit is reset to 0 before timing (or the result says it could not);
- a "cold" L2 that is warm under CUDA graphs or ``-n > 1``: the flush precedes each
  sample, so the result states exactly which calls ran cold (``options["cold"]``);
- the flush or any setup leaking into the timed window: both precede the start mark;
- work that is never used and so skipped: the engine cannot see inside ``fn``; the
  microbenchmarks write every result to memory that outlives the call (``out=``, the
  chase's final pointer), and the docs ask the same of user code.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab._gc import gc_paused
from perflab.capture import env

# the clocks (clocks.py), a round of samples and the host-bound rule (sampling.py) and what
# a result warns about (timer_warnings.py) have their own modules; their names are
# importable from here too
from perflab.capture.clocks import Clock as Clock
from perflab.capture.clocks import HostClock as HostClock
from perflab.capture.clocks import HostQueueClock as HostQueueClock
from perflab.capture.clocks import nothing
from perflab.capture.nvtx import Range
from perflab.capture.sampling import HOST_BOUND_FRACTION as HOST_BOUND_FRACTION
from perflab.capture.sampling import PROBE_SAMPLES as PROBE_SAMPLES
from perflab.capture.sampling import IdleCheck, check_idle, queue_lead
from perflab.capture.sampling import Samples as Samples
from perflab.capture.sampling import host_bound as host_bound
from perflab.capture.sampling import lead_for as lead_for
from perflab.capture.sampling import take_samples as take_samples
from perflab.capture.timer_warnings import EMPTY_WINDOW_FACTOR as EMPTY_WINDOW_FACTOR
from perflab.capture.timer_warnings import cold_calls as cold_calls
from perflab.capture.timer_warnings import host_bound_warnings
from perflab.capture.timer_warnings import noise_warnings as noise_warnings
from perflab.capture.timer_warnings import nothing_timed as nothing_timed
from perflab.capture.timer_warnings import timer_warnings as timer_warnings
from perflab.capture.timer_warnings import unmeasured_warning as unmeasured_warning
from perflab.errors import InputError, no_gpu
from perflab.model import stats
from perflab.model.timing import TimingResult, first_unmeasurable, measurable
from perflab.model.units import format_ns

if TYPE_CHECKING:  # the GPU side, imported when a run starts
    from perflab.capture.throttle import ThrottleReport

CPU_MIN_SAMPLE_NS = 20_000  # batch tiny CPU calls so perf_counter overhead stays < ~1%
ESTIMATE_SAMPLES = 5
MAX_BUDGET_MS = 3_600_000.0  # one hour: a larger budget is a typo, and int() would overflow
MAX_COUNT = 10_000_000  # calls per sample / samples: beyond this a run never ends
MAX_WARMUP_CALLS = 100_000
ROUND_GROWTH = 0.5  # each round adds half as many samples as there are
EMPTY_SAMPLES = 51  # samples of nothing timed for an empty sample's window (once per clock)
TICK_READS = 1_000  # back-to-back clock readings for its tick
HOT_EMPTY_FACTOR = 100.0  # a hot batch lasts >= 100 empty windows (their overhead < 1% of it)
HOT_TICK_FACTOR = 1_000.0  # and >= 1000 ticks of the clock
HOT_MIN_BATCH_NS = 20_000.0  # and >= 20 us (all there is when neither is known)


@dataclass
class TimingOptions:
    """How to time; every field has a CLI/magic counterpart."""

    warmup_ms: float = 25.0
    budget_ms: float = 100.0  # the timeout: sampling stops when it is spent
    number: int | None = None  # calls per sample (-n)
    repeat: int | None = None  # samples (-r): a fixed count, no stopping rule
    flush_l2: bool | None = None  # None: on for CUDA, off for CPU
    graph: bool = False
    hot: bool = False  # calls back to back, no flush, batched until an empty window is < 1%
    backend: str = "auto"
    name: str = "fn"
    nvtx: bool = True
    min_samples: int = 10
    max_samples: int = 10_000
    max_noise: float = 0.005  # target relative standard error of the median (0: off)
    fill_queue: bool = True  # GPU: a spinning kernel before each sample's start event
    extra: dict[str, object] = field(default_factory=dict)

    def validate(self) -> None:
        if self.backend not in ("auto", "cuda", "cpu"):
            raise InputError(f"backend must be auto, cuda or cpu, not {self.backend!r}")
        for label, value in (
            ("warm-up (--warmup)", self.warmup_ms),
            ("budget (--budget)", self.budget_ms),
        ):
            if not _is_number(value) or not 0 <= value <= MAX_BUDGET_MS:
                raise InputError(
                    f"{label} must be a number of ms from 0 to {MAX_BUDGET_MS:,.0f} (one hour), "
                    f"not {value!r}"
                )
        for label, count in (
            ("-n/number", self.number),
            ("-r/repeat", self.repeat),
            ("min_samples", self.min_samples),
            ("max_samples", self.max_samples),
        ):
            if count is not None and not _is_count(count):
                raise InputError(
                    f"{label} must be a whole number from 1 to {MAX_COUNT:,}, not {count!r}"
                )
        if self.max_samples < self.min_samples:
            raise InputError(
                f"max_samples ({self.max_samples}) is below min_samples ({self.min_samples})"
            )
        if not _is_number(self.max_noise) or not 0 <= self.max_noise < 1:
            raise InputError(f"max_noise must be a fraction from 0 to 1, not {self.max_noise!r}")
        if self.hot and self.flush_l2:
            raise InputError(
                "--hot (hot=True) runs calls back to back with no cache flush between them: "
                "drop --flush-l2 (flush_l2=True)"
            )


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_COUNT


def _make_clock(opts: TimingOptions) -> Clock:
    backend = env.default_backend() if opts.backend == "auto" else opts.backend
    if backend == "cpu":
        if opts.graph:
            raise no_gpu("--graph (CUDA-graph replay)")
        return HostClock(flush=bool(opts.flush_l2))
    from perflab.capture.gpu_clock import make_cuda_clock

    return make_cuda_clock(not opts.hot if opts.flush_l2 is None else opts.flush_l2)


# --- planning -----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a run will do, derived from the budgets and the estimate."""

    number: int  # calls per sample
    warmup_calls: int
    max_count: int  # samples the budget allows (the rounds stop earlier when quiet)
    fixed: bool  # -r given: max_count samples, unless the budget runs out first
    sample_ns: float = 0.0  # estimated time of one sample, its flush included


def _plan(
    opts: TimingOptions,
    per_call_ns: float,
    clock_name: str,
    flush_ns: float = 0.0,
    hot_batch_ns: float = HOT_MIN_BATCH_NS,
) -> Plan:
    """Calls per sample, warm-up calls and the most samples, from budgets and estimates.

    ``flush_ns`` is the cost of the cache flush before each sample: it spends budget too.
    ``hot_batch_ns``: the least batch of a hot run (see :func:`hot_batch`).
    """
    per_call_ns = max(per_call_ns, 1.0)
    if opts.number is not None:
        number = opts.number
        _check_sample_fits(number, per_call_ns, opts)
    elif opts.hot:
        least = max(hot_batch_ns, CPU_MIN_SAMPLE_NS if clock_name == "cpu" else 0.0)
        fits = opts.budget_ms * 1e6 / opts.min_samples / per_call_ns  # min_samples batches
        number = max(1, min(MAX_COUNT, math.ceil(least / per_call_ns), math.floor(fits)))
    elif clock_name == "cpu":
        number = max(1, min(MAX_COUNT, math.ceil(CPU_MIN_SAMPLE_NS / per_call_ns)))
    else:
        number = 1  # the queue filler keeps short kernels from being launch-bound
    sample_ns = per_call_ns * number
    warmup = max(1, min(MAX_WARMUP_CALLS, int(opts.warmup_ms * 1e6 / per_call_ns)))
    if opts.repeat is not None:
        return Plan(number, warmup, opts.repeat, True, sample_ns + flush_ns)
    wanted = int(min(opts.budget_ms * 1e6 / (sample_ns + flush_ns), MAX_COUNT))
    floor = opts.min_samples
    if sample_ns * floor > 10 * opts.budget_ms * 1e6:
        floor = min(3, floor)  # a call far beyond the budget: keep the run short, a warning follows
    return Plan(
        number, warmup, max(floor, min(wanted, opts.max_samples)), False, sample_ns + flush_ns
    )


def _check_sample_fits(number: int, per_call_ns: float, opts: TimingOptions) -> None:
    """Refuse ``-n`` calls whose one sample would outlast the whole budget (the timeout):
    a sample cannot be cut short, so the run would overrun it many times over. One call
    per sample cannot be split: a call longer than the budget runs a few samples, with a
    warning."""
    budget_ns = opts.budget_ms * 1e6
    if number > 1 and number * per_call_ns > budget_ns:
        fits = max(1, int(budget_ns // per_call_ns))
        raise InputError(
            f"-n {number:,}: one sample of {number:,} calls would take about "
            f"{format_ns(number * per_call_ns)} ({format_ns(per_call_ns)} per call, estimated), "
            f"more than the whole {opts.budget_ms:g} ms budget (--budget, the timeout): "
            f"use -n {fits:,} or fewer, or a larger --budget"
        )


def warmup_steps(warmup_calls: int, calls_per_step: int) -> int:
    """Warm-up steps that make at least ``warmup_calls`` calls (a graph replay of N calls
    is one step of N calls), and at least one step."""
    return max(1, math.ceil(warmup_calls / calls_per_step))


def relative_standard_error(samples: npt.ArrayLike) -> float:
    """Standard error of the median over the median, from its order-statistic 95%
    interval (distribution-free): ``(hi - lo) / (2 * 1.96) / median``."""
    values = np.asarray(samples, dtype=np.float64)
    if values.size < 2:
        return math.inf
    med = stats.median(values)
    if med <= 0:
        return math.inf
    lo, hi = stats.median_ci95(values)
    return (hi - lo) / (2 * stats.Z95) / med


def stop_reason(
    samples: npt.ArrayLike, elapsed_ns: float, opts: TimingOptions, plan: Plan
) -> str | None:
    """Why sampling stops now, or None to take more: ``repeat`` (the ``-r`` count is
    taken), ``budget-cut`` (the budget, the timeout, ran out before the ``-r`` count),
    ``max_samples``, ``noise`` (relative standard error of the median <= max_noise after
    min_samples) or ``budget`` (the budget is spent)."""
    n = np.asarray(samples).size
    if plan.fixed:
        if n >= plan.max_count:
            return "repeat"
        return "budget-cut" if elapsed_ns >= opts.budget_ms * 1e6 else None
    if n >= opts.max_samples:
        return "max_samples"
    quiet_enough = n >= opts.min_samples and opts.max_noise > 0
    if quiet_enough and relative_standard_error(samples) <= opts.max_noise:
        return "noise"
    if n >= plan.max_count or elapsed_ns >= opts.budget_ms * 1e6:
        return "budget" if n >= min(opts.min_samples, plan.max_count) else None
    return None


def next_round(n: int, elapsed_ns: float, opts: TimingOptions, plan: Plan) -> int:
    """How many samples the next round takes, within the budget (the timeout) and the
    caps, at least one. A free run: first ``min_samples``, then half as many as there
    are. A ``-r`` count: first ``min_samples`` or what the estimate says the budget holds,
    then as many again, so that a spent budget ends it after a round (``budget-cut``)."""
    cap = (plan.max_count if plan.fixed else min(plan.max_count, opts.max_samples)) - n
    budget_ns = opts.budget_ms * 1e6
    if n == 0:
        first = min(opts.min_samples, cap)
        if plan.fixed and plan.sample_ns > 0:
            first = min(first, int(budget_ns / plan.sample_ns))
        return max(1, first)
    per_sample = elapsed_ns / n
    by_budget = int(max(0.0, budget_ns - elapsed_ns) / per_sample) if per_sample > 0 else cap
    growth = n if plan.fixed else max(1, int(n * ROUND_GROWTH))
    return max(1, min(growth, by_budget, cap))


# --- sampling -----------------------------------------------------------------------


def _estimate(clock: Clock, fn: Callable[[], object], budget_ns: float) -> Samples:
    """ESTIMATE_SAMPLES single calls, timed; only the first when it alone spends the
    budget (a call of minutes is not repeated five times just to learn its length)."""
    first = take_samples(clock, fn, 1, 1)
    if first.window_ns[0] < budget_ns:
        first.extend(take_samples(clock, fn, 1, ESTIMATE_SAMPLES - 1))
    return first


def _back_to_back_per_call(
    clock: Clock, fn: Callable[[], object], single_ns: float, batch_ns: float
) -> float:
    """Per-call time of calls issued back to back behind a filler, for planning a hot
    batch. A single call's window on a queue holds its launch gap too (an H200: ~26 us for a
    ~2 us kernel), which would make the batch ten times too short."""
    number = max(1, min(MAX_COUNT, math.ceil(batch_ns / max(single_ns, 1.0))))
    lead = queue_lead(clock, fn, number, flush=False) if clock.can_fill else 0.0
    probe = take_samples(clock, fn, number, ESTIMATE_SAMPLES, lead, flush=False)
    return min(single_ns, float(np.median(probe.window_ns)) / number)


# --- an empty sample's window and the clock's tick ------------------------------------

_TIMER_STEPS: dict[tuple[str, str], tuple[float | None, float | None]] = {}


def timer_steps(clock: Clock) -> tuple[float | None, float | None]:
    """An empty sample's window and the clock's tick in ns (None where they cannot be
    measured), measured on the first use of each kind of clock and device in this
    process."""
    key = (type(clock).__name__, str(clock.device))
    if key not in _TIMER_STEPS:
        _TIMER_STEPS[key] = (empty_window(clock), timer_tick(clock))
    return _TIMER_STEPS[key]


def empty_step(clock: Clock) -> tuple[Callable[[], object], int] | None:
    """What a sample of nothing holds, as (step, steps): no call on the host clock (an
    empty window); on a queue one empty kernel (a spin of 0 cycles), the least a sample
    can enqueue. None when the queue has no such kernel."""
    if not clock.asynchronous:
        return nothing, 0
    if not clock.can_fill:
        return None
    return (lambda: clock.spin(0)), 1


def empty_window(clock: Clock) -> float | None:
    """What the timer reads for a sample of nothing: the median of EMPTY_SAMPLES samples
    of :func:`empty_step`, taken as the engine takes samples (behind the queue filler
    where there is one; no cache flush). It is a warning threshold, not a floor: a
    sample near it is dominated by the marks' own overhead, and a short kernel can read
    below it (on a GPU the empty kernel's launch is in it, and a kernel's own may overlap
    the events')."""
    empty = empty_step(clock)
    if empty is None:
        return None
    step, steps = empty
    lead = queue_lead(clock, step, steps, flush=False) if clock.asynchronous else 0.0
    empties = take_samples(clock, step, steps, EMPTY_SAMPLES, lead, flush=False)
    return _measurable(stats.median(empties.window_ns))


def timer_tick(clock: Clock) -> float | None:
    """The clock's tick, from TICK_READS back-to-back readings (see :func:`clock_step`).
    On a queue they are read again behind a filler longer than their issue, so that the
    device records them back to back, not at the host's pace."""
    steps, issued_ns = _back_to_back(clock, 0.0)
    if clock.asynchronous and clock.can_fill:
        steps, _ = _back_to_back(clock, lead_for(issued_ns))
    return clock_step(steps)


def _back_to_back(clock: Clock, lead_ns: float) -> tuple[npt.NDArray[np.float64], float]:
    """Differences of successive readings taken with nothing between them (behind a
    filler of ``lead_ns``), and the host's time to issue them."""
    if lead_ns > 0:
        clock.hold(lead_ns)
    t0 = time.perf_counter_ns()
    marks = [clock.mark() for _ in range(TICK_READS)]
    issued = float(time.perf_counter_ns() - t0)
    clock.sync()
    steps = [clock.elapsed_ns(a, b) for a, b in itertools.pairwise(marks)]
    return np.asarray(steps, dtype=np.float64), issued


def clock_step(differences: npt.ArrayLike) -> float | None:
    """A clock's step from differences of its readings: when they are whole nanoseconds
    (the host clock), the largest step that all are multiples of (the tick: 1 ns for
    ``perf_counter_ns`` on Linux, though one reading costs ~20 ns); else (CUDA events,
    float milliseconds) the least gap between two distinct readings, to the nanosecond:
    back-to-back events are never closer than the GPU takes to record one (about 1.2 us
    on an H200) but their readings differ in steps of the event clock (32 ns there).
    With a single distinct reading, that reading. None when none is above 0."""
    values = np.asarray(differences, dtype=np.float64)
    values = values[np.isfinite(values) & (values >= 0)]
    positive = values[values > 0]
    if positive.size == 0:
        return None
    if positive.max() < 2**53 and (positive == np.round(positive)).all():
        return _measurable(float(np.gcd.reduce(positive.astype(np.int64))))
    distinct = np.unique(np.round(values))  # float32 ms carry sub-ns rounding noise
    gaps = np.diff(distinct)
    step = float(gaps.min()) if gaps.size else float(positive.min())
    return _measurable(step)


def _measurable(ns: float) -> float | None:
    return ns if first_unmeasurable([ns]) is None else None


def hot_batch(empty_window_ns: float | None, tick_ns: float | None) -> float:
    """The least time of a hot batch: HOT_EMPTY_FACTOR empty windows and HOT_TICK_FACTOR
    ticks of the clock (the timer's overhead < 1% of it), and HOT_MIN_BATCH_NS."""
    return max(
        HOT_MIN_BATCH_NS,
        HOT_EMPTY_FACTOR * (empty_window_ns or 0.0),
        HOT_TICK_FACTOR * (tick_ns or 0.0),
    )


def _flush_cost_ns(clock: Clock) -> float:
    if not clock.flushes:
        return 0.0
    t0 = time.perf_counter_ns()
    clock.flush()
    clock.sync()
    return float(time.perf_counter_ns() - t0)


@dataclass
class _Run:
    samples: Samples
    stop_reason: str
    plan: Plan
    warmup_calls: int
    lead_ns: float
    elapsed_ns: float
    empty_window_ns: float | None = None  # the timer's, per sample (timer_steps)
    tick_ns: float | None = None
    idle: IdleCheck | None = None  # host-bound samples (None: the host clock, no queue)


def measure(clock: Clock, fn: Callable[[], object], opts: TimingOptions) -> _Run:
    """The engine proper, on any clock: estimate, plan, warm up per call, sample in
    rounds until a stopping rule fires; on a queue, then check which samples the device
    waited for the host in (:func:`perflab.capture.sampling.check_idle`)."""
    empty_ns, tick_ns = timer_steps(clock)
    fn()  # first call: compilation, allocation, lazy loading
    clock.sync()
    estimate = _estimate(clock, fn, opts.budget_ms * 1e6)
    per_call = float(np.median(estimate.window_ns))
    batch = hot_batch(empty_ns, tick_ns)
    if opts.hot and opts.number is None and clock.asynchronous:
        per_call = _back_to_back_per_call(clock, fn, per_call, batch)
    plan = _plan(opts, per_call, clock.name, _flush_cost_ns(clock), batch)
    if opts.graph:
        step, steps, calls_per_step = clock.capture_graph(fn, plan.number), 1, plan.number
    else:
        step, steps, calls_per_step = fn, plan.number, 1
    n_warm = min(
        warmup_steps(plan.warmup_calls, calls_per_step), max(1, MAX_WARMUP_CALLS // calls_per_step)
    )
    for _ in range(n_warm):
        step()
    clock.sync()
    lead = 0.0
    if clock.asynchronous and clock.can_fill and opts.fill_queue:
        lead = queue_lead(clock, step, steps)
    samples = Samples()
    t0 = time.perf_counter_ns()
    reason = None
    while reason is None:
        n = len(samples.window_ns)
        samples.extend(
            take_samples(
                clock,
                step,
                steps,
                next_round(n, time.perf_counter_ns() - t0, opts, plan),
                lead,
            )
        )
        per_call_ns = np.asarray(samples.window_ns) / plan.number
        reason = stop_reason(per_call_ns, time.perf_counter_ns() - t0, opts, plan)
    elapsed = float(time.perf_counter_ns() - t0)
    idle = check_idle(clock, step, steps, samples) if clock.asynchronous else None
    warm = n_warm * calls_per_step
    return _Run(samples, reason, plan, warm, lead, elapsed, empty_ns, tick_ns, idle)


def time_function(
    fn: Callable[[], object], options: TimingOptions | None = None, **overrides: Any
) -> TimingResult:
    """Time ``fn()`` soundly; see :class:`TimingOptions` for the knobs.

    >>> r = time_function(lambda: sum(range(1000)), backend="cpu", budget_ms=20)
    >>> r.n > 0
    True
    """
    opts = TimingOptions(**{**asdict(options or TimingOptions()), **overrides})
    opts.validate()
    if not callable(fn):
        raise InputError(f"the function to time must be callable, got {type(fn).__name__}")
    clock = _make_clock(opts)
    try:
        from perflab.capture.throttle import ThrottleWatch

        watch = ThrottleWatch.start(clock)
        try:  # the watch's NVML polling thread stops here, whatever happens while timing
            timer_steps(clock)  # once per process, before the NVTX range
            with gc_paused(), Range(opts.name, nvtx=opts.nvtx):
                run = measure(clock, fn, opts)
            throttle = watch.finish(run.samples.start_at_ns, run.samples.end_at_ns)
        finally:
            watch.close()
    finally:
        clock.close()
    return _result(clock, opts, run, throttle)


def _result(clock: Clock, opts: TimingOptions, run: _Run, throttle: ThrottleReport) -> TimingResult:
    number = run.plan.number
    window = np.asarray(run.samples.window_ns, dtype=np.float64)
    host = np.asarray(run.samples.host_ns, dtype=np.float64)
    idle = run.idle or IdleCheck.none(window.size)
    measured = measurable(window / number)
    if not measured.any():
        # events left on two streams read no ordered time: the stream change is the cause
        changed = getattr(clock, "stream_change", None)
        raise InputError(changed or nothing_timed(window, clock.name))
    dropped = throttle.drop if throttle.drop is not None else np.zeros(window.size, bool)
    keep = ~dropped & measured
    if not keep.any():
        keep = measured  # never drop everything: the warning says the clocks were low
    per_call = window[keep] / number
    warnings = noise_warnings(per_call, opts.min_samples) + throttle.warnings
    if not measured.all():
        warnings.append(unmeasured_warning(window, measured))
    warnings += list(clock.notes)
    warnings += host_bound_warnings(idle.flagged, idle.undecided, idle.back_to_back_ns)
    warnings += timer_warnings(per_call, number, run.empty_window_ns, run.tick_ns)
    if run.stop_reason == "budget-cut":
        warnings.append(
            f"-r {opts.repeat:,} cut to {window.size:,} samples: the {opts.budget_ms:g} ms "
            "budget (--budget, the timeout) ran out first; raise --budget to take them all"
        )
    cold = cold_calls(clock.flushes, number, opts.graph, opts.hot)
    if clock.flushes and number > 1:
        warnings.append(f"L2 flushed before each sample only: cold calls are the {cold}")
    if clock.name == "cpu":
        warnings.append("no GPU: timed with the host clock (perf_counter_ns)")
    sm_min, sm_median = throttle.sample_clocks(keep)
    return TimingResult(
        samples_ns=per_call,
        backend=clock.name,
        device=clock.device,
        name=opts.name,
        number=number,
        warnings=warnings,
        versions=env.versions(),
        host_ns=host[keep],
        stop_reason=run.stop_reason,
        throttle=throttle.recorded(),
        empty_window_ns=run.empty_window_ns,
        tick_ns=run.tick_ns,
        sm_clock_min_mhz=sm_min,
        sm_clock_median_mhz=sm_median,
        options={
            "warmup_ms": opts.warmup_ms,
            "budget_ms": opts.budget_ms,
            "max_noise": opts.max_noise,
            "min_samples": opts.min_samples,
            "flush_l2": clock.flushes,
            "cold": cold,
            "graph": opts.graph,
            "hot": opts.hot,
            "repeat": opts.repeat,
            "warmup_calls": run.warmup_calls,
            "samples": int(window.size),
            "relative_standard_error": _finite_or_none(relative_standard_error(per_call)),
            "queue_filler_ns": run.lead_ns,
            "host_bound_samples": int(idle.flagged[keep].sum()),
            "host_bound_undecided": int(idle.undecided[keep].sum()),
            "back_to_back_ns": idle.back_to_back_ns,
            "unmeasured_samples": int((~measured).sum()),  # read 0 ns: left out
            **clock.setup,
            **opts.extra,
        },
    )


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
