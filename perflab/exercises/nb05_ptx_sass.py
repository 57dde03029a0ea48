"""Exercises of notebooks/05-reading-ptx-and-sass.ipynb."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from perflab.exercises import Spec
from perflab.exercises.checks import choice, kernel_check

if TYPE_CHECKING:
    from perflab.model.kernel import KernelArtifacts

NOTEBOOK = "05-reading-ptx-and-sass"


def _heavy_without_spills(kernel: KernelArtifacts, flags: Sequence[str]) -> bool:
    return bool(
        kernel.name.startswith("heavy")
        and kernel.arch.startswith("sm_90")
        and not kernel.resources.spills
    )


KERNELS = ["matmul_tiled", "wmma_tile", "matmul_tile", "matmul_fp32"]

EXERCISES = (
    Spec(
        "no-spill",
        NOTEBOOK,
        "Compile HEAVY so that ptxas reports no spills (answer with perflab.compile_cuda(...)). "
        "The kernel must still be `heavy`, for sm_90a.",
        kernel_check(
            _heavy_without_spills,
            goal="HEAVY compiled for sm_90a with no spill stores or loads",
            right="No spill stores or loads: acc[] lives in registers.",
            wrong="ptxas still spills (or this is not `heavy` for sm_90a). Look at the "
            "resources line: what limits the registers each thread may use?",
            name="heavy",
        ),
        "Drop the register cap: perflab.compile_cuda(HEAVY, arch='sm_90a'). The 64 accumulators "
        "then fit in registers (72 per thread), with no STL/LDL. The price is occupancy: more "
        "registers per thread means fewer resident warps, which the occupancy line shows.",
    ),
    Spec(
        "tensor-cores",
        NOTEBOOK,
        "Before the cells below compile them for sm_90a: which of these kernels will use tensor "
        "cores? matmul_tiled (section 2: a CUDA C++ loop over shared-memory tiles), wmma_tile "
        "(CUDA C++ with the WMMA API), matmul_tile (Triton: tl.dot of fp16 tiles), matmul_fp32 "
        "(Triton: tl.dot of fp32 tiles with input_precision='ieee'). Name all that will (a list, "
        "or comma-separated).",
        choice(
            ["wmma_tile", "matmul_tile"],
            KERNELS,
            why={
                "matmul_tiled": "A plain CUDA C++ loop multiplies with FFMA: the compiler never "
                "turns it into tensor-core instructions by itself.",
                "matmul_fp32": "Tensor cores multiply fp16, bf16, tf32 or fp8 inputs: what does "
                "input_precision='ieee' ask of an fp32 product?",
            },
            missed="The introduction above lists what reaches the tensor cores: which of the "
            "kernels is written with one of those?",
        ),
        "wmma_tile (HMMA: warp-level, even on sm_90a) and the Triton matmul_tile (HGMMA on "
        "sm_90a). The tiled CUDA matmul and the ieee-precision Triton matmul use FFMA.",
        worked=["wmma_tile", "matmul_tile"],
        answer_as='e.g. ["matmul_tiled"]',
    ),
)
