"""The timing engine behind ``perflab.bench`` and ``%%gpuprofile``.

Method (after Triton's ``do_bench`` and nvbench): call once, estimate the cost of a
call, derive warm-up and sample counts from millisecond budgets, optionally flush
the L2 (or the CPU's last-level cache) before every sample, optionally replay a CUDA
graph, keep every sample, and time with CUDA events on the current stream (GPU) or
``perf_counter_ns`` (CPU). Garbage collection is off while timing.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from perflab._gc import gc_paused
from perflab.capture import env
from perflab.capture.nvtx import Range
from perflab.errors import InputError, NoGPUError
from perflab.model.timing import TimingResult

NOISE_IQR_FRACTION = 0.10
WORST_OVER_BEST = 4.0
CPU_MIN_SAMPLE_NS = 20_000  # batch tiny CPU calls so perf_counter overhead stays < ~1%
ESTIMATE_CALLS = 5
DEFAULT_FLUSH_BYTES = 32 << 20


@dataclass
class BenchOptions:
    """How to time; every field has a CLI/magic counterpart."""

    warmup_ms: float = 25.0
    budget_ms: float = 100.0
    number: int | None = None  # calls per sample (-n)
    repeat: int | None = None  # samples (-r)
    flush_l2: bool | None = None  # None: on for CUDA, off for CPU
    graph: bool = False
    backend: str = "auto"
    name: str = "fn"
    nvtx: bool = True
    min_samples: int = 10
    max_samples: int = 10_000
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if self.backend not in ("auto", "cuda", "cpu"):
            raise InputError(f"backend must be auto, cuda or cpu, not {self.backend!r}")
        for label, value in (("warm-up", self.warmup_ms), ("budget", self.budget_ms)):
            if not (value >= 0 and math.isfinite(value)):
                raise InputError(f"{label} must be a non-negative number of ms, not {value!r}")
        for label, count in (("-n/number", self.number), ("-r/repeat", self.repeat)):
            if count is not None and count < 1:
                raise InputError(f"{label} must be at least 1, not {count}")


class _CpuClock:
    name = "cpu"

    def __init__(self, flush: bool) -> None:
        self.device = f"CPU: {env.cpu_name()}"
        size = max(env.cpu_caches().values(), default=DEFAULT_FLUSH_BYTES)
        self._flush_buf = np.empty(2 * size, dtype=np.uint8) if flush else None
        self.flushes = flush

    def flush(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.fill(1)  # write the whole buffer: evicts the caches

    def sync(self) -> None:
        pass

    def run_samples(self, fn: Callable[[], object], number: int, count: int) -> list[float]:
        clock = time.perf_counter_ns
        calls = range(number)
        totals = [0] * count
        flush = self.flush if self.flushes else None  # no call at all when not flushing
        for i in range(count):
            if flush is not None:
                flush()
            t0 = clock()
            for _ in calls:
                fn()
            totals[i] = clock() - t0
        return [t / number for t in totals]

    def close(self) -> None:
        self._flush_buf = None


class _CudaEventClock:
    """One CUDA event pair per sample, read after a single sync at the end (no host
    round trip between samples). Subclasses supply the events, the flush and the sync."""

    name = "cuda"
    device = "cuda"
    flushes = False
    _flush_buf: Any = None

    def new_event(self) -> Any:
        raise NotImplementedError

    def elapsed_ms(self, start: Any, end: Any) -> float:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def run_samples(self, fn: Callable[[], object], number: int, count: int) -> list[float]:
        pairs = [(self.new_event(), self.new_event()) for _ in range(count)]
        for start, end in pairs:
            self.flush()
            start.record()
            for _ in range(number):
                fn()
            end.record()
        self.sync()
        return [self.elapsed_ms(s, e) * 1e6 / number for s, e in pairs]

    def close(self) -> None:
        self._flush_buf = None


class _TorchCudaClock(_CudaEventClock):
    """CUDA events on torch's current stream (CuPy work on the same stream is timed too)."""

    def __init__(self, torch: Any, flush: bool) -> None:
        self.torch = torch
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.device = str(props.name)
        l2 = int(getattr(props, "L2_cache_size", 0)) or DEFAULT_FLUSH_BYTES
        # Twice the L2 so nothing useful survives the flush.
        self._flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device="cuda") if flush else None
        self.flushes = flush

    def new_event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end))

    def flush(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.zero_()

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        """Capture ``number`` calls into a CUDA graph; return its replay."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()  # warm-up on a side stream, as torch's graph docs require
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(number):
                fn()
        self.sync()
        replay: Callable[[], object] = graph.replay
        return replay


class _CupyCudaClock(_CudaEventClock):
    """The same method through CuPy events when torch has no CUDA."""

    def __init__(self, cupy: Any, flush: bool) -> None:
        self.cupy = cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        self.device = props["name"].decode()
        l2 = int(props["l2CacheSize"]) or DEFAULT_FLUSH_BYTES
        self._flush_buf = cupy.empty(2 * l2, dtype=cupy.uint8) if flush else None
        self.flushes = flush

    def new_event(self) -> Any:
        return self.cupy.cuda.Event()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(self.cupy.cuda.get_elapsed_time(start, end))

    def flush(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.fill(0)

    def sync(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        stream = self.cupy.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            try:
                for _ in range(number):
                    fn()
            finally:
                graph = stream.end_capture()
        return lambda: graph.launch(stream=self.cupy.cuda.get_current_stream())


def _make_clock(opts: BenchOptions) -> Any:
    backend = env.default_backend() if opts.backend == "auto" else opts.backend
    if backend == "cpu":
        if opts.graph:
            raise NoGPUError("--graph needs a CUDA GPU (CUDA-graph replay); none is available")
        return _CpuClock(flush=bool(opts.flush_l2))
    flush = True if opts.flush_l2 is None else opts.flush_l2
    torch = env._torch_cuda()
    if torch is not None:
        return _TorchCudaClock(torch, flush)
    cupy = env._cupy_cuda()
    if cupy is not None:
        return _CupyCudaClock(cupy, flush)
    raise NoGPUError("backend 'cuda' was asked for but no CUDA GPU is available (no GPU)")


def _plan(
    opts: BenchOptions, per_call_ns: float, clock_name: str, flush_ns: float = 0.0
) -> tuple[int, int, int]:
    """(calls per sample, warm-up calls, samples) from the budgets and the estimate.

    ``flush_ns`` is the cost of the cache flush before each sample: it spends budget too.
    """
    per_call_ns = max(per_call_ns, 1.0)
    if opts.number is not None:
        number = opts.number
    elif clock_name == "cpu":
        number = max(1, math.ceil(CPU_MIN_SAMPLE_NS / per_call_ns))
    else:
        number = 1
    sample_ns = per_call_ns * number
    warmup = max(1, int(opts.warmup_ms * 1e6 / per_call_ns))
    if opts.repeat is not None:
        return number, warmup, opts.repeat
    wanted = int(opts.budget_ms * 1e6 / (sample_ns + flush_ns))
    floor = opts.min_samples
    if sample_ns * floor > 10 * opts.budget_ms * 1e6:
        floor = 3  # a call far beyond the budget: keep the run short, a warning follows
    return number, warmup, max(floor, min(wanted, opts.max_samples))


def _estimate(clock: Any, fn: Callable[[], object]) -> float:
    return float(np.median(clock.run_samples(fn, 1, ESTIMATE_CALLS)))


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


def bench(
    fn: Callable[[], object], options: BenchOptions | None = None, **overrides: Any
) -> TimingResult:
    """Time ``fn()`` soundly; see :class:`BenchOptions` for the knobs.

    >>> r = bench(lambda: sum(range(1000)), backend="cpu", budget_ms=20)
    >>> r.n > 0
    True
    """
    opts = BenchOptions(**{**asdict(options or BenchOptions()), **overrides})
    opts.validate()
    if not callable(fn):
        raise InputError(f"bench() needs a callable, got {type(fn).__name__}")
    clock = _make_clock(opts)
    throttle = _ThrottleWatch.start(clock.name)
    try:
        with gc_paused(), Range(opts.name, nvtx=opts.nvtx):
            fn()  # first call: compilation, allocation, lazy loading
            clock.sync()
            per_call = _estimate(clock, fn)
            number, warmup, count = _plan(opts, per_call, clock.name, _flush_cost_ns(clock))
            timed = clock.capture_graph(fn, number) if opts.graph else fn
            if opts.graph:
                number_in_graph, number = number, 1
            for _ in range(min(warmup, 10_000)):
                timed()
            clock.sync()
            raw = np.asarray(clock.run_samples(timed, number, count), dtype=np.float64)
            if opts.graph:
                raw /= number_in_graph
                number = number_in_graph
    finally:
        clock.close()
    warnings = noise_warnings(raw, opts.min_samples) + throttle.finish()
    if clock.name == "cpu":
        warnings.append("no GPU: timed with the host clock (perf_counter_ns)")
    return TimingResult(
        samples_ns=raw,
        backend=clock.name,
        device=clock.device,
        name=opts.name,
        number=number,
        warnings=warnings,
        versions=env.versions(),
        options={
            "warmup_ms": opts.warmup_ms,
            "budget_ms": opts.budget_ms,
            "flush_l2": clock.flushes,
            "graph": opts.graph,
            "warmup_calls": warmup,
            "samples": count,
            **opts.extra,
        },
    )


class _ThrottleWatch:
    """Clock-throttle reasons seen through NVML during a run (GPU only, when present)."""

    _BAD_REASONS: ClassVar[dict[int, str]] = {
        0x8: "hardware slowdown",
        0x20: "software thermal slowdown",
        0x40: "hardware thermal slowdown",
        0x80: "hardware power brake",
        0x4: "software power cap",
    }

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml = nvml
        self.handle = handle

    @classmethod
    def start(cls, backend: str) -> _ThrottleWatch:
        if backend != "cuda":
            return cls(None, None)
        try:
            import pynvml

            pynvml.nvmlInit()
            return cls(pynvml, pynvml.nvmlDeviceGetHandleByIndex(0))
        except Exception:  # no pynvml / no NVML: nothing to watch
            return cls(None, None)

    def finish(self) -> list[str]:
        if self.nvml is None:
            return []
        try:
            mask = int(self.nvml.nvmlDeviceGetCurrentClocksEventReasons(self.handle))
        except Exception:
            return []
        finally:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
        seen = [text for bit, text in self._BAD_REASONS.items() if mask & bit]
        return [f"clocks throttled during the run: {', '.join(seen)}"] if seen else []
