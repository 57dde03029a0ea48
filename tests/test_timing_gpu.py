"""The timing engine on a real GPU (skipped without one; run by scripts/gpu-check).

These are the only tests of the CUDA paths: events and their queries, the torch.cuda._sleep
queue filler, host-bound flags on a real launch queue, graph replay and its capture errors,
the SM clock of each sample polled from NVML, the persisting-L2 reset, NVML (pynvml or
libnvidia-ml through ctypes) and work on other streams. The logic they feed is tested on
the host in test_timing_engine.py, test_throttle.py and test_gpu_clock.py."""

from __future__ import annotations

import argparse
import ctypes
import sys
from typing import Any

import numpy as np
import pytest

from perflab.capture import env, gpu_clock, graph, nvml
from perflab.capture.timer import (
    ESTIMATE_SAMPLES,
    PROBE_SAMPLES,
    TimingOptions,
    measure,
    time_function,
)
from perflab.errors import InputError

pytestmark = pytest.mark.gpu


def test_cuda_events_time_a_matmul() -> None:
    import torch

    a = torch.randn(2048, 2048, device="cuda")
    r = time_function(lambda: a @ a, budget_ms=50)
    assert r.backend == "cuda"
    assert r.options["flush_l2"] is True and r.options["cold"] == "every call"
    # 2*2048^3 FLOP cannot finish faster than 1 us on any GPU that exists
    assert r.median_ns > 1_000
    assert "no GPU" not in " ".join(r.warnings)
    assert r.stop_reason in ("noise", "budget", "max_samples")
    assert r.host_ns is not None and r.host_ns.size == r.n
    assert isinstance(r.throttle.get("checked"), bool)


def test_flush_makes_a_memory_bound_kernel_slower_or_equal() -> None:
    import torch

    x = torch.randn(8 << 20, device="cuda")  # 32 MiB, fits in an H100/H200 L2 (50 MiB)
    warm = time_function(lambda: x.sum(), flush_l2=False, budget_ms=50)
    cold = time_function(lambda: x.sum(), flush_l2=True, budget_ms=50)
    assert cold.compare(warm).ratio >= 0.95


def test_graph_warmup_is_counted_per_call() -> None:
    """Every kernel the engine ran is counted: first call, estimate, side-stream warm-up
    before capture, then replays of 50 calls (warm-up, host-cost probe, samples)."""
    import torch

    x = torch.zeros(1, device="cuda", dtype=torch.float64)
    r = time_function(lambda: x.add_(1.0), graph=True, number=50, repeat=10, flush_l2=False)
    torch.cuda.synchronize()
    assert r.number == 50 and r.n == 10
    warm = r.options["warmup_calls"]
    assert warm % 50 == 0
    expected = 1 + ESTIMATE_SAMPLES + 1 + warm + (PROBE_SAMPLES + 10) * 50
    assert x.item() == expected
    # the warm-up lasts about its 25 ms budget, not 50 times that
    assert warm * r.median_ns < 3 * 25e6


def test_tiny_kernel_is_not_host_bound_with_the_filler() -> None:
    import torch

    small = torch.randn(1024, device="cuda")
    filled = time_function(lambda: small.add_(1.0), flush_l2=False, budget_ms=50)
    assert filled.options["queue_filler_ns"] > 0
    assert filled.options["host_bound_samples"] <= 0.1 * filled.n
    bare = time_function(lambda: small.add_(1.0), flush_l2=False, budget_ms=50, fill_queue=False)
    assert bare.options["queue_filler_ns"] == 0
    assert bare.options["host_bound_samples"] > 0  # a ~2 us kernel, ~10 us of host issue
    assert bare.options["back_to_back_ns"] is not None
    assert any(w.startswith("host-bound") for w in bare.warnings)


def test_a_host_held_back_by_the_full_launch_queue_is_not_host_bound() -> None:
    """Each sample: a filler sized for the host's issue (tens of us) and a ~0.2 ms kernel.
    The host issues far faster than the GPU runs, so the launch queue fills and the host
    then waits for room: its issue time grows past the filler in most samples, yet the GPU
    has every sample queued ahead of it and never waits."""
    import torch

    r = time_function(
        lambda: torch.cuda._sleep(400_000), flush_l2=False, repeat=3000, budget_ms=5000
    )
    assert r.host_ns is not None
    held_back = int((r.host_ns > r.options["queue_filler_ns"]).sum())
    assert held_back > r.n // 2, (held_back, r.n)
    assert r.options["host_bound_samples"] == 0
    assert not any(w.startswith("host-bound") for w in r.warnings)


