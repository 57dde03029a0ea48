"""Measure a device's ceilings (compute per dtype, bandwidth per memory level) from the
matmul and bandwidth sweeps, and store them for the roofline (perflab.model.ceilings).

Compute: the best GFLOP/s of the matmul sweep per dtype. On the CPU the dtype keys are
``fp32`` (the better of torch and numpy), ``bf16`` (torch) and ``fp64`` (numpy).
Bandwidth: the copy plateaus by level (``L2``, ``L3``, ``DRAM``, ``HBM``...). When no
plateau reached past the caches, memory bandwidth is the median copy rate over the
working sets larger than twice the last cache. Points bound by call overhead (see
:mod:`perflab.machine.bandwidth`) are never a ceiling: a level with nothing else is left
out, and the ceilings' notes say why.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from perflab.machine import bandwidth, matmul
from perflab.machine._common import cache_capacities
from perflab.model.ceilings import Ceilings
from perflab.model.machine import BenchResult, Level, Series
from perflab.model.units import counted, format_rate

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
    from the largest; levels bound by call overhead are left out (see
    :func:`bandwidth_ceilings` for why each was)."""
    return bandwidth_ceilings(result, on_gpu)[0]


def bandwidth_ceilings(result: BenchResult, on_gpu: bool) -> tuple[dict[str, float], list[str]]:
    """GB/s per level as :func:`bandwidth_by_level`, and a note for each level refused
    or narrowed because of points bound by call overhead."""
    copy = result.get("copy")
    bound = _overhead_bound(copy)
    notes: list[str] = []
    if bound is None and any(not _is_memory(lv.name, on_gpu) for lv in copy.levels):
        notes.append(
            "bandwidth: the copy sweep records no call overhead (older result): its cache "
            "levels are taken as measured, and the smallest may be bound by call overhead"
        )
    levels: dict[str, float] = {}
    in_levels = np.zeros(len(copy), dtype=bool)
    for lv in copy.levels:
        value, note = _level_ceiling(copy, lv, bound)
        if note:
            notes.append(note)
        if value is not None:
            levels[lv.name] = value
        in_levels |= (copy.x >= lv.x_min) & (copy.x <= lv.x_max)
    notes.extend(_outside_levels_note(copy, _bound_mask(bound, copy) & ~in_levels))
    memory = "HBM" if on_gpu else "DRAM"
    if memory not in levels:
        last_cache = max(cache_capacities(on_gpu).values(), default=math.inf)
        beyond = (copy.x > 2 * last_cache) & ~_bound_mask(bound, copy)
        if beyond.any():
            levels[memory] = float(np.median(copy.y[beyond]))
    ordered = sorted(levels, key=lambda name: (name != memory, -list(levels).index(name)))
    return {name: levels[name] for name in ordered}, notes


def _is_memory(name: str, on_gpu: bool) -> bool:
    return name.startswith("HBM" if on_gpu else "DRAM")


def _overhead_bound(copy: Series) -> npt.NDArray[np.bool_] | None:
    share = copy.extra.get("overhead_share")
    return None if share is None else bandwidth.overhead_bound(share)


def _bound_mask(bound: npt.NDArray[np.bool_] | None, copy: Series) -> npt.NDArray[np.bool_]:
    return np.zeros(len(copy), dtype=bool) if bound is None else bound


def _outside_levels_note(copy: Series, bound: npt.NDArray[np.bool_]) -> list[str]:
    """Why the overhead-bound points that no level holds give no ceiling, if any."""
    if not bound.any():
        return []
    span = bandwidth.size_span(copy.x[bound])
    return [
        f"bandwidth: no ceiling from {counted(int(bound.sum()), 'copy point')} ({span}): "
        f"each took under {bandwidth.OVERHEAD_BOUND_RATIO:g}x an empty call's time, bound "
        "by call overhead, not by memory"
    ]


def _level_ceiling(
    copy: Series, level: Level, bound: npt.NDArray[np.bool_] | None
) -> tuple[float | None, str]:
    """A level's ceiling from its points that are not overhead-bound: the level's value
    when none is, the median of the others when some are, none when all are."""
    inside = (copy.x >= level.x_min) & (copy.x <= level.x_max)
    overhead = inside & _bound_mask(bound, copy)
    if not overhead.any():
        return level.value, ""
    ratio = f"{bandwidth.OVERHEAD_BOUND_RATIO:g}x"
    kept = inside & ~overhead
    if not kept.any():
        return None, (
            f"bandwidth: no {level.name} ceiling: all {int(inside.sum())} of its points take "
            f"under {ratio} an empty call's time, so they time the call, not the "
            f"{level.name} (its plateau, {format_rate(level.value * 1e9)}, would be a floor, "
            "not a roof)"
        )
    value = float(np.median(copy.y[kept]))
    left_out = counted(int(overhead.sum()), "point")
    return value, (
        f"bandwidth: {level.name} from {int(kept.sum())} of its {int(inside.sum())} points, "
        f"leaving out {left_out} that took under {ratio} an empty call's time"
    )


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
    return from_results(bw, mm), bw, mm


def from_results(bw: BenchResult, mm: BenchResult) -> Ceilings:
    """The ceilings of a bandwidth sweep (its copy series) and a matmul sweep."""
    on_gpu = bw.backend == "cuda"
    notes = [
        f"compute: best of a matmul sweep over n = {mm.options['sizes']}",
        "bandwidth: copy plateaus, bytes read + written, each point repeated in its timed "
        "window; cache levels timed hot, memory cold",
    ]
    if not on_gpu:
        notes.append("no GPU: these are the CPU's ceilings")
    bandwidth_levels, bandwidth_notes = bandwidth_ceilings(bw, on_gpu)
    notes.extend(bandwidth_notes)
    return Ceilings(
        device=bw.device,
        backend=bw.backend,
        flops=flops_by_dtype(mm),
        bandwidth=bandwidth_levels,
        versions=bw.versions,
        notes=notes,
    )
