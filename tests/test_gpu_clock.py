"""The GPU side of the timing engine, run on the host: NVML through ctypes (and its
absence), the event clocks' queries, CUDA-graph capture failures and their clean-up
(against a stand-in for torch.cuda that behaves as torch's ``torch.cuda.graph`` does), and
side-stream warnings from real traces. The clock check's rule is in test_throttle.py; the
same paths on a real GPU are in test_timing_gpu.py."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from perflab.analysis.side_streams import kernels_per_stream, side_stream_warning
from perflab.capture import env, gpu_clock, graph, nvml
from perflab.capture.gpu_clock import TorchCudaClock
from perflab.capture.throttle import ThrottleWatch, active_pollers
from perflab.errors import InputError
from perflab.io import load_trace
from perflab.model.trace import EventKind

ABSENT_LIBRARY = "libperflab-no-such-nvml.so.1"


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither pynvml nor the driver's library (as on a machine without a driver)."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(nvml, "LIBRARY", ABSENT_LIBRARY)


class _FakeCudaClock:
    name = "cuda"
    max_sm_mhz = 1755.0

    def __init__(self) -> None:
        self.identity = {"uuid": "GPU-1"}


# --- NVML through ctypes ------------------------------------------------------------


def test_no_driver_library_is_a_clean_unavailable(no_nvml: None) -> None:
    found, why = nvml.load_nvml()
    assert found is None
    assert why is not None and why.startswith("pynvml is not installed and " + ABSENT_LIBRARY)


def test_env_reports_no_nvml_clocks_without_the_library(no_nvml: None) -> None:
    assert env._nvml_clocks(object()) == {}


def _error_string(code: int) -> bytes:
    return {6: b"Not Found"}.get(code, b"Unknown Error")


class _FakeLibrary:
    """The C functions of libnvidia-ml, written in Python: they fill what ctypes passes
    by reference (``byref(x)._obj`` is ``x``) and return NVML codes."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.nvmlErrorString = _error_string  # a plain function: the binding sets restype

    def nvmlInit_v2(self) -> int:
        self.calls.append("init")
        return 0

    def nvmlDeviceGetHandleByUUID(self, uuid: Any, handle: Any) -> int:
        if uuid.value != b"GPU-1":
            return 6  # NVML_ERROR_NOT_FOUND
        handle._obj.value = 0x1234
        return 0

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, kind: Any, mhz: Any) -> int:
        assert handle.value == 0x1234
        mhz._obj.value = {1: 1980, 2: 3201}[kind.value]
        return 0

    def nvmlDeviceGetViolationStatus(self, handle: Any, policy: Any, status: Any) -> int:
        status._obj.violationTime = 7_000 + policy.value
        return 0

    def nvmlSystemGetDriverVersion(self, buf: Any, size: Any) -> int:
        ctypes.memmove(buf, b"580.65\0", 7)
        return 0


def test_ctypes_binding_passes_and_reads_values() -> None:
    lib = _FakeLibrary()
    api = nvml.CtypesNvml(lib)
    api.nvmlInit()
    handle = gpu_clock.nvml_handle(api, {"uuid": "GPU-1"})
    assert handle is not None and handle.value == 0x1234
    assert api.nvmlDeviceGetMaxClockInfo(handle, api.NVML_CLOCK_SM) == 1980
    assert api.nvmlDeviceGetMaxClockInfo(handle, api.NVML_CLOCK_MEM) == 3201
    status = api.nvmlDeviceGetViolationStatus(handle, api.NVML_PERF_POLICY_THERMAL)
    assert status.violationTime == 7_001
    assert api.nvmlSystemGetDriverVersion() == "580.65"
    assert lib.calls == ["init"]


def test_ctypes_binding_errors_name_the_call() -> None:
    api = nvml.CtypesNvml(_FakeLibrary())
    with pytest.raises(
        nvml.NvmlError, match=r"nvmlDeviceGetHandleByUUID: Not Found \(NVML error 6\)"
    ):
        api.nvmlDeviceGetHandleByUUID("GPU-2")
    with pytest.raises(nvml.NvmlError, match="nvmlShutdown: not in this driver's NVML"):
        api.nvmlShutdown()
    assert gpu_clock.nvml_handle(api, {"uuid": "GPU-2"}) is None  # no match: None, no error