def test_event_queries_say_whether_the_gpu_got_there() -> None:
    import torch

    clock = gpu_clock.TorchCudaClock(torch, flush=False)
    try:
        clock.hold(50e6)  # 50 ms of spinning ahead of the mark
        mark = clock.mark()
        assert not clock.reached(mark)
        clock.sync()
        assert clock.reached(mark)
    finally:
        clock.close()


def test_sleep_kernel_calibration_is_a_plausible_clock() -> None:
    import torch

    clock = gpu_clock.TorchCudaClock(torch, flush=False)
    try:
        assert clock.can_fill
        rate = clock._calibrate()  # SM cycles per ns: the clock in GHz
        assert 0.3 < rate < 4.0
    finally:
        clock.close()


def test_persisting_l2_carve_out_is_reset() -> None:
    import torch

    torch.zeros(1, device="cuda")  # the CUDA context exists
    lib = gpu_clock._loaded_cudart()
    assert lib is not None, "torch's CUDA runtime library should be mapped"
    major, _ = torch.cuda.get_device_capability()
    if major < 8:
        pytest.skip("persisting L2 needs compute capability 8.0+")
    assert lib.cudaDeviceSetLimit(gpu_clock.CUDA_LIMIT_PERSISTING_L2, ctypes.c_size_t(4 << 20)) == 0
    a = torch.randn(1024, device="cuda")
    r = time_function(lambda: a.add_(1.0), budget_ms=20)
    assert any("persisting-L2 carve-out" in w for w in r.warnings)
    assert r.options["persisting_l2"].startswith("reset from")
    size = ctypes.c_size_t(1)
    assert lib.cudaDeviceGetLimit(ctypes.byref(size), gpu_clock.CUDA_LIMIT_PERSISTING_L2) == 0
    assert size.value == 0


def test_throttle_check_reads_this_gpu_through_nvml() -> None:
    """NVML (pynvml, else libnvidia-ml through ctypes) is there wherever the driver is."""
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    r = time_function(lambda: a @ a, budget_ms=50)
    assert r.throttle["checked"] is True, r.throttle
    assert r.throttle["method"].startswith("NVML polled every 1 ms during the samples")
    assert r.throttle["default_from"].startswith("NVML")
    assert r.throttle["polls"] > 10
    assert isinstance(r.throttle["violation_ns"], dict)
    assert not any(w.startswith("NVML unavailable") for w in r.warnings)


def test_ctypes_nvml_finds_this_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setitem(sys.modules, "pynvml", None)  # the ctypes binding, even if installed
    api, why = nvml.load_nvml()
    assert why is None and isinstance(api, nvml.CtypesNvml)
    clock = gpu_clock.TorchCudaClock(torch, flush=False)
    api.nvmlInit()
    try:
        handle = gpu_clock.nvml_handle(api, clock.identity)
        assert handle is not None
        assert api.nvmlDeviceGetUUID(handle) == clock.identity["uuid"]
        top = api.nvmlDeviceGetMaxClockInfo(handle, api.NVML_CLOCK_SM)
        assert 500 < top < 4000
        assert 0 < api.nvmlDeviceGetClockInfo(handle, api.NVML_CLOCK_SM) <= top
        assert (
            api.nvmlDeviceGetViolationStatus(handle, api.NVML_PERF_POLICY_POWER).violationTime >= 0
        )
        assert api.nvmlSystemGetDriverVersion()
    finally:
        api.nvmlShutdown()
        clock.close()
    device = env._torch_device(torch, torch.cuda.current_device())
    assert device["sm_clock_max_mhz"] == top  # the maximum, named so
    assert "sm_clock_mhz" not in device


