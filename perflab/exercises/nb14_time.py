"""Exercises of notebooks/14-where-did-the-time-go.ipynb: two predictions about the A100
training trace, asked before its summary."""

from __future__ import annotations

from perflab.analysis.categories import category_names
from perflab.exercises import Spec
from perflab.exercises.checks import choice, largest, ranges

NOTEBOOK = "14-where-did-the-time-go"

# each wrong pick's hint: what that category is, and what it leaves out in a data-parallel step
_WAIT = "What must every rank of a data-parallel step wait for, and in which kernels?"
_CATEGORY_HINTS = {
    "communication": "The NCCL kernels run for as long as their collective takes: do they "
    "take longer than the compute of this step?",
    "gemm": "Most matrix-multiply kernels in a convolutional network are cuDNN's convolutions "
    "run as GEMMs, named apart from the convolution category; either way the compute is "
    "spread over many short kernels. " + _WAIT,
    "convolution": "The convolution kernels are many and each is short; think about what else "
    "runs for a long time in a data-parallel step. " + _WAIT,
    "normalization": "Batch norm kernels are many and memory-bound, but each is short. " + _WAIT,
}


EXERCISES = (
    Spec(
        "largest-category",
        NOTEBOOK,
        "This trace is rank 0 of a 2-rank data-parallel training run of a convolutional network "
        "on A100s (cuDNN convolutions, batch norm, NCCL all-reduce of the gradients). Before the "
        "summary below: which kernel category will take the most GPU kernel time? One of "
        + ", ".join(category_names())
        + ".",
        choice(
            largest("category_us"),
            category_names(),
            why={
                name: _CATEGORY_HINTS.get(name, "A category of many short kernels. " + _WAIT)
                for name in category_names()
            },
            right="In a data-parallel step the NCCL kernels last as long as the collective, "
            "waiting for the other rank included: their time is not all transfer.",
        ),
        "Communication, here: the NCCL kernels take the largest share of the kernel time. An "
        "NCCL kernel runs from its own rank's launch until the collective is done, waiting for "
        "the other rank included, so its time is not all transfer; one rank's trace cannot say "
        "how much of it was waiting.",
        worked="communication",
        measured={"category_us": "numbers"},
    ),
    Spec(
        "comm-overlap",
        NOTEBOOK,
        "DDP all-reduces the gradients in buckets while the backward pass still runs, so that "
        "communication hides behind compute. Predict what share of the NCCL kernel time in this "
        "trace ran while other kernels ran: 'little' (under a third), 'some' (a third to two "
        "thirds) or 'most' (over two thirds)?",
        ranges(
            lambda v: v["overlapped_us"] / v["nccl_us"],
            [1 / 3, 2 / 3],
            ["little", "some", "most"],
            low="DDP starts each bucket's all-reduce as soon as its gradients are ready, during "
            "the backward pass: some overlap is built in.",
            high="Overlap needs compute kernels running at the same time; after the last "
            "backward kernel, and while the other rank is late, the NCCL kernels run alone.",
        ),
        "Little, in this trace: most of the NCCL kernel time ran with no compute kernel beside "
        "it. That alone does not say the step paid for it: an NCCL kernel's time includes "
        "waiting for the other rank, and in this host-bound step the compute stream was often "
        "empty because the host had not launched its next kernel yet. The step's critical path "
        "says whether the step waited for those kernels (section 8: it did not).",
        worked="little",
        measured={"nccl_us": "positive", "overlapped_us": "number"},
    ),
)
