"""The CUDA side of the timing engine: event clocks (torch, else CuPy) with a queue
filler, the persisting-L2 reset, and the clock-throttle check through NVML.

Everything here touches a GPU and runs only on one (``gpu`` tests, scripts/gpu-check);
the logic it feeds (planning, stopping, host-bound flags) lives in
:mod:`perflab.capture.timer` and runs on the host clock too.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from perflab.capture import env
from perflab.errors import no_gpu

DEFAULT_FLUSH_BYTES = 32 << 20
CALIBRATION_CYCLES = 2_000_000  # ~1 ms at 2 GHz: long enough to time with events
CUDA_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
THROTTLE_CLOCK_FRACTION = 0.75  # nvbench drops samples below 75% of the default SM clock

SPIN_SOURCE = r"""
extern "C" __global__ void perflab_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


class _EventClock:
    """One CUDA event pair per sample on the current stream, read after one sync.
    ``hold(ns)`` enqueues a spinning kernel of about ``ns`` (the queue filler)."""

    name = "cuda"
    asynchronous = True
    can_fill = False
    flushes = False
    device = "cuda"
    _flush_buf: Any = None
    _cycles_per_ns: float | None = None

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.setup: dict[str, Any] = {}

    # subclasses: new_event, event_ms, spin, flush, sync, capture_graph
    def new_event(self) -> Any:
        raise NotImplementedError

    def event_ms(self, start: Any, end: Any) -> float:
        raise NotImplementedError

    def spin(self, cycles: int) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def mark(self) -> Any:
        event = self.new_event()
        event.record()
        return event

    def elapsed_ns(self, start: Any, end: Any) -> float:
        return self.event_ms(start, end) * 1e6

    def hold(self, ns: float) -> None:
        if self._cycles_per_ns is None:
            self._cycles_per_ns = self._calibrate()
        self.spin(max(1, int(ns * self._cycles_per_ns)))

    def _calibrate(self) -> float:
        """SM cycles per ns of the spinning kernel, timed with events (second try: the
        first may include loading the kernel)."""
        rate = math.nan
        for _ in range(2):
            self.sync()
            start = self.mark()
            self.spin(CALIBRATION_CYCLES)
            end = self.mark()
            self.sync()
            rate = CALIBRATION_CYCLES / max(self.elapsed_ns(start, end), 1.0)
        return rate

    def close(self) -> None:
        self._flush_buf = None


