"""The logic of the GPU clock checks, run on the host: the SM clock of each sample from its
queue filler and the drop rule, NVML through ctypes (and its absence), CUDA-graph capture
failures and their clean-up (against a stand-in for torch.cuda that behaves as torch's
``torch.cuda.graph`` does), and side-stream warnings from real traces. The same paths on
a real GPU are in test_timing_gpu.py."""

from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perflab.analysis.side_streams import kernels_per_stream, side_stream_warning
from perflab.capture import env, gpu_clock, graph, nvml, timer
from perflab.capture.gpu_clock import (
    ThrottleWatch,
    TorchCudaClock,
    below_clock,
    clock_mhz_from_filler,
)
from perflab.capture.timer import HostQueueClock, time_function
from perflab.errors import InputError
from perflab.io import load_trace
from perflab.model.trace import EventKind

ABSENT_LIBRARY = "libperflab-no-such-nvml.so.1"


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither pynvml nor the driver's library (as on a machine without a driver)."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(nvml, "LIBRARY", ABSENT_LIBRARY)


# --- the SM clock of a sample, from its filler ----------------------------------------


def test_clock_from_filler_is_cycles_over_time() -> None:
    # 1,980,000 cycles in 1 ms: 1980 MHz; 1.5 ms: 1320 MHz
    mhz = clock_mhz_from_filler(1_980_000, [1e6, 1.5e6, 0.0, math.nan, -5.0])
    assert mhz[:2].tolist() == pytest.approx([1980.0, 1320.0])
    assert np.isnan(mhz[2:]).all()  # no filler, or no time: no clock
    assert np.isnan(clock_mhz_from_filler(0, [1e6])).all()


def test_samples_below_three_quarters_of_the_default_clock_are_dropped() -> None:
    clocks = [1980.0, 1500.0, 1485.0, 1484.9, math.nan, 700.0]
    assert below_clock(clocks, 1980.0).tolist() == [False, False, False, True, False, True]
    assert not below_clock(clocks, math.nan).any()  # no reference: nothing dropped
    assert not below_clock(clocks, 0.0).any()