def test_every_sample_has_its_own_plausible_sm_clock() -> None:
    """NVML's SM clock, polled while the samples run: a least and a median per kept
    sample, within the device's range, and the samples' windows in host time in order."""
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    r = time_function(lambda: a @ a, budget_ms=200)
    low, middle = r.sm_clock_min_mhz, r.sm_clock_median_mhz
    assert low is not None and middle is not None and low.size == middle.size == r.n
    assert np.isfinite(low).all() and (low <= middle).all()
    assert low.min() > 200 and middle.max() < 4000
    top = env._torch_device(torch, torch.cuda.current_device()).get("sm_clock_max_mhz")
    if top:
        assert middle.max() <= top
    clock = gpu_clock.TorchCudaClock(torch, flush=True)
    try:
        run = measure(clock, lambda: a @ a, TimingOptions(budget_ms=50, warmup_ms=10))
    finally:
        clock.close()
    starts, ends = np.asarray(run.samples.start_at_ns), np.asarray(run.samples.end_at_ns)
    assert (ends > starts).all() and (np.diff(starts) > 0).all()


def test_timed_result_reports_the_window_clocks_and_counts_drops() -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    r = time_function(lambda: a @ a, budget_ms=50)
    t = r.throttle
    clocks = t["window_sm_mhz"]
    assert clocks is not None, t
    assert 200 < clocks["min"] <= clocks["median"] <= clocks["max"] < 4000
    assert t["default_sm_mhz"] is not None and 500 < t["default_sm_mhz"] < 4000
    assert r.n + t["dropped_samples"] == r.options["samples"]
    assert t["dropped_samples"] <= t["throttled_samples"]  # only NVML-confirmed ones
    assert "drop" not in t


# --- CUDA graphs and streams ----------------------------------------------------------


@pytest.mark.parametrize("sync", ["item", "print", "cpu"])
def test_a_sync_under_graph_is_a_perflab_error_and_the_next_run_works(
    sync: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    x = torch.ones(1024, device="cuda")
    cells = {
        "item": lambda: x.sum().item(),
        "print": lambda: print(x.sum()),
        "cpu": lambda: x.cpu(),
    }
    before = torch.cuda.current_stream()
    with pytest.raises(InputError) as caught:
        time_function(cells[sync], graph=True, budget_ms=10, warmup_ms=1)
    assert str(caught.value).startswith(graph.SYNC_MESSAGE), str(caught.value)
    assert torch.cuda.current_stream() == before
    assert not torch.cuda.is_current_stream_capturing()
    y = torch.zeros(1, device="cuda", dtype=torch.float64)
    r = time_function(lambda: y.add_(1.0), graph=True, number=10, repeat=3, flush_l2=False)
    assert r.n == 3 and y.item() > 0
    capsys.readouterr()


def test_a_graph_of_one_call_says_what_it_saves() -> None:
    import torch

    x = torch.zeros(1024, device="cuda")
    one = time_function(lambda: x.add_(1.0), graph=True, budget_ms=20, flush_l2=False)
    assert one.number == 1 and graph.ONE_CALL_NOTE in one.warnings
    many = time_function(lambda: x.add_(1.0), graph=True, number=20, budget_ms=20, flush_l2=False)
    assert graph.ONE_CALL_NOTE not in many.warnings


def _timing_args(*argv: str) -> argparse.Namespace:
    from perflab.frontend import TIMING_ARGUMENTS, add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser, TIMING_ARGUMENTS)
    return parser.parse_args(list(argv))


def test_kernels_on_a_side_stream_are_warned_with_trace() -> None:
    import torch

    from perflab.frontend import timed_run

    x = torch.ones(1 << 20, device="cuda")
    y = torch.ones(1 << 20, device="cuda")
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]

    def one_stream() -> None:
        x.mul_(1.0)
        y.mul_(1.0)

    def two_streams() -> None:
        x.mul_(1.0)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y.mul_(1.0)  # never joined back: outside the timed window

    args = _timing_args("--trace", "--budget", "10", "--warmup", "1")
    warned = timed_run(two_streams, args, "two").result.warnings
    assert any(w.startswith("the traced run put kernels on 2 streams") for w in warned), warned
    quiet = timed_run(one_stream, args, "one").result.warnings
    assert not any("streams" in w for w in quiet), quiet
    torch.cuda.synchronize()


