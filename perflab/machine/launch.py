"""Launch overhead: what one tiny kernel costs the GPU when launches come back to back and
as a node of a CUDA graph, each on the GPU's own clock; and, as series of their own, what
launching costs the host.

Kernels: ``empty`` (``torch.cuda._sleep(0)``: a kernel that does nothing) and ``small``
(an in-place add on 1024 floats). Series, in microseconds per kernel against the batch N:

- ``KERNEL/stream, GPU clock``: N launches timed by the timing engine on the CUDA clock:
  CUDA events around them, queued behind its queue filler; the window over N. The filler
  keeps the GPU from waiting for the host inside the window, so this is the GPU's own
  kernel-to-kernel cost (what gpu-benches publishes: 10,000 launches queued from C++).
  Samples in which the GPU waited for the host anyway are named in the warnings.
- ``KERNEL/graph node, GPU clock``: a CUDA graph of N nodes (100 and 1,000) replayed the
  same way; the window over N.
- ``KERNEL/host dispatch per launch``: N launches and one synchronisation on the host
  clock, over N: at large N the host's own cost of a launch (the Python loop and torch's
  dispatch), as the GPU keeps up with it.
- ``KERNEL/launch+sync, host clock``: launch, then synchronise, N times, on the host
  clock: the round trip a loop pays when it waits for every kernel.

CPU analog (no GPU): the cost per call of a Python no-op and of a tiny torch op on the CPU
(``add_`` on one element): the dispatch overhead every eager op pays before any work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import ModuleType

import numpy as np

from perflab.errors import import_extra
from perflab.machine._common import NoiseLog, median_call_ns, new_result, progress, resolve_backend
from perflab.model.machine import BenchResult, Series

CUDA_BATCHES = (1, 10, 100, 1000)
CPU_BATCHES = (1, 10, 100, 1000)
GRAPH_NODES = (100, 1000)
GPU_STREAM = "stream, GPU clock"
GPU_GRAPH = "graph node, GPU clock"
HOST_DISPATCH = "host dispatch per launch"
HOST_SYNC = "launch+sync, host clock"
METHOD_NOTE = (
    "which clock: 'stream, GPU clock' and 'graph node, GPU clock' are CUDA events around "
    "N launches (or one replay of an N-node graph) queued behind a spinning kernel, over N: "
    "the GPU's own cost per kernel; 'host dispatch per launch' is the host's time for N "
    "launches and one synchronisation, over N (the Python loop and torch's dispatch); "
    "'launch+sync, host clock' is the host's time per kernel when it waits for each one"
)
# The published figure to set beside the GPU-clock series (DESIGN section 8)
REFERENCE_NOTE = (
    "reference (published by gpu-benches, not measured here): ~2.4-2.5 us per back-to-back "
    "tiny kernel on an H200 and ~1.26 us per CUDA graph node, 10,000 launches queued from "
    "C++: compare them with the GPU-clock series, not with the host's"
)


def gpu_clock_series(
    kernel_name: str,
    kernel: Callable[[], object],
    batches: Sequence[int],
    graph_nodes: Sequence[int],
    *,
    budget_ms: float,
    noise: NoiseLog | None = None,
    show: bool | None = None,
) -> list[Series]:
    """The GPU-clock series of one kernel: per kernel, batches of N launches back to back
    and graphs of N nodes, each timed by the timing engine on the CUDA clock (events
    around the N calls, behind its queue filler; the window over N), never by the host."""

    def per_kernel_us(n: int, graph: bool, series: str) -> float:
        ns = median_call_ns(
            kernel,
            "cuda",
            budget_ms=budget_ms,
            name=f"{series} x{n}",
            noise=noise,
            number=n,
            graph=graph,
        )
        return ns / 1e3

    stream_name = f"{kernel_name}/{GPU_STREAM}"
    graph_name = f"{kernel_name}/{GPU_GRAPH}"
    stream = [per_kernel_us(n, False, stream_name) for n in progress(batches, stream_name, show)]
    graph = [per_kernel_us(n, True, graph_name) for n in progress(graph_nodes, graph_name, show)]
    return [
        Series(stream_name, np.asarray(batches), np.asarray(stream), "batch", "us"),
        Series(graph_name, np.asarray(graph_nodes), np.asarray(graph), "nodes", "us"),
    ]


def _cuda_kernels(torch: ModuleType) -> dict[str, Callable[[], object]]:
    x = torch.rand(1024, device="cuda")
    return {"empty": lambda: torch.cuda._sleep(0), "small": lambda: x.add_(1.0)}


def _host_batch(
    torch: ModuleType, kernel: Callable[[], object], sync_each: bool, n: int
) -> Callable[[], object]:
    """N launches and one synchronisation (the host's dispatch, at large N: the GPU keeps
    up), or a synchronisation after each launch (the round trip)."""
    sync = torch.cuda.synchronize

    def batch() -> None:
        for _ in range(n):
            kernel()
            if sync_each:
                sync()
        sync()

    return batch


def _cpu_calls() -> dict[str, Callable[[], object]]:
    torch = import_extra("torch", "perflab machine launch")

    one = torch.zeros(1)
    return {"python call": lambda: None, "torch op": lambda: one.add_(1.0)}


def _cpu_batch(call: Callable[[], object], n: int) -> Callable[[], object]:
    def batch() -> None:
        for _ in range(n):
            call()

    return batch


def _host_clock_series(
    name: str,
    batches: tuple[int, ...],
    make: Callable[[int], Callable[[], object]],
    budget_ms: float,
    noise: NoiseLog,
    show: bool | None,
) -> Series:
    """Per-kernel (or per-call) time of batches of ``n`` on the host clock."""
    per_kernel_us = []
    for n in progress(batches, f"launch {name}", show):
        ns = median_call_ns(make(n), "cpu", budget_ms=budget_ms, name=f"{name} x{n}", noise=noise)
        per_kernel_us.append(ns / n / 1e3)
    return Series(name, np.asarray(batches), np.asarray(per_kernel_us), "batch", "us")


def _run_cuda(
    result: BenchResult, grid: tuple[int, ...], budget_ms: float, noise: NoiseLog, show: bool | None
) -> None:
    torch = import_extra("torch", "perflab machine launch")
    for kname, kernel in _cuda_kernels(torch).items():
        result.series += gpu_clock_series(
            kname, kernel, grid, GRAPH_NODES, budget_ms=budget_ms, noise=noise, show=show
        )
        for label, sync_each in ((HOST_DISPATCH, False), (HOST_SYNC, True)):
            make = functools.partial(_host_batch, torch, kernel, sync_each)
            name = f"{kname}/{label}"
            result.series.append(_host_clock_series(name, grid, make, budget_ms, noise, show))
    result.warnings += [METHOD_NOTE, REFERENCE_NOTE]


def run(
    *,
    backend: str = "auto",
    batches: tuple[int, ...] | None = None,
    quick: bool = False,
    budget_ms: float = 50.0,
    show_progress: bool | None = None,
) -> BenchResult:
    """Per-kernel cost (us) of each kernel on the GPU's clock (``empty/stream, GPU clock``,
    ``small/graph node, GPU clock``), the host's dispatch per launch and the launch+sync
    round trip on the host's; on the CPU, per-call cost of a Python call and of a tiny
    torch op."""
    chosen = resolve_backend(backend)
    grid = batches or (CUDA_BATCHES if chosen == "cuda" else CPU_BATCHES)
    if quick and batches is None:
        grid = grid[::2] + ((grid[-1],) if len(grid) % 2 == 0 else ())
    budget = budget_ms / (2 if quick else 1)
    noise = NoiseLog()
    if chosen == "cuda":
        timer = "GPU clock (CUDA events behind the queue filler); host clock for the host series"
        options: dict[str, object] = {"quick": quick, "timer": timer}
        result = new_result("launch", chosen, {**options, "graph_nodes": list(GRAPH_NODES)})
        _run_cuda(result, grid, budget, noise, show_progress)
    else:
        result = new_result("launch", chosen, {"quick": quick, "timer": "host clock"})
        for cname, call in _cpu_calls().items():
            make = functools.partial(_cpu_batch, call)
            result.series.append(
                _host_clock_series(cname, grid, make, budget, noise, show_progress)
            )
        result.warnings.append(
            "no GPU: per-call dispatch cost on the CPU (the CPU analog); no kernels, no CUDA graphs"
        )
    result.warnings.extend(noise.summary())
    return result


def steady_us(result: BenchResult) -> dict[str, float]:
    """Per-kernel cost at the largest batch of each series."""
    return {s.name: float(s.y[-1]) for s in result.series if len(s)}
