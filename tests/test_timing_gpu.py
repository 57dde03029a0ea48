"""The timing engine on a real GPU (skipped without one; run by scripts/gpu-check).

These are the only tests of the CUDA paths: events, the torch.cuda._sleep queue filler,
graph replay, the persisting-L2 reset and NVML. The logic they feed is tested on the
host in test_timing_engine.py."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from perflab.capture import gpu_clock
from perflab.capture.timer import (
    ESTIMATE_SAMPLES,
    PROBE_SAMPLES,
    TimingOptions,
    measure,
    time_function,
)

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
    assert any(w.startswith("host-bound") for w in bare.warnings)


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


def test_throttle_check_finds_this_gpu_in_nvml_or_says_why() -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    r = time_function(lambda: a @ a, budget_ms=50)
    try:
        import pynvml
    except ImportError:
        assert r.throttle == {"checked": False, "why": r.throttle["why"]}
        assert "pynvml" in r.throttle["why"]
        assert any(w.startswith("throttle check unavailable") for w in r.warnings)
        return
    assert r.throttle["checked"] is True, r.throttle
    assert r.throttle["min_sm_mhz"] and r.throttle["min_sm_mhz"] > 0
    pynvml.nvmlInit()
    try:
        clock = gpu_clock.TorchCudaClock(torch, flush=False)
        handle = gpu_clock.nvml_handle(pynvml, clock.identity)
        uuid = pynvml.nvmlDeviceGetUUID(handle)
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        assert uuid == clock.identity["uuid"]
    finally:
        pynvml.nvmlShutdown()


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


# --- the timer's floor and resolution; hot batches ------------------------------------


def test_cuda_timer_floor_and_resolution_are_measured_and_kept() -> None:
    """An empty kernel between events (behind the filler) and the events' step: measured
    once per device, on every result, saved with it."""
    import torch

    from perflab.capture.timer import timer_steps

    small = torch.randn(1024, device="cuda")
    r = time_function(lambda: small.add_(1.0), flush_l2=False, budget_ms=30)
    assert r.floor_ns is not None and 100 < r.floor_ns < 100_000, r.floor_ns
    assert r.resolution_ns is not None and 0 < r.resolution_ns < 10_000, r.resolution_ns
    clock = gpu_clock.make_cuda_clock(False)
    try:
        assert timer_steps(clock) == (r.floor_ns, r.resolution_ns)  # cached per device
    finally:
        clock.close()
    doc = r.to_dict()
    assert (doc["floor_ns"], doc["resolution_ns"]) == (r.floor_ns, r.resolution_ns)
    lo, hi = r.ci95_ns  # widened by one step of the events
    assert hi - lo >= 2 * r.resolution_ns


def test_a_tiny_kernel_is_flagged_near_the_floor_and_hot_batches_it() -> None:
    import torch

    small = torch.randn(1024, device="cuda")
    single = time_function(lambda: small.add_(1.0), flush_l2=False, budget_ms=30)
    assert any("timer's floor" in w for w in single.warnings), (single.median_ns, single.floor_ns)
    hot = time_function(lambda: small.add_(1.0), hot=True, budget_ms=50)
    assert hot.options["hot"] is True and hot.options["flush_l2"] is False
    assert hot.options["cold"].startswith("none (hot: ")
    assert hot.number >= 10
    assert hot.floor_ns is not None and hot.number * hot.median_ns > 20 * hot.floor_ns
    assert not any("timer's floor" in w for w in hot.warnings)
