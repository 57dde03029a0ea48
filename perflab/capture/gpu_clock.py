"""The CUDA side of the timing engine: event clocks (torch, else CuPy) with a queue
filler, the persisting-L2 reset, and finding the CUDA device in NVML (for the clock check,
:mod:`perflab.capture.throttle`).

Everything here touches a GPU and runs only on one (``gpu`` tests, scripts/gpu-check);
the logic it feeds (planning, stopping, host-bound flags) lives in
:mod:`perflab.capture.timer` and :mod:`perflab.capture.sampling` and runs on the host
clock and the host queue too.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.capture import env, graph
from perflab.capture.clocks import DEFAULT_FLUSH_BYTES
from perflab.errors import no_gpu

if TYPE_CHECKING:
    from perflab.capture.timer import Clock

CALIBRATION_CYCLES = 2_000_000  # ~1 ms at 2 GHz: long enough to time with events
CUDA_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize

SPIN_SOURCE = r"""
extern "C" __global__ void perflab_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


class _EventClock:
    """One CUDA event pair per sample on the current stream, read after one sync.
    ``hold(ns)`` enqueues a spinning kernel of about ``ns`` (the queue filler): it spins
    :meth:`filler_cycles` SM cycles, calibrated once with events."""

    name = "cuda"
    asynchronous = True
    can_fill = False
    flushes = False
    device = "cuda"
    max_sm_mhz = math.nan  # the device's maximum SM clock, as CUDA reports it
    _flush_buf: Any = None
    _cycles_per_ns: float | None = None
    _stream: int | None = None  # the current stream's handle when the clock was made
    stream_change: str | None = None  # what note_stream_change found, if anything

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.setup: dict[str, object] = {}

    # subclasses: new_event, event_ms, reached, spin, flush, sync, capture_graph,
    # current_stream
    def new_event(self) -> Any:
        raise NotImplementedError

    def reached(self, mark: object) -> bool:
        raise NotImplementedError

    def event_ms(self, start: Any, end: Any) -> float:
        raise NotImplementedError

    def spin(self, cycles: int) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def current_stream(self) -> int:
        """The current stream's handle (a cudaStream_t as an int: stream objects of one
        stream need not compare equal)."""
        raise NotImplementedError

    def mark(self) -> object:
        event = self.new_event()
        event.record()
        return event

    def elapsed_ns(self, start: object, end: object) -> float:
        return self.event_ms(start, end) * 1e6

    def _note_graph(self, number: int) -> None:
        note = graph.one_call_note(number)
        if note is not None:
            self.notes.append(note)

    def filler_cycles(self, ns: float) -> int:
        """The SM cycles ``hold(ns)`` spins (calibrating the filler on first use)."""
        if self._cycles_per_ns is None:
            self._cycles_per_ns = self._calibrate()
        return max(1, int(ns * self._cycles_per_ns))

    def hold(self, ns: float) -> None:
        self.spin(self.filler_cycles(ns))

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

    def note_stream_change(self) -> None:
        """Note it when the timed code left another stream current: the start and end
        events then sit on different streams, and work on the new one is not ordered
        after the start event."""
        now = self.current_stream()
        if self._stream is not None and now != self._stream and self.stream_change is None:
            self.stream_change = (
                f"the timed code changed the current CUDA stream (from stream {self._stream:#x} "
                f"to {now:#x}): work on a stream other than the one the timing events are on may "
                "run outside the timed window; set the stream outside the timed code, or "
                "restore it (with torch.cuda.stream(s): ...) and join it back "
                "(torch.cuda.current_stream().wait_stream(s))"
            )
            self.notes.append(self.stream_change)

    def close(self) -> None:
        """Release the flush buffer; note a stream the timed code left current."""
        self._flush_buf = None
        with contextlib.suppress(Exception):  # close runs in finally: never mask an error
            self.note_stream_change()


class TorchCudaClock(_EventClock):
    """CUDA events on torch's current stream (CuPy work on the same stream is timed too);
    the filler is ``torch.cuda._sleep`` (a kernel that spins for a number of cycles)."""

    def __init__(self, torch: ModuleType, flush: bool) -> None:
        super().__init__()
        self.torch = torch
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        self.device = str(props.name)
        self.identity = torch_identity(props)
        self.max_sm_mhz = _mhz_from_khz(getattr(props, "clock_rate", 0))
        self._stream = self.current_stream()
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

    def reached(self, mark: object) -> bool:
        return bool(mark.query())  # type: ignore[attr-defined]  # cudaEventQuery

    def spin(self, cycles: int) -> None:
        self.torch.cuda._sleep(cycles)

    def flush(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.zero_()

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def current_stream(self) -> int:
        return int(self.torch.cuda.current_stream().cuda_stream)

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        """Capture ``number`` calls into a CUDA graph; return its replay."""
        replay = graph.capture_torch(self.torch, fn, number)
        self._note_graph(number)
        return replay


class CupyCudaClock(_EventClock):
    """The same method through CuPy events when torch has no CUDA; the filler is a
    clock64 spin kernel compiled with NVRTC (absent when NVRTC cannot compile)."""

    def __init__(self, cupy: ModuleType, flush: bool) -> None:
        super().__init__()
        self.cupy = cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        self.device = name.decode() if isinstance(name, bytes) else str(name)
        self.identity = _cupy_identity(props)
        self.max_sm_mhz = _mhz_from_khz(props.get("clockRate", 0))
        self._stream = self.current_stream()
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

    def reached(self, mark: object) -> bool:
        return bool(mark.done)  # type: ignore[attr-defined]  # cudaEventQuery

    def spin(self, cycles: int) -> None:
        self._spin((1,), (1,), (np.int64(cycles),))

    def flush(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.fill(0)

    def sync(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()

    def current_stream(self) -> int:
        return int(self.cupy.cuda.get_current_stream().ptr)

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        replay = graph.capture_cupy(self.cupy, fn, number)
        self._note_graph(number)
        return replay


def _mhz_from_khz(khz: Any) -> float:
    """CUDA's clock rate (kHz) in MHz; NaN when absent or not a positive number."""
    try:
        value = float(khz) / 1e3
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) and value > 0 else math.nan


def make_cuda_clock(flush: bool) -> Clock:
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


def torch_identity(props: object) -> dict[str, str]:
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


def _loaded_cudart() -> ctypes.CDLL | None:
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


def reset_persisting_l2(notes: list[str]) -> dict[str, str]:
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
