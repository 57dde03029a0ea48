"""What this machine has: backend, devices, library and tool versions."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import sys
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict

from perflab.errors import no_gpu

if TYPE_CHECKING:
    from perflab.capture.toolchain import FoundTool


class Device(TypedDict, total=False):
    """One device as ``perflab info`` describes it: a GPU, or the CPU (cores and caches)."""

    index: int
    name: str
    kind: str
    compute_capability: str
    sms: int
    memory_bytes: int
    l2_bytes: int | None
    sm_clock_max_mhz: int | None
    memory_clock_max_mhz: int | None
    driver: str
    cores: int | None
    cache_bytes: dict[str, int]


class Info(TypedDict):
    """What ``perflab info --json`` prints."""

    backend: str
    devices: list[Device]
    versions: dict[str, str]
    cuda_tools: dict[str, FoundTool | None]
    platform: dict[str, str]


_PACKAGES = ("perflab", "numpy", "torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "nvtx")


def package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str]:
    """Python and package versions (without importing the packages)."""
    found = {"python": platform.python_version()}
    for dist in _PACKAGES:
        v = package_version(dist)
        if v is not None:
            found["cupy" if dist.startswith("cupy") else dist] = v
    return found


@functools.lru_cache(maxsize=1)
def _torch_cuda() -> ModuleType | None:
    """torch, when it is installed and sees a GPU; else None."""
    if os.environ.get("PERFLAB_FORCE_CPU") or not _cuda_driver_loads():
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


@functools.lru_cache(maxsize=1)
def _cupy_cuda() -> ModuleType | None:
    if os.environ.get("PERFLAB_FORCE_CPU") or not _cuda_driver_loads():
        return None
    try:
        import cupy
    except ImportError:
        return None
    try:
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # cupy raises its own CUDARuntimeError with no GPU/driver
        return None


@functools.lru_cache(maxsize=1)
def _cuda_driver_loads() -> bool:
    """Whether the CUDA driver library loads. Without it neither torch nor CuPy can use a
    GPU, so the second or more that importing them takes is skipped (``perflab info``)."""
    import ctypes

    names = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")
    for name in names:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def cuda_available() -> bool:
    return _torch_cuda() is not None or _cupy_cuda() is not None


def require_gpu(needs: str, hint: str = "") -> None:
    """Raise the one "no GPU" error (:func:`perflab.errors.no_gpu`) unless CUDA works."""
    if not cuda_available():
        raise no_gpu(needs, hint)


def default_backend() -> str:
    return "cuda" if cuda_available() else "cpu"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_device() -> Device:
    return {
        "name": cpu_name(),
        "kind": "cpu",
        "cores": os.cpu_count(),
        "cache_bytes": cpu_caches(),
    }


def cpu_caches() -> dict[str, int]:
    """CPU cache sizes by level from sysfs (``{"L1d": 49152, "L2": ..., "L3": ...}``)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    caches: dict[str, int] = {}
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return caches
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            level = _read(f"{base}/{entry}/level")
            kind = _read(f"{base}/{entry}/type")
            size = _read(f"{base}/{entry}/size")
        except OSError:
            continue
        if kind == "Instruction":
            continue
        label = f"L{level}" + ("d" if kind == "Data" else "")
        caches[label] = _parse_cache_size(size)
    return caches


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read().strip()


def _parse_cache_size(text: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    digits = text[:-1] if mult != 1 else text
    return int(digits) * mult


def gpu_devices() -> list[Device]:
    torch = _torch_cuda()
    if torch is not None:
        return [_torch_device(torch, i) for i in range(torch.cuda.device_count())]
    cupy = _cupy_cuda()
    if cupy is not None:
        return [_cupy_device(cupy, i) for i in range(cupy.cuda.runtime.getDeviceCount())]
    return []


def _torch_device(torch: ModuleType, index: int) -> Device:
    p = torch.cuda.get_device_properties(index)
    info: Device = {
        "index": index,
        "name": p.name,
        "kind": "cuda",
        "compute_capability": f"{p.major}.{p.minor}",
        "sms": p.multi_processor_count,
        "memory_bytes": int(p.total_memory),
        "l2_bytes": int(getattr(p, "L2_cache_size", 0)) or None,
    }
    info.update(_nvml_clocks(p))
    return info


def _cupy_device(cupy: ModuleType, index: int) -> Device:
    p = cupy.cuda.runtime.getDeviceProperties(index)
    return {
        "index": index,
        "name": p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"]),
        "kind": "cuda",
        "compute_capability": f"{p['major']}.{p['minor']}",
        "sms": int(p["multiProcessorCount"]),
        "memory_bytes": int(p["totalGlobalMem"]),
        "l2_bytes": int(p["l2CacheSize"]),
        "sm_clock_max_mhz": int(p.get("clockRate", 0)) // 1000 or None,
        "memory_clock_max_mhz": int(p.get("memoryClockRate", 0)) // 1000 or None,
    }


def _nvml_clocks(props: object) -> Device:
    """Maximum clocks (not the current ones) and driver through NVML (pynvml or the
    driver's library), for the device with these torch properties (found by UUID or PCI
    bus id: NVML's indices ignore CUDA_VISIBLE_DEVICES)."""
    from perflab.capture.gpu_clock import nvml_handle, torch_identity
    from perflab.capture.nvml import load_nvml

    nvml, _ = load_nvml()
    if nvml is None:
        return {}
    try:
        nvml.nvmlInit()
        try:
            h = nvml_handle(nvml, torch_identity(props))
            if h is None:
                return {}
            return {
                "sm_clock_max_mhz": nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM),
                "memory_clock_max_mhz": nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM),
                "driver": _text(nvml.nvmlSystemGetDriverVersion()),
            }
        finally:
            nvml.nvmlShutdown()
    except Exception:  # NVML raises its own error types when no driver is present
        return {}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def current_device_name() -> str:
    gpus = gpu_devices()
    if gpus:
        return str(gpus[0]["name"])
    return f"CPU: {cpu_name()}"


def info() -> Info:
    """Everything ``perflab info --json`` prints."""
    from perflab.capture import toolchain

    gpus = gpu_devices()
    return {
        "backend": "cuda" if gpus else "cpu",
        "devices": gpus or [cpu_device()],
        "versions": versions(),
        "cuda_tools": toolchain.describe(),
        "platform": {
            "system": platform.system(),
            "machine": platform.machine(),
            "python": sys.version.split()[0],
        },
    }
