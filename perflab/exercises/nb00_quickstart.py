"""Exercises of notebooks/00-quickstart.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import number

NOTEBOOK = "00-quickstart"

_MIDDLE = (
    "That is one of the two middle samples. With an even number of samples, the statistic "
    "that ignores the interrupted one lies between the middle two."
)
_ONE_SAMPLE = (
    "That is one of the samples, neither the middle nor an extreme: sort the six and take the "
    "value with half of them on each side."
)

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
            low="Too low for the statistic %%gpuprofile reports: sort the six samples and find "
            "the value with half of them on each side.",
            high="Too high for the statistic %%gpuprofile reports: one interrupted sample must "
            "not move it much. Sort the six samples: which value has half of them on each side?",
            mistakes={
                4.0: "That is the minimum, the luckiest sample: a minimum hides the noise and "
                "rewards measurement artefacts.",
                4.1: _ONE_SAMPLE,
                4.2: _MIDDLE,
                4.3: _MIDDLE,
                4.4: _ONE_SAMPLE,
                5.0: "That is the mean: the one interrupted sample pulls it up, and it describes "
                "no run. Which statistic hardly notices one outlier?",
                9.0: "That is the interrupted sample, the maximum: the reported time is the one "
                "that an interrupt hardly moves.",
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
            mistakes={
                2: "That is how the side of the matrix grows. Each of the n^2 outputs sums n "
                "products: how does the count of products grow when n doubles?",
                4: "That is how the size of each matrix (n^2 elements) grows; the arithmetic "
                "grows faster: each of the n^2 outputs sums n products.",
            },
        ),
        "An n x n matmul does 2n^3 floating-point operations, so doubling n multiplies the work "
        "by 2^3 = 8. A time ratio printed by --compare below 8 means the larger matmul used the "
        "machine better (fixed costs and idle hardware weigh less in it); read it only when "
        "neither result warns of noise.",
        worked=8,
    ),
)
