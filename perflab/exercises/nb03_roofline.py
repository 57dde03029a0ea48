"""Exercises of notebooks/03-roofline.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import number

NOTEBOOK = "03-roofline"

EXERCISES = (
    Spec(
        "add-intensity",
        NOTEBOOK,
        "An fp32 element-wise add c = a + b does 1 FLOP per element. Counting the bytes it must "
        "move (read a and b, write c), what is its arithmetic intensity in FLOP/B? "
        "(Within 10%.)",
        number(
            1 / 12,
            unit="FLOP/B",
            rel=0.10,
            low="Count each array once per element: a and b read, c written, 4 bytes each.",
            high="Count all three arrays: two reads and one write of 4 bytes each, per FLOP.",
        ),
        "1 FLOP per 12 bytes (4 + 4 read, 4 written) = 0.083 FLOP/B, far left of any ridge "
        "point: an add is memory-bound on every machine. Only fusing it into a neighbour moves it.",
        worked=1 / 12,
        answer_as="FLOP per byte",
    ),
    Spec(
        "matmul-intensity",
        NOTEBOOK,
        "An fp32 n x n matmul does 2n^3 FLOPs and must move at least 3n^2 elements of 4 bytes "
        "(read A and B, write C). Predict its intensity at n = 1024, in FLOP/B: the cell below "
        "counts both with torch's FlopCounterMode. (Within 5%.)",
        number(
            lambda v: v["flops"] / v["bytes"],
            unit="FLOP/B",
            rel=0.05,
            low="Intensity grows with n: simplify 2n^3 / (3n^2 x 4 bytes) to a function of n "
            "before putting n = 1024 in.",
            high="Every element is 4 bytes, and all three matrices move: 3n^2 x 4 bytes.",
        ),
        "2n^3 / (12 n^2) = n / 6, so 170.7 FLOP/B at n = 1024: intensity grows with n, which is "
        "why large matmuls can be compute-bound and small ones cannot.",
        worked=1024 / 6,
        measured={"flops": "positive", "bytes": "positive"},
        answer_as="FLOP per byte",
    ),
)
