"""Measure a device's ceilings (compute per dtype, bandwidth per memory level) from the
matmul and bandwidth sweeps, and store them for the roofline (perflab.model.ceilings).

Compute: the best GFLOP/s of the matmul sweep per dtype. On the CPU the dtype keys are
``fp32`` (the better of torch and numpy), ``bf16`` (torch) and ``fp64`` (numpy).
Bandwidth: the copy plateaus by level (``L2``, ``L3``, ``DRAM``, ``HBM``...). When no
plateau reached past the caches, memory bandwidth is the median copy rate over the
working sets larger than twice the last cache.
"""

from __future__ import annotations

import math

import numpy as np

from perflab.machine import bandwidth, matmul
from perflab.machine._common import cache_capacities
from perflab.model.ceilings import Ceilings
from perflab.model.machine import BenchResult

MEMORY_REACH = 8  # the bandwidth sweep goes to 8x the last cache
CPU_FLOPS_KEYS = {
    "torch-fp32": "fp32",
    "numpy-fp32": "fp32",
    "torch-bf16": "bf16",
    "numpy-fp64": "fp64",
}


def flops_by_dtype(result: BenchResult) -> dict[str, float]:
    """Best GFLOP/s per dtype key (CPU variants folded into plain dtype names)."""
    best: dict[str, float] = {}
    for name, rate in matmul.best_gflops(result).items():
        key = CPU_FLOPS_KEYS.get(name, name)
        best[key] = max(rate, best.get(key, 0.0))
    return best


def bandwidth_by_level(result: BenchResult, on_gpu: bool) -> dict[str, float]:
    """GB/s per level, device memory first (the roofline's default roof), then caches
    from the largest."""
    copy = result.get("copy")
    levels = {lv.name: lv.value for lv in copy.levels}
    memory = "HBM" if on_gpu else "DRAM"
    if memory not in levels:
        last_cache = max(cache_capacities(on_gpu).values(), default=math.inf)
        beyond = copy.y[copy.x > 2 * last_cache]
        if beyond.size:
            levels[memory] = float(np.median(beyond))
    ordered = sorted(levels, key=lambda name: (name != memory, -list(levels).index(name)))
    return {name: levels[name] for name in ordered}


def measure(
    *, backend: str = "auto", quick: bool = False, show_progress: bool | None = None
) -> tuple[Ceilings, BenchResult, BenchResult]:
    """Run the sweeps; return the ceilings and the two results they came from."""
    from perflab.machine._common import resolve_backend

    on_gpu = resolve_backend(backend) == "cuda"
    # reach well past the last cache so the memory level is measured, even when quick
    past_caches = int(MEMORY_REACH * max(cache_capacities(on_gpu).values(), default=0))
    bw = bandwidth.run(
        backend=backend,
        kernels=("copy",),
        quick=quick,
        max_bytes=max(past_caches, 64 << 20) if not on_gpu else None,
        show_progress=show_progress,
    )
    mm = matmul.run(backend=bw.backend, quick=quick, show_progress=show_progress)
    notes = [
        f"compute: best of a matmul sweep over n = {mm.options['sizes']}",
        "bandwidth: copy plateaus, bytes read + written",
    ]
    if not on_gpu:
        notes.append("no GPU: these are the CPU's ceilings")
    ceilings = Ceilings(
        device=bw.device,
        backend=bw.backend,
        flops=flops_by_dtype(mm),
        bandwidth=bandwidth_by_level(bw, on_gpu),
        versions=bw.versions,
        notes=notes,
    )
    return ceilings, bw, mm
