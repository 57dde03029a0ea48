"""Exercises of notebooks/22-reductions-scans-and-histograms.ipynb: predictions counted before
the cell that counts them (the shuffles of a warp's reduction in its SASS, the bank conflicts of
a tree's strided addressing, the adds of a Hillis-Steele scan) and a reduction's bound worked out
from the H200's recorded HBM rate."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import number

NOTEBOOK = "22-reductions-scans-and-histograms"

EXERCISES = (
    Spec(
        "warp-shuffle-count",
        NOTEBOOK,
        "warp_sum adds 32 values, one per lane, with __shfl_down_sync: each step every lane adds "
        "the value of the lane `offset` above it, and the offset halves from one step to the "
        "next until lane 0 holds the sum. How many SHFL instructions will its SASS hold? The "
        "cell after your answer compiles it for sm_90 and counts them.",
        number(
            lambda v: v["shfl"],
            abs=0,
            low="Every value must reach lane 0: how many halvings take 32 lanes down to one?",
            high="A shuffle moves a value for all 32 lanes at once: one instruction per step, "
            "not one per lane or per add.",
            mistakes={
                31.0: "That is the adds lane 0's sum needs, one per value but its own; a shuffle "
                "serves all lanes at once, so count the steps.",
                32.0: "A shuffle serves all 32 lanes at once: count the steps, not the lanes.",
            },
        ),
        "log2 32 = 5: the offsets 16, 8, 4, 2 and 1, one SHFL.DOWN each (ptxas unrolls the loop). "
        "Each shuffle lets every lane add another's value, so after five the first lane holds "
        "all 32; the other lanes' sums are partial and unused.",
        worked=lambda v: v["shfl"],
        measured={"shfl": "count"},
        answer_as="SHFL instructions",
    ),
    Spec(
        "tree-bank-conflict",
        NOTEBOOK,
        "The strided tree (sum_strided) lets thread t of the block add s[i + stride] into s[i] "
        "at i = 2 x stride x t, for the threads whose i lies inside the block's 256 words. "
        "Shared memory has 32 banks of 32-bit words (word w is in bank w mod 32), and a warp's "
        "request takes one pass per distinct word in its busiest bank. At stride = 2, predict "
        "that n-way conflict (the passes) of the first warp's read of s[i]. The cell after your "
        "answer computes the bank of each lane's address.",
        number(
            lambda v: v["degree"],
            abs=0,
            low="Write down i for lanes 0 to 31 at stride 2, then each word mod 32: how many "
            "lanes share the busiest bank?",
            high="Only distinct words count, and a bank holds every 32nd word: work out i mod 32 "
            "for lanes 0 to 31.",
            mistakes={
                1.0: "Consecutive lanes read words 4 apart here, not consecutive words.",
                2.0: "That is the first step, stride 1 (words 2 apart): at stride 2 they are 4 "
                "apart.",
                32.0: "All 32 lanes would have to hit one bank: words 4 apart spread over 8 banks.",
            },
        ),
        "4-way. At stride 2, i = 4t: lanes 0 to 31 read the words 0, 4, ..., 124, whose banks are "
        "0, 4, ..., 28, eight banks with four distinct words each. Each step the stride doubles "
        "and so does the conflict (2, 4, 8 ways) until fewer lanes remain active; sequential "
        "addressing (consecutive threads, consecutive words) has none.",
        worked=lambda v: v["degree"],
        measured={"degree": "positive count"},
        answer_as="ways (passes of the request)",
    ),
    Spec(
        "scan-adds",
        NOTEBOOK,
        "Hillis-Steele's inclusive scan of n = 1024 values runs log2 n steps; at the step with "
        "offset d (1, 2, 4, ..., 512) every element i >= d adds element i - d, and the elements "
        "below d are copied. Predict the adds over the whole scan; the cell after your answer "
        "counts them as it runs the kernel's index arithmetic in numpy. (Within 2%.)",
        number(
            lambda v: v["adds"],
            unit="adds",
            rel=0.02,
            low="Every step adds for almost every element, not only for the ones a tree would "
            "touch: count n - d per step.",
            high="At the step with offset d, the first d elements have no partner: they are "
            "copied, not added.",
            mistakes={
                2046.0: "That is the work-efficient (Blelloch) scan's count, 2 (n - 1): "
                "Hillis-Steele adds at almost every element at every step.",
                1023.0: "That is a reduction's n - 1: a scan keeps every prefix, and this one "
                "recomputes them at every step.",
                10240.0: "n log2 n counts an add for every element at every step, but at the step "
                "with offset d the first d elements add nothing.",
            },
        ),
        "The sum over the steps of n - d: 10 x 1024 - (1 + 2 + ... + 512) = 10,240 - 1,023 = "
        "9,217 adds, about n log2 n, against 2 (n - 1) = 2,046 for Blelloch's up-sweep and "
        "down-sweep: 4.5 times the work, in half the steps (10 against 20).",
        worked=lambda v: v["adds"],
        measured={"adds": "positive count"},
        answer_as="adds",
    ),
    Spec(
        "reduction-bound",
        NOTEBOOK,
        lambda v: (
            "A sum of n = 2**28 floats (1 GiB) reads every byte once and adds 0.25 FLOP per "
            f"byte, far left of every ridge point. At the H200's recorded HBM rate of "
            f"{v['hbm_tbps']:.2f} TB/s, predict the fastest it can run, in microseconds. The "
            "cell after your answer works it out from the recorded ceiling. (Within 10%.)"
        ),
        number(
            lambda v: v["predicted_us"],
            unit="us",
            rel=0.10,
            low="The bound is the bytes over the rate: 4 bytes per float, 2**28 floats.",
            high="Divide the bytes by the rate in bytes per second (a TB is 10**12 bytes) and "
            "convert seconds to microseconds.",
            mistakes={64.5: "Bytes, not floats: each float is 4 bytes."},
        ),
        lambda v: (
            f"2**28 x 4 B = 1,073,741,824 B over {v['hbm_tbps']:.2f} TB/s = "
            f"{v['predicted_us']:.0f} us. The adds would take far less at the recorded FP32 "
            "rate, so the prediction is the time to read the input; a tree's shared-memory "
            "traffic or a single address's atomics can make a kernel slower than that, never "
            "faster."
        ),
        worked=lambda v: v["predicted_us"],
        given={"hbm_tbps": "positive"},
        measured={"predicted_us": "positive"},
        answer_as="microseconds",
    ),
)

# What the notebook counted (its stored outputs), with which each solution passes its check.
EXAMPLES: dict[str, dict[str, object]] = {
    "warp-shuffle-count": {"shfl": 5},
    "tree-bank-conflict": {"degree": 4},
    "scan-adds": {"adds": 9217},
    "reduction-bound": {"hbm_tbps": 4.16, "predicted_us": 258.4},
}
