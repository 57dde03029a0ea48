"""Memory latency by pointer chase: every load's address comes from the previous load,
over a random cyclic permutation of cache lines, so neither prefetchers nor parallelism
hide the latency. Working sets sweep from KB to GB; plateaus are the levels of the
hierarchy (L1, L2, L3/DRAM on a CPU; L1, L2, HBM on a GPU).

- CPU: a ten-line C function compiled at run time with the system C compiler (``gcc``,
  or ``$PERFLAB_CC``) and called through ctypes; the buffer asks for transparent huge
  pages so TLB misses do not blur the cache levels. Reported in ns.
- CUDA: one thread (one warp, one active lane) chases through the same permutation; the
  kernel counts SM cycles with ``clock64()`` and CUDA events give ns. It is built with
  CuPy's ``RawModule`` (NVRTC), or with nvcc to a cubin when NVRTC is unavailable.

The pointer state survives between calls, so successive timed calls keep walking the
whole cycle instead of re-reading its first lines.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import mmap
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.bench._common import (
    NoiseLog,
    hierarchy_levels,
    median_call_ns,
    new_result,
    progress,
    resolve_backend,
    size_sweep,
)
from perflab.errors import ToolchainError
from perflab.model.bench import BenchResult, Level, Series

CPU_STRIDE = 64  # one cache line per hop
GPU_STRIDE = 128  # one L1 line per hop
CPU_STEPS = 1 << 16  # hops per timed call: ~0.1 ms in L1, ~10 ms in DRAM
GPU_STEPS = 1 << 15
WARM_CAP = 1 << 20  # at most this many hops to warm the caches before timing
COMPILE_TIMEOUT_S = 60

C_SOURCE = r"""
#include <stdint.h>
/* Follow `steps` links starting from *state; leave the position in *state. */
uint64_t perflab_chase(const uint64_t *next, uint64_t *state, uint64_t steps) {
    uint64_t p = *state;
    for (uint64_t i = 0; i < steps; ++i) p = next[p];
    *state = p;
    return p;
}
"""

CUDA_SOURCE = r"""
extern "C" __global__ void perflab_chase(const unsigned long long *next,
                                         unsigned long long *state,
                                         unsigned long long steps) {
    unsigned long long p = state[0];
    long long t0 = clock64();
    for (unsigned long long i = 0; i < steps; ++i) p = next[p];
    long long t1 = clock64();
    state[0] = p;               /* the chase result is used: nothing is optimised away */
    state[1] = (unsigned long long)(t1 - t0);
}
"""


def cyclic_permutation(n_lines: int, words_per_line: int, seed: int) -> npt.NDArray[np.uint64]:
    """``next`` array (in words) linking ``n_lines`` lines in one random cycle."""
    order = np.random.default_rng(seed).permutation(n_lines).astype(np.uint64)
    starts = order * np.uint64(words_per_line)
    links = np.zeros(n_lines * words_per_line, dtype=np.uint64)
    links[starts] = np.roll(starts, -1)
    return links


def follow(links: npt.NDArray[np.uint64], start: int, steps: int) -> int:
    """Pure-Python reference walk (used to check the compiled chase)."""
    p = start
    for _ in range(steps):
        p = int(links[p])
    return p


# --- CPU ------------------------------------------------------------------------------


def _c_compiler() -> str:
    chosen = os.environ.get("PERFLAB_CC") or shutil.which("gcc") or shutil.which("cc")
    if not chosen:
        raise ToolchainError(
            "no C compiler found: the CPU latency benchmark compiles a small C pointer "
            "chase; install gcc or set PERFLAB_CC"
        )
    return chosen


@functools.lru_cache(maxsize=1)
def compiled_chase() -> Callable[..., int]:
    """Compile :data:`C_SOURCE` once per process and return the ctypes function.

    The temporary directory is removed right away: the loaded library stays mapped.
    """
    compiler = _c_compiler()
    with tempfile.TemporaryDirectory(prefix="perflab-chase-") as tmp:
        src, lib = Path(tmp) / "chase.c", Path(tmp) / "chase.so"
        src.write_text(C_SOURCE, encoding="utf-8")
        cmd = [compiler, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"{compiler} took over {COMPILE_TIMEOUT_S} s") from None
        except OSError as exc:
            raise ToolchainError(f"cannot run {compiler}: {exc.strerror}") from None
        if done.returncode != 0:
            raise ToolchainError(f"{compiler} failed on the chase kernel:\n{done.stderr[-2000:]}")
        fn = ctypes.CDLL(str(lib)).perflab_chase
    fn.restype = ctypes.c_uint64
    fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint64]
    return fn  # type: ignore[no-any-return]


class _HostChain:
    """A permutation in a huge-page-backed buffer, and the chase's position in it."""

    def __init__(self, nbytes: int, stride: int, seed: int) -> None:
        self.n_lines = max(1, nbytes // stride)
        words = stride // 8
        self._map = mmap.mmap(-1, self.n_lines * stride)
        with contextlib.suppress(AttributeError, OSError):  # not Linux: plain pages
            self._map.madvise(mmap.MADV_HUGEPAGE)
        self.links = np.frombuffer(self._map, dtype=np.uint64)
        self.links[:] = cyclic_permutation(self.n_lines, words, seed)
        self.state = ctypes.c_uint64(0)
        self._chase = compiled_chase()

    def walk(self, steps: int) -> int:
        return int(self._chase(self.links.ctypes.data, ctypes.byref(self.state), steps))

    def close(self) -> None:
        del self.links
        self._map.close()


def _cpu_point(nbytes: int, steps: int, budget_ms: float, seed: int, noise: NoiseLog) -> float:
    chain = _HostChain(nbytes, CPU_STRIDE, seed)
    try:
        chain.walk(min(chain.n_lines, WARM_CAP))
        per_call = median_call_ns(
            lambda: chain.walk(steps),
            "cpu",
            budget_ms=budget_ms,
            name=f"chase {nbytes} B",
            noise=noise,
        )
    finally:
        chain.close()
    return per_call / steps


def _run_cpu(
    sizes: list[int], steps: int, budget_ms: float, seed: int, show: bool | None
) -> tuple[list[float], list[float], list[str]]:
    noise = NoiseLog()
    ns = [
        _cpu_point(n, steps, budget_ms, seed, noise) for n in progress(sizes, "latency (cpu)", show)
    ]
    return ns, [float("nan")] * len(ns), noise.summary()


# --- CUDA -----------------------------------------------------------------------------


def _cuda_kernel(cupy: Any) -> Any:
    """The chase kernel through NVRTC, or through nvcc to a cubin when NVRTC fails."""
    try:
        return cupy.RawModule(code=CUDA_SOURCE).get_function("perflab_chase")
    except Exception as nvrtc_error:  # cupy raises CompileException or a library error
        from perflab.capture.toolchain import find_tool

        nvcc = find_tool("nvcc")
        if nvcc is None:
            raise ToolchainError(f"cannot build the chase kernel: {nvrtc_error}") from None
        arch = f"sm_{cupy.cuda.Device().compute_capability}"  # CuPy gives "90" for 9.0
        with tempfile.TemporaryDirectory(prefix="perflab-chase-") as tmp:
            src, cubin = Path(tmp) / "chase.cu", Path(tmp) / "chase.cubin"
            src.write_text(CUDA_SOURCE, encoding="utf-8")
            cmd = [str(nvcc.path), "-cubin", f"-arch={arch}", "-O3", "-o", str(cubin), str(src)]
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False
            )
            if done.returncode != 0:
                raise ToolchainError(
                    f"nvcc failed on the chase kernel:\n{done.stderr[-2000:]}"
                ) from None
            return cupy.RawModule(path=str(cubin)).get_function("perflab_chase")


