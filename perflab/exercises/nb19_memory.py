"""Exercises of notebooks/19-where-did-the-memory-go.ipynb: the bytes autograd saves for an
MLP block, the peak of a training step against them, what activation checkpointing costs in
time, the segment the CUDA caching allocator asks the device for, and what a loop that keeps
its loss tensors leaves behind each step."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, number, ranges

NOTEBOOK = "19-where-did-the-memory-go"
FLOAT32_BYTES = 4
MIB = 1 << 20
# the CUDA caching allocator's constants (c10/cuda/CUDACachingAllocator.cpp)
SMALL_REQUEST = MIB  # the largest request served from the small pool
SMALL_SEGMENT = 2 * MIB  # the small pool's segments
LARGE_SEGMENT = 20 * MIB  # the segment that requests from 1 MiB to 10 MiB share
OWN_SEGMENT = 10 * MIB  # from here a request gets a segment of its own...
LARGE_ROUNDING = 2 * MIB  # ...rounded up to a multiple of 2 MiB
BLOCK_ROUNDING = 512  # every request is rounded up to a multiple of 512 bytes

PEAK_BOUNDS = (1.5, 2.5)
PEAK_LABELS = ("under 1.5x", "1.5x to 2.5x", "over 2.5x")
SLOWDOWN_BOUNDS = (1.1, 1.6)
SLOWDOWN_LABELS = ("under 10% slower", "10% to 60% slower", "over 60% slower")


def rounded_request(size: int) -> int:
    """A request as the caching allocator sizes its block: a multiple of 512 bytes."""
    return max(BLOCK_ROUNDING, -(-size // BLOCK_ROUNDING) * BLOCK_ROUNDING)


def segment_bytes(size: int) -> int:
    """What the caching allocator asks cudaMalloc for when no cached block fits a request of
    ``size`` bytes."""
    block = rounded_request(size)
    if block <= SMALL_REQUEST:
        return SMALL_SEGMENT
    if block < OWN_SEGMENT:
        return LARGE_SEGMENT
    return -(-block // LARGE_ROUNDING) * LARGE_ROUNDING


def _saved_bytes(v: Values) -> float:
    """The ReLU's output: the one tensor of the block that autograd keeps."""
    return float(v["tokens"] * v["hidden"] * FLOAT32_BYTES)


def _sizes(v: Values) -> str:
    return (
        f"{v['tokens']:,} tokens (batch x sequence) of width {v['width']}, hidden size "
        f"{v['hidden']}, float32"
    )


