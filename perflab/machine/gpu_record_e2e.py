"""Notebook 12's end-to-end batch-1 latency, the section of ``scripts/gpu-record`` that
records what a client sees: the host clock around one call and the synchronisation that
waits for its result, for the model run eagerly, replayed as a CUDA graph and compiled with
``torch.compile`` (``mode="reduce-overhead"`` and the default mode).

Each variant is warmed up, then timed for a fixed number of samples in one loop (no
rounds, nothing else between two samples), so that every percentile, the tail included,
comes from the same steady state. Beside each end-to-end series, a second pass of the same
length times each call with CUDA events recorded right before and after it, with no queue
filler: the GPU's span of the call, from its first work to its last, with whatever the GPU
waited for the host in between. The end-to-end pass carries no events, so its times hold
nothing but the call and the sync.

Saved as ``12-inference/end-to-end.json`` (a BenchResult: device, date and versions), one
series per variant and pass, in the order taken. On the CPU (a dry run) there is no CUDA
graph, and ``torch.compile`` uses its ``eager`` backend: the plumbing, not a compiler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from perflab.capture.graph import capture_torch
from perflab.machine.gpu_record import Recorder, host_times, inference_model
from perflab.model.machine import Series

if TYPE_CHECKING:
    import torch
    from torch import nn

FOLDER = "12-inference"
NAME = "end-to-end"
GPU_SAMPLES = 5000  # a p99.9 from the 5 slowest
CPU_SAMPLES = 50
WARMUP_CALLS = 50  # reduce-overhead records its CUDA graph on the first few calls
END_TO_END = "end to end"
EVENTS = "GPU events"


def event_samples(cuda: ModuleType, fn: Callable[[], object], count: int) -> list[float]:
    """Device ns of ``count`` calls of ``fn``, each between two CUDA events recorded right
    before and after it (no queue filler: the GPU's span of the call, waits for the host
    included), with a sync after each, as in the end-to-end pass (``torch.cuda`` is
    ``cuda``)."""
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    times = []
    for _ in range(count):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)) * 1e6)
    return times


def variants(model: nn.Module, x: torch.Tensor, on_gpu: bool) -> dict[str, Callable[[], object]]:
    """The ways notebook 12 runs the model, each a call that serves one request (its
    input in ``x``): eager, a CUDA graph replay (with the copy of the input into the
    captured tensor that a server needs), and ``torch.compile`` in two modes."""
    import torch

    calls: dict[str, Callable[[], object]] = {"eager": lambda: model(x)}
    if on_gpu:
        calls["CUDA graph"] = _graph_call(model, x)
    for mode in ("reduce-overhead", "default"):
        if on_gpu:
            compiled = torch.compile(model, mode=mode)
        else:  # no inductor C++ build on a dry run: dynamo's path with the eager backend
            compiled = torch.compile(model, backend="eager")
        calls[f"torch.compile {mode}"] = _bind(compiled, x)
    return calls


def _bind(fn: Callable[[torch.Tensor], object], x: torch.Tensor) -> Callable[[], object]:
    return lambda: fn(x)


def _graph_call(model: nn.Module, x: torch.Tensor) -> Callable[[], object]:
    """The forward captured as a CUDA graph, as ``perflab.bench(..., graph=True)`` captures
    it; a call copies ``x`` into the captured input and replays."""
    import torch

    static_x = x.clone()
    replay = capture_torch(torch, lambda: model(static_x), 1)

    def call() -> None:
        static_x.copy_(x)
        replay()

    return call


def end_to_end(rec: Recorder) -> Mapping[str, object]:
    """Each variant: warm-up, then the end-to-end pass and the events pass (on a GPU), a
    fixed number of samples each; a variant that fails is named with its error and the
    others are still recorded."""
    import torch

    count = GPU_SAMPLES if rec.on_gpu else CPU_SAMPLES
    model, x = inference_model(rec)
    series: list[Series] = []
    done: dict[str, object] = {"samples": count, "warmup_calls": WARMUP_CALLS}
    with torch.inference_mode():
        for label, call in variants(model, x, rec.on_gpu).items():
            try:
                done[label] = _record_variant(rec, label, call, count, series)
            except Exception as exc:
                done[label] = {"failed": f"{type(exc).__name__}: {exc}"[:500]}
    torch._dynamo.reset()  # drop the compiled models and their graphs' memory pools
    rec.series(FOLDER, NAME, "end-to-end latency", series)
    return done


def _record_variant(
    rec: Recorder, label: str, call: Callable[[], object], count: int, series: list[Series]
) -> dict[str, float]:
    import torch

    def sync() -> None:
        if rec.on_gpu:
            torch.cuda.synchronize()

    for _ in range(WARMUP_CALLS):
        call()
    sync()
    passes = {END_TO_END: host_times(count, call, sync)}
    if rec.on_gpu:
        passes[EVENTS] = event_samples(torch.cuda, call, count)
    summary = {}
    for kind, values in passes.items():
        series.append(_samples_series(f"{label}: {kind}", values))
        for q in (50, 99, 99.9):
            summary[f"{kind} p{q} us"] = float(np.percentile(values, q) / 1e3)
    return summary


def _samples_series(name: str, values: list[float]) -> Series:
    return Series(
        name=name,
        x=np.arange(len(values), dtype=np.float64),
        y=np.asarray(values, dtype=np.float64),
        x_unit="sample",
        y_unit="ns",
    )
