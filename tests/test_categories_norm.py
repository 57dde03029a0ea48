"""Normalisation kernels have their own category (they were counted as reductions)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from data_paths import TRACES

from perflab.analysis.categories import DEFAULT_RULES, categorize, category_names
from perflab.analysis.trace_summary import summarize
from perflab.errors import InputError
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
        ("layer_norm_normal_kernel", "normalization"),  # a named normalisation wins
        # a vector norm inside a word, as "norm...ops" anywhere in one word, is none
        ("at_normtwoops_reduce", "reduction"),
        ("NormOps norm", "other"),
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


def test_the_built_in_rules_take_linear_time_on_long_names() -> None:
    """The normalisation rule's lookahead took quadratic time on a name of repeated "norm"
    (47 s at 100,000 characters); the bound is only against such a hang."""
    code = (
        "from perflab.analysis.categories import categorize\n"
        "print(categorize(['norm' * 25000, 'normtwo' * 15000 + 'ops', 'a' * 100000]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True
    )
    assert done.stdout.strip() == "['normalization', 'other', 'other']"


def test_users_rules_come_first_and_match_case_insensitively() -> None:
    rules = [("mine", r"MY_fused_\d+"), ("comm", "nccl"), *DEFAULT_RULES]
    names = ["my_fused_12_kernel", "ncclKernel_AllReduce", "gemm_kernel"]
    assert categorize(names, rules) == ["mine", "comm", "gemm"]
    assert category_names(rules)[:3] == ["mine", "comm", "communication"]
    summary = summarize(load_trace(TRACES / "kineto" / "nccl_2ranks_a100.json.gz"), rules)
    assert summary.categories["comm"].count > 0 and "communication" not in summary.categories


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        ([("mine", r"(?!x)norm")], "the category rule ('mine', '(?!x)norm'): not a usable"),
        ([("mine", r"(a)\1")], "no backreferences"),
        ([("mine",)], "a category rule is (category, pattern)"),
        ([("mine", 3)], "a category rule is (category, pattern) of text"),
        (["mine"], "a category rule is (category, pattern)"),
    ],
)
def test_bad_rules_are_refused_by_name(rules: list[object], says: str) -> None:
    with pytest.raises(InputError, match=re.escape(says)):
        categorize(["x"], rules)  # type: ignore[arg-type]
    if "(category, pattern)" in says:  # category_names reads the table without compiling it
        with pytest.raises(InputError, match=re.escape(says)):
            category_names(rules)  # type: ignore[arg-type]
