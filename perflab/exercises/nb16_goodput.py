"""Exercises of notebooks/16-goodput-of-a-training-step.ipynb."""

from __future__ import annotations

from perflab.analysis.idle_classify import CAUSES
from perflab.exercises import Spec
from perflab.exercises.checks import choice, largest, number, ranges

NOTEBOOK = "16-goodput-of-a-training-step"

_CAUSE_HINTS = {
    "host-busy": "The GPU waits while the host runs Python and framework code between "
    "launches: how much host work do some 300 small kernels per step need?",
    "after-sync": "The step reads the loss back once (loss.item()): one wait per step. What "
    "does the host do between its hundreds of launches?",
    "launch-overhead": "A launch call costs microseconds: about 300 launches per step add up "
    "to a few milliseconds, not most of a step of about 35 ms.",
    "launch-blocked": "A launch call that blocks for 100 us or more (a full launch queue, the "
    "driver) is rare: a GPU that keeps running out of work has no full queue to block on.",
    "gpu-dependency": "Work waits for another stream, a peer rank or a copy engine: this is one "
    "GPU with no collectives and no peers to wait for.",
    "unknown": "Nearly every gap here ends with a launch that the trace ties to the thread that "
    "made it, so its cause can be named.",
}


EXERCISES = (
    Spec(
        "padding-share",
        NOTEBOOK,
        "Lengths are drawn uniformly from 8 to 64 and every batch is padded to 64. Predict what "
        "share of the processed tokens is padding; the cell below measures it. (A fraction such "
        "as 0.3; within 0.05.)",
        number(
            lambda v: 1 - v["real_tokens"] / v["padded_tokens"],
            abs=0.05,
            low="Padding fills each row from its sequence's length up to 64: how long is a "
            "sequence on average, next to 64?",
            high="Each sequence has at least 8 real tokens, and the lengths are spread evenly "
            "up to 64: what is their mean?",
        ),
        "The mean length is (8 + 64) / 2 = 36 tokens, so 36 / 64 = 56% of each padded row is "
        "real and about 44% is padding. The measured share differs a little because 20 batches "
        "are a sample of the lengths.",
        worked=1 - 36 / 64,
        measured={"real_tokens": "count", "padded_tokens": "positive count"},
        answer_as="a fraction",
    ),
    Spec(
        "busy-share",
        NOTEBOOK,
        "Before the summary below: how busy was the H200 over the profiled span (kernels and "
        "copies)? Predict 'mostly idle' (busy under 40% of the time), 'about half' (40% to "
        "70%) or 'mostly busy' (over 70%). The phases above give a feel for it: steps of about "
        "35 ms, 1,256 kernels in four steps, a batch of 32 x 256 tokens on a 13-million-"
        "parameter model.",
        ranges(
            lambda v: v["busy_us"] / v["span_us"],
            [0.4, 0.7],
            ["mostly idle", "about half", "mostly busy"],
            low="The GPU does more than that: count the kernels per step, and the input copies "
            "of 16 MiB from pageable memory.",
            high="About 300 kernels per step of 35 ms: at a few to tens of microseconds each, "
            "on a GPU this fast, how much of the step do they fill?",
        ),
        "Mostly idle, in this trace: kernels and copies fill about a fifth of the span. For a "
        "training step that should keep the GPU full, that idle time matters more than the "
        "speed of any kernel; the idle breakdown says what the GPU waited for.",
        worked="mostly idle",
        measured={"busy_us": "positive", "span_us": "positive"},
    ),
    Spec(
        "idle-cause",
        NOTEBOOK,
        "perflab puts each idle gap down to what the host did before it launched the work that "
        "ended it: 'host-busy' (running Python and framework code), 'after-sync' (waiting in a "
        "synchronisation or a blocking copy), 'launch-overhead' (launching back to back: the "
        "launches themselves are the cost), 'launch-blocked' (a launch call blocked for 100 us "
        "or more), 'gpu-dependency' (the work waited for another stream, a peer rank or a copy "
        "engine) or 'unknown'. Predict which cause takes the most idle time in this trace.",
        choice(
            largest("idle_us"),
            list(CAUSES),
            why=_CAUSE_HINTS,
            right="The GPU finished its queue and waited while the host ran framework code "
            "before its next launch: that is fixed on the host side, with less host work for the "
            "same GPU work, not by a faster GPU or faster launches.",
        ),
        "host-busy, in this trace: between launches the host runs Python and framework code "
        "(the operators' own host work, autograd, AdamW's per-parameter ops), and the GPU, "
        "having finished its queue, waits. The per-step readback (after-sync) and the launch "
        "calls themselves (launch-overhead) hold little of it. Less host work for the same GPU "
        "work fixes it: larger batches, fewer operators to dispatch (a fused optimizer, "
        "torch.compile), CUDA graphs where the whole step can be captured and replayed; a "
        "faster GPU does not.",
        worked="host-busy",
        measured={"idle_us": "numbers"},
    ),
)
