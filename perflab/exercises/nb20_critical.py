"""Exercises of notebooks/20-the-critical-path-of-a-step.ipynb: predictions read off a step's
critical path (a what-if's step time, the kind that bounds a job with a straggler, what a faster
network buys a host-bound rank, Amdahl's bound), each asked before the replay that decides it."""

from __future__ import annotations

from perflab.analysis.critical_walk import KINDS
from perflab.exercises import Spec
from perflab.exercises.checks import choice, largest, number

NOTEBOOK = "20-the-critical-path-of-a-step"

_NOT_THE_STRAGGLERS = (
    "Look at the rank that arrives last at each all-reduce: what does it do just before, "
    "while the others wait?"
)
_KIND_HINTS = {
    "host": "Every rank runs the same Python, about a fifth of a step: what runs longer on the "
    "rank that arrives last?",
    "launch": "A launch call and its latency take microseconds; the step takes most of a "
    "millisecond.",
    "kernel": "GEMMs run on every rank, but the path goes through one rank's at each "
    "all-reduce: is that GEMM longer than the rest of the step?",
    "copy": "This job copies nothing between host and device.",
    "collective": "The ranks' collectives are matched across the job, so the path splits each "
    "into waiting (off the path) and transfer.",
    "collective transfer": "The fast ranks' all-reduce kernels are long, but most of that is "
    "waiting for the last rank, and the path runs through the last to arrive. "
    + _NOT_THE_STRAGGLERS,
    "unexplained": "Every stretch of this job's steps follows a recorded dependency.",
}

# values the notebook measured when it last ran (tests/test_exercises.py checks the solutions)
EXAMPLES = {
    "tiny-kernels-half": {"predicted_us": 133.0},
    "host-half-step": {"predicted_ms": 19.39},
    "straggler-kind": {
        "by_kind": {"kernel": 606.0, "host": 184.0, "collective transfer": 80.0, "launch": 5.0}
    },
    "comm-half-rank": {"recorded_ms": 222.37, "predicted_ms": 222.37},
    "amdahl-bound": {"gpu_share": 0.081},
}


