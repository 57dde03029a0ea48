"""Exercises of notebooks/10-launch-overhead-and-cuda-graphs.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import choice, number

NOTEBOOK = "10-launch-overhead-and-cuda-graphs"

EXERCISES = (
    Spec(
        "launch-bound",
        NOTEBOOK,
        "Suppose a decode loop launches 400 kernels per token; each runs 3 us on the GPU, and "
        "the host needs 5 us to issue each launch. Is the loop 'launch-bound' or 'GPU-bound'?",
        choice(
            "launch-bound",
            ["launch-bound", "GPU-bound"],
            why={
                "launch-bound": "The host needs 5 us per kernel, the GPU only 3: the GPU waits "
                "for the host.",
                "GPU-bound": "Compare the two rates: which side finishes its part of each "
                "kernel first, and then waits for the other?",
            },
        ),
        "Launch-bound: the host issues a kernel every 5 us and the GPU finishes it in 3, so the "
        "GPU is idle 40% of the time. A profile shows gaps between kernels the size of the "
        "launch cost.",
        worked="launch-bound",
    ),
    Spec(
        "tokens-per-second",
        NOTEBOOK,
        "In the same scenario, what is the most tokens per second this loop can produce while it "
        "stays launch-bound? (Within 5%.)",
        number(
            1 / (400 * 5e-6),
            unit="tokens/s",
            rel=0.05,
            low="While the loop is launch-bound the GPU's 3 us per kernel overlaps the host's "
            "next launch: only the host's time per launch adds up.",
            high="The host cannot issue launches faster than one every 5 us, whatever the GPU "
            "does, and a token needs 400 of them.",
        ),
        "One token = 400 launches x 5 us = 2 ms of host time, so at most 500 tokens/s. A CUDA "
        "graph of the 400 kernels removes most of the per-launch host cost, and the bound moves "
        "to the GPU's 400 x 3 us = 1.2 ms (833 tokens/s).",
        worked="500 tokens/s",
        answer_as="tokens per second",
    ),
)
