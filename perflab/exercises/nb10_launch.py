"""Exercises of notebooks/10-launch-overhead-and-cuda-graphs.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, choice, number, ranges

NOTEBOOK = "10-launch-overhead-and-cuda-graphs"

# the graph-against-eager prediction's bands: the graph's time over eager's, on the GPU's clock
GRAPH_BOUNDS = (0.5, 0.9)
GRAPH_LABELS = ("much less", "somewhat less", "about the same")
# the H200's recorded ten-kernel cell (notebooks/recordings/h200/10-launch), as printed
EXAMPLES = {"graph-gpu-clock": {"eager_us": 19.04, "graph_us": 13.57}}


def _graph_share(values: Values) -> float:
    return float(values["graph_us"] / values["eager_us"])


def _graph_band(values: Values) -> str:
    return GRAPH_LABELS[sum(_graph_share(values) >= bound for bound in GRAPH_BOUNDS)]


EXERCISES = (
    Spec(
        "graph-gpu-clock",
        NOTEBOOK,
        "Ten small add_ kernels are timed on the GPU's clock (CUDA events behind a queue filler, "
        "so the host's launch cost is already hidden), eagerly and as one CUDA graph replayed "
        "once per sample. Predict the graph's time as a share of the eager time: 'much less' "
        "(under half), 'somewhat less' (half to 0.9) or 'about the same' (0.9 or more).",
        ranges(
            _graph_share,
            GRAPH_BOUNDS,
            GRAPH_LABELS,
            low="On this clock the queue filler already hides the host's dispatch of each "
            "launch, where a graph saves the most: only what happens on the GPU between the "
            "kernels is left to save here, and each sample still pays one graph launch.",
            high="Even with every launch queued before the GPU needs it, the GPU spends time "
            "between one kernel of a stream and the next; the nodes of a graph are prepared at "
            "instantiation and start closer together.",
            right="The graph saves GPU time between kernels, not only the host's dispatch.",
        ),
        lambda v: (
            f"Recorded: {v['graph_us']:.2f} us as a graph against {v['eager_us']:.2f} us "
            f"eagerly, {_graph_share(v):.2f} of it, about "
            f"{(v['eager_us'] - v['graph_us']) / 10:.2f} us less per kernel. The queue filler "
            "hides the host's cost in both, so the saving is on the GPU: the gaps between "
            "consecutive kernels, less one graph launch per replay. What a graph saves on the "
            "host's side (section 1) comes on top of it, end to end."
        ),
        worked=_graph_band,
        measured={"eager_us": "positive", "graph_us": "positive"},
    ),
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