EXERCISES = (
    Spec(
        "tiny-kernels-half",
        NOTEBOOK,
        "Read the tiny step's path above, stretch by stretch. Predict the step's duration, in "
        "microseconds, when every kernel and copy runs twice as fast (kernels=0.5); the replay "
        "below answers.",
        number(
            lambda v: v["predicted_us"],
            unit="us",
            abs=2.0,
            low="Only GPU work shrinks: the host's stretches, the launch latency and the copy "
            "call's return after its copy keep their length.",
            high="Every kernel and copy on the path is halved, the readback's copy too: add "
            "the path's stretches again with those halved.",
            mistakes={
                100.0: "That halves the whole step; the host's stretches and the launch latency "
                "do not run on the GPU."
            },
        ),
        "The path is aten::mm's host time (10 us), the launch of the GEMM (10 us: the call and "
        "its latency), the GEMM (100 us), the softmax (30 us, after the cross-stream wait), the "
        "readback's copy (4 us), the copy call's return (6 us) and log_metrics (40 us). Halving "
        "the GPU work: 10 + 10 + 50 + 15 + 2 + 6 + 40 = 133 us. The path stays the same chain: "
        "the host still waits in the blocking readback.",
        worked=133.0,
        measured={"predicted_us": "positive"},
        answer_as="microseconds, such as 150",
    ),
    Spec(
        "host-half-step",
        NOTEBOOK,
        "From the H200 steps' time by kind above (their mean is about 35.6 ms), predict the "
        "mean step, in ms, with every host event twice as fast (host=0.5), before the replay "
        "below. Remember what a launch stretch on this path is: the launch call's own time, on "
        "the host.",
        number(
            lambda v: v["predicted_ms"],
            unit="ms",
            rel=0.06,
            low="Only the host's part of the path halves; the copy and the launches' latency to "
            "the GPU keep their length.",
            high="host=0.5 halves the launch calls too: they are host work, on the host's lane.",
            mistakes={
                21.5: "That halves the host stretches only: the launch calls on the path are "
                "host work too, and halve with them."
            },
        ),
        "Host stretches are about 79% of each step and launch calls (host work) about 12%: "
        "halving both removes about 45% of the step, 35.6 ms x (1 - 0.91 / 2), about 19.4 ms. "
        "The path stays on the host because even halved, the host's work is far longer than "
        "the GPU's (about 4.6 ms of kernels per step).",
        worked=19.4,
        measured={"predicted_ms": "positive"},
        answer_as="milliseconds, such as 30",
    ),
    Spec(
        "straggler-kind",
        NOTEBOOK,
        "Before its critical path below: in the generated 4-rank job, rank 2's GEMM runs 1.5x "
        "as long as the others', and the fast ranks' all-reduce kernels last several times the "
        "80 us transfer. Which kind of stretch takes the most of each step's path: 'host', "
        "'launch', 'kernel', 'copy', 'collective', 'collective transfer' or 'unexplained'?",
        choice(
            largest("by_kind"),
            list(KINDS),
            why=_KIND_HINTS,
            right="The path runs through the last rank to arrive at each all-reduce: the "
            "straggler's GEMM. The fast ranks' long NCCL kernels are waiting, off the path; only "
            "the transfer after the last arrival is on it.",
        ),
        "kernel: the path of every step runs through rank 2's GEMM (about 600 us of a step "
        "of about 880 us), then only the transfer (80 us) of the all-reduce. The other ranks' "
        "all-reduce kernels start early and wait for rank 2; that waiting is not on the path, "
        "so a faster network would buy only the transfer.",
        worked="kernel",
        measured={"by_kind": "numbers"},
    ),
    Spec(
        "comm-half-rank",
        NOTEBOOK,
        "The A100 DDP rank's NCCL kernels run for about 15.6 ms per step of about 222 ms. "
        "Predict what share of its mean step a network twice as fast (comm=0.5) saves, as a "
        "fraction such as 0.05, before the replay below.",
        number(
            lambda v: 1 - v["predicted_ms"] / v["recorded_ms"],
            abs=0.02,
            low="A faster network cannot make the step longer.",
            high="A what-if shortens a step only by what is on its path: is any collective on "
            "this rank's path, and how much of an NCCL kernel in one rank's trace is waiting for "
            "the peer?",
        ),
        "Nothing: the rank's path is host (95%) and launch calls (5%), no GPU work and no "
        "collective on it. Its all-reduces run on their own stream while the host is still "
        "launching the rest of the step, and in one rank's trace an NCCL kernel's duration "
        "mixes waiting for the peer with moving data. A faster network changes nothing until "
        "the host is no longer the bound (the replay with host=0.5 and comm=0.5 says it still "
        "is).",
        worked=0.0,
        measured={"recorded_ms": "positive", "predicted_ms": "positive"},
        answer_as="a fraction",
    ),
    Spec(
        "amdahl-bound",
        NOTEBOOK,
        "Amdahl's law on the H200 step's path: predict the largest speed-up of the mean step "
        "(recorded time / new time, such as 1.5) that any change to the GPU's work alone "
        "(kernels and copies, even made free) could give.",
        number(
            lambda v: 1 / (1 - v["gpu_share"]),
            rel=0.03,
            low="Free GPU work removes all of the GPU's share of the path, but nothing more: "
            "what share of the path is GPU work?",
            high="Only the GPU's stretches on the path can go; the host's time stays. What is "
            "1 / (1 - f) for the GPU's share f?",
        ),
        "Kernels and copies are about 8% of the H200 path (the pageable input copy; no kernel "
        "is on it), so the step cannot get shorter than 92% of itself by changing the GPU's "
        "work: a speed-up of at most 1 / (1 - 0.08), about 1.09x. The replay with kernels=0 "
        "reaches that bound here, because the host's chain stays the longest.",
        worked=lambda v: 1 / (1 - v["gpu_share"]),
        measured={"gpu_share": "fraction"},
        answer_as="a ratio",
    ),
)
