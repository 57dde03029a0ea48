"""Matrix-multiply throughput per dtype over sizes: ``2 n^3`` flops per ``n x n @ n x n``.

On CUDA: FP32, TF32 (FP32 inputs with TF32 tensor cores allowed), BF16, FP16 and FP8
(e4m3 through ``torch._scaled_mm``, where the GPU and torch support it). On the CPU (the
analog): torch FP32 and BF16 and numpy FP64/FP32. Inputs are random (never zeros: some
hardware is faster on zeros). Where ``peaks`` (GFLOP/s per dtype, from a spec table)
are given, each series records the fraction of that peak reached.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import TypedDict

import numpy as np

from perflab.errors import InputError, import_extra
from perflab.machine._common import (
    NoiseLog,
    median_call_ns,
    new_result,
    progress,
    resolve_backend,
)
from perflab.model.machine import BenchResult, Series

CUDA_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
CPU_DTYPES = ("torch-fp32", "torch-bf16", "numpy-fp64", "numpy-fp32")
CUDA_SIZES = (1024, 2048, 4096, 8192)
CPU_SIZES = (128, 256, 512, 1024)


@contextlib.contextmanager
def _tf32(torch: ModuleType, allowed: bool) -> Iterator[None]:
    """TF32 on or off for the block, restored afterwards (it is process-wide state).

    torch >= 2.9 has ``backends.cuda.matmul.fp32_precision`` ("tf32"/"ieee"); once a
    process has used it, reading the old ``allow_tf32`` raises, so the new API is used
    whenever it exists."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        before = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if allowed else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = before
        return
    before_flag = matmul.allow_tf32
    matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        matmul.allow_tf32 = before_flag


def _cuda_matmul(dtype: str, n: int) -> Callable[[], object] | None:
    """A closure running one product, or None when this GPU/torch lacks the dtype."""
    torch = import_extra("torch", "perflab machine matmul")

    if dtype == "fp8":
        return _cuda_fp8(torch, n)
    torch_dtype = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }[dtype]
    a = torch.randn(n, n, device="cuda", dtype=torch_dtype)
    b = torch.randn(n, n, device="cuda", dtype=torch_dtype)
    out = torch.empty(n, n, device="cuda", dtype=torch_dtype)
    return lambda: torch.matmul(a, b, out=out)


def _cuda_fp8(torch: ModuleType, n: int) -> Callable[[], object] | None:
    fp8 = getattr(torch, "float8_e4m3fn", None)
    major, minor = torch.cuda.get_device_capability()
    if fp8 is None or not hasattr(torch, "_scaled_mm") or (major, minor) < (8, 9):
        return None
    a = torch.randn(n, n, device="cuda").to(fp8)
    b = torch.randn(n, n, device="cuda").to(fp8).t()  # _scaled_mm wants b column-major
    one = torch.ones((), device="cuda", dtype=torch.float32)

    def product() -> object:
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    try:
        product()
    except (RuntimeError, TypeError):  # this torch/GPU pair has no FP8 GEMM
        return None
    return product


def _cpu_matmul(dtype: str, n: int) -> Callable[[], object]:
    if dtype.startswith("numpy"):
        np_dtype = np.float64 if dtype.endswith("fp64") else np.float32
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal((n, n)).astype(np_dtype) for _ in range(2))
        out = np.empty((n, n), dtype=np_dtype)
        return lambda: np.matmul(a, b, out=out)
    torch = import_extra("torch", "perflab machine matmul")

    torch_dtype = torch.bfloat16 if dtype.endswith("bf16") else torch.float32
    gen = torch.Generator().manual_seed(0)
    ta = torch.randn(n, n, generator=gen).to(torch_dtype)
    tb = torch.randn(n, n, generator=gen).to(torch_dtype)
    tout = torch.empty(n, n, dtype=torch_dtype)
    return lambda: torch.matmul(ta, tb, out=tout)


def _series(
    dtype: str,
    sizes: tuple[int, ...],
    backend: str,
    budget_ms: float,
    noise: NoiseLog,
    show: bool | None,
    failures: list[str],
) -> Series | None:
    """GFLOP/s at each size (NaN where that size failed, said in ``failures``); None when
    the device or torch build lacks the dtype altogether."""
    rates = []
    for n in progress(sizes, f"matmul {dtype} ({backend})", show):
        try:
            ns = _time_product(dtype, n, backend, budget_ms, noise)
        except _Unsupported:
            return None
        except (RuntimeError, MemoryError) as exc:  # e.g. out of memory at the largest size
            failures.append(f"{dtype} n={n}: {type(exc).__name__}: {str(exc)[:200]}")
            ns = math.nan
        rates.append(2.0 * n**3 / ns)  # flops per ns == GFLOP/s
    return Series(dtype, np.asarray(sizes), np.asarray(rates), "n", "GFLOPs")


class _Unsupported(Exception):
    """This GPU/torch pair has no such dtype."""


def _time_product(dtype: str, n: int, backend: str, budget_ms: float, noise: NoiseLog) -> float:
    name = f"{dtype} {n}"
    if backend != "cuda":
        fn = _cpu_matmul(dtype, n)
        return median_call_ns(fn, backend, budget_ms=budget_ms, name=name, noise=noise)
    torch = import_extra("torch", "perflab machine matmul")

    with _tf32(torch, dtype == "tf32"):
        cuda_fn = _cuda_matmul(dtype, n)
        if cuda_fn is None:
            raise _Unsupported(dtype)
        try:
            return median_call_ns(cuda_fn, backend, budget_ms=budget_ms, name=name, noise=noise)
        finally:
            del cuda_fn
            torch.cuda.empty_cache()  # the next size starts from free memory


