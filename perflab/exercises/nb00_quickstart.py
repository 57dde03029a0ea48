"""Exercises of notebooks/00-quickstart.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import number

NOTEBOOK = "00-quickstart"

EXERCISES = (
    Spec(
        "reported-time",
        NOTEBOOK,
        "%%gpuprofile times a cell six times after its warm-up: 4.3, 4.1, 9.0, 4.2, 4.0 and "
        "4.4 ms (an interrupt hit the third sample). What time does it report for the cell, "
        "in ms?",
        number(
            4.25,
            unit="ms",
            abs=0.005,
            low="The reported time is not the luckiest sample: a minimum hides the noise and "
            "rewards measurement artefacts.",
            high="One interrupted sample must not move the reported time much: which statistic "
            "of six samples hardly notices it?",
            mistakes={
                4.2: "That is one of the two middle samples. With an even number of samples, the "
                "statistic that ignores the interrupted one lies between the middle two.",
                4.3: "That is one of the two middle samples. With an even number of samples, the "
                "statistic that ignores the interrupted one lies between the middle two.",
                5.0: "That is the mean: the one interrupted sample pulls it up, and it describes "
                "no run. Which statistic hardly notices one outlier?",
            },
        ),
        "4.25 ms, the median: half-way between the middle two of the sorted samples (4.0, 4.1, "
        "4.2, 4.3, 4.4, 9.0). The mean, 5.0 ms, is pulled up by the one interrupted sample and "
        "describes no run; the minimum, 4.0 ms, is the luckiest run. %%gpuprofile reports the "
        "median with a distribution-free 95% confidence interval and shows the minimum and "
        "maximum beside it; the spread (IQR, worst/best) decides the noise warnings.",
        worked="4.25 ms",
        answer_as="in ms",
    ),
    Spec(
        "matmul-flops",
        NOTEBOOK,
        "The comparison below times a 1024 x 1024 matmul against the 512 x 512 one. How many "
        "times the arithmetic of the 512 x 512 matmul does the 1024 x 1024 one do?",
        number(
            8,
            abs=0,
            low="Count the multiply-adds: each of the n^2 outputs sums n products, and all three "
            "of those counts grow with n.",
            high="An n x n matmul does about 2n^3 floating-point operations: work out what "
            "doubling n does to that.",
        ),
        "An n x n matmul does 2n^3 floating-point operations, so doubling n multiplies the work "
        "by 2^3 = 8. The time ratio printed by --compare is usually less than 8 on a small "
        "machine: the 512 case does not fill the hardware as well (fixed costs, caches, threads).",
        worked=8,
    ),
)
