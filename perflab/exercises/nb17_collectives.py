"""Exercises of notebooks/17-collectives.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import number

NOTEBOOK = "17-collectives"

EXERCISES = (
    Spec(
        "busbw-factor",
        NOTEBOOK,
        "What is the bus-bandwidth factor of an all_reduce on 16 ranks? (Within 1%.)",
        number(
            2 * (16 - 1) / 16,
            rel=0.01,
            low="The definitions above give the factor as a function of n, the number of "
            "ranks: put n = 16 in.",
            high="In a ring each rank sends a reduce-scatter pass and an all-gather pass of "
            "(n-1)/n of the message each: the factor stays below 2 for every n.",
        ),
        "2(n-1)/n = 30/16 = 1.875: each rank sends and receives 2(n-1)/n x S bytes in a ring "
        "all_reduce, close to 2S for many ranks.",
        worked=1.875,
    ),
    Spec(
        "busbw",
        NOTEBOOK,
        "Suppose an all_reduce of a 1 GB message on 8 GPUs takes 5 ms. What bus bandwidth does "
        "nccl-tests report, in GB/s? (Within 2%.)",
        number(
            1e9 / 5e-3 / 1e9 * 2 * (8 - 1) / 8,
            unit="GB/s",
            rel=0.02,
            low="busbw is algbw times the all_reduce factor for 8 ranks, which is above 1.",
            high="Start from algbw = S / t with S the message size itself (for all_reduce S "
            "is not multiplied by n), then apply the factor once.",
        ),
        "algbw = 1 GB / 5 ms = 200 GB/s; busbw = 200 x 2(8-1)/8 = 350 GB/s: what each link "
        "carried, comparable with the link's own bandwidth.",
        worked="350 GB/s",
        answer_as='e.g. "300 GB/s"',
    ),
)