EXERCISES = (
    Spec(
        "activation-bytes",
        NOTEBOOK,
        lambda v: (
            f"One MLP block, Linear({v['width']}, {v['hidden']}) -> ReLU -> "
            f"Linear({v['hidden']}, {v['width']}), on {_sizes(v)}; the loss is out.sum(). "
            "How many bytes does autograd keep for the backward pass when the forward pass "
            "ends, beyond the input x (which the caller holds anyway)? Count only tensors "
            "as large as the batch."
        ),
        number(
            _saved_bytes,
            unit="B",
            rel=0.05,
            low="Each Linear needs its input to compute its weight's gradient, and ReLU "
            "needs to know where its input was positive: which tensor of hidden width is "
            "kept?",
            high="ReLU saves its output and the second Linear saves its input: that is one "
            "tensor, counted once. The first Linear's output is gone once ReLU has read it, "
            "and the backward of sum needs only a shape.",
            mistakes={
                0.0: "The first Linear's input is not counted, but something of hidden width "
                "must be kept: the second Linear's weight gradient needs its input.",
            },
        ),
        lambda v: (
            "Autograd keeps the ReLU's output, one tensor of tokens x hidden float32: "
            f"{v['tokens']:,} x {v['hidden']} x 4 = {_saved_bytes(v):,.0f} bytes. ReLU saves "
            "its output (its gradient passes where the output is positive), and the second "
            "Linear saves the same tensor as its input (for its weight's gradient). The first "
            "Linear's output is freed once ReLU has read it; the first Linear saves x, which "
            "the caller holds anyway; out.sum() saves nothing of the batch's size. With GELU "
            "instead of ReLU, the block would keep two such tensors: GELU needs its input."
        ),
        worked=_saved_bytes,
        given={"tokens": "positive count", "width": "positive count", "hidden": "positive count"},
    ),
    Spec(
        "peak-over-activations",
        NOTEBOOK,
        "The next cell records one training step of the block (forward, loss, backward) for "
        "three shapes and measures the highest memory above where the step started. Predict "
        "that peak as a multiple of the saved activations you worked out: 'under 1.5x', "
        "'1.5x to 2.5x' or 'over 2.5x'?",
        ranges(
            lambda v: v["peak_bytes"] / v["activation_bytes"],
            PEAK_BOUNDS,
            PEAK_LABELS,
            low="The backward pass makes gradients of the size of the tensors it goes "
            "through, while the saved tensors are still alive: how many tensors of hidden "
            "width are live when ReLU's backward runs?",
            high="Count the tensors of hidden width live at once: the saved output, the "
            "gradient flowing into ReLU and the one flowing out of it.",
        ),
        "Over 2.5x, here: about 3.25x. The peak is in the backward pass, at ReLU's backward "
        "(threshold_backward): the saved ReLU output, the gradient flowing into it (the mm of "
        "the second Linear's backward) and the gradient flowing out are three tensors of "
        "tokens x hidden, live at once; the block's output (tokens x width, a quarter of one "
        "of them here) is still held by the step. The saved activations set the floor of the "
        "peak, the backward's working set the rest.",
        worked="over 2.5x",
        measured={"peak_bytes": "positive", "activation_bytes": "positive"},
    ),
    Spec(
        "checkpoint-cost",
        NOTEBOOK,
        "With torch.utils.checkpoint around each of the four blocks, the forward pass keeps "
        "only each block's input and runs each block's forward again in the backward pass. "
        "The backward of a Linear costs about twice its forward. Predict how much longer a "
        "training step takes: 'under 10% slower', '10% to 60% slower' or 'over 60% slower'?",
        ranges(
            lambda v: v["checkpointed_s"] / v["plain_s"],
            SLOWDOWN_BOUNDS,
            SLOWDOWN_LABELS,
            low="Every block's forward runs twice: what share of a step is one forward pass, "
            "when the backward costs about twice the forward?",
            high="Only the forward runs again, not the backward: one extra forward on top of "
            "a forward and a backward.",
        ),
        "10% to 60% slower: the step does one more forward pass, and with the backward at "
        "about twice the forward a forward is about a third of the step, so about +33%; "
        "timed on a busy CPU the ratio comes out near that, within the timings' spread. That "
        "buys a peak a little over half as high here.",
        worked="10% to 60% slower",
        measured={"plain_s": "positive", "checkpointed_s": "positive"},
    ),
    Spec(
        "segment-bytes",
        NOTEBOOK,
        lambda v: (
            f"A tensor of {v['request_bytes']:,} bytes is allocated on a GPU whose caching "
            "allocator has no cached block that fits. How many bytes does the allocator ask "
            "cudaMalloc for? (Use the rules above.)"
        ),
        number(
            lambda v: float(segment_bytes(v["request_bytes"])),
            unit="B",
            rel=0.001,
            low="The allocator does not ask for the bytes of the request exactly: how does "
            "it round a request of this size?",
            high="A 20 MiB segment is shared by requests from 1 MiB up to 10 MiB: is this "
            "request in that range?",
        ),
        lambda v: (
            f"{v['request_bytes']:,} bytes is over 10 MiB ({OWN_SEGMENT:,} bytes), so it gets "
            "a segment of its own, rounded up to a multiple of 2 MiB: "
            f"{segment_bytes(v['request_bytes']):,} bytes; the "
            f"{segment_bytes(v['request_bytes']) - rounded_request(v['request_bytes']):,} "
            "bytes beyond the request are split off as a cached block (a large-pool block is "
            "split when over 1 MiB would remain), which a later request of the large pool "
            "that fits in it can use."
        ),
        worked=lambda v: float(segment_bytes(v["request_bytes"])),
        given={"request_bytes": "positive count"},
    ),
    Spec(
        "leak-per-step",
        NOTEBOOK,
        lambda v: (
            f"A validation loop runs the block on {_sizes(v)}, with gradients on (no "
            "torch.no_grad()), and appends each step's loss, mse_loss(model(x), y), to a "
            "list as a tensor (no .item()). The batches were made before the loop. Predict "
            "how many bytes each step leaves allocated for good (within 25%)."
        ),
        number(
            lambda v: v["kept_bytes_per_step"],
            unit="B",
            rel=0.25,
            low="The loss is one float, but it carries its grad_fn, and the graph behind it "
            "holds every tensor its backward would need.",
            high="Only what the graph saves for a backward stays: the inputs and targets "
            "were made before the loop, and the first Linear's output is freed once ReLU has "
            "read it.",
            mistakes={
                4.0: "A float32 scalar is 4 bytes, but the loss carries its grad_fn, and the "
                "graph behind it holds every tensor its backward would need.",
            },
        ),
        lambda v: (
            "The loss keeps its autograd graph alive, and the graph keeps what each backward "
            "would need: the ReLU's output (tokens x hidden floats) and the block's output "
            "(tokens x width, saved by mse_loss; the target was made before the loop): "
            f"{v['tokens'] * (v['hidden'] + v['width']) * FLOAT32_BYTES:,} bytes a step. On "
            "this machine the trace shows a third tensor of tokens x width under mse_loss: "
            "the loss's own storage (a scalar that kept the buffer its mean was computed "
            "in). .item() (or torch.no_grad() and .detach()) drops all of it."
        ),
        worked=lambda v: float(v["tokens"] * (v["hidden"] + v["width"]) * FLOAT32_BYTES),
        given={"tokens": "positive count", "width": "positive count", "hidden": "positive count"},
        measured={"kept_bytes_per_step": "positive"},
    ),
)

# Values the notebook gave and measured (printed in its stored outputs), with which each
# solution must pass its own check.
EXAMPLES = {
    "activation-bytes": {"tokens": 1600, "width": 256, "hidden": 1024},
    "peak-over-activations": {"peak_bytes": 21_299_208, "activation_bytes": 6_553_600},
    "checkpoint-cost": {"plain_s": 0.405, "checkpointed_s": 0.586},
    "segment-bytes": {"request_bytes": 13_107_200},
    "leak-per-step": {
        "tokens": 800,
        "width": 256,
        "hidden": 1024,
        "kept_bytes_per_step": 4_915_200,
    },
}
