"""The timing engine on a real GPU (skipped without one; run by scripts/gpu-check)."""

from __future__ import annotations

import pytest

from perflab.capture.timer import bench

pytestmark = pytest.mark.gpu


def test_cuda_events_time_a_matmul() -> None:
    import torch

    a = torch.randn(2048, 2048, device="cuda")
    r = bench(lambda: a @ a, budget_ms=50)
    assert r.backend == "cuda"
    assert r.options["flush_l2"] is True
    # 2*2048^3 FLOP cannot finish faster than 1 us on any GPU that exists
    assert r.median_ns > 1_000
    assert "no GPU" not in " ".join(r.warnings)


def test_flush_makes_a_memory_bound_kernel_slower_or_equal() -> None:
    import torch

    x = torch.randn(8 << 20, device="cuda")  # 32 MiB, fits in an H100/H200 L2 (50 MiB)
    warm = bench(lambda: x.sum(), flush_l2=False, budget_ms=50)
    cold = bench(lambda: x.sum(), flush_l2=True, budget_ms=50)
    assert cold.compare(warm).ratio >= 0.95


def test_graph_replay_counts_each_call() -> None:
    import torch

    x = torch.zeros(1, device="cuda")
    r = bench(lambda: x.add_(1.0), graph=True, number=50, repeat=10, flush_l2=False)
    torch.cuda.synchronize()
    assert r.number == 50
    assert r.n == 10
    # first call + side-stream warm-up + 50 captured calls replayed (warm-up + 10 samples)
    assert x.item() >= 50 * 11


def test_cupy_work_on_the_current_stream_is_timed() -> None:
    cp = pytest.importorskip("cupy")
    a = cp.random.random((2048, 2048), dtype=cp.float32)
    r = bench(lambda: a @ a, budget_ms=50)
    assert r.median_ns > 1_000
