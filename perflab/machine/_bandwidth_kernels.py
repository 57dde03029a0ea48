"""The bandwidth loops: read, copy and triad repeated ``passes`` times inside one call,
so that one call over a cache-sized working set moves much more data than the call
costs (as gpu-benches does). On the CPU a small C library compiled at run time (the way
the latency benchmark compiles its pointer chase); on a GPU a Triton kernel
(:mod:`perflab.machine._triton_stream`).

C: each pass is a call to a ``noinline`` function followed by an empty ``asm`` with a
``memory`` clobber, so the compiler may neither merge the passes nor drop one (a pass
reads memory that, as far as it knows, the barrier may have changed); read adds every
pass's sum and stores it through a ``volatile`` pointer. The loops use 32-byte vectors
where ``-march=native`` enables AVX (16-byte ones otherwise) and independent
accumulators, so an L1-resident pass is bound by the loads, not by an add chain. Built with ``-O2
-march=native`` (the library runs where it is built), else with ``-O2`` alone.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.errors import ToolchainError, import_extra
from perflab.machine._native import c_compiler, load_c_library

C_PURPOSE = "the CPU bandwidth loops are a small C library"
FLAG_SETS = (("-O2", "-march=native"), ("-O2",))
ALIGN = 64  # bytes: arrays start on a cache line
ARRAYS = {"read": 1, "copy": 2, "triad": 3}  # arrays each kind reads or writes

C_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>

/* the widest vectors that fit the registers: 32 bytes with AVX, else 16 (SSE2, NEON);
   aligned(8): a vector may start at any double */
#if defined(__AVX__)
#define VECTOR_BYTES 32
#else
#define VECTOR_BYTES 16
#endif
typedef double vd __attribute__((vector_size(VECTOR_BYTES), aligned(8)));
#define LANES (sizeof(vd) / sizeof(double))
/* after each pass: memory may have changed, so no pass is merged with another or dropped */
#define PASS_DONE() __asm__ volatile("" ::: "memory")

static vd load(const double *p) { return *(const vd *)p; }
static void store(double *p, vd v) { *(vd *)p = v; }

static __attribute__((noinline)) void copy_pass(double *dst, const double *src, size_t n) {
    size_t i = 0;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        vd a = load(src + i), b = load(src + i + LANES);
        vd c = load(src + i + 2 * LANES), d = load(src + i + 3 * LANES);
        store(dst + i, a);
        store(dst + i + LANES, b);
        store(dst + i + 2 * LANES, c);
        store(dst + i + 3 * LANES, d);
    }
    for (; i < n; ++i) dst[i] = src[i];
}

static __attribute__((noinline)) double read_pass(const double *src, size_t n) {
    /* eight accumulators in registers: loads, not the add latency, bound an L1 pass */
    vd s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
    size_t i = 0;
    for (; i + 8 * LANES <= n; i += 8 * LANES) {
        s0 += load(src + i);
        s1 += load(src + i + LANES);
        s2 += load(src + i + 2 * LANES);
        s3 += load(src + i + 3 * LANES);
        s4 += load(src + i + 4 * LANES);
        s5 += load(src + i + 5 * LANES);
        s6 += load(src + i + 6 * LANES);
        s7 += load(src + i + 7 * LANES);
    }
    vd v = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
    double total = 0.0;
    for (size_t k = 0; k < LANES; ++k) total += v[k];
    for (; i < n; ++i) total += src[i];
    return total;
}

static __attribute__((noinline)) void triad_pass(
    double *a, const double *b, const double *c, double s, size_t n) {
    vd sv = s - (vd){0};
    size_t i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES) {
        store(a + i, load(b + i) + sv * load(c + i));
        store(a + i + LANES, load(b + i + LANES) + sv * load(c + i + LANES));
    }
    for (; i < n; ++i) a[i] = b[i] + s * c[i];
}

void perflab_copy(double *dst, const double *src, uint64_t n, uint64_t passes) {
    for (uint64_t r = 0; r < passes; ++r) {
        copy_pass(dst, src, n);
        PASS_DONE();
    }
}

void perflab_read(const double *src, uint64_t n, uint64_t passes, double *sum) {
    double total = 0.0;
    for (uint64_t r = 0; r < passes; ++r) {
        total += read_pass(src, n);
        PASS_DONE();
    }
    *(volatile double *)sum = total;
}

void perflab_triad(double *a, const double *b, const double *c, double s, uint64_t n,
                   uint64_t passes) {
    for (uint64_t r = 0; r < passes; ++r) {
        triad_pass(a, b, c, s, n);
        PASS_DONE();
    }
}
"""

_P, _U64, _F64 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_double
_ARGTYPES = {
    "copy": [_P, _P, _U64, _U64],
    "read": [_P, _U64, _U64, _P],
    "triad": [_P, _P, _P, _F64, _U64, _U64],
}


@dataclass(frozen=True)
class CLibrary:
    """The compiled loops and how they were built."""

    functions: dict[str, Any]  # kind -> ctypes function
    compiler: str
    flags: tuple[str, ...]

    def describe(self) -> str:
        return f"C loop ({self.compiler.rsplit('/', 1)[-1]} {' '.join(self.flags)})"


