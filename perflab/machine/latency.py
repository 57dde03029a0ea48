"""Memory latency by pointer chase: every load's address comes from the previous load,
over a random cyclic permutation of cache lines, so neither prefetchers nor parallelism
hide the latency. Working sets sweep from KB to GB; plateaus are the levels of the
hierarchy (L1, L2, L3/DRAM on a CPU; L1, L2, HBM on a GPU).

- CPU: a ten-line C function compiled at run time with the system C compiler (``gcc``,
  or ``$PERFLAB_CC``) and called through ctypes; the buffer asks for transparent huge
  pages so TLB misses do not blur the cache levels. Reported in ns.
- CUDA: one thread (one warp, one active lane) chases through the same permutation; the
  kernel counts SM cycles with ``clock64()`` and CUDA events give ns. It is built with
  CuPy's ``RawModule`` (NVRTC), or with nvcc to a cubin when NVRTC is unavailable, and
  must pass a preflight (a short walk checked against :func:`follow`); when CuPy cannot
  build or run it (``cupy-cuda13x`` needs NVRTC, cuBLAS, cuRAND and a recent driver),
  the same chase written in Triton runs instead (ns only, no cycle counter).

TLB misses: past the L2 a random chase over GBs lands on a new page almost every load,
so the time past L2 is memory latency *plus* TLB misses (GPU pages are 2 MiB; the TLBs
reach a few GB at most). The levels say so: the first plateau past L2 on a GPU is named
``HBM (+TLB misses)`` and a second step above it ``HBM + more TLB misses`` (never "HBM
far"). ``stride_bytes`` controls the hop: a page-sized stride walks one line per page
and shows the TLB reach on its own; the default (128 B on a GPU, 64 B on a CPU) hops
one cache line.

The pointer state survives between calls, so successive timed calls keep walking the
whole cycle instead of re-reading its first lines.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import mmap
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.plateaus import detect_plateaus, name_levels
from perflab.errors import InputError, ToolchainError, import_extra
from perflab.machine._common import (
    NoiseLog,
    cache_capacities,
    hierarchy_levels,
    median_call_ns,
    new_result,
    progress,
    resolve_backend,
    size_sweep,
)
from perflab.machine._native import COMPILE_TIMEOUT_S, load_c_library
from perflab.model.machine import BenchResult, Level, Series
from perflab.model.units import format_bytes

CPU_STRIDE = 64  # one cache line per hop
GPU_STRIDE = 128  # one L1 line per hop
CPU_STEPS = 1 << 16  # hops per timed call: ~0.1 ms in L1, ~10 ms in DRAM
GPU_STEPS = 1 << 15
WARM_CAP = 1 << 20  # at most this many hops to warm the caches before timing

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


@functools.lru_cache(maxsize=1)
def compiled_chase() -> Callable[..., int]:
    """Compile :data:`C_SOURCE` once per process and return the ctypes function."""
    fn = load_c_library(
        C_SOURCE, "chase", purpose="the CPU latency benchmark compiles a small C pointer chase"
    ).perflab_chase
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


def _cpu_point(
    nbytes: int, steps: int, budget_ms: float, seed: int, stride: int, noise: NoiseLog
) -> float:
    chain = _HostChain(nbytes, stride, seed)
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
    sizes: list[int], steps: int, budget_ms: float, seed: int, stride: int, show: bool | None
) -> tuple[list[float], list[float], list[str]]:
    noise = NoiseLog()
    ns = [
        _cpu_point(n, steps, budget_ms, seed, stride, noise)
        for n in progress(sizes, "latency (cpu)", show)
    ]
    return ns, [float("nan")] * len(ns), noise.summary()


# --- CUDA -----------------------------------------------------------------------------


class _CupyChase:
    """The CUDA C++ chase through CuPy: NVRTC, or nvcc to a cubin when NVRTC fails.
    Counts SM cycles with clock64() as well as ns."""

    method = "CUDA C++ through CuPy"

    def __init__(self) -> None:
        cupy = import_extra("cupy", "the CUDA C++ pointer chase")

        self.cupy = cupy
        self.kernel = _cupy_kernel(cupy)

    def point(self, nbytes: int, steps: int, seed: int, stride: int) -> tuple[float, float]:
        """(ns, cycles) per load for one working set: the median of three launches."""
        cupy = self.cupy
        n_lines = max(1, nbytes // stride)
        links = cupy.asarray(cyclic_permutation(n_lines, stride // 8, seed))
        state = cupy.zeros(2, dtype=cupy.uint64)
        try:
            self.kernel((1,), (1,), (links, state, np.uint64(min(n_lines, WARM_CAP))))
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            samples = []
            for _ in range(3):
                start.record()
                self.kernel((1,), (1,), (links, state, np.uint64(steps)))
                end.record()
                end.synchronize()
                ms = cupy.cuda.get_elapsed_time(start, end)
                samples.append((ms * 1e6 / steps, int(state[1].get()) / steps))
        finally:
            del links, state
        ns, cycles = sorted(samples)[1]
        return float(ns), float(cycles)

    def walk(self, links: npt.NDArray[np.uint64], steps: int) -> int:
        """Follow ``steps`` links from 0 on the GPU (the preflight's check)."""
        state = self.cupy.zeros(2, dtype=self.cupy.uint64)
        self.kernel((1,), (1,), (self.cupy.asarray(links), state, np.uint64(steps)))
        return int(state[0].get())


def _cupy_kernel(cupy: Any) -> Any:
    try:
        return cupy.RawModule(code=CUDA_SOURCE).get_function("perflab_chase")
    except Exception as nvrtc_error:  # cupy raises CompileException or a library error
        from perflab.capture.toolchain import find_tool

        nvcc = find_tool("nvcc")
        if nvcc is None:
            raise ToolchainError(f"NVRTC failed and there is no nvcc: {nvrtc_error}") from None
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


class _TritonChase:
    """The chase in Triton (perflab.machine._triton_chase) on torch tensors, timed with
    torch's CUDA events; ns only (cycles NaN)."""

    method = "Triton"

    def __init__(self) -> None:
        torch = import_extra("torch", "the Triton pointer chase")

        from perflab.machine import _triton_chase

        self.torch = torch
        self.kernel = _triton_chase.chase_kernel

    def _launch(self, links: Any, state: Any, steps: int) -> None:
        self.kernel[(1,)](links, state, steps, num_warps=1)

    def point(self, nbytes: int, steps: int, seed: int, stride: int) -> tuple[float, float]:
        torch = self.torch
        n_lines = max(1, nbytes // stride)
        host = cyclic_permutation(n_lines, stride // 8, seed).astype(np.int64)
        links = torch.from_numpy(host).to("cuda")
        state = torch.zeros(1, dtype=torch.int64, device="cuda")
        try:
            self._launch(links, state, min(n_lines, WARM_CAP))
            samples = []
            for _ in range(3):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                self._launch(links, state, steps)
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e6 / steps)
        finally:
            del links, state
        return float(sorted(samples)[1]), float("nan")

    def walk(self, links: npt.NDArray[np.uint64], steps: int) -> int:
        torch = self.torch
        dev_links = torch.from_numpy(links.astype(np.int64)).to("cuda")
        state = torch.zeros(1, dtype=torch.int64, device="cuda")
        self._launch(dev_links, state, steps)
        return int(state.item())


def chase_backend(makers: tuple[Callable[[], Any], ...] = (_CupyChase, _TritonChase)) -> Any:
    """The first chase that builds and passes a preflight (walk a small random cycle on
    the GPU and compare with :func:`follow`): CuPy's CUDA C++ (cupy-cuda13x needs NVRTC
    and a recent driver), else Triton. Raises ToolchainError listing why each failed."""
    links = cyclic_permutation(64, GPU_STRIDE // 8, seed=1)
    expected = follow(links, 0, 100)
    failures = []
    for make in makers:
        try:
            chase = make()
            got = chase.walk(links, 100)
        except Exception as exc:  # import, compile or launch failure: try the next
            failures.append(f"{getattr(make, 'method', make.__name__)}: {exc}")
            continue
        if got == expected:
            return chase
        failures.append(f"{chase.method}: preflight walk ended at {got}, expected {expected}")
    raise ToolchainError("cannot build the GPU pointer chase: " + "; ".join(failures))


def _run_cuda(
    sizes: list[int], steps: int, seed: int, stride: int, show: bool | None
) -> tuple[list[float], list[float], list[str]]:
    chase = chase_backend()
    points = [chase.point(n, steps, seed, stride) for n in progress(sizes, "latency (cuda)", show)]
    notes = [f"chase kernel: {chase.method}"]
    if chase.method == "Triton":
        notes.append("cycles not measured (the Triton chase has no SM cycle counter)")
    return [p[0] for p in points], [p[1] for p in points], notes


# --- entry point ----------------------------------------------------------------------


def run(
    *,
    backend: str = "auto",
    min_bytes: int = 4 << 10,
    max_bytes: int | None = None,
    per_octave: int | None = None,
    quick: bool = False,
    steps: int | None = None,
    budget_ms: float = 60.0,
    seed: int = 0,
    stride_bytes: int | None = None,
    show_progress: bool | None = None,
) -> BenchResult:
    """Pointer-chase latency over working sets; one series ``chase`` (ns, and cycles on
    a GPU) with its plateaus named after the hierarchy (past L2: memory plus TLB misses).

    ``per_octave`` is the number of sizes per doubling (default 2; ``quick``: 1, unless
    ``per_octave`` is given). ``quick`` also lowers the top size (CPU 64 MiB, GPU 256 MiB).
    ``stride_bytes`` is the hop (a multiple of 8; default one cache line).
    """
    chosen = resolve_backend(backend)
    on_gpu = chosen == "cuda"
    stride = stride_bytes or (GPU_STRIDE if on_gpu else CPU_STRIDE)
    if stride < 8 or stride % 8:
        raise InputError(f"stride must be a positive multiple of 8 bytes, not {stride}")
    top = max_bytes or ((256 if quick else 1024) << 20 if on_gpu else (64 if quick else 256) << 20)
    points = per_octave if per_octave is not None else (1 if quick else 2)
    sizes = size_sweep(min_bytes, top, points)
    hops = steps or (GPU_STEPS if on_gpu else CPU_STEPS)
    if on_gpu:
        ns, cycles, warnings = _run_cuda(sizes, hops, seed, stride, show_progress)
    else:
        ns, cycles, warnings = _run_cpu(
            sizes, hops, budget_ms / (2 if quick else 1), seed, stride, show_progress
        )
    extra = {"cycles": np.asarray(cycles)} if on_gpu else {}
    series = Series("chase", np.asarray(sizes), np.asarray(ns), "bytes", "ns", extra)
    series.levels, cache_warnings = (
        (_named_levels(series, on_gpu), []) if on_gpu else _cpu_levels(series)
    )
    result = new_result(
        "latency",
        chosen,
        {
            "stride_bytes": stride,
            "steps": hops,
            "quick": quick,
            "per_octave": points,
            "seed": seed,
            "method": "random cyclic pointer chase, one thread",
        },
    )
    result.series.append(series)
    result.warnings.extend(warnings)
    if on_gpu and any(lv.name.startswith("HBM") for lv in series.levels):
        result.warnings.append(
            "past the L2 the chase also misses the TLB (a new page almost every load): "
            "HBM levels are memory latency plus TLB misses"
        )
    if not on_gpu:
        result.warnings.extend(cache_warnings)
        result.warnings.extend(_slower_repeat_warnings(series.levels))
        result.warnings.append("no GPU: CPU pointer chase (the CPU analog)")
    return result


GPU_BEYOND_L2 = {"HBM": "HBM (+TLB misses)", "HBM far": "HBM + more TLB misses"}
CPU_REPEAT = " (slower)"  # a second plateau inside one cache's reported size, on a CPU


def _named_levels(series: Series, on_gpu: bool) -> list[Level]:
    """Plateaus named after the caches; on a GPU a second L2 plateau is the far L2
    partition, and the plateaus past L2 say they include TLB misses; on a CPU a plateau
    as slow as memory is named after memory even where a cache's reported size holds it
    (:func:`_memory_like`)."""
    if not on_gpu:
        return _cpu_levels(series)[0]
    levels = hierarchy_levels(series, on_gpu, repeat_suffix=" far")
    for lv in levels:
        lv.name = GPU_BEYOND_L2.get(lv.name, lv.name)
    return levels


MEMORY_LIKE = 3.0  # heuristic: a cache hit answers more than 3x faster than memory


def _cpu_levels(series: Series) -> tuple[list[Level], list[str]]:
    """The CPU's plateaus, named, and a warning when a cache held less than its reported
    size: a plateau inside a cache's reported size whose latency is within MEMORY_LIKE x
    of memory's (the median of the points past every cache) is not that cache's hits (a
    cache shared with other cores or virtual machines keeps less for this one), so the
    cache is taken to end before it and the plateau is named after memory."""
    detected = detect_plateaus(series.x, series.y)
    capacities = cache_capacities(False)
    levels = name_levels(detected, capacities, memory="DRAM", repeat_suffix=CPU_REPEAT)
    past = series.y[series.x > max(capacities.values(), default=np.inf)]
    memory_ns = float(np.median(past)) if len(past) else None
    like = _memory_like(levels, memory_ns) if memory_ns else None
    if memory_ns is None or like is None:
        return levels, []
    held = {cache: size for cache, size in capacities.items() if size >= like.x_max}
    # the cache ends where the last plateau before the memory-like one ends
    ends = max((lv.x_max for lv in levels if lv.x_max < like.x_min), default=like.x_min / 2)
    for name in held:  # a cache left no larger than a smaller one held nothing seen here
        smaller = [size for other, size in capacities.items() if size < held[name]]
        capacities[name] = ends
        if ends <= max(smaller, default=0.0):
            del capacities[name]
    cache = min(held, key=held.__getitem__)
    warning = (
        f"the plateau at {format_bytes(like.x_min)}-{format_bytes(like.x_max)} "
        f"({like.value:.3g} ns) fits in the reported {cache} ({format_bytes(held[cache])}) "
        f"but takes {like.value / memory_ns:.2f}x the {memory_ns:.3g} ns of the working sets "
        "past every cache, not a cache hit's "
        f"(a heuristic: a cache answers more than {MEMORY_LIKE:g}x faster than memory), so "
        f"it is named DRAM: this core held less of the {cache} than reported "
        "(a cache shared with other cores or virtual machines)"
    )
    levels = name_levels(detected, capacities, memory="DRAM", repeat_suffix=CPU_REPEAT)
    return levels, [warning]


def _memory_like(levels: list[Level], memory_ns: float) -> Level | None:
    """The first cache-named plateau whose latency is within MEMORY_LIKE x of memory's."""
    return next(
        (
            lv
            for lv in levels
            if not lv.name.startswith("DRAM") and lv.value * MEMORY_LIKE >= memory_ns
        ),
        None,
    )


def _slower_repeat_warnings(levels: list[Level]) -> list[str]:
    """A CPU plateau named "<level> (slower)" follows a faster plateau of the same name:
    say by how much and what usually causes it, so that its latency is not read as the
    level's."""
    by_name = {lv.name: lv for lv in levels}  # names are unique: a repeat has the suffix
    warnings = []
    for lv in levels:
        name = lv.name.removesuffix(CPU_REPEAT)
        if name == lv.name or name not in by_name or by_name[name].value <= 0:
            continue
        ratio = lv.value / by_name[name].value
        if name == "DRAM":
            warnings.append(
                f"a second DRAM plateau ({lv.value:.3g} ns) is {ratio:.1f}x the first: "
                "past the TLB's reach every load also waits for a page walk (a likely "
                "cause; this sweep does not separate the two)"
            )
            continue
        warnings.append(
            f"two plateaus fit in the reported {name}: the second ({lv.value:.3g} ns) is "
            f"{ratio:.1f}x the first, so it is probably not served by {name}: a cache shared "
            "with other cores or virtual machines holds less than its reported size, and "
            "loads past the TLB's reach wait for page walks"
        )
    return warnings
