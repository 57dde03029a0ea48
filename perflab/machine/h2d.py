"""Host-device copies: host to device and back, from pinned and from pageable host memory,
over sizes, in GB/s (bytes copied / time, timed with CUDA events on the stream).

Pinned memory lets the copy engine DMA straight from the buffer; pageable memory goes
through a staging buffer first, which is why it is slower. Pinned copies are timed with a
queue filler before each sample (small copies are not launch-bound); a pageable copy
blocks the host while it stages, so it is host-bound by nature and timed without one.
This needs a GPU: there is no CPU analog (the nearest, memcpy, is the bandwidth benchmark).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np

from perflab.errors import import_extra, no_gpu
from perflab.machine._common import (
    NoiseLog,
    median_call_ns,
    new_result,
    progress,
    resolve_backend,
    size_sweep,
)
from perflab.model.machine import BenchResult, Series

DIRECTIONS = ("h2d", "d2h")
MEMORY = ("pinned", "pageable")


def _copy(torch: ModuleType, direction: str, memory: str, nbytes: int) -> Callable[[], object]:
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=memory == "pinned")
    host.fill_(1)
    device = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    if direction == "h2d":
        return lambda: device.copy_(host, non_blocking=memory == "pinned")
    return lambda: host.copy_(device, non_blocking=memory == "pinned")


def run(
    *,
    backend: str = "auto",
    min_bytes: int | None = None,
    max_bytes: int | None = None,
    per_octave: int = 1,
    quick: bool = False,
    budget_ms: float = 40.0,
    show_progress: bool | None = None,
) -> BenchResult:
    """GB/s for ``h2d/pinned``, ``h2d/pageable``, ``d2h/pinned`` and ``d2h/pageable``;
    sizes 4 KiB-1 GiB (quick: 64 KiB-256 MiB, every other octave)."""
    chosen = resolve_backend(backend)
    if chosen != "cuda":
        raise no_gpu("h2d (host-device copies)")
    torch = import_extra("torch", "perflab machine h2d")

    lo = min_bytes or ((64 << 10) if quick else (4 << 10))
    hi = max_bytes or ((256 << 20) if quick else (1 << 30))
    sizes = size_sweep(lo, hi, per_octave)
    if quick:
        sizes = sizes[::2]
    noise = NoiseLog()
    result = new_result("h2d", chosen, {"quick": quick, "timer": "CUDA events"})
    for direction in DIRECTIONS:
        for memory in MEMORY:
            name = f"{direction}/{memory}"
            rates = []
            for n in progress(sizes, f"{name}", show_progress):
                ns = median_call_ns(
                    _copy(torch, direction, memory, n),
                    chosen,
                    budget_ms=budget_ms / (2 if quick else 1),
                    name=f"{name} {n} B",
                    noise=noise,
                    fill_queue=memory == "pinned",  # a pageable copy blocks the host
                )
                rates.append(n / ns)
            result.series.append(
                Series(name, np.asarray(sizes), np.asarray(rates), "bytes", "GBps")
            )
    result.warnings.extend(noise.summary())
    return result