@functools.lru_cache(maxsize=1)
def c_library() -> CLibrary:
    """Compile :data:`C_SOURCE` once per process: with ``-march=native`` first, and
    without it where the compiler refuses the flag. Raises ToolchainError when neither
    builds (or there is no compiler)."""
    compiler = c_compiler(C_PURPOSE)
    failures = []
    for flags in FLAG_SETS:
        try:
            lib = load_c_library(C_SOURCE, "bandwidth", purpose=C_PURPOSE, flags=flags)
        except ToolchainError as exc:
            failures.append(str(exc))
            continue
        functions = {}
        for kind, argtypes in _ARGTYPES.items():
            fn = getattr(lib, f"perflab_{kind}")
            fn.restype, fn.argtypes = None, argtypes
            functions[kind] = fn
        return CLibrary(functions, compiler, flags)
    raise ToolchainError(failures[-1])


def aligned_array(n: int, fill: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.float64]:
    """``n`` float64 starting on a 64-byte boundary (numpy guarantees 16), zeros or ``fill``."""
    spare = ALIGN // 8
    raw = np.zeros(n + spare, dtype=np.float64)
    start = (-raw.ctypes.data % ALIGN) // 8
    out = raw[start : start + n]
    if fill is not None:
        out[:] = fill
    return out


class CLoop:
    """``passes`` passes of ``kind`` over its own aligned arrays per call. ``arrays`` are
    (src) for read, (dst, src) for copy, (a, b, c) for triad (``a = b + scale * c``);
    ``sum`` holds the last read's total."""

    def __init__(self, kind: str, n: int, passes: int, scale: float, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.kind, self.n, self.passes, self.scale = kind, n, passes, scale
        self.arrays = [aligned_array(n, rng.random(n)) for _ in range(ARRAYS[kind])]
        self.sum = np.zeros(1, dtype=np.float64)
        self._fn = c_library().functions[kind]
        self._args = self._arguments()

    def _arguments(self) -> tuple[Any, ...]:
        ptrs = [a.ctypes.data for a in self.arrays]
        if self.kind == "read":
            return (ptrs[0], self.n, self.passes, self.sum.ctypes.data)
        if self.kind == "copy":
            return (ptrs[0], ptrs[1], self.n, self.passes)
        return (ptrs[0], ptrs[1], ptrs[2], self.scale, self.n, self.passes)

    def __call__(self) -> None:
        self._fn(*self._args)


class TritonLoop:
    """``passes`` passes of ``kind`` in one Triton launch over float32 CUDA tensors of
    ``n`` elements, ``n`` rounded down to whole tiles (at least one): ``self.n``.
    (``device="cpu"`` under Triton's interpreter, to check the launch without a GPU.)"""

    def __init__(
        self, kind: str, n: int, passes: int, scale: float, programs: int, device: str = "cuda"
    ) -> None:
        torch = import_extra("torch", "the Triton bandwidth loop")
        from perflab.machine import _triton_stream as ts

        self.kind, self.passes, self.scale = kind, passes, scale
        self.n = triton_elements(n)
        self.grid = (max(1, min(programs, self.n // ts.BLOCK)),)
        arrays = [
            torch.rand(self.n, device=device, dtype=torch.float32) for _ in range(ARRAYS[kind])
        ]
        # only the arrays the kind touches (read: x; copy: x, out; triad: x, y, out); the
        # kernel ignores the others, passed as x
        self.x = arrays[0]
        self.out = arrays[1] if kind != "read" else self.x
        self.y = arrays[2] if kind == "triad" else self.x
        self.sums = torch.zeros(self.grid[0], device=device, dtype=torch.float32)
        self._kernel, self._code, self._block = ts.stream_kernel, ts.KIND_CODES[kind], ts.BLOCK
        self._warps = ts.NUM_WARPS

    def __call__(self) -> None:
        self._kernel[self.grid](
            self.x,
            self.y,
            self.out,
            self.sums,
            self.n,
            self.passes,
            self.scale,
            KIND=self._code,
            BLOCK=self._block,
            num_warps=self._warps,
        )


def triton_elements(n: int) -> int:
    """``n`` rounded down to whole tiles of the Triton loop, at least one tile."""
    from perflab.machine._triton_stream import BLOCK

    return max(BLOCK, n // BLOCK * BLOCK)


def gpu_programs() -> int:
    """Programs per Triton launch: eight per SM, enough loads in flight to fill the L2's
    bandwidth (fewer when the arrays have fewer tiles)."""
    torch = import_extra("torch", "the Triton bandwidth loop")
    return 8 * int(
        torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    )


def c_preflight() -> str:
    """Build the C loops and check a read and a copy on a small array; returns how they
    were built. Raises ToolchainError when they cannot be built or compute wrong."""
    lib = c_library()
    read = CLoop("read", 1000, passes=3, scale=1.0)
    read.arrays[0][:] = 1.0
    read()
    copy = CLoop("copy", 1000, passes=2, scale=1.0)
    copy()
    if read.sum[0] != 3000.0 or not np.array_equal(copy.arrays[0], copy.arrays[1]):
        raise ToolchainError(
            f"the C bandwidth loops compute wrong results (read of 3 x 1000 ones gave "
            f"{read.sum[0]!r}): not used"
        )
    return lib.describe()


def triton_preflight(programs: int) -> str:
    """Launch the Triton read on a small array and check its sum (as the latency
    benchmark checks its chase); raises when triton is missing or the check fails."""
    import_extra("triton", "the Triton bandwidth loop")
    loop = TritonLoop("read", 1, passes=3, scale=1.0, programs=programs)
    loop.x.fill_(1.0)
    loop()
    got = float(loop.sums.sum().item())
    if got != 3.0 * loop.n:
        raise ToolchainError(
            f"the Triton bandwidth loop read 3 passes of {loop.n} ones as {got}: not used"
        )
    return "Triton loop"
