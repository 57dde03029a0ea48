"""Exercises of notebooks/15-nsight-reports.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, choice, number, ranges

NOTEBOOK = "15-nsight-reports"


def _nearer_peak(values: Values) -> str:
    return "memory" if values["memory_pct"] > values["compute_pct"] else "compute"


EXERCISES = (
    Spec(
        "gemv-share",
        NOTEBOOK,
        "Each iteration of this power iteration does one dense matrix-vector product in double "
        "precision (cuBLAS) and a few operations on vectors of the same length (a norm, a "
        "scaling, a residual). Before the kernel table below: what share of the kernel time "
        "will the matrix-vector kernel take? 'under half', 'most' (half to 90%) or 'nearly all' "
        "(over 90%)?",
        ranges(
            lambda v: v["gemv_ns"] / v["all_ns"],
            [0.5, 0.9],
            ["under half", "most", "nearly all"],
            low="A matrix-vector product reads the whole n x n matrix; a vector operation reads "
            "a few vectors of n elements. With n in the thousands, how do they compare?",
            high="The vector operations are many small kernels, each with a fixed cost of a "
            "few microseconds whatever its size.",
        ),
        "Nearly all: the matrix-vector product reads n^2 doubles per iteration, the vector "
        "operations a few times n. The reductions and element-wise kernels are many but short.",
        worked="nearly all",
        measured={"gemv_ns": "positive", "all_ns": "positive"},
    ),
    Spec(
        "ncu-bound",
        NOTEBOOK,
        "The cells below read an Nsight Compute report of copy_blocked, a Numba kernel that "
        "copies an array. Predict which Speed Of Light throughput is nearer its peak: 'memory' "
        "or 'compute'?",
        choice(
            _nearer_peak,
            ["memory", "compute"],
            why={
                "memory": "A copy moves bytes and does no arithmetic, but a badly strided one "
                "can waste its memory traffic: check what the SM is busy with.",
                "compute": "A copy does no arithmetic: only a few address computations per "
                "element run on the SM.",
            },
            right="The unit nearest its peak is the limit; for a copy it should be memory, and "
            "how far below the peak it stays is the next question.",
        ),
        "Memory: DRAM throughput is well above the compute (SM) throughput, which is near zero, "
        "as it should be for a copy. A copy should also come close to the DRAM peak; the rules "
        "of the report say why this one does not.",
        worked="memory",
        measured={"memory_pct": "number", "compute_pct": "number"},
    ),
    Spec(
        "sectors",
        NOTEBOOK,
        "Only 8 of every 32 bytes fetched per sector are used. If the accesses were fully "
        "coalesced, by what factor would the DRAM traffic for the same copy drop? (Within 10%.)",
        number(
            32 / 8,
            rel=0.10,
            low="Fully coalesced, a warp uses every byte of each 32-byte sector it fetches: how "
            "many sectors does it then need, next to using 8 bytes of each?",
            high="The copy still moves every byte it uses once: the saving is the unused bytes "
            "of each sector, no more.",
        ),
        "32 / 8 = 4x fewer bytes. The UncoalescedGlobalAccess rule says the same from the other "
        "side: 75% of the sectors are excessive.",
        worked=4,
        answer_as="a factor",
    ),
)
