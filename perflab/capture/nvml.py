"""NVML, the driver's management library, for the few calls perflab makes: pynvml when it
is installed, else ``libnvidia-ml.so.1`` through ctypes (torch's wheels do not bring
pynvml, but every NVIDIA driver installs the library), so the clock checks run wherever
a driver does.

:func:`load_nvml` returns an object with pynvml's names for those calls (``nvmlInit``,
``nvmlDeviceGetClockInfo``, ...), or None and why. Nothing here starts NVML on import.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

LIBRARY = "libnvidia-ml.so.1"

NVML_SUCCESS = 0
NVML_CLOCK_SM = 1  # nvmlClockType_t
NVML_CLOCK_MEM = 2
NVML_PERF_POLICY_POWER = 0  # nvmlPerfPolicyType_t
NVML_PERF_POLICY_THERMAL = 1
# nvmlClocksEventReasons (formerly "clocks throttle reasons") that mean a power or thermal
# limit holds the clocks down; the others (GPU idle, applications clocks setting, sync
# boost, display clock setting) say the clock was chosen, not held down
THROTTLE_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
TEXT_BUFFER = 96  # NVML_DEVICE_UUID_V2_BUFFER_SIZE; driver versions need 80


class NvmlError(Exception):
    """An NVML call returned an error (its code and NVML's text for it)."""

    def __init__(self, call: str, code: int, text: str) -> None:
        self.code = code
        super().__init__(f"{call}: {text} (NVML error {code})")


class _ViolationTime(ctypes.Structure):  # nvmlViolationTime_t
    _fields_ = (("referenceTime", ctypes.c_ulonglong), ("violationTime", ctypes.c_ulonglong))


class CtypesNvml:
    """pynvml's names for the calls perflab makes, over ``libnvidia-ml.so.1`` (or any
    object with the library's functions, for tests). Device handles are ``c_void_p``."""

    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_PERF_POLICY_POWER = NVML_PERF_POLICY_POWER
    NVML_PERF_POLICY_THERMAL = NVML_PERF_POLICY_THERMAL

    def __init__(self, lib: object) -> None:
        self._lib = lib
        self._error_string = getattr(lib, "nvmlErrorString", None)
        if self._error_string is not None:
            self._error_string.restype = ctypes.c_char_p  # const char *, not int

    def _call(self, name: str, *args: object) -> None:
        func: Callable[..., int] | None = getattr(self._lib, name, None)
        if func is None:
            raise NvmlError(name, -1, "not in this driver's NVML")
        code = int(func(*args))
        if code != NVML_SUCCESS:
            raise NvmlError(name, code, self._error_text(code))

    def _error_text(self, code: int) -> str:
        raw = self._error_string(code) if self._error_string is not None else None
        return raw.decode(errors="replace") if isinstance(raw, bytes) else "unknown error"

    # --- library -------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._call("nvmlInit_v2")

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        buf = ctypes.create_string_buffer(TEXT_BUFFER)
        self._call("nvmlSystemGetDriverVersion", buf, ctypes.c_uint(TEXT_BUFFER))
        return buf.value.decode(errors="replace")

    # --- handles -------------------------------------------------------------------
    def _handle(self, name: str, *args: object) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self._call(name, *args, ctypes.byref(handle))
        return handle

    def nvmlDeviceGetHandleByIndex(self, index: int) -> ctypes.c_void_p:
        return self._handle("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index))

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> ctypes.c_void_p:
        return self._handle("nvmlDeviceGetHandleByUUID", _c_text(uuid))

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str | bytes) -> ctypes.c_void_p:
        return self._handle("nvmlDeviceGetHandleByPciBusId_v2", _c_text(bus_id))

    def nvmlDeviceGetUUID(self, handle: ctypes.c_void_p) -> str:
        buf = ctypes.create_string_buffer(TEXT_BUFFER)
        self._call("nvmlDeviceGetUUID", handle, buf, ctypes.c_uint(TEXT_BUFFER))
        return buf.value.decode(errors="replace")

    # --- clocks --------------------------------------------------------------------
    def _clock(self, name: str, handle: ctypes.c_void_p, kind: int) -> int:
        mhz = ctypes.c_uint(0)
        self._call(name, handle, ctypes.c_int(kind), ctypes.byref(mhz))
        return int(mhz.value)

    def nvmlDeviceGetClockInfo(self, handle: ctypes.c_void_p, kind: int) -> int:
        return self._clock("nvmlDeviceGetClockInfo", handle, kind)

    def nvmlDeviceGetMaxClockInfo(self, handle: ctypes.c_void_p, kind: int) -> int:
        return self._clock("nvmlDeviceGetMaxClockInfo", handle, kind)

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: ctypes.c_void_p, kind: int) -> int:
        return self._clock("nvmlDeviceGetDefaultApplicationsClock", handle, kind)

    def _reasons(self, name: str, handle: ctypes.c_void_p) -> int:
        mask = ctypes.c_ulonglong(0)
        self._call(name, handle, ctypes.byref(mask))
        return int(mask.value)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: ctypes.c_void_p) -> int:
        return self._reasons("nvmlDeviceGetCurrentClocksEventReasons", handle)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: ctypes.c_void_p) -> int:
        return self._reasons("nvmlDeviceGetCurrentClocksThrottleReasons", handle)

    def nvmlDeviceGetViolationStatus(self, handle: ctypes.c_void_p, policy: int) -> _ViolationTime:
        status = _ViolationTime()
        self._call(
            "nvmlDeviceGetViolationStatus", handle, ctypes.c_int(policy), ctypes.byref(status)
        )
        return status


def _c_text(value: str | bytes) -> ctypes.c_char_p:
    return ctypes.c_char_p(value.encode() if isinstance(value, str) else value)


def load_nvml(library: str | None = None) -> tuple[Any, str | None]:
    """``(nvml, None)``: pynvml, else a :class:`CtypesNvml` over ``library`` (default
    :data:`LIBRARY`); or ``(None, why)`` when neither is there (no NVIDIA driver)."""
    library = library or LIBRARY
    try:
        import pynvml
    except ImportError:
        pass
    else:
        return pynvml, None
    try:
        lib = ctypes.CDLL(library)
    except OSError as exc:
        return None, f"pynvml is not installed and {library} could not be loaded ({exc})"
    return CtypesNvml(lib), None
