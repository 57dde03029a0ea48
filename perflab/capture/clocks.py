"""The clocks the timing engine (:mod:`perflab.capture.timer`) times with: the protocol every
clock follows, the host clock of the CPU backend, and a host thread run as a queue (the
queue logic, tested without a GPU). The CUDA clocks are :mod:`perflab.capture.gpu_clock`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from perflab.capture import env

DEFAULT_FLUSH_BYTES = 32 << 20


def nothing() -> None:
    """What an empty sample runs."""


def _reading(mark: object) -> int:
    """A host mark's ``perf_counter_ns`` reading: the int itself, or the queue's box."""
    if isinstance(mark, int):
        return mark
    if isinstance(mark, list) and isinstance(mark[0], int):
        return mark[0]
    raise TypeError(f"not a mark of a host clock: {mark!r}")


class Clock(Protocol):
    """What the engine times with: :class:`HostClock` (the CPU backend),
    :class:`HostQueueClock` (a host thread run as a queue, for tests),
    :class:`~perflab.capture.gpu_clock.TorchCudaClock` and
    :class:`~perflab.capture.gpu_clock.CupyCudaClock`.

    A mark is opaque (a ``perf_counter_ns`` reading, a CUDA event): only :meth:`elapsed_ns`
    reads two of them, and on an asynchronous clock only after :meth:`sync`; :meth:`reached`
    asks, without waiting, whether the device has got to one yet. A CUDA clock also has
    ``identity``, ``max_sm_mhz`` and ``stream_change``, which the throttle check and the
    result read where present."""

    name: str  # the result's backend: "cpu", "cuda" or "host-queue"
    device: str  # the result's device, in words
    asynchronous: bool  # marks and calls are queued: read the marks after sync()
    can_fill: bool  # hold() really keeps the queue busy (the queue filler)
    flushes: bool  # flush() evicts the cache before each sample
    notes: list[str]  # warnings the result carries (a reset carve-out, no filler)
    setup: dict[str, object]  # what the result's options record (the persisting-L2 check)

    def mark(self) -> object:
        """Put a time stamp in the queue (take one, on the host)."""
        ...

    def elapsed_ns(self, start: object, end: object) -> float:
        """The time between two marks of this clock."""
        ...

    def reached(self, mark: object) -> bool:
        """Whether the device has already got to ``mark`` (a query that does not wait:
        ``cudaEventQuery``). Always True on the host, which is its own device."""
        ...

    def hold(self, ns: float) -> None:
        """Keep the queue busy for about ``ns`` (nothing on the host)."""
        ...

    def spin(self, cycles: int) -> None:
        """Enqueue a kernel that spins ``cycles`` cycles (0: the least a sample holds)."""
        ...

    def flush(self) -> None:
        """Evict the cache (when ``flushes``)."""
        ...

    def sync(self) -> None:
        """Wait until everything queued has run."""
        ...

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        """One step that makes ``number`` calls of ``fn`` (a CUDA graph's replay)."""
        ...

    def close(self) -> None:
        """Release the flush buffer and whatever else the clock holds."""
        ...


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
        self.setup: dict[str, object] = {}

    def mark(self) -> int:
        return time.perf_counter_ns()

    def elapsed_ns(self, start: object, end: object) -> float:
        return float(_reading(end) - _reading(start))

    def reached(self, mark: object) -> bool:
        return True

    def hold(self, ns: float) -> None:
        """No queue to fill on the host."""

    def spin(self, cycles: int) -> None:
        """No queue to spin in: the engine asks only an asynchronous clock."""

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
    (fillers, host-bound flags) run for real without a GPU; it is not a user backend.

    ``depth`` bounds the queue as a GPU's launch queue is bounded: with ``depth`` items
    waiting, :meth:`submit` blocks until the worker takes one, so the host is held back
    by a full queue while the worker never waits (None: unbounded)."""

    name = "host-queue"
    asynchronous = True
    can_fill = True
    flushes = False

    def __init__(self, depth: int | None = None) -> None:
        self.device = "CPU worker thread (the host analog of a GPU stream)"
        self.notes: list[str] = []
        self.setup: dict[str, object] = {}
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue(maxsize=depth or 0)
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

    def elapsed_ns(self, start: object, end: object) -> float:
        return float(_reading(end) - _reading(start))

    def reached(self, mark: object) -> bool:
        return _reading(mark) != 0  # the worker stamps the box when it gets there

    def hold(self, ns: float) -> None:
        self.submit(lambda: time.sleep(ns / 1e9))  # sleeps at least ns

    def spin(self, cycles: int) -> None:
        """An empty work item (the analog of a GPU's spin kernel of ``cycles``; only 0 is
        asked, for the timer's floor)."""
        self.submit(nothing)

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
