"""The timing engine behind ``perflab.bench`` and ``%%gpuprofile``.

Method (after Triton's ``do_bench`` and nvbench):

1. call once (compilation, allocation), then estimate the cost of a call and of
   issuing one sample from the host;
2. warm up for the warm-up budget, counted in *calls* (a CUDA-graph replay of N calls
   counts N);
3. take samples in rounds until a stopping rule fires (``stop_reason``): the relative
   standard error of the median is below ``max_noise`` (nvbench's noise criterion,
   default 0.5%) after at least ``min_samples``, or the time budget is spent (the
   timeout), or ``max_samples``/``repeat`` is reached.

One sample is: [cache flush] [queue filler] start-mark, ``number`` calls, end-mark.
The flush and the filler are enqueued before the start mark, so neither is inside the
timed window. On a GPU the filler is a spinning kernel (``torch.cuda._sleep``) sized
from the host's cost of issuing a sample, so the start event and the calls sit in a
full queue and the GPU never waits for the host inside the window (nvbench's blocking
kernel). The host time of issuing every sample (``host_ns``) is kept too, and a sample
whose filler was shorter than its host time is flagged host-bound: the GPU may have
waited for the CPU, and the sample then measures the host's loop, not the kernel.

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

import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab._gc import gc_paused
from perflab.capture import env
from perflab.capture.nvtx import Range
from perflab.errors import InputError, no_gpu
from perflab.model import stats
from perflab.model.timing import TimingResult

NOISE_IQR_FRACTION = 0.10
WORST_OVER_BEST = 4.0
CPU_MIN_SAMPLE_NS = 20_000  # batch tiny CPU calls so perf_counter overhead stays < ~1%
ESTIMATE_SAMPLES = 5
PROBE_SAMPLES = 3  # samples that measure the host's cost of issuing one (GPU, with filler)
DEFAULT_FLUSH_BYTES = 32 << 20
MAX_BUDGET_MS = 3_600_000.0  # one hour: a larger budget is a typo, and int() would overflow
MAX_COUNT = 10_000_000  # calls per sample / samples: beyond this a run never ends
MAX_WARMUP_CALLS = 100_000
HOST_BOUND_FRACTION = 0.05  # the GPU may have idled > 5% of a sample: flag it
LEAD_FACTOR = 2.0  # the queue filler lasts twice the host's cost of issuing a sample
LEAD_MARGIN_NS = 20_000.0
MAX_LEAD_NS = 50_000_000.0
ROUND_GROWTH = 0.5  # each round adds half as many samples as there are


@dataclass
class TimingOptions:
    """How to time; every field has a CLI/magic counterpart."""

    warmup_ms: float = 25.0
    budget_ms: float = 100.0  # the timeout: sampling stops when it is spent
    number: int | None = None  # calls per sample (-n)
    repeat: int | None = None  # samples (-r): a fixed count, no stopping rule
    flush_l2: bool | None = None  # None: on for CUDA, off for CPU
    graph: bool = False
    backend: str = "auto"
    name: str = "fn"
    nvtx: bool = True
    min_samples: int = 10
    max_samples: int = 10_000
    max_noise: float = 0.005  # target relative standard error of the median (0: off)
    fill_queue: bool = True  # GPU: a spinning kernel before each sample's start event
    extra: dict[str, Any] = field(default_factory=dict)

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


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_COUNT


# --- clocks -------------------------------------------------------------------------


class HostClock:
    """The CPU backend: the host is the device. Marks are ``perf_counter_ns`` readings;
    there is no queue (``asynchronous`` False), so there is nothing to fill."""

    name = "cpu"
    asynchronous = False
    can_fill = False

    def __init__(self, flush: bool) -> None:
        self.device = f"CPU: {env.cpu_name()}"
        size = max(env.cpu_caches().values(), default=DEFAULT_FLUSH_BYTES)
        self._flush_buf = np.empty(2 * size, dtype=np.uint8) if flush else None
        self.flushes = flush
        self.notes: list[str] = []
        self.setup: dict[str, Any] = {}

    def mark(self) -> int:
        return time.perf_counter_ns()

    def elapsed_ns(self, start: Any, end: Any) -> float:
        return float(end - start)

    def hold(self, ns: float) -> None:
        """No queue to fill on the host."""

    def flush(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.fill(1)  # write the whole buffer: evicts the caches

    def sync(self) -> None:
        pass

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        """The host analog of a graph: one step that makes ``number`` calls."""

        def replay() -> None:
            for _ in range(number):
                fn()

        return replay

    def close(self) -> None:
        self._flush_buf = None


class HostQueueClock:
    """A real asynchronous queue on the host: one worker thread runs what is submitted,
    in order, as a GPU stream runs kernels. Marks are ``perf_counter_ns`` readings taken
    by the worker when it reaches them; ``hold(ns)`` keeps the worker busy (the queue
    filler). Work is put on the queue with :meth:`submit`. It lets the queue logic
    (fillers, host-bound flags) run for real without a GPU; it is not a user backend."""

    name = "host-queue"
    asynchronous = True
    can_fill = True
    flushes = False

    def __init__(self) -> None:
        self.device = "CPU worker thread (the host analog of a GPU stream)"
        self.notes: list[str] = []
        self.setup: dict[str, Any] = {}
        self._queue: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._work, name="perflab-host-queue", daemon=True)
        self._worker.start()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            item()

    def submit(self, work: Callable[[], object]) -> None:
        self._queue.put(work)

    def mark(self) -> list[int]:
        box = [0]

        def stamp() -> None:
            box[0] = time.perf_counter_ns()

        self.submit(stamp)
        return box

    def elapsed_ns(self, start: Any, end: Any) -> float:
        return float(end[0] - start[0])

    def hold(self, ns: float) -> None:
        self.submit(lambda: time.sleep(ns / 1e9))  # sleeps at least ns

    def flush(self) -> None:
        """No cache flush on this queue."""

    def sync(self) -> None:
        done = threading.Event()
        self.submit(done.set)
        done.wait()

    capture_graph = HostClock.capture_graph

    def close(self) -> None:
        self._queue.put(None)
        self._worker.join()


def _make_clock(opts: TimingOptions) -> Any:
    backend = env.default_backend() if opts.backend == "auto" else opts.backend
    if backend == "cpu":
        if opts.graph:
            raise no_gpu("--graph (CUDA-graph replay)")
        return HostClock(flush=bool(opts.flush_l2))
    from perflab.capture.gpu_clock import make_cuda_clock

    return make_cuda_clock(True if opts.flush_l2 is None else opts.flush_l2)


# --- planning -----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a run will do, derived from the budgets and the estimate."""

    number: int  # calls per sample
    warmup_calls: int
    max_count: int  # samples the budget allows (the rounds stop earlier when quiet)
    fixed: bool  # -r given: exactly max_count samples


