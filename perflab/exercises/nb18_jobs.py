"""Exercises of notebooks/18-whole-jobs.ipynb: predictions about the generated jobs with a
straggler, two asked before the summary and one before the critical path's what-ifs."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import choice, number, ranges, smallest

NOTEBOOK = "18-whole-jobs"
RANKS = ["0", "1", "2", "3"]
_FAST = (
    "This rank is not slow, so its all-reduce kernel starts early: what does it do inside the "
    "kernel until the last rank arrives?"
)


EXERCISES = (
    Spec(
        "shortest-comm",
        NOTEBOOK,
        "Rank 2 is the straggler: its compute takes longer, so it arrives last at most "
        "all-reduces. Predict which rank's own trace will show the least time inside its "
        "all-reduce kernels (its comm time): 0, 1, 2 or 3?",
        choice(
            smallest("comm_us"),
            RANKS,
            why={
                "0": _FAST,
                "1": _FAST,
                "3": _FAST,
                "2": "An all-reduce kernel lasts from its rank's arrival until the last rank "
                "has arrived and the data has moved: which rank waits least inside it?",
            },
            right="The straggler arrives last, so its all-reduce kernel hardly waits; the fast "
            "ranks' kernels start early and wait for it. Comm time in one rank's trace is "
            "partly waiting for the others: only the whole job says whose fault it is.",
        ),
        "Rank 2, the straggler itself: it arrives last, so its all-reduce kernels are the "
        "shortest (transfer only), while the other ranks' kernels start earlier and wait for "
        "it. Read in one rank's trace, a long all-reduce looks like slow communication; in the "
        "job it is waiting for a slow rank.",
        worked="2",
        measured={"comm_us": "numbers"},
    ),
    Spec(
        "goodput-lost",
        NOTEBOOK,
        "In about 80% of the iterations the straggler computes 40-80 us longer than the others "
        "(whose compute takes 200-260 us; the all-reduce's transfer takes 50-70 us). Predict "
        "what share of all the ranks' busy GPU time the three other ranks spend waiting for it "
        "(a fraction; within a factor of 2).",
        number(
            lambda v: v["wait_us"] / v["busy_us"],
            factor=2,
            low="Three ranks wait, not one, in most iterations, each for as long as the "
            "straggler is late.",
            high="The wait is only the straggler's lateness (tens of microseconds, in 4 of 5 "
            "iterations), against every rank's busy time per iteration: compute plus its "
            "all-reduce kernel.",
        ),
        "Per iteration the three other ranks each wait about as long as the straggler is late "
        "(tens of microseconds, in most iterations), while each rank is busy about 300 us "
        "(compute and its all-reduce), 1.2 ms for four: 3 x 60 us x 0.8 / 1.2 ms is about 0.1. "
        "That share of GPU time looked busy but did nothing; fixing one rank's compute gives it "
        "back to all of them.",
        worked=0.1,
        measured={"wait_us": "positive", "busy_us": "positive"},
        answer_as="a fraction",
    ),
    Spec(
        "faster-network",
        NOTEBOOK,
        "In the job with its host side, each step on every rank is about 100 us of Python, a "
        "GEMM of 300-400 us (1.6 times as long on rank 2) and an all-reduce whose transfer "
        "takes 60 us once the last rank has arrived. Predict how much shorter the mean step "
        "gets if every transfer ran twice as fast: 'under 10%', '10% to 30%' or 'over 30%'?",
        ranges(
            lambda v: 1 - v["what_if_ns"] / v["recorded_ns"],
            [0.1, 0.3],
            ["under 10%", "10% to 30%", "over 30%"],
            low="A faster network shortens at least the transfer, which every step waits for "
            "after the last rank arrives.",
            high="Only the transfer shrinks, not the fast ranks' wait for rank 2: what share of "
            "a step is the transfer itself?",
            right="The wait for the straggler is set by its GEMM, not by the network: only the "
            "transfer's own share of the step comes off.",
        ),
        "Under 10%: a twice-as-fast network saves half of the 60 us transfer, about 30 us of a "
        "step of about 800 us. The fast ranks' time inside their all-reduce kernels is mostly "
        "waiting for rank 2's GEMM, and that wait does not shrink with the network.",
        worked="under 10%",
        measured={"recorded_ns": "positive", "what_if_ns": "positive"},
    ),
)

# Values the notebook measured (its stored outputs), with which each solution passes its check.
EXAMPLES: dict[str, dict[str, object]] = {
    "faster-network": {"recorded_ns": 802_500.0, "what_if_ns": 772_500.0},
}
