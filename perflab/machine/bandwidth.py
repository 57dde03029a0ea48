"""Memory bandwidth: copy and triad over working sets from KB to GB.

GB/s counts the bytes the operation must read plus write (STREAM's convention; write
allocation is not counted): copy moves ``2 x n x itemsize`` for ``b[:] = a``, triad
``3 x n x itemsize`` for ``a = b + s * c``. The working set is the size of all arrays
together, so it can be compared with cache sizes.

- CUDA: ``torch`` ``copy_`` and ``torch.add(b, c, alpha=s, out=a)`` (one kernel each),
  timed with CUDA events; the plateaus are L2 and HBM.
- CPU (the analog): numpy ``copyto`` and a numpy triad. numpy runs the triad as two passes
  (``c * s`` then ``+ b``), so it moves more bytes than it is credited with and reads
  below copy; tiny sizes are bound by the cost of a numpy call, not by a cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from perflab.errors import import_extra
from perflab.machine._common import (
    NoiseLog,
    hierarchy_levels,
    median_call_ns,
    new_result,
    progress,
    resolve_backend,
    size_sweep,
)
from perflab.model.machine import BenchResult, Series

KERNELS = ("copy", "triad")
ARRAYS = {"copy": 2, "triad": 3}
SCALE = 3.0


def _numpy_kernel(kind: str, n: int) -> Callable[[], object]:
    rng = np.random.default_rng(0)
    arrays = [rng.random(n) for _ in range(ARRAYS[kind])]
    if kind == "copy":
        src, dst = arrays
        return lambda: np.copyto(dst, src)
    a, b, c = arrays

    def triad() -> None:
        np.multiply(c, SCALE, out=a)
        np.add(a, b, out=a)

    return triad


def _torch_kernel(kind: str, n: int) -> Callable[[], object]:
    torch = import_extra("torch", "perflab machine bandwidth on a GPU")

    arrays = [torch.rand(n, device="cuda", dtype=torch.float32) for _ in range(ARRAYS[kind])]
    if kind == "copy":
        src, dst = arrays
        return lambda: dst.copy_(src)
    a, b, c = arrays
    return lambda: torch.add(b, c, alpha=SCALE, out=a)


def _point_GBps(
    kind: str, working_set: int, backend: str, budget_ms: float, noise: NoiseLog
) -> float:
    itemsize = 4 if backend == "cuda" else 8
    n = max(1, working_set // (ARRAYS[kind] * itemsize))
    make = _torch_kernel if backend == "cuda" else _numpy_kernel
    fn = make(kind, n)
    ns = median_call_ns(
        fn, backend, budget_ms=budget_ms, name=f"{kind} {working_set} B", noise=noise
    )
    return ARRAYS[kind] * n * itemsize / ns  # bytes per ns == GB/s


def run(
    *,
    backend: str = "auto",
    kernels: tuple[str, ...] = KERNELS,
    min_bytes: int | None = None,
    max_bytes: int | None = None,
    per_octave: int = 2,
    quick: bool = False,
    budget_ms: float = 40.0,
    show_progress: bool | None = None,
) -> BenchResult:
    """Copy and triad GB/s over working sets, each series with its plateaus named.

    Defaults: CPU 32 KiB-256 MiB (quick: 64 KiB-64 MiB, one point per octave); CUDA
    256 KiB-4 GiB (quick: 1 MiB-2 GiB).
    """
    chosen = resolve_backend(backend)
    on_gpu = chosen == "cuda"
    unknown = set(kernels) - set(KERNELS)
    if unknown:
        from perflab.errors import InputError

        raise InputError(f"unknown bandwidth kernel(s) {sorted(unknown)} (known: copy, triad)")
    lo = min_bytes or (
        (1 << 20 if quick else 256 << 10) if on_gpu else (64 << 10 if quick else 32 << 10)
    )
    hi = max_bytes or (
        (2 << 30 if quick else 4 << 30) if on_gpu else (64 << 20 if quick else 256 << 20)
    )
    sizes = size_sweep(lo, hi, 1 if quick else per_octave)
    budget = budget_ms / (2 if quick else 1)
    noise = NoiseLog()
    result = new_result("bandwidth", chosen, _options(quick, on_gpu))
    for kind in kernels:
        rates = [
            _point_GBps(kind, n, chosen, budget, noise)
            for n in progress(sizes, f"bandwidth {kind} ({chosen})", show_progress)
        ]
        series = Series(kind, np.asarray(sizes), np.asarray(rates), "bytes", "GBps")
        series.levels = hierarchy_levels(series, on_gpu)
        result.series.append(series)
    result.warnings.extend(noise.summary())
    if not on_gpu:
        result.warnings.append("no GPU: numpy copy/triad on the CPU (the CPU analog)")
    return result


def _options(quick: bool, on_gpu: bool) -> dict[str, Any]:
    return {
        "quick": quick,
        "dtype": "float32" if on_gpu else "float64",
        "bytes_counted": "read + written (STREAM convention)",
        "implementation": "torch copy_/add(out=)" if on_gpu else "numpy copyto/multiply+add",
    }