def _plan(opts: TimingOptions, per_call_ns: float, clock_name: str, flush_ns: float = 0.0) -> Plan:
    """Calls per sample, warm-up calls and the most samples, from budgets and estimates.

    ``flush_ns`` is the cost of the cache flush before each sample: it spends budget too.
    """
    per_call_ns = max(per_call_ns, 1.0)
    if opts.number is not None:
        number = opts.number
    elif clock_name == "cpu":
        number = max(1, min(MAX_COUNT, math.ceil(CPU_MIN_SAMPLE_NS / per_call_ns)))
    else:
        number = 1  # the queue filler keeps short kernels from being launch-bound
    sample_ns = per_call_ns * number
    warmup = max(1, min(MAX_WARMUP_CALLS, int(opts.warmup_ms * 1e6 / per_call_ns)))
    if opts.repeat is not None:
        return Plan(number, warmup, opts.repeat, True)
    wanted = int(min(opts.budget_ms * 1e6 / (sample_ns + flush_ns), MAX_COUNT))
    floor = opts.min_samples
    if sample_ns * floor > 10 * opts.budget_ms * 1e6:
        floor = min(3, floor)  # a call far beyond the budget: keep the run short, a warning follows
    return Plan(number, warmup, max(floor, min(wanted, opts.max_samples)), False)


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
    """Why sampling stops now, or None to take more: ``repeat``, ``max_samples``,
    ``noise`` (relative standard error of the median <= max_noise after min_samples) or
    ``budget`` (the time budget, the timeout, is spent)."""
    n = np.asarray(samples).size
    if plan.fixed:
        return "repeat" if n >= plan.max_count else None
    if n >= opts.max_samples:
        return "max_samples"
    quiet_enough = n >= opts.min_samples and opts.max_noise > 0
    if quiet_enough and relative_standard_error(samples) <= opts.max_noise:
        return "noise"
    if n >= plan.max_count or elapsed_ns >= opts.budget_ms * 1e6:
        return "budget" if n >= min(opts.min_samples, plan.max_count) else None
    return None


