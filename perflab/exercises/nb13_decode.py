"""Exercises of notebooks/13-llm-decode-and-quantisation.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, number, ranges

NOTEBOOK = "13-llm-decode-and-quantisation"

# the batch-8 / batch-1 time ratio's bands
BATCH_BOUNDS = (1.5, 5.0)
BATCH_LABELS = ("about the same", "in between", "about 8x")


def _int8_mb(v: Values) -> float:
    return float(v["weights"] + 4 * v["channels"]) / 1e6


def _band(ratio: float) -> str:
    return BATCH_LABELS[sum(ratio >= bound for bound in BATCH_BOUNDS)]


EXERCISES = (
    Spec(
        "decode-intensity",
        NOTEBOOK,
        "One decode step at batch 1, in fp32: every weight of every Linear layer is read once "
        "(4 bytes each) and used in one multiply and one add for the single new token; the KV "
        "cache adds a few percent to both the bytes and the FLOPs. Predict the step's arithmetic "
        "intensity in FLOP/B. The cell after your answer counts both from the model's shapes. "
        "(Within 15%.)",
        number(
            lambda v: v["flops"] / v["bytes"],
            unit="FLOP/B",
            rel=0.15,
            low="Count per weight: a multiply and an add are 2 FLOPs, and the weight is read "
            "once, 4 bytes in fp32. Divide the FLOPs by the bytes.",
            high="At batch 1 each weight is used by one token only: 2 FLOPs for the 4 bytes "
            "it costs to read it. Nothing is reused, so the intensity cannot grow with the "
            "matrix's size as a matmul's does.",
        ),
        lambda v: (
            f"2 FLOPs per weight over 4 bytes per weight: 0.5 FLOP/B, a little less with the KV "
            f"cache (counted: {v['flops'] / 1e6:.1f} MFLOP over {v['bytes'] / 1e6:.1f} MB = "
            f"{v['flops'] / v['bytes']:.3f} FLOP/B). A matrix-vector product reuses nothing, so "
            "its intensity is fixed by the bytes per weight: 1 FLOP/B in bf16, 2 in int8. "
            "Every CPU and GPU ridge point lies far to the right: decode at batch 1 is "
            "memory-bound."
        ),
        worked=lambda v: v["flops"] / v["bytes"],
        measured={"flops": "positive", "bytes": "positive"},
        answer_as="FLOP per byte",
    ),
    Spec(
        "batch-decode-time",
        NOTEBOOK,
        "The sweep below times one decode step at batch 1, 2, 4, 8 and 16 (the same weights, "
        "one new token per sequence). Predict how long a batch-8 step takes compared with a "
        "batch-1 step: 'about the same' (under 1.5x), 'in between' (1.5x to 5x) or 'about 8x' "
        "(5x or more).",
        ranges(
            lambda v: v["batch8_ms"] / v["batch1_ms"],
            BATCH_BOUNDS,
            BATCH_LABELS,
            low="Every sequence in the batch needs its own 2 FLOPs per weight. Compare 8 times "
            "the FLOPs of one token with what this CPU's measured peak does in the time of a "
            "batch-1 step: the arithmetic stops hiding behind the weight reads.",
            high="The weights are read once per step whatever the batch: the bytes hardly grow "
            "with the batch, only the FLOPs do, and at batch 1 the arithmetic is a small part "
            "of the step.",
            unit="x",
        ),
        lambda v: (
            f"Measured here: {v['batch8_ms']:.1f} ms against {v['batch1_ms']:.1f} ms, "
            f"{v['batch8_ms'] / v['batch1_ms']:.2f}x for 8 times the tokens. The weights "
            "are read once per step for the whole batch, so as long as the step is bound by "
            "reading them, a larger batch is almost free per step and throughput grows with "
            "the batch. The step grows once the batch's FLOPs take longer than the weight reads "
            "(intensity near the ridge point), and on a CPU a matrix-matrix kernel also runs at "
            "another rate than a matrix-vector one."
        ),
        worked=lambda v: _band(v["batch8_ms"] / v["batch1_ms"]),
        measured={"batch1_ms": "positive", "batch8_ms": "positive"},
    ),
    Spec(
        "int8-weight-bytes",
        NOTEBOOK,
        lambda v: (
            f"The model's Linear layers hold {v['weights']:,} weights in "
            f"{v['channels']:,} output channels. Weight-only int8, per output channel: "
            "each weight becomes one int8 and each output channel keeps one fp32 scale. How "
            "many MB (10^6 bytes) of weights does one decode step read after quantisation? "
            "(Within 5%.)"
        ),
        number(
            _int8_mb,
            unit="MB",
            rel=0.05,
            low="Count one byte for every weight, then the scales (4 bytes per output channel) "
            "on top: the int8 values alone are nearly all of it.",
            high="An int8 weight is one byte, not four: the fp32 weights are no longer read, "
            "and the scales are one number per output channel, not per weight.",
        ),
        lambda v: (
            f"{v['weights']:,} weights x 1 byte + {v['channels']:,} scales x 4 bytes = "
            f"{_int8_mb(v):.2f} MB, a quarter of fp32's {4 * v['weights'] / 1e6:.1f} MB "
            "(the scales add "
            f"{400 * v['channels'] / v['weights']:.2f}% to the int8 bytes). int4 with one "
            "16-bit scale per group of 32 weights would be 0.5 + 2/32 bytes per weight."
        ),
        worked=lambda v: f"{_int8_mb(v):.3f} MB",
        given={"weights": "positive count", "channels": "count"},
        answer_as='e.g. "12 MB"',
    ),
)
