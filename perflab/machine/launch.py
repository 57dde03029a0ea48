"""Launch overhead: what one small kernel costs when launched back to back on a stream,
with a synchronisation after each, and as a node of a CUDA graph.

Kernels: ``empty`` (``torch.cuda._sleep(0)``: a kernel that does nothing) and ``small``
(an in-place add on 1024 floats). Each series is the host-observed time per kernel for
batches of ``N`` launches (launch N, then synchronise once; or synchronise after each; or
replay a graph of N nodes), in microseconds; the largest batch gives the steady cost.

CPU analog (no GPU): the cost per call of a Python no-op and of a tiny torch op on the CPU
(``add_`` on one element): the dispatch overhead every eager op pays before any work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType

import numpy as np

from perflab.errors import import_extra
from perflab.machine._common import NoiseLog, median_call_ns, new_result, progress, resolve_backend
from perflab.model.machine import BenchResult, Series

CUDA_BATCHES = (1, 10, 100, 1000)
CPU_BATCHES = (1, 10, 100, 1000)
MODES = ("stream", "sync", "graph")
# What the CUDA figures are, beside the published reference (DESIGN section 8): gpu-benches'
# gpu-small-kernels queues 10,000 launches from C++ and divides the host time by them, so
# its figure is the GPU's kernel-to-kernel cost with no Python or torch dispatch in the loop.
HOST_CLOCK_NOTE = (
    "host clock: each figure is the host's time per kernel over a batch, with the Python "
    "loop and torch's dispatch of every launch included (and, for sync, each "
    "synchronisation); gpu-benches' ~2.4-2.5 us per back-to-back tiny kernel on an H200 "
    "(~1.26 us as CUDA graph nodes) is 10,000 launches queued from C++ with neither, the "
    "GPU's own kernel-to-kernel cost: a figure here above it may be the host's dispatch, "
    "not the GPU"
)


def _cuda_kernels(torch: ModuleType) -> dict[str, Callable[[], object]]:
    x = torch.rand(1024, device="cuda")
    return {"empty": lambda: torch.cuda._sleep(0), "small": lambda: x.add_(1.0)}


def _cuda_batch(
    torch: ModuleType, kernel: Callable[[], object], mode: str, n: int
) -> Callable[[], object]:
    sync = torch.cuda.synchronize
    if mode == "stream":

        def batch() -> None:
            for _ in range(n):
                kernel()
            sync()

        return batch
    if mode == "sync":

        def each() -> None:
            for _ in range(n):
                kernel()
                sync()

        return each
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel()  # warm up outside the capture, as torch's graph docs require
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        for _ in range(n):
            kernel()
    sync()

    def replay() -> None:
        graph.replay()
        sync()

    return replay


def _cpu_calls() -> dict[str, Callable[[], object]]:
    torch = import_extra("torch", "perflab machine launch")

    one = torch.zeros(1)
    return {"python call": lambda: None, "torch op": lambda: one.add_(1.0)}


def _cpu_batch(call: Callable[[], object], n: int) -> Callable[[], object]:
    def batch() -> None:
        for _ in range(n):
            call()

    return batch


def _measure(
    name: str,
    batches: tuple[int, ...],
    make: Callable[[int], Callable[[], object]],
    backend: str,
    budget_ms: float,
    noise: NoiseLog,
    show: bool | None,
) -> Series:
    per_kernel_us = []
    for n in progress(batches, f"launch {name}", show):
        ns = median_call_ns(
            make(n), "cpu", budget_ms=budget_ms, name=f"{name} x{n}", noise=noise
        )  # host clock: launch cost is what the host sees
        per_kernel_us.append(ns / n / 1e3)
    return Series(name, np.asarray(batches), np.asarray(per_kernel_us), "batch", "us")


def run(
    *,
    backend: str = "auto",
    batches: tuple[int, ...] | None = None,
    quick: bool = False,
    budget_ms: float = 50.0,
    show_progress: bool | None = None,
) -> BenchResult:
    """Per-kernel cost (us) for each kernel and mode (``empty/stream``, ``small/graph``...);
    on the CPU, per-call cost of a Python call and of a tiny torch op."""
    chosen = resolve_backend(backend)
    grid = batches or (CUDA_BATCHES if chosen == "cuda" else CPU_BATCHES)
    if quick and batches is None:
        grid = grid[::2] + ((grid[-1],) if len(grid) % 2 == 0 else ())
    budget = budget_ms / (2 if quick else 1)
    noise = NoiseLog()
    result = new_result("launch", chosen, {"quick": quick, "timer": "host clock, with sync"})
    if chosen == "cuda":
        torch = import_extra("torch", "perflab machine launch")

        for kname, kernel in _cuda_kernels(torch).items():
            for mode in MODES:
                make = functools.partial(_cuda_batch, torch, kernel, mode)
                result.series.append(
                    _measure(f"{kname}/{mode}", grid, make, chosen, budget, noise, show_progress)
                )
        result.warnings.append(HOST_CLOCK_NOTE)
    else:
        for cname, call in _cpu_calls().items():
            make = functools.partial(_cpu_batch, call)
            result.series.append(_measure(cname, grid, make, chosen, budget, noise, show_progress))
        result.warnings.append(
            "no GPU: per-call dispatch cost on the CPU (the CPU analog); no kernels, no CUDA graphs"
        )
    result.warnings.extend(noise.summary())
    return result


def steady_us(result: BenchResult) -> dict[str, float]:
    """Per-kernel cost at the largest batch of each series."""
    return {s.name: float(s.y[-1]) for s in result.series if len(s)}