def next_round(n: int, elapsed_ns: float, opts: TimingOptions, plan: Plan) -> int:
    """How many samples the next round takes: the rest of a fixed count; else first
    ``min_samples``, then half as many as there are, within the budget and the caps."""
    if plan.fixed:
        return plan.max_count - n
    if n == 0:
        return min(opts.min_samples, plan.max_count)
    per_sample = elapsed_ns / n
    left = max(0.0, opts.budget_ms * 1e6 - elapsed_ns)
    by_budget = int(left / per_sample) if per_sample > 0 else plan.max_count
    cap = min(plan.max_count, opts.max_samples) - n
    return max(1, min(max(1, int(n * ROUND_GROWTH)), by_budget, cap))


# --- host-bound samples -------------------------------------------------------------


def host_bound(
    window_ns: npt.ArrayLike, host_ns: npt.ArrayLike, lead_ns: npt.ArrayLike
) -> npt.NDArray[np.bool_]:
    """Samples in which the device may have waited for the host.

    A sample's work is issued within ``host_ns`` of its filler being enqueued; the filler
    keeps the device busy for ``lead_ns``. So the device can have idled inside the timed
    window for at most ``host_ns - lead_ns``; a sample is flagged when that bound exceeds
    HOST_BOUND_FRACTION of its window (``window_ns``: the time of all its calls)."""
    window = np.asarray(window_ns, dtype=np.float64)
    idle_bound = np.maximum(
        0.0, np.asarray(host_ns, dtype=np.float64) - np.asarray(lead_ns, dtype=np.float64)
    )
    return np.asarray(idle_bound > HOST_BOUND_FRACTION * window, dtype=np.bool_)


def lead_for(host_issue_ns: float) -> float:
    """Queue-filler length for samples the host issues in ``host_issue_ns``."""
    return min(MAX_LEAD_NS, LEAD_FACTOR * host_issue_ns + LEAD_MARGIN_NS)


# --- sampling -----------------------------------------------------------------------


@dataclass
class Samples:
    """Raw samples of one round or run: the window of each sample (all its calls), the
    host's time to issue it, and the device time of the filler before it."""

    window_ns: list[float] = field(default_factory=list)
    host_ns: list[float] = field(default_factory=list)
    lead_ns: list[float] = field(default_factory=list)

    def extend(self, other: Samples) -> None:
        self.window_ns += other.window_ns
        self.host_ns += other.host_ns
        self.lead_ns += other.lead_ns


def take_samples(
    clock: Any,
    step: Callable[[], object],
    steps: int,
    count: int,
    lead_ns: float = 0.0,
    after_issue: Callable[[], None] | None = None,
) -> Samples:
    """``count`` samples of ``steps`` calls of ``step``, in this order per sample: flush,
    [filler], start mark, the calls, end mark, then ``after_issue`` (e.g. an SM clock
    reading, taken while the device runs the queue). Only the calls lie between the
    marks; one sync at the end."""
    host = time.perf_counter_ns
    marks = []
    issued = []
    calls = range(steps)
    for _ in range(count):
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
        issued.append(float(host() - h0))
        marks.append((pre, start, end))
        if after_issue is not None:
            after_issue()
    clock.sync()
    out = Samples(host_ns=issued)
    for pre, start, end in marks:
        out.window_ns.append(clock.elapsed_ns(start, end))
        out.lead_ns.append(clock.elapsed_ns(pre, start) if pre is not None else 0.0)
    return out


def _estimate(clock: Any, fn: Callable[[], object]) -> Samples:
    return take_samples(clock, fn, 1, ESTIMATE_SAMPLES)


def _flush_cost_ns(clock: Any) -> float:
    if not clock.flushes:
        return 0.0
    t0 = time.perf_counter_ns()
    clock.flush()
    clock.sync()
    return float(time.perf_counter_ns() - t0)


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