FAKE_NVML_C = r"""
#include <stdio.h>
#include <string.h>
typedef struct { unsigned long long referenceTime, violationTime; } nvmlViolationTime_t;
typedef void *nvmlDevice_t;
static int device;
static unsigned long long power_ns;
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int code) { return code == 6 ? "Not Found" : "Unknown Error"; }
int nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
    if (strcmp(uuid, "GPU-1") != 0) return 6;
    *d = &device;
    return 0;
}
int nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int kind, unsigned int *mhz) {
    if (d != &device) return 2;
    *mhz = kind == 1 ? 1980 : 3201;
    return 0;
}
int nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t d, int kind, unsigned int *mhz) {
    if (d != &device) return 2;
    *mhz = kind == 1 ? 1755 : 3201;
    return 0;
}
int nvmlDeviceGetClockInfo(nvmlDevice_t d, int kind, unsigned int *mhz) {
    if (d != &device) return 2;
    *mhz = kind == 1 ? 1200 : 3201;
    return 0;
}
int nvmlDeviceGetViolationStatus(nvmlDevice_t d, int policy, nvmlViolationTime_t *v) {
    v->referenceTime = 1;
    v->violationTime = policy == 0 ? power_ns : 0;
    if (policy == 0) power_ns += 3000000ULL;
    return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *mask) {
    *mask = 0x4ULL;
    return 0;
}
int nvmlSystemGetDriverVersion(char *buf, unsigned int size) {
    snprintf(buf, size, "580.65.06");
    return 0;
}
"""


def test_throttle_check_through_a_compiled_nvml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ctypes binding against a real shared library with NVML's C signatures (a
    stand-in compiled here): handles, clocks, the violation struct and error text."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in library")
    source, library = tmp_path / "nvml.c", tmp_path / "libfake-nvml.so"
    source.write_text(FAKE_NVML_C)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(library), str(source)],
        check=True,
        timeout=120,
        start_new_session=True,
        capture_output=True,
    )
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(nvml, "LIBRARY", str(library))
    api, why = nvml.load_nvml()
    assert why is None and isinstance(api, nvml.CtypesNvml)
    with pytest.raises(nvml.NvmlError, match="Not Found"):
        api.nvmlDeviceGetHandleByUUID("GPU-2")
    assert api.nvmlSystemGetDriverVersion() == "580.65.06"
    watch = ThrottleWatch.start(_FakeCudaClock())
    try:
        windows = []
        for _ in range(2):  # two samples of 3 ms, NVML polled meanwhile
            t0 = time.perf_counter_ns()
            time.sleep(0.003)
            windows.append((t0, time.perf_counter_ns()))
        out = watch.finish(*zip(*windows, strict=True))
    finally:
        watch.close()
    assert active_pollers() == 0
    assert out["default_sm_mhz"] == 1755.0  # the default applications clock, from C
    assert out["default_from"] == "NVML's default applications SM clock"
    # every read: the power cap on, the power counter 3 ms further, the SM clock at 1200
    # MHz, below 75% of 1755: NVML confirms the throttling, so both are dropped
    assert out["drop"].tolist() == [True, True]
    assert out["window_sm_mhz"] == {"min": 1200.0, "median": 1200.0, "max": 1200.0}
    assert out["violation_ns"]["power"] >= 3_000_000
    assert out["reasons_after"] == out["reasons_seen"] == ["software power cap"]
    assert not any(w.startswith("NVML unavailable") for w in out["warnings"])