class TorchCudaClock(_EventClock):
    """CUDA events on torch's current stream (CuPy work on the same stream is timed too);
    the filler is ``torch.cuda._sleep`` (a kernel that spins for a number of cycles)."""

    def __init__(self, torch: Any, flush: bool) -> None:
        super().__init__()
        self.torch = torch
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        self.device = str(props.name)
        self.identity = torch_identity(props)
        l2 = int(getattr(props, "L2_cache_size", 0)) or DEFAULT_FLUSH_BYTES
        # Twice the L2 so nothing useful survives the flush.
        self._flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device="cuda") if flush else None
        self.flushes = flush
        self.can_fill = hasattr(torch.cuda, "_sleep")
        if not self.can_fill:
            self.notes.append(
                "queue filler unavailable (this torch has no torch.cuda._sleep): short "
                "kernels may be launch-bound (see the host-bound warning)"
            )
        self.setup.update(reset_persisting_l2(self.notes))

    def new_event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)

    def event_ms(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end))

    def spin(self, cycles: int) -> None:
        self.torch.cuda._sleep(cycles)

    def flush(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.zero_()

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        """Capture ``number`` calls into a CUDA graph; return its replay."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()  # warm-up on a side stream, as torch's graph docs require
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(number):
                fn()
        self.sync()
        replay: Callable[[], object] = graph.replay
        return replay


class CupyCudaClock(_EventClock):
    """The same method through CuPy events when torch has no CUDA; the filler is a
    clock64 spin kernel compiled with NVRTC (absent when NVRTC cannot compile)."""

    def __init__(self, cupy: Any, flush: bool) -> None:
        super().__init__()
        self.cupy = cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        self.device = name.decode() if isinstance(name, bytes) else str(name)
        self.identity = _cupy_identity(props)
        l2 = int(props["l2CacheSize"]) or DEFAULT_FLUSH_BYTES
        self._flush_buf = cupy.empty(2 * l2, dtype=cupy.uint8) if flush else None
        self.flushes = flush
        self._spin: Any = None
        try:
            self._spin = cupy.RawKernel(SPIN_SOURCE, "perflab_spin")
            self._spin.compile()
            self.can_fill = True
        except Exception as exc:  # NVRTC missing or too old for this driver
            self.notes.append(f"queue filler unavailable (CuPy could not compile it: {exc})")
        self.setup.update(reset_persisting_l2(self.notes))

    def new_event(self) -> Any:
        return self.cupy.cuda.Event()

    def event_ms(self, start: Any, end: Any) -> float:
        return float(self.cupy.cuda.get_elapsed_time(start, end))

    def spin(self, cycles: int) -> None:
        self._spin((1,), (1,), (np.int64(cycles),))

    def flush(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.fill(0)

    def sync(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        stream = self.cupy.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            try:
                for _ in range(number):
                    fn()
            finally:
                graph = stream.end_capture()
        return lambda: graph.launch(stream=self.cupy.cuda.get_current_stream())


def make_cuda_clock(flush: bool) -> Any:
    torch = env._torch_cuda()
    if torch is not None:
        return TorchCudaClock(torch, flush)
    cupy = env._cupy_cuda()
    if cupy is not None:
        return CupyCudaClock(cupy, flush)
    raise no_gpu("backend 'cuda'")


# --- device identity (to find the same GPU in NVML) ---------------------------------


def _uuid_text(raw: bytes) -> str:
    """NVML's spelling of a 16-byte CUDA device UUID: ``GPU-8-4-4-4-12`` hex digits."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def torch_identity(props: Any) -> dict[str, str]:
    ident: dict[str, str] = {}
    uuid = getattr(props, "uuid", None)
    raw = getattr(uuid, "bytes", None)  # torch gives a list of 16 ints
    with contextlib.suppress(TypeError, ValueError):
        raw = bytes(raw) if raw is not None else None
    if isinstance(raw, bytes) and len(raw) == 16:
        ident["uuid"] = _uuid_text(raw)
    elif uuid is not None:
        text = str(uuid)
        ident["uuid"] = text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        domain = int(getattr(props, "pci_domain_id", 0))
        dev = int(getattr(props, "pci_device_id", 0))
        ident["pci_bus_id"] = f"{domain:08x}:{int(bus):02x}:{dev:02x}.0"
    return ident


def _cupy_identity(props: dict[str, Any]) -> dict[str, str]:
    ident: dict[str, str] = {}
    raw = props.get("uuid")
    if isinstance(raw, bytes) and len(raw) == 16:
        ident["uuid"] = _uuid_text(raw)
    if "pciBusID" in props:
        ident["pci_bus_id"] = (
            f"{int(props.get('pciDomainID', 0)):08x}:{int(props['pciBusID']):02x}:"
            f"{int(props.get('pciDeviceID', 0)):02x}.0"
        )
    return ident


def nvml_handle(nvml: Any, identity: dict[str, str]) -> Any:
    """The NVML handle of the CUDA device with this UUID or PCI bus id (NVML's indices
    ignore ``CUDA_VISIBLE_DEVICES``, so index 0 may be another GPU); None if neither
    matches."""
    lookups = (
        ("uuid", "nvmlDeviceGetHandleByUUID"),
        ("pci_bus_id", "nvmlDeviceGetHandleByPciBusId"),
    )
    for key, func in lookups:
        if key not in identity or not hasattr(nvml, func):
            continue
        for value in (identity[key], identity[key].encode()):  # old pynvml wants bytes
            with contextlib.suppress(Exception):
                return getattr(nvml, func)(value)
    return None


# --- persisting L2 ------------------------------------------------------------------


def _loaded_cudart() -> Any:
    """The CUDA runtime library already mapped into this process (torch's), or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as fh:
            paths = {line.split()[-1] for line in fh if "libcudart.so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        with contextlib.suppress(OSError):
            return ctypes.CDLL(path)
    return None


def reset_persisting_l2(notes: list[str]) -> dict[str, Any]:
    """Reset a persisting-L2 carve-out left by earlier code (it inflates bandwidth:
    llm.c #851 saw 3,530 GB/s on an 864 GB/s L40S). Returns what the result records;
    appends a note when a carve-out was found or the check could not run."""
    lib = _loaded_cudart()
    if lib is None:
        notes.append("persisting-L2 carve-out not checked (no CUDA runtime library found)")
        return {"persisting_l2": "not checked"}
    size = ctypes.c_size_t(0)
    if lib.cudaDeviceGetLimit(ctypes.byref(size), CUDA_LIMIT_PERSISTING_L2) != 0:
        notes.append("persisting-L2 carve-out not checked (cudaDeviceGetLimit failed)")
        return {"persisting_l2": "not checked"}
    if size.value == 0:
        return {"persisting_l2": "none"}
    lib.cudaDeviceSetLimit(CUDA_LIMIT_PERSISTING_L2, ctypes.c_size_t(0))
    lib.cudaCtxResetPersistingL2Cache()
    notes.append(
        f"a persisting-L2 carve-out of {size.value:,} bytes (set by earlier code) was reset "
        "to 0 before timing"
    )
    return {"persisting_l2": f"reset from {size.value} bytes"}


# --- throttling ---------------------------------------------------------------------


class ThrottleWatch:
    """SM clock per sample and NVML violation counters before and after a run (nvbench
    drops samples run below 75% of the default SM clock). ``finish`` returns the
    result's ``throttle`` field: ``{"checked": False, "why": ...}`` when it cannot run."""

    _REASONS: ClassVar[dict[int, str]] = {
        0x4: "software power cap",
        0x8: "hardware slowdown",
        0x20: "software thermal slowdown",
        0x40: "hardware thermal slowdown",
        0x80: "hardware power brake",
    }
    _POLICIES: ClassVar[tuple[str, ...]] = ("NVML_PERF_POLICY_POWER", "NVML_PERF_POLICY_THERMAL")

    def __init__(self, why: str | None, nvml: Any = None, handle: Any = None) -> None:
        self.why = why
        self.nvml = nvml
        self.handle = handle
        self.readings: list[float] = []
        self.default_mhz = math.nan
        self.before: dict[str, int] = {}

    @classmethod
    def start(cls, clock: Any) -> ThrottleWatch:
        if clock.name != "cuda":
            return cls("no GPU: the throttle check reads an NVIDIA GPU's clocks through NVML")
        try:
            import pynvml
        except ImportError:
            return cls("pynvml is not installed (pip install nvidia-ml-py)")
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVML raises its own error types
            return cls(f"NVML did not start: {exc}")
        handle = nvml_handle(pynvml, getattr(clock, "identity", {}))
        if handle is None:
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()
            return cls("cannot match the CUDA device to an NVML device (by UUID or PCI bus id)")
        watch = cls(None, pynvml, handle)
        watch.default_mhz = watch._default_clock()
        watch.before = watch._violations()
        return watch

    def _default_clock(self) -> float:
        nvml, h = self.nvml, self.handle
        for getter in ("nvmlDeviceGetDefaultApplicationsClock", "nvmlDeviceGetMaxClockInfo"):
            with contextlib.suppress(Exception):
                return float(getattr(nvml, getter)(h, nvml.NVML_CLOCK_SM))
        return math.nan

    def _violations(self) -> dict[str, int]:
        out = {}
        for policy in self._POLICIES:
            with contextlib.suppress(Exception):
                status = self.nvml.nvmlDeviceGetViolationStatus(
                    self.handle, getattr(self.nvml, policy)
                )
                out[policy.rsplit("_", 1)[-1].lower()] = int(status.violationTime)
        return out

    def sample(self) -> None:
        """Read the SM clock while the device runs the queue (after each sample is
        issued, outside its timed window)."""
        if self.nvml is None:
            return
        try:
            mhz = float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        except Exception:
            mhz = math.nan
        self.readings.append(mhz)

    def _reasons(self) -> list[str]:
        for getter in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            with contextlib.suppress(Exception):
                mask = int(getattr(self.nvml, getter)(self.handle))
                return [text for bit, text in self._REASONS.items() if mask & bit]
        return []

    def finish(self, count: int) -> dict[str, Any]:
        if self.nvml is None:
            why = self.why or "not checked"
            warn = [] if why.startswith("no GPU") else [f"throttle check unavailable: {why}"]
            return {"checked": False, "why": why, "warnings": warn}
        clocks = np.asarray(self.readings[-count:] if count else [], dtype=np.float64)
        drop = np.zeros(count, dtype=bool)
        if clocks.size == count and math.isfinite(self.default_mhz):
            drop = clocks < THROTTLE_CLOCK_FRACTION * self.default_mhz
        after = self._violations()
        violated = {k: after[k] - v for k, v in self.before.items() if after.get(k, v) > v}
        reasons = self._reasons()
        warnings = []
        if drop.any():
            warnings.append(
                f"dropped {int(drop.sum())} of {count} samples run below 75% of the default "
                f"SM clock ({self.default_mhz:.0f} MHz)"
            )
        if violated:
            warnings.append(
                "clocks throttled during the run: "
                + ", ".join(f"{k} {ns / 1e6:.1f} ms" for k, ns in violated.items())
            )
        finite = clocks[np.isfinite(clocks)]
        return {
            "checked": True,
            "method": "NVML SM clock before each sample; violation counters before/after",
            "default_sm_mhz": self.default_mhz if math.isfinite(self.default_mhz) else None,
            "min_sm_mhz": float(finite.min()) if finite.size else None,
            "violation_ns": violated,
            "reasons_after": reasons,
            "dropped_samples": int(drop.sum()),
            "drop": drop,
            "warnings": warnings,
        }

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = None