def run(
    *,
    backend: str = "auto",
    dtypes: tuple[str, ...] | None = None,
    sizes: tuple[int, ...] | None = None,
    quick: bool = False,
    budget_ms: float = 60.0,
    peaks: Mapping[str, float] | None = None,
    show_progress: bool | None = None,
) -> BenchResult:
    """GFLOP/s per dtype (one series each) over square sizes ``n``.

    ``peaks`` maps dtype to a spec peak in GFLOP/s (on a GPU it defaults to the spec
    table's dense figures); the best rate's fraction of it is stored in
    ``options["fraction_of_peak"]``, and which peak that was (its GFLOP/s, figure, dense or
    not, source) in ``options["peak_used"]``. Dtypes the device cannot run are listed
    in the warnings, never silently dropped.
    """
    chosen = resolve_backend(backend)
    on_gpu = chosen == "cuda"
    known = CUDA_DTYPES if on_gpu else CPU_DTYPES
    wanted = dtypes or known
    unknown = [d for d in wanted if d not in known]
    if unknown:
        raise InputError(
            f"unknown matmul dtype(s) {unknown} on {chosen} (known: {', '.join(known)})"
        )
    grid = sizes or (CUDA_SIZES if on_gpu else CPU_SIZES)
    if quick and sizes is None:
        grid = grid[1::2]
    if any(n < 1 for n in grid):
        raise InputError(f"matrix sizes must be positive, got {list(grid)}")
    result = new_result(
        "matmul", chosen, {"quick": quick, "sizes": list(grid), "data": "random normal"}
    )
    used = peaks_used(result.device, peaks, on_gpu)  # bad peaks fail before any timing
    noise = NoiseLog()
    failures: list[str] = []
    for dtype in wanted:
        series = _series(
            dtype,
            tuple(grid),
            chosen,
            budget_ms / (2 if quick else 1),
            noise,
            show_progress,
            failures,
        )
        if series is None:
            result.warnings.append(f"{dtype}: not supported by this GPU or torch build; skipped")
            continue
        result.series.append(series)
    if used:
        best = best_gflops(result)
        fractions = {
            name: rate / used[name]["gflops"] for name, rate in best.items() if name in used
        }
        result.options["fraction_of_peak"] = fractions
        result.options["peak_used"] = {name: used[name] for name in fractions}
    result.warnings.extend(f"failed, left out (NaN): {f}" for f in failures)
    result.warnings.extend(noise.summary())
    if not on_gpu:
        result.warnings.append("no GPU: CPU matmul (the CPU analog)")
    return result


# matmul dtype -> key of the spec table (perflab.analysis.specs); FP16 shares BF16's peak
SPEC_KEYS = {
    "fp32": "fp32",
    "tf32": "tf32_tensor",
    "bf16": "bf16_tensor",
    "fp16": "bf16_tensor",
    "fp8": "fp8_tensor",
}


def spec_peaks(device_name: str) -> dict[str, float]:
    """Datasheet peaks in GFLOP/s per matmul dtype, from the spec table ({} if unknown)."""
    return {d: peak["gflops"] for d, peak in spec_peak_info(device_name).items()}


class _Rate(TypedDict):
    gflops: float


class Peak(_Rate, total=False):
    """A dtype's peak and where it comes from (the spec table's row, or the caller)."""

    figure: str
    device: str
    dense: bool | None
    source: str
    derived: str


def spec_peak_info(device_name: str) -> dict[str, Peak]:
    """Per matmul dtype, the spec table's peak: ``gflops``, the ``figure`` it is (e.g.
    "BF16/FP16 tensor"), the ``device`` row, ``dense`` (the table holds dense figures:
    no 2:4 sparsity), its ``source`` and how it was ``derived`` ({} if the device is
    not in the table)."""
    from perflab.analysis.specs import COMPUTE_LABELS, find_spec

    spec = find_spec(device_name)
    if spec is None:
        return {}
    info: dict[str, Peak] = {}
    for dtype, key in SPEC_KEYS.items():
        fig = spec.compute.get(key)
        if fig is None or fig.value is None:
            continue
        info[dtype] = {
            "gflops": fig.value * 1e3,  # the table holds TFLOP/s
            "figure": COMPUTE_LABELS[key],
            "device": spec.name,
            "dense": True,
            "source": fig.source,
            "derived": fig.derived,
        }
    return info


def peaks_used(
    device_name: str, peaks: Mapping[str, float] | None, on_gpu: bool
) -> dict[str, Peak]:
    """The peak each dtype's fraction is taken against: the caller's ``peaks`` (checked:
    positive and finite; dense or sparse unknown), else on a GPU the spec table's."""
    if peaks is None:
        return spec_peak_info(device_name) if on_gpu else {}
    bad = {d: v for d, v in peaks.items() if not _positive_finite(v)}
    if bad:
        raise InputError(f"matmul peaks must be positive finite GFLOP/s, got {bad}")
    return {
        d: Peak(gflops=float(v), figure=f"{d} peak", dense=None, source="peaks= argument")
        for d, v in peaks.items()
    }


def best_gflops(result: BenchResult) -> dict[str, float]:
    """The highest rate measured per dtype (sizes that failed are NaN and skipped)."""
    finite = {s.name: s.y[np.isfinite(s.y)] for s in result.series}
    return {name: float(y.max()) for name, y in finite.items() if y.size}


def _positive_finite(value: object) -> bool:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    return math.isfinite(value) and float(value) > 0
