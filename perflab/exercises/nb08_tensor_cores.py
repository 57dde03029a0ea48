"""Exercises of notebooks/08-tensor-cores-and-precision.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import choice, number

NOTEBOOK = "08-tensor-cores-and-precision"

EXERCISES = (
    Spec(
        "fp8-hopper",
        NOTEBOOK,
        "Before the cell below compiles the table: which instruction family will the FP8 tile use "
        "on Hopper (sm_90a)? FFMA, HMMA, HGMMA or QGMMA?",
        choice(
            lambda v: v["family"],
            ["FFMA", "HMMA", "HGMMA", "QGMMA"],
            why={
                "FFMA": "FFMA is the plain fp32 fused multiply-add, no tensor cores at all; "
                "Hopper's tensor cores do take 8-bit floating point.",
                "HMMA": "HMMA is the warp-level instruction (Ampere, Ada, and WMMA code on "
                "Hopper); a Triton tl.dot on sm_90a uses Hopper's warpgroup instructions.",
                "HGMMA": "HGMMA is Hopper's warpgroup MMA for TF32, BF16 and FP16 inputs; "
                "8-bit floating point has an instruction family of its own.",
                "QGMMA": "QGMMA is the warpgroup MMA for 8-bit floating-point inputs: check that "
                "the table's FP8 row really reached the tensor cores on sm_90a.",
            },
            right="QGMMA is the warpgroup MMA for 8-bit floating-point inputs.",
        ),
        "QGMMA (the table's sm_90a column, FP8 row). The Q stands for the quarter-precision "
        "(8-bit) inputs; like HGMMA it is a warpgroup instruction with operands in shared memory.",
        worked=lambda v: v["family"],
        measured={"family": "text"},
    ),
    Spec(
        "compute-bound-size",
        NOTEBOOK,
        "A BF16 n x n matmul does 2n^3 FLOPs and moves at least three n x n matrices of 2-byte "
        "elements. With the H200's BF16 ridge point printed above, from what n on is such a "
        "matmul compute-bound? (Within 10%.)",
        number(
            lambda v: 3 * v["bf16_flops"] / v["hbm_bytes_per_s"],
            rel=0.10,
            low="Write the matmul's intensity as a function of n, 2n^3 FLOPs over 3 x 2n^2 "
            "bytes, set it equal to the ridge point and solve for n.",
            high="A matmul whose intensity is just above the ridge point is already "
            "compute-bound; check the bytes: 2 per BF16 element, three matrices.",
        ),
        "The intensity is 2n^3 / (3 x 2n^2) = n / 3 FLOP/B; it passes the BF16 ridge point, "
        "989.5e12 / 4.8e12 = 206 FLOP/B, at n of about 620. Real kernels need more: a tile's "
        "operands are read from HBM or L2 more than once, and the peak is not reached at the "
        "ridge. An element-wise op (below 1 FLOP/B) is never compute-bound.",
        worked=620,
        given={"bf16_flops": "positive", "hbm_bytes_per_s": "positive"},
    ),
    Spec(
        "bf16-error",
        NOTEBOOK,
        "BF16 keeps 7 mantissa bits. Predict the relative error of the BF16 product that the "
        "cell below measures (inputs rounded to BF16, products accumulated in fp32). Within a "
        "factor of 3 of the measurement.",
        number(
            lambda v: v["bf16_error"],
            factor=3,
            low="Too optimistic: each input keeps only 7 mantissa bits (about 2 decimal digits).",
            high="Too pessimistic: the rounding errors are random and partly cancel in the sum.",
        ),
        "About 2^-8 = 0.004 per rounded input; two rounded inputs per product, and independent "
        "errors that partly cancel over the sum: a few times 1e-3.",
        worked=2.0**-8,
        measured={"bf16_error": "positive"},
        answer_as="e.g. 1e-2",
    ),
)
