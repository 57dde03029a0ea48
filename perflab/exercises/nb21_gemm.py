"""Exercises of notebooks/21-a-gemm-optimisation-ladder.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, choice, number, smallest

NOTEBOOK = "21-a-gemm-optimisation-ladder"
SAME_WITHIN = 0.01  # two intensities counted from SASS closer than 1% are the same


def _direction(values: Values) -> str:
    """Whether the vectorised step's FLOP per global byte went up, down or stayed."""
    before, after = values["scalar_flop_per_byte"], values["vector_flop_per_byte"]
    if abs(after - before) <= SAME_WITHIN * before:
        return "same"
    return "up" if after > before else "down"


def _hgmma_where(values: Values) -> str:
    """Which of the two tensor-core kernels has HGMMA in its SASS."""
    wmma, dot = values["wmma_hgmma"] > 0, values["dot_hgmma"] > 0
    return {(True, True): "both", (True, False): "hgemm_wmma", (False, True): "hgemm_dot"}.get(
        (wmma, dot), "neither"
    )


EXERCISES = (
    Spec(
        "gemm-tiled-bound",
        NOTEBOOK,
        "The shared-memory tiled kernel (16 x 16 tiles, float operands) loads each tile element "
        "from global memory once per block and then reads both operands of every FMA from "
        "shared memory. On the H200's ceilings (HBM and L2 recorded, compute recorded, shared "
        "memory from the spec table), which one bounds it: 'HBM', 'L2', 'shared memory' or "
        "'FP32 compute'? The cells after your answer count its loads in the SASS and work out "
        "each bound.",
        choice(
            smallest("bounds_tflops"),
            ["HBM", "L2", "shared memory", "FP32 compute"],
            why={
                "HBM": "Count the bytes per FLOP at each level: global memory sees each tile "
                "element once per block, so its intensity grew with the tile; which level still "
                "sees two operands per FMA?",
                "L2": "The tile divides the global traffic by the tile's width; the loads that "
                "did not shrink are the ones inside the k loop.",
                "shared memory": "Every FMA still reads two 4-byte operands, now from shared "
                "memory: bytes per FLOP at that level did not change with the tile.",
                "FP32 compute": "Compute is the bound only when every memory level can feed "
                "the FMAs faster: work out FLOP per byte at shared memory, times its bandwidth.",
            },
            right="Tiling moved the operand traffic from global to shared memory without "
            "reducing it: the next step, register blocking, does.",
        ),
        "Shared memory. Per FMA the kernel reads two 4-byte words from shared memory: 2 FLOP per "
        "8 B = 0.25 FLOP/B, times 33.5 TB/s (spec) = 8.4 TFLOP/s. Global memory sees each tile "
        "element once per 16 FMAs: 4 FLOP/B, 30 TFLOP/s at the recorded L2 rate and 17 at HBM's "
        "(with no reuse in the L2), and FP32 compute is 51 TFLOP/s recorded.",
        worked=smallest("bounds_tflops"),
        measured={"bounds_tflops": "numbers"},
    ),
    Spec(
        "gemm-shared-loads",
        NOTEBOOK,
        "With register blocking each thread computes a TM x TN = 8 x 8 block of C: for every "
        "step of k it reads TM values of A and TN values of B from shared memory into registers "
        "and does TM x TN FMAs on them. Predict the 4-byte words read from shared memory per "
        "FFMA in the main loop; the cell after your answer counts both in the SASS. (Within 10%.)",
        number(
            lambda v: v["shared_words"] / v["ffma"],
            rel=0.10,
            low="Count both operands: TM words of A and TN words of B per step of k.",
            high="A value loaded into a register serves a whole row or column of the thread's "
            "block of C, not one FMA: divide by all TM x TN FMAs.",
            mistakes={
                2.0: "That is the tiled kernel's count, two words per FMA: register blocking "
                "reuses each loaded word across the thread's block of C."
            },
        ),
        "(TM + TN) / (TM x TN) = 16 / 64 = 0.25 words per FFMA, an eighth of the tiled kernel's "
        "2. In the SASS ptxas reads the eight contiguous values with two LDS.128 per operand: "
        "32 LDS.128 (128 words) for 512 FFMA per iteration of the loop.",
        worked=0.25,
        measured={"shared_words": "count", "ffma": "positive count"},
        answer_as="words per FFMA",
    ),
    Spec(
        "gemm-tile-intensity",
        NOTEBOOK,
        "The register-blocked kernel's block computes a BM x BN = 128 x 128 tile of C and, per "
        "step of BK = 8 along k, loads a BM x BK tile of A and a BK x BN tile of B (4-byte "
        "floats) from global memory, on which it does 2 x BM x BN x BK FLOPs. Predict its "
        "FLOP per byte loaded from global memory; the cell after your answer counts LDG bytes "
        "and FFMAs in the SASS. (Within 10%.)",
        number(
            lambda v: v["flops"] / v["bytes"],
            unit="FLOP/B",
            rel=0.10,
            low="Simplify first: the BK cancels, leaving BM x BN over (BM + BN), divided by the "
            "bytes of one element and times the FLOPs of one FMA.",
            high="Each element is 4 bytes, and both tiles are loaded: (BM + BN) x BK elements "
            "per step.",
            mistakes={
                16.0: "An FMA is two FLOPs: 2 x BM x BN x BK.",
                128.0: "Count bytes, not elements: 4 bytes per float.",
            },
        ),
        "2 x 128 x 128 x 8 FLOPs / ((128 + 128) x 8 x 4 bytes) = BM x BN / (2 (BM + BN)) = "
        "32 FLOP/B. Per thread (256 threads) that is 8 LDG.E of 4 bytes for 512 FFMA per "
        "iteration: 1,024 FLOPs per 32 bytes.",
        worked=32.0,
        measured={"flops": "positive", "bytes": "positive"},
        answer_as="FLOP per byte",
    ),
    Spec(
        "gemm-vector-intensity",
        NOTEBOOK,
        "The vectorised step loads the same tiles as the register-blocked one, with float4 "
        "loads (LDG.E.128) instead of 4-byte ones. Will its FLOP per byte loaded from global "
        "memory go 'up', 'down' or stay the 'same'? The cell after your answer counts it in "
        "the SASS.",
        choice(
            _direction,
            ["up", "down", "same"],
            why={
                "up": "A wider load moves more bytes per instruction: does the kernel need fewer "
                "bytes for the same FLOPs?",
                "down": "Nothing is loaded twice: each tile element still arrives once per block.",
                "same": "The tiles, hence the bytes per FLOP, decide the intensity: what changed "
                "is the instructions per byte.",
            },
            right="Vectorising cuts load instructions fourfold and leaves the bytes, so the "
            "kernel stays where it was on the roofline.",
        ),
        "Same: the bytes per FLOP are set by the tile sizes (32 FLOP/B for 128 x 128 x 8). What "
        "changes is the count of load instructions: 2 LDG.E.128 instead of 8 LDG.E per 512 "
        "FFMA, fewer issue slots and fewer address calculations; the roofline does not show "
        "that, the instruction mix does.",
        worked=_direction,
        measured={"scalar_flop_per_byte": "positive", "vector_flop_per_byte": "positive"},
    ),
    Spec(
        "gemm-hgmma",
        NOTEBOOK,
        "The last step runs the product on tensor cores twice: hgemm_wmma, CUDA C++ with the "
        "WMMA API compiled for sm_90, and hgemm_dot, Triton's tl.dot compiled for Hopper "
        "(Triton targets sm_90a there). In whose SASS will HGMMA, the warpgroup instruction, "
        "appear: 'hgemm_wmma', 'hgemm_dot', 'both' or 'neither'?",
        choice(
            _hgmma_where,
            ["hgemm_wmma", "hgemm_dot", "both", "neither"],
            why={
                "hgemm_wmma": "WMMA is a warp-level API, and plain sm_90 code must also run on "
                "later GPUs: which instruction can it use?",
                "hgemm_dot": "Look at the target each kernel was compiled for, and at the API "
                "each one uses.",
                "both": "One of the two is written for a single warp and compiled for a "
                "portable target.",
                "neither": "Triton's tl.dot on fp16 tiles of 64 rows or more is compiled for "
                "the architecture-specific target on Hopper.",
            },
            right="WMMA gives warp-level HMMA on any target; warpgroup HGMMA needs sm_90a, "
            "which Triton uses on Hopper.",
        ),
        "hgemm_dot only. WMMA compiles to HMMA (warp-level, 16 x 8 x 16 per instruction) even "
        "on Hopper, and plain sm_90 has no wgmma at all; Triton compiles tl.dot for sm_90a and "
        "emits HGMMA.64x128x16, one instruction per warpgroup with its operands read from "
        "shared memory.",
        worked=_hgmma_where,
        measured={"wmma_hgmma": "count", "dot_hgmma": "count"},
    ),
)

# What the notebook counted (its stored outputs), with which each solution passes its check.
EXAMPLES: dict[str, dict[str, object]] = {
    "gemm-tiled-bound": {
        "bounds_tflops": {"HBM": 16.6, "L2": 30.4, "shared memory": 8.4, "FP32 compute": 51.2}
    },
    "gemm-shared-loads": {"shared_words": 128, "ffma": 512},
    "gemm-tile-intensity": {"flops": 1024.0, "bytes": 32.0},
    "gemm-vector-intensity": {"scalar_flop_per_byte": 32.0, "vector_flop_per_byte": 32.0},
    "gemm-hgmma": {"wmma_hgmma": 0, "dot_hgmma": 8},
}