class _FakeNvml:
    """pynvml's surface, with counters that rise during the run."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PERF_POLICY_POWER = 0
    NVML_PERF_POLICY_THERMAL = 1

    def __init__(self) -> None:
        self.power_ns = 0
        self.shut = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        return f"handle of {uuid}"

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: str, kind: int) -> int:
        return 1980

    def nvmlDeviceGetViolationStatus(self, handle: str, policy: int) -> Any:
        status = type("Status", (), {})()
        status.violationTime = 0
        if policy == self.NVML_PERF_POLICY_POWER:
            status.violationTime = self.power_ns
            self.power_ns += 2_000_000  # 2 ms more each time it is read
        return status

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        return 0x4 | 0x40


class _FakeCudaClock:
    name = "cuda"
    max_sm_mhz = 1755.0

    def __init__(self) -> None:
        self.identity = {"uuid": "GPU-1"}

    def filler_cycles(self, ns: float) -> int:
        return int(ns * 1.98)  # a filler calibrated at 1980 MHz


def test_watch_drops_slow_windows_and_reads_nvml_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeNvml()
    monkeypatch.setattr(nvml, "load_nvml", lambda: (fake, None))
    watch = ThrottleWatch.start(_FakeCudaClock())
    lead = 50_000.0
    # the filler's event time per sample: at 1980, 1980, 1320 (throttled), none
    out = watch.finish([lead, lead, 1.5 * lead, 0.0], lead)
    watch.close()
    assert fake.shut
    assert out["checked"] is True
    assert out["drop"].tolist() == [False, False, True, False]
    assert out["dropped_samples"] == 1
    assert out["default_sm_mhz"] == 1980.0  # NVML's default clock wins over CUDA's maximum
    assert out["window_sm_mhz"] == {"min": 1320.0, "median": 1980.0, "max": 1980.0}
    assert out["violation_ns"] == {"power": 2_000_000}
    assert out["reasons_after"] == ["software power cap", "hardware thermal slowdown"]
    assert out["warnings"][0].startswith("dropped 1 of 4 samples run below 75% of the default")
    assert "lowest 1320 MHz" in out["warnings"][0]
    assert out["warnings"][1] == "clocks throttled during the run: power 2.0 ms"
    assert "queue filler" in out["method"] and "NVML" in out["method"]


def test_without_nvml_the_filler_clock_is_checked_against_cudas_maximum(no_nvml: None) -> None:
    watch = ThrottleWatch.start(_FakeCudaClock())
    lead = 50_000.0
    out = watch.finish([lead, 3 * lead], lead)  # 1980 MHz, then 660 MHz
    watch.close()
    assert out["checked"] is True
    assert out["default_sm_mhz"] == 1755.0
    assert out["default_from"] == "the CUDA device's maximum SM clock"
    assert out["drop"].tolist() == [False, True]
    assert out["violation_ns"] == {}
    assert any(
        w.startswith("NVML unavailable (pynvml is not installed and " + ABSENT_LIBRARY)
        for w in out["warnings"]
    )


def test_nothing_to_check_says_why(no_nvml: None) -> None:
    class NoFiller:
        name = "cuda"

    out = ThrottleWatch.start(NoFiller()).finish([0.0, 0.0], 0.0)
    assert out["checked"] is False
    assert out["why"].startswith("no queue filler to measure the SM clock, and pynvml")
    assert out["warnings"] == [f"throttle check unavailable: {out['why']}"]


def test_without_a_filler_nvml_alone_is_checked_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "load_nvml", lambda: (_FakeNvml(), None))
    watch = ThrottleWatch.start(_FakeCudaClock())
    out = watch.finish([0.0, 0.0], 0.0)  # fill_queue=False: no filler ran
    watch.close()
    assert out["checked"] is True and out["window_sm_mhz"] is None
    assert out["method"] == "NVML violation counters before/after"
    assert out["warnings"][0].startswith("SM clock per sample not measured (no queue filler)")
    assert not out["drop"].any()


def test_without_a_default_clock_nothing_is_dropped_and_it_says_so(no_nvml: None) -> None:
    clock = _FakeCudaClock()
    clock.max_sm_mhz = math.nan  # CUDA gave no clock rate either
    watch = ThrottleWatch.start(clock)
    out = watch.finish([50_000.0, 500_000.0], 50_000.0)
    assert out["window_sm_mhz"] == {"min": 198.0, "median": 1089.0, "max": 1980.0}
    assert not out["drop"].any() and out["default_sm_mhz"] is None
    assert out["warnings"][0].startswith("SM clock per sample measured but not checked")


class _ThrottlingQueue(HostQueueClock):
    """The host queue as a 'cuda' clock whose filler is a busy spin that runs 10x as
    long as asked on every other sample (a clock at a tenth of its speed)."""

    name = "cuda"
    max_sm_mhz = 1000.0
    flushes = False

    def __init__(self) -> None:
        super().__init__()
        self.holds = 0

    def filler_cycles(self, ns: float) -> int:
        return int(ns * 2.0)  # 2000 MHz when the spin takes the time asked

    def hold(self, ns: float) -> None:
        self.holds += 1
        stretch = 10.0 if self.holds % 2 == 0 else 1.0

        def spin() -> None:
            end = time.perf_counter_ns() + ns * stretch
            while time.perf_counter_ns() < end:
                pass

        self.submit(spin)


def test_slow_fillers_drop_their_samples_through_the_timer(
    monkeypatch: pytest.MonkeyPatch, no_nvml: None
) -> None:
    """The real sampling loop on a real queue: each sample's filler is event-timed, and
    the samples after a filler that ran at a tenth of the clock are dropped and counted."""
    made: list[_ThrottlingQueue] = []

    def make(opts: Any) -> _ThrottlingQueue:
        made.append(_ThrottlingQueue())
        return made[0]

    monkeypatch.setattr(timer, "_make_clock", make)
    r = time_function(lambda: None, repeat=20, warmup_ms=0, number=1)
    throttle = r.throttle
    total = r.options["samples"]
    assert total == 20
    dropped = throttle["dropped_samples"]
    # half the samples ran at 200 MHz (< 750): always dropped; a fast one only when the
    # worker thread was descheduled for over 2.6x its filler
    assert dropped >= total // 2
    assert r.n == total - dropped
    assert any(w.startswith(f"dropped {dropped} of {total} samples") for w in r.warnings)
    assert throttle["window_sm_mhz"]["min"] <= 200.0
    assert "drop" not in throttle  # applied by the timer, not saved


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
    lead = 50_000.0
    out = watch.finish([lead, 2 * lead], lead)  # 1980 MHz, then 990 MHz
    watch.close()
    assert out["default_sm_mhz"] == 1755.0  # the default applications clock, from C
    assert out["default_from"] == "NVML's default applications SM clock"
    assert out["drop"].tolist() == [False, True]
    assert out["violation_ns"] == {"power": 3_000_000}
    assert out["reasons_after"] == ["software power cap"]
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
    assert clock_mhz_from_filler(clock.filler_cycles(50_000.0), [50_000.0])[0] == 1980.0


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