def _cuda_point(cupy: Any, kernel: Any, nbytes: int, steps: int, seed: int) -> tuple[float, float]:
    """(ns, cycles) per load for one working set."""
    n_lines = max(1, nbytes // GPU_STRIDE)
    links = cupy.asarray(cyclic_permutation(n_lines, GPU_STRIDE // 8, seed))
    state = cupy.zeros(2, dtype=cupy.uint64)
    try:
        kernel((1,), (1,), (links, state, np.uint64(min(n_lines, WARM_CAP))))
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        samples = []
        for _ in range(3):
            start.record()
            kernel((1,), (1,), (links, state, np.uint64(steps)))
            end.record()
            end.synchronize()
            ms = cupy.cuda.get_elapsed_time(start, end)
            samples.append((ms * 1e6 / steps, int(state[1].get()) / steps))
    finally:
        del links, state
    ns, cycles = sorted(samples)[1]  # the median of three launches
    return float(ns), float(cycles)


def _run_cuda(
    sizes: list[int], steps: int, seed: int, show: bool | None
) -> tuple[list[float], list[float], list[str]]:
    import cupy

    kernel = _cuda_kernel(cupy)
    points = [
        _cuda_point(cupy, kernel, n, steps, seed) for n in progress(sizes, "latency (cuda)", show)
    ]
    return [p[0] for p in points], [p[1] for p in points], []


# --- entry point ----------------------------------------------------------------------


def run(
    *,
    backend: str = "auto",
    min_bytes: int = 4 << 10,
    max_bytes: int | None = None,
    per_octave: int = 2,
    quick: bool = False,
    steps: int | None = None,
    budget_ms: float = 60.0,
    seed: int = 0,
    show_progress: bool | None = None,
) -> BenchResult:
    """Pointer-chase latency over working sets; one series ``chase`` (ns, and cycles on
    a GPU) with its plateaus named after the hierarchy.

    ``quick`` uses one point per octave and a smaller top size (CPU 64 MiB, GPU 256 MiB).
    """
    chosen = resolve_backend(backend)
    on_gpu = chosen == "cuda"
    top = max_bytes or ((256 if quick else 1024) << 20 if on_gpu else (64 if quick else 256) << 20)
    sizes = size_sweep(min_bytes, top, 1 if quick else per_octave)
    hops = steps or (GPU_STEPS if on_gpu else CPU_STEPS)
    if on_gpu:
        ns, cycles, warnings = _run_cuda(sizes, hops, seed, show_progress)
    else:
        ns, cycles, warnings = _run_cpu(
            sizes, hops, budget_ms / (2 if quick else 1), seed, show_progress
        )
    extra = {"cycles": np.asarray(cycles)} if on_gpu else {}
    series = Series("chase", np.asarray(sizes), np.asarray(ns), "bytes", "ns", extra)
    series.levels = _named_levels(series, on_gpu)
    result = new_result(
        "latency",
        chosen,
        {
            "stride_bytes": GPU_STRIDE if on_gpu else CPU_STRIDE,
            "steps": hops,
            "quick": quick,
            "seed": seed,
            "method": "random cyclic pointer chase, one thread",
        },
    )
    result.series.append(series)
    result.warnings.extend(warnings)
    if not on_gpu:
        result.warnings.append("no GPU: CPU pointer chase (the CPU analog)")
    return result


def _named_levels(series: Series, on_gpu: bool) -> list[Level]:
    return hierarchy_levels(series, on_gpu, repeat_suffix=" far" if on_gpu else " (2)")