def cold_calls(flushes: bool, calls_per_sample: int, graph: bool) -> str:
    """Which calls ran with a cold cache: the flush precedes each sample, never each
    call inside one (a graph replay or ``-n`` calls share the sample's flush)."""
    if not flushes:
        return "none"
    if calls_per_sample == 1:
        return "every call"
    where = "graph replay" if graph else "sample"
    return f"first call of each {where} (1 of {calls_per_sample}; the rest ran warm)"


@dataclass
class _Run:
    samples: Samples
    stop_reason: str
    plan: Plan
    warmup_calls: int
    lead_ns: float
    elapsed_ns: float


def measure(clock: Any, fn: Callable[[], object], opts: TimingOptions, watch: Any = None) -> _Run:
    """The engine proper, on any clock: estimate, plan, warm up per call, sample in
    rounds until a stopping rule fires."""
    fn()  # first call: compilation, allocation, lazy loading
    clock.sync()
    estimate = _estimate(clock, fn)
    per_call = float(np.median(estimate.window_ns))
    plan = _plan(opts, per_call, clock.name, _flush_cost_ns(clock))
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
        clock.hold(1.0)  # the first hold calibrates the filler: not inside a sample
        probe = take_samples(clock, step, steps, PROBE_SAMPLES)  # host cost of a sample
        lead = lead_for(float(np.max(probe.host_ns)))
    reading = watch.sample if watch is not None else None
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
                reading,
            )
        )
        per_call_ns = np.asarray(samples.window_ns) / plan.number
        reason = stop_reason(per_call_ns, time.perf_counter_ns() - t0, opts, plan)
    return _Run(
        samples, reason, plan, n_warm * calls_per_step, lead, float(time.perf_counter_ns() - t0)
    )


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
    from perflab.capture.gpu_clock import ThrottleWatch

    watch = ThrottleWatch.start(clock)
    try:
        with gc_paused(), Range(opts.name, nvtx=opts.nvtx):
            run = measure(clock, fn, opts, watch)
        throttle = watch.finish(len(run.samples.window_ns))
    finally:
        clock.close()
        watch.close()
    return _result(clock, opts, run, throttle)


def _result(clock: Any, opts: TimingOptions, run: _Run, throttle: dict[str, Any]) -> TimingResult:
    number = run.plan.number
    window = np.asarray(run.samples.window_ns, dtype=np.float64)
    host = np.asarray(run.samples.host_ns, dtype=np.float64)
    flagged = (
        host_bound(window, host, run.samples.lead_ns)
        if clock.asynchronous
        else np.zeros(window.size, bool)
    )
    keep = ~np.asarray(throttle.pop("drop", np.zeros(window.size, bool)), dtype=bool)
    if not keep.any():
        keep[:] = True  # never drop everything: the warning says the clocks were low
    per_call = window[keep] / number
    warnings = noise_warnings(per_call, opts.min_samples) + list(throttle.pop("warnings", []))
    warnings += list(clock.notes)
    if flagged.any():
        warnings.append(
            f"host-bound: in {int(flagged.sum())} of {flagged.size} samples the GPU may have "
            "waited for the host inside the timed window (the queue filler was shorter than "
            "the host's time to issue the sample); these samples time the host's loop: use "
            "--graph, or -n to batch calls"
        )
    cold = cold_calls(clock.flushes, number, opts.graph)
    if clock.flushes and number > 1:
        warnings.append(f"L2 flushed before each sample only: cold calls are the {cold}")
    if clock.name == "cpu":
        warnings.append("no GPU: timed with the host clock (perf_counter_ns)")
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
        throttle=throttle,
        options={
            "warmup_ms": opts.warmup_ms,
            "budget_ms": opts.budget_ms,
            "max_noise": opts.max_noise,
            "min_samples": opts.min_samples,
            "flush_l2": clock.flushes,
            "cold": cold,
            "graph": opts.graph,
            "warmup_calls": run.warmup_calls,
            "samples": int(window.size),
            "relative_standard_error": _finite_or_none(relative_standard_error(per_call)),
            "queue_filler_ns": run.lead_ns,
            "host_bound_samples": int(flagged[keep].sum()),
            **clock.setup,
            **opts.extra,
        },
    )


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
