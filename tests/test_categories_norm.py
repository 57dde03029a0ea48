"""Normalisation kernels have their own category (they were counted as reductions)."""

from __future__ import annotations

import pytest
from data_paths import TRACES

from perflab.analysis.categories import DEFAULT_RULES, categorize, category_names
from perflab.io import load_trace


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(args)", "normalization"),
        (
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float)",
            "normalization",
        ),
        ("cudnn::batchnorm_fwtr_nhwc_semiPersist", "normalization"),
        ("void at::native::batch_norm_collect_statistics_kernel<float>", "normalization"),
        (
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>",
            "normalization",
        ),
        (
            "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>",
            "normalization",
        ),
        ("GroupNormKernel", "normalization"),
        ("InstanceNormForward", "normalization"),
        ("rms_norm_kernel", "normalization"),
        ("welford_reduce", "normalization"),
        ("my_norm_kernel", "normalization"),
        # a vector norm is a reduction; a normal distribution is elementwise work
        (
            "void at::native::reduce_kernel<512, 1, ReduceOp<float, NormTwoOps<float>>>",
            "reduction",
        ),
        (
            "void at::native::distribution_elementwise_grid_stride_kernel<normal_kernel>",
            "elementwise",
        ),
        ("triton_per_fused_native_layer_norm_0", "triton"),  # rules earlier in the table win
        ("void at::native::reduce_kernel<512, 1>", "reduction"),
        ("softmax_warp_forward", "reduction"),
    ],
)
def test_normalisation_kernels_have_their_own_category(name: str, category: str) -> None:
    assert categorize([name]) == [category]


def test_normalization_comes_before_reduction() -> None:
    names = category_names(DEFAULT_RULES)
    assert names.index("normalization") < names.index("reduction")


def test_a100_batch_norm_kernels_are_normalization_not_reduction() -> None:
    summary = load_trace(TRACES / "kineto" / "nccl_2ranks_a100.json.gz").summary()
    cats = summary.categories
    assert cats["normalization"].count == 318  # the cuDNN bn_fw / bn_bw kernels
    assert cats["reduction"].count == 15
    share = cats["normalization"].total_us / summary.kernels.total_us
    assert share == pytest.approx(0.193, abs=0.001)