def test_env_names_maximum_clocks_as_maximum(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _FakeLibrary()
    lib.nvmlShutdown = lambda: 0  # type: ignore[attr-defined]
    monkeypatch.setattr(nvml, "load_nvml", lambda: (nvml.CtypesNvml(lib), None))
    props = type("Props", (), {"uuid": "GPU-1"})()
    clocks = env._nvml_clocks(props)
    assert clocks == {"sm_clock_max_mhz": 1980, "memory_clock_max_mhz": 3201, "driver": "580.65"}


def test_cupy_device_names_maximum_clocks_as_maximum() -> None:
    props = {
        "name": b"GPU",
        "major": 9,
        "minor": 0,
        "multiProcessorCount": 132,
        "totalGlobalMem": 1,
        "l2CacheSize": 1,
        "clockRate": 1_980_000,
        "memoryClockRate": 3_201_000,
    }
    runtime = type("Runtime", (), {"getDeviceProperties": staticmethod(lambda i: props)})
    cupy = type("Cupy", (), {"cuda": type("Cuda", (), {"runtime": runtime})})
    dev = env._cupy_device(cupy, 0)
    assert dev["sm_clock_max_mhz"] == 1980 and dev["memory_clock_max_mhz"] == 3201
    assert "sm_clock_mhz" not in dev


# --- CUDA-graph capture ---------------------------------------------------------------


class _Stream:
    handles = iter(range(0x10, 0x1000, 0x10))

    def __init__(self, name: str) -> None:
        self.name = name
        self.cuda_stream = 0 if name == "default" else next(self.handles)

    def wait_stream(self, other: _Stream) -> None:
        pass

    def __repr__(self) -> str:
        return f"<stream {self.name}>"


class _FakeCuda:
    """torch.cuda as far as capture goes. ``graph(g)`` behaves as torch's does: its exit
    ends the capture, then restores the stream, so an error while ending it leaves the
    capture stream current. ``item()`` stands for a host sync: under capture CUDA refuses
    it and the capture is invalidated."""

    def __init__(self) -> None:
        self.default = _Stream("default")
        self.current = self.default
        self.capturing = False
        self.invalidated = False
        self.capture_stream = _Stream("capture")
        self.replays = 0

    def Stream(self) -> _Stream:
        return _Stream("side")

    def current_stream(self) -> _Stream:
        return self.current

    def set_stream(self, stream: _Stream) -> None:
        self.current = stream

    def synchronize(self) -> None:
        if self.capturing:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    def is_current_stream_capturing(self) -> bool:
        return self.capturing and self.current is self.capture_stream

    @contextmanager
    def stream(self, s: _Stream) -> Iterator[None]:
        before, self.current = self.current, s
        try:
            yield
        finally:
            self.current = before

    def item(self) -> float:
        if self.capturing:
            self.invalidated = True
            raise RuntimeError(
                "CUDA error: operation not permitted when stream is capturing\n"
                "CUDA kernel errors might be asynchronously reported at some other API call"
            )
        return 1.0

    def CUDAGraph(self) -> Any:
        cuda = self

        class Graph:
            def capture_begin(self) -> None:
                cuda.capturing, cuda.invalidated = True, False

            def capture_end(self) -> None:
                cuda.capturing = False  # cudaStreamEndCapture ends it, even on failure
                if cuda.invalidated:
                    raise RuntimeError(
                        "CUDA error: operation failed due to a previous error during capture"
                    )

            def replay(self) -> None:
                cuda.replays += 1

        return Graph()

    def graph(self, g: Any) -> Any:
        cuda = self

        class Capture:
            def __enter__(self) -> None:
                self.before, cuda.current = cuda.current, cuda.capture_stream
                g.capture_begin()

            def __exit__(self, *exc: object) -> None:
                g.capture_end()  # as torch: if this raises, the stream is not restored
                cuda.current = self.before

        return Capture()


def _torch(cuda: _FakeCuda) -> Any:
    return type("Torch", (), {"cuda": cuda})


def test_a_sync_under_capture_is_a_perflab_error_and_the_next_capture_works() -> None:
    cuda = _FakeCuda()
    with pytest.raises(InputError) as caught:
        graph.capture_torch(_torch(cuda), cuda.item, 3)
    message = str(caught.value)
    assert message.startswith(graph.SYNC_MESSAGE)
    # the first error, briefly: its first line only
    assert message.endswith("(torch: CUDA error: operation not permitted when stream is capturing)")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    # cleaned up: capture over, the stream the run started on is current again
    assert not cuda.capturing
    assert cuda.current is cuda.default
    replay = graph.capture_torch(_torch(cuda), lambda: None, 3)
    replay()
    assert cuda.replays == 1 and cuda.current is cuda.default


def test_an_interrupt_under_capture_is_cleaned_up_and_passed_on() -> None:
    cuda = _FakeCuda()
    calls = [0]

    def interrupted() -> None:
        calls[0] += 1
        if cuda.capturing:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        graph.capture_torch(_torch(cuda), interrupted, 2)
    assert calls[0] == 2  # the side-stream warm-up, then the first captured call
    assert not cuda.capturing and cuda.current is cuda.default


def test_capture_errors_say_why() -> None:
    def raised(*messages: str) -> BaseException:
        """The last of ``messages``, raised while handling the ones before it (as torch
        raises ending an invalidated capture)."""
        exc: BaseException | None = None
        for text in messages:
            new = RuntimeError(text)
            new.__context__ = exc
            exc = new
        assert exc is not None
        return exc

    sync = graph.capture_error(
        raised(
            "CUDA error: operation not permitted when stream is capturing",
            "CUDA error: operation failed due to a previous error during capture",
        )
    )
    assert str(sync).endswith(
        "(torch: CUDA error: operation not permitted when stream is capturing)"
    )
    pageable = graph.capture_error(
        raised("Cannot copy between CPU and CUDA tensors during CUDA graph capture unless ...")
    )
    assert str(pageable).startswith(graph.SYNC_MESSAGE)
    unjoined = graph.capture_error(raised("cudaErrorStreamCaptureUnjoined: ..."), "cupy")
    assert str(unjoined).startswith(graph.UNJOINED_MESSAGE)
    assert "(cupy: cudaErrorStreamCaptureUnjoined: ...)" in str(unjoined)
    other = graph.capture_error(ValueError("x" * 500))
    assert str(other).startswith(graph.OTHER_MESSAGE)
    assert len(str(other)) < len(graph.OTHER_MESSAGE) + graph.MAX_CAUSE_CHARS + 20


class _Props:
    name = "Fake GPU"
    uuid = "GPU-1"
    L2_cache_size = 1 << 20
    clock_rate = 1_980_000  # kHz


def _torch_clock(cuda: _FakeCuda) -> TorchCudaClock:
    cuda.current_device = lambda: 0  # type: ignore[attr-defined]
    cuda.get_device_properties = lambda index: _Props()  # type: ignore[attr-defined]
    return TorchCudaClock(_torch(cuda), flush=False)


def test_a_one_call_graph_says_what_it_saves() -> None:
    assert graph.one_call_note(2) is None
    cuda = _FakeCuda()
    clock = _torch_clock(cuda)
    clock.capture_graph(lambda: None, 50)
    assert graph.ONE_CALL_NOTE not in clock.notes
    clock.capture_graph(lambda: None, 1)
    assert graph.ONE_CALL_NOTE in clock.notes


def test_torch_clock_knows_the_filler_cycles_and_the_maximum_clock() -> None:
    clock = _torch_clock(_FakeCuda())
    assert clock.max_sm_mhz == 1980.0
    clock._cycles_per_ns = 1.98  # as calibrated at 1980 MHz
    assert clock.filler_cycles(50_000.0) == 99_000


class _Event:
    """A CUDA event as torch and CuPy show it: ``query()``/``done`` say whether the device
    has got to it (cudaEventQuery)."""

    def __init__(self, done: bool) -> None:
        self.done = done

    def query(self) -> bool:
        return self.done


def test_event_clocks_ask_whether_the_device_reached_a_mark() -> None:
    clock = _torch_clock(_FakeCuda())
    assert clock.reached(_Event(True)) is True
    assert clock.reached(_Event(False)) is False
    cupy_reached = gpu_clock.CupyCudaClock.reached
    assert cupy_reached(clock, _Event(False)) is False  # type: ignore[arg-type]
    assert cupy_reached(clock, _Event(True)) is True  # type: ignore[arg-type]


def test_a_stream_left_current_by_the_timed_code_is_noted() -> None:
    cuda = _FakeCuda()
    clock = _torch_clock(cuda)
    cuda.set_stream(_Stream("default"))  # another object for the same stream: no change
    clock.close()
    assert not any("changed the current CUDA stream" in n for n in clock.notes)
    clock = _torch_clock(cuda)
    user = _Stream("user")
    cuda.set_stream(user)  # what torch.cuda.set_stream(s) in a cell does
    clock.close()
    expected = (
        f"the timed code changed the current CUDA stream (from stream 0x0 to "
        f"{user.cuda_stream:#x}): work on a stream other than the one the timing events"
    )
    assert any(n.startswith(expected) for n in clock.notes), clock.notes


# --- work on other streams, from a trace ----------------------------------------------


def test_side_streams_are_counted_in_a_real_trace(trace_data: Any) -> None:
    trace = load_trace(trace_data / "kineto" / "sampled_4streams.json.gz")
    counts = kernels_per_stream(trace)
    assert list(counts.values()) == sorted(counts.values(), reverse=True)
    assert len(counts) == 4 and sum(counts.values()) == int((trace.kind == EventKind.KERNEL).sum())
    warning = side_stream_warning(trace)
    assert warning is not None
    assert warning.startswith("the traced run put kernels on 4 streams (GPU 0 stream 7: ")


def test_one_stream_gives_no_warning(trace_data: Any) -> None:
    trace = load_trace(trace_data / "kineto" / "triton_example_a100.json.gz")
    assert len(kernels_per_stream(trace)) == 1
    assert side_stream_warning(trace) is None
