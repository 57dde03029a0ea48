"""Notebook 21's exercises judge the ladder's counts: a wrong prediction hears its
direction or the hint for its known mistake, and the measured values decide the options."""

from __future__ import annotations

from exercise_checks import predicted

TILED_BOUNDS = {"HBM": 16.6, "L2": 30.4, "shared memory": 8.4, "FP32 compute": 51.2}


def test_the_tiled_bound_is_the_smallest_measured_bound() -> None:
    assert predicted("gemm-tiled-bound", "shared memory", bounds_tflops=TILED_BOUNDS)
    wrong = predicted("gemm-tiled-bound", "FP32 compute", bounds_tflops=TILED_BOUNDS)
    assert wrong.state == "wrong" and "shared memory" in wrong.reason
    compute_bound = {"HBM": 133.0, "L2": 243.3, "shared memory": 67.0, "FP32 compute": 51.2}
    assert predicted("gemm-tiled-bound", "FP32 compute", bounds_tflops=compute_bound)


def test_shared_loads_per_ffma_and_the_tiled_kernels_count_as_a_known_mistake() -> None:
    assert predicted("gemm-shared-loads", 0.25, shared_words=128, ffma=512)
    mistake = predicted("gemm-shared-loads", 2, shared_words=128, ffma=512)
    assert mistake.state == "wrong" and "tiled kernel's count" in mistake.reason


def test_tile_intensity_hints_name_the_missing_factor() -> None:
    assert predicted("gemm-tile-intensity", "32 FLOP/B", flops=1024.0, bytes=32.0)
    for answer, says in ((16, "two FLOPs"), (128, "4 bytes per float")):
        verdict = predicted("gemm-tile-intensity", answer, flops=1024.0, bytes=32.0)
        assert verdict.state == "wrong" and says in verdict.reason, verdict


def test_vectorising_leaves_the_intensity_the_same_within_a_percent() -> None:
    same = {"scalar_flop_per_byte": 32.0, "vector_flop_per_byte": 32.1}
    assert predicted("gemm-vector-intensity", "same", **same)
    assert not predicted("gemm-vector-intensity", "up", **same)
    higher = {"scalar_flop_per_byte": 32.0, "vector_flop_per_byte": 64.0}
    assert predicted("gemm-vector-intensity", "up", **higher)


def test_hgmma_answer_follows_the_counted_instructions() -> None:
    assert predicted("gemm-hgmma", "hgemm_dot", wmma_hgmma=0, dot_hgmma=8)
    both = predicted("gemm-hgmma", "both", wmma_hgmma=0, dot_hgmma=8)
    assert both.state == "wrong" and "single warp" in both.reason
    assert predicted("gemm-hgmma", "neither", wmma_hgmma=0, dot_hgmma=0)
