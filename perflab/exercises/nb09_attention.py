"""Exercises of notebooks/09-fused-attention.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, choice, number

NOTEBOOK = "09-fused-attention"

# the sequence lengths that bound the bands of the naive-bound prediction
NAIVE_BANDS = (4096, 65536)
NAIVE_LABELS = ("below 4096", "4096 to 65536", "above 65536", "never")


def _score_gb(v: Values) -> float:
    return float(v["batch"] * v["heads"] * v["n"] ** 2 * v["bytes_per_score"]) / 1e9


def _naive_crossing(v: Values) -> int | None:
    """The smallest swept N whose naive intensity reaches the ridge point, or None."""
    reached = [int(n) for n, intensity in v["naive_intensity"].items() if intensity >= v["ridge"]]
    return min(reached) if reached else None


def _naive_band(v: Values) -> str:
    crossing = _naive_crossing(v)
    if crossing is None:
        return NAIVE_LABELS[-1]
    return NAIVE_LABELS[sum(crossing >= bound for bound in NAIVE_BANDS)]


def _naive_solution(v: Values) -> str:
    largest = max(v["naive_intensity"], key=lambda n: int(n))
    limit = v["naive_intensity"][largest]
    crossing = _naive_crossing(v)
    where = (
        "it never reaches the ridge in the sweep"
        if crossing is None
        else f"it reaches the ridge at N = {crossing:,}"
    )
    return (
        "Per head, naive attention does 4 N^2 d FLOPs and moves 4 N d x 2 bytes for Q, K, V and "
        "O plus 4 N^2 x 2 bytes for S and P (each written once and read once). The intensity "
        "N d / (2 (N + d)) grows with N but approaches d / 2 = 64 FLOP/B for d = 128: the N^2 "
        "bytes grow as fast as the N^2 FLOPs. At the largest N swept it is "
        f"{limit:.1f} FLOP/B against a ridge of {v['ridge']:.0f} FLOP/B: {where}. Naive "
        "attention at this head size is memory-bound at every length, which is the case for "
        "fusing: only removing the N^2 traffic lets the intensity grow with N."
    )


def _fused_solution(v: Values) -> str:
    return (
        "4 N^2 d FLOPs over 4 N d x 2 bytes (Q, K, V read, O written, 2 bytes each) is N / 2 "
        f"FLOP/B: d cancels. Counted: {v['flops'] / 1e9:.2f} GFLOP over {v['bytes'] / 1e6:.2f} "
        f"MB = {v['flops'] / v['bytes']:.0f} FLOP/B per head. It grows with N because each K "
        "and V row is used by all N queries while it stays on chip; it passes the H200's fp16 "
        "ridge at a few hundred tokens. It is a bound on the HBM bytes: K and V are read "
        "once per block of queries, from L2 when they fit there."
    )


EXERCISES = (
    Spec(
        "score-bytes",
        NOTEBOOK,
        lambda v: (
            f"One attention layer at batch {v['batch']}, {v['heads']} heads, sequence length "
            f"{v['n']:,}, with the scores S = Q K^T kept in fp32 ({v['bytes_per_score']} bytes "
            "each), as a numerically careful softmax does. How many GB (10^9 bytes) is the score "
            "matrix that naive attention writes to memory (the probabilities P are as large "
            "again)? (Within 5%.)"
        ),
        number(
            _score_gb,
            unit="GB",
            rel=0.05,
            low="S holds one score per (query, key) pair: N x N per head, for every head and "
            "every sequence of the batch, each score 4 bytes.",
            high="The head dimension does not appear: the dot product sums it away, so S is "
            "N x N per head, not N x N x d. And a GB here is 10^9 bytes.",
        ),
        lambda v: (
            f"{v['batch']} x {v['heads']} x {v['n']:,}^2 x {v['bytes_per_score']} B = "
            f"{_score_gb(v):.1f} GB for S alone, and P is as large: half of an H200's 141 GB "
            "of HBM for one layer's intermediate, written and read back at HBM speed. The "
            "inputs Q, K and V together are 3 x N x d x 2 bytes per head, thousands of times "
            "less at this length."
        ),
        worked=lambda v: f"{_score_gb(v):.2f} GB",
        given={"batch": "count", "heads": "count", "n": "count", "bytes_per_score": "count"},
        answer_as='e.g. "12 GB"',
    ),
    Spec(
        "naive-bound",
        NOTEBOOK,
        "Naive attention in fp16 with head dimension d = 128 writes S and P (N x N each, "
        "2 bytes per element) and reads them back, besides reading Q, K and V and writing O. "
        "The cell after your answer computes its arithmetic intensity for N from 512 to "
        "1,048,576 and the H200's ridge point from the recorded ceilings (fp16 matmul rate "
        "over the HBM copy rate). From which sequence length on is naive attention "
        "compute-bound on the H200: 'below 4096', '4096 to 65536', 'above 65536' or 'never'?",
        choice(
            _naive_band,
            NAIVE_LABELS,
            why={
                "below 4096": "Count the bytes as well as the FLOPs: both grow with N^2. What "
                "does FLOPs / bytes tend to as N grows?",
                "4096 to 65536": "Write the intensity as a fraction of N^2 terms: for large N "
                "it stops growing. Compare its limit with the ridge point.",
                "above 65536": "A longer sequence does not help for ever: the N^2 FLOPs bring "
                "N^2 bytes of S and P with them. What is the limit of the ratio?",
                "never": "Compare the limit of the intensity for large N with the ridge point: "
                "which is larger in the cell's output?",
            },
            right="The N^2 bytes of S and P keep pace with the N^2 FLOPs.",
        ),
        _naive_solution,
        worked=_naive_band,
        measured={"naive_intensity": "sweep", "ridge": "positive"},
    ),
    Spec(
        "fused-intensity",
        NOTEBOOK,
        "The fused kernel reads Q, K and V once and writes O once (fp16, 2 bytes per element, "
        "N x d each per head) and does the same 4 N^2 d FLOPs per head as naive attention. "
        "Predict its arithmetic intensity in FLOP/B (counted at HBM, per head) for N = 4096 "
        "and d = 128. The cell after your answer counts both. (Within 10%.)",
        number(
            lambda v: v["flops"] / v["bytes"],
            unit="FLOP/B",
            rel=0.10,
            low="Four N x d matrices of 2 bytes each are all the bytes; the FLOPs grow with "
            "N^2. Write the ratio and cancel d: what is left grows with N.",
            high="Count the bytes of all four matrices (Q, K, V and O), 2 bytes per element, "
            "and the FLOPs of both matmuls (2 N^2 d each).",
        ),
        _fused_solution,
        worked=lambda v: v["flops"] / v["bytes"],
        measured={"flops": "positive", "bytes": "positive"},
        answer_as="FLOP per byte",
    ),
    Spec(
        "attention-smem",
        NOTEBOOK,
        "The pointer-load kernel with D = 128, BLOCK_M = 128, BLOCK_N = 128, 8 warps and "
        "num_stages = 3 (fp16 tiles): Triton keeps the Q tile in shared memory once and "
        "num_stages buffers each of the K tile and of the V tile. How much shared memory will "
        "it need, in KiB? The cell after your answer compiles it. (Within 5%.)",
        number(
            lambda v: v["shared_bytes"] / 1024,
            unit="KiB",
            rel=0.05,
            low="Count every buffer: the Q tile is BLOCK_M x D, each K and each V tile "
            "BLOCK_N x D, 2 bytes per element, and there are num_stages of each of K and V.",
            high="The scores and probabilities (BLOCK_M x BLOCK_N) stay in registers, and the "
            "Q tile is loaded once: only K and V are multi-buffered. 1 KiB is 1,024 bytes.",
        ),
        lambda v: (
            "Q: 128 x 128 x 2 B = 32 KiB once; K and V: 3 stages x 2 tiles x 128 x 128 x 2 B = "
            f"192 KiB; 224 KiB in all (compiled: {v['shared_bytes'] / 1024:.0f} KiB), just under "
            "the 227 KiB one block may use on an H100/H200 SM. One block per SM, and no room "
            "for a fourth stage: head dimension 128 with 128 x 128 tiles is where Hopper's "
            "shared memory runs out."
        ),
        worked=lambda v: f"{v['shared_bytes'] / 1024:.1f} KiB",
        measured={"shared_bytes": "count"},
        answer_as='e.g. "64 KiB"',
    ),
)

EXAMPLES: dict[str, dict[str, object]] = {
    "score-bytes": {"batch": 8, "heads": 32, "n": 8192, "bytes_per_score": 4},
    "naive-bound": {
        "naive_intensity": {"512": 51.2, "4096": 62.1, "1048576": 63.99},
        "ridge": 185.8,
    },
    "fused-intensity": {"flops": 8_589_934_592, "bytes": 4_194_304},
    "attention-smem": {"shared_bytes": 229_376},
}
