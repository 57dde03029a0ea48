"""Exercises of notebooks/01-timing-done-right.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import choice, number, ranges

NOTEBOOK = "01-timing-done-right"


def _band(slowdown: float) -> str:
    return "little" if slowdown < 1.2 else "some" if slowdown < 3.0 else "much"


EXERCISES = (
    Spec(
        "launch-vs-work",
        NOTEBOOK,
        "On a GPU you wrap `y = model(x)` in time.perf_counter() with no synchronize and get "
        "40 us, while the profiler shows 3 ms of kernels. What did the 40 us measure? Answer "
        "'a', 'b' or 'c': (a) the kernels' run time, (b) the host's time to queue the launches, "
        "(c) the kernels plus the copy of y back to the host.",
        choice(
            "b",
            ["a", "b", "c"],
            why={
                "a": "The kernels had not finished (or even started) when the host read the clock.",
                "b": "Launches are asynchronous: the host returns once the work is queued.",
                "c": "Nothing was copied back: y stays on the GPU until you ask for it.",
            },
        ),
        "(b). A launch only queues the work; without a synchronisation (or CUDA events on the "
        "stream) the host clock stops long before the GPU finishes.",
        worked="b",
    ),
    Spec(
        "noise-slowdown",
        NOTEBOOK,
        lambda v: (
            "The cell below times the same numpy sort alone, then with two busy neighbours "
            "(processes that spin on a core each) running beside it. This machine has "
            f"{v['cores']} logical CPU(s). Predict how much slower the median gets with the "
            "neighbours: 'little' (under 1.2x), 'some' (1.2x to 3x) or 'much' (over 3x)?"
        ),
        ranges(
            lambda v: v["noisy_ns"] / v["alone_ns"],
            [1.2, 3.0],
            ["little", "some", "much"],
            low="Count the processes that want a core (the timed one and two spinning "
            "neighbours) against the cores this machine has: with more of them than cores, "
            "the timed code waits for its turn.",
            high="The neighbours take CPU time, not memory bandwidth or cache, and the operating "
            "system shares the cores fairly between the processes that can run.",
        ),
        "It depends on the cores. With more runnable processes than cores, each gets a share of "
        "them: on two cores the sort and two spinners share two cores, so the sort gets about "
        "two thirds of one and takes 1.5x as long, more with the cost of being switched out "
        "(caches refilled, a time slice to wait for): 'some'. With spare cores the neighbours "
        "hardly matter: 'little'. The comparison below gives the ratio with its interval. On a "
        "GPU the same happens when another process shares it.",
        worked=lambda v: _band(v["noisy_ns"] / v["alone_ns"]),
        given={"cores": "count"},
        measured={"alone_ns": "positive", "noisy_ns": "positive"},
    ),
    Spec(
        "cold-calls",
        NOTEBOOK,
        "With `%%gpuprofile -n 10 --flush-l2`, how many of the 10 calls in each sample start "
        "with a cold L2?",
        number(
            1,
            abs=0,
            low="A flush comes before every sample: the first call after it cannot find its "
            "data in the cache.",
            high="The flush runs once per sample, not once per call: what do the calls after "
            "the first one find in the cache?",
        ),
        "One: the flush precedes each sample; the other nine calls find the data the first one "
        "left in the cache. Use -n 1 (the default) when the cold time is what you want, or "
        "accept a warm time and say so; a CUDA graph replay (--graph) is the same: one flush "
        "per replay.",
        worked=1,
        answer_as="a whole number",
    ),
)