def test_a_cell_that_leaves_another_stream_current_is_noted() -> None:
    import torch

    x = torch.ones(1024, device="cuda")
    before = torch.cuda.current_stream()

    def cell() -> None:
        torch.cuda.set_stream(torch.cuda.Stream())  # type: ignore[no-untyped-call]
        x.add_(1.0)

    try:  # events on two streams: a result that says so, or (no ordered time) an error
        r = time_function(cell, budget_ms=10, warmup_ms=1)
        said = r.warnings
    except InputError as exc:  # seen on an H200: every window read negative
        said = [str(exc)]
    finally:
        torch.cuda.set_stream(before)
    assert any("changed the current CUDA stream" in w for w in said), said
    plain = time_function(lambda: x.add_(1.0), budget_ms=10, warmup_ms=1)
    assert not any("changed the current CUDA stream" in w for w in plain.warnings)


def test_cupy_clock_times_cupy_work_with_a_filler() -> None:
    cp = pytest.importorskip("cupy")
    a = cp.random.random((2048, 2048), dtype=cp.float32)
    clock = gpu_clock.CupyCudaClock(cp, flush=False)
    try:
        run = measure(clock, lambda: a @ a, TimingOptions(budget_ms=50, warmup_ms=5))
    finally:
        clock.close()
    assert min(run.samples.window_ns) > 1_000
    if clock.can_fill:
        assert run.lead_ns > 0


def test_cupy_work_on_the_current_stream_is_timed() -> None:
    cp = pytest.importorskip("cupy")
    a = cp.random.random((2048, 2048), dtype=cp.float32)
    r = time_function(lambda: a @ a, budget_ms=50)
    assert r.median_ns > 1_000


def test_every_chase_backend_passes_its_preflight_on_the_gpu() -> None:
    from perflab.machine import latency

    links = latency.cyclic_permutation(64, latency.GPU_STRIDE // 8, seed=1)
    makers: list[Any] = [latency._TritonChase]
    try:
        import cupy  # noqa: F401

        makers.append(latency._CupyChase)
    except ImportError:
        pass
    for make in makers:
        chase = make()
        assert chase.walk(links, 100) == latency.follow(links, 0, 100), chase.method
        ns, _ = chase.point(1 << 20, 1 << 12, 0, latency.GPU_STRIDE)
        assert 10 < ns < 10_000, chase.method


def test_tf32_matmul_runs_with_the_precision_api() -> None:
    from perflab.machine import matmul

    r = matmul.run(backend="cuda", dtypes=("fp32", "tf32"), sizes=(1024,), show_progress=False)
    best = matmul.best_gflops(r)
    assert best["fp32"] > 0 and best["tf32"] > 0
    assert not any(w.startswith("failed") for w in r.warnings)


# --- an empty sample's window and the tick; hot batches -----------------------------------


def test_cuda_empty_window_and_tick_are_measured_and_kept() -> None:
    """An empty kernel between events (behind the filler) and the events' tick: measured
    once per device, on every result, saved with it."""
    import torch

    from perflab.capture.timer import timer_steps

    small = torch.randn(1024, device="cuda")
    r = time_function(lambda: small.add_(1.0), flush_l2=False, budget_ms=30)
    empty, tick = r.empty_window_ns, r.tick_ns
    assert empty is not None and 100 < empty < 100_000, empty
    assert tick is not None and 0 < tick < 10_000, tick
    clock = gpu_clock.make_cuda_clock(False)
    try:
        assert timer_steps(clock) == (empty, tick)  # cached per device
    finally:
        clock.close()
    doc = r.to_dict()
    assert (doc["empty_window_ns"], doc["tick_ns"]) == (empty, tick)
    lo, hi = r.ci95_ns  # widened by one tick of the events
    assert hi - lo >= 2 * tick


def test_a_tiny_kernel_is_flagged_near_the_empty_window_and_hot_batches_it() -> None:
    import torch

    small = torch.randn(1024, device="cuda")
    single = time_function(lambda: small.add_(1.0), flush_l2=False, budget_ms=30)
    said = "an empty sample's window"
    assert any(said in w for w in single.warnings), (single.median_ns, single.empty_window_ns)
    hot = time_function(lambda: small.add_(1.0), hot=True, budget_ms=50)
    assert hot.options["hot"] is True and hot.options["flush_l2"] is False
    assert hot.options["cold"].startswith("none (hot: ")
    assert hot.number >= 10
    empty = hot.empty_window_ns
    assert empty is not None and hot.number * hot.median_ns > 20 * empty
    assert not any(said in w for w in hot.warnings)
