"""Exercises of notebooks/24-torch-compile-and-inductor.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, number

NOTEBOOK = "24-torch-compile-and-inductor"


def _break_even(values: Values) -> float:
    """Calls after which compiling has paid for itself: the compile time over the time each
    compiled call saves."""
    saved_s = (float(values["eager_us"]) - float(values["compiled_us"])) * 1e-6
    if saved_s <= 0:
        raise ValueError("the compiled call is no faster than eager, so compiling never pays back")
    return float(values["compile_s"]) / saved_s


EXERCISES = (
    Spec(
        "compile-graph-breaks",
        NOTEBOOK,
        "noisy(x) computes y from relu(x), prints y's shape, branches in Python on "
        "y.sum().item() > 0 and returns tanh(y). With torch.compile's defaults, how many graph "
        "breaks will torch._dynamo.explain report for it? The cell after your answer asks it.",
        number(
            lambda v: v["graph_breaks"],
            abs=0,
            low="Go through the body line by line and ask of each whether Dynamo can put it in "
            "a graph: a side effect outside the tensors, or a Python value that depends on "
            "tensor data, ends the graph.",
            high="A Python branch on a number Dynamo has already left the graph for is no "
            "extra break: once the value is a Python float, the if is ordinary Python.",
            mistakes={
                0.0: "print is a side effect Dynamo cannot replay from a graph, and .item() "
                "asks for a tensor's value, which a graph traced ahead of the data does not have.",
            },
        ),
        "Two: print (a side effect outside the graph: 'Failed to trace builtin operator') and "
        ".item() ('Tensor.item() call with capture_scalar_outputs=False'). After .item() the "
        "comparison and the if are plain Python on a float, so they cost no further break, but "
        "each break splits the function: three graphs. Written with torch.where and without "
        "the print, it is one graph with no break.",
        worked=lambda v: v["graph_breaks"],
        measured={"graph_breaks": "count"},
        answer_as="a number of graph breaks",
    ),
    Spec(
        "compile-block-kernels",
        NOTEBOOK,
        "The MLP block is x + fc2(gelu(fc1(layer_norm(x)))), with no gradients. Eager PyTorch "
        "runs five kernels for it (layer norm, the two matrix products with their bias, GELU, "
        "the residual add). How many kernels will the code Inductor generates for it call per "
        "forward pass on the CPU, counting its own fused C++ kernels and the library matrix "
        "products it calls? The cell after your answer compiles it and counts.",
        number(
            lambda v: v["generated"] + v["library"],
            abs=0,
            low="Inductor fuses pointwise work into a neighbour, but it calls a library "
            "kernel for each matrix product: can a fused C++ loop run on both sides of one?",
            high="Inductor never adds passes: every kernel of its code either replaces eager "
            "kernels or is one of eager's matrix products.",
            mistakes={
                1.0: "A fused kernel cannot contain a matrix product Inductor hands to a "
                "library (extern_kernels.addmm): the work on either side of it is apart.",
                3.0: "Count the library matrix products too: Inductor calls them as kernels "
                "of their own.",
            },
        ),
        "Five: cpp_fused_native_layer_norm_0, extern addmm (fc1 and its bias), cpp_fused_gelu_1, "
        "extern addmm (fc2), cpp_fused_add_2. Each matrix product is a library call that a "
        "generated loop cannot enter, and on the CPU Inductor does not fuse GELU or the "
        "residual add into the product's epilogue, so each pointwise step between two "
        "products stays a kernel of its own: as many kernels as eager, each doing what "
        "eager's did.",
        worked=lambda v: v["generated"] + v["library"],
        measured={"generated": "count", "library": "count"},
        answer_as="a number of kernels",
    ),
    Spec(
        "compile-fusion-bytes",
        NOTEBOOK,
        "The attention-like chain computes scores = q @ k^T / sqrt(d) + mask, then "
        "exp(scores - max), its row sums, the division, and p @ v, for 4 heads of 128 x 128 "
        "float32 scores (256 KiB a copy). Between the two matrix products eager runs seven "
        "kernels, each reading its inputs from memory and writing its output; Inductor runs "
        "one fused kernel. Predict how many times fewer bytes the fused kernel moves than the "
        "seven eager kernels together (each buffer read or written once per kernel). The cell "
        "after your answer counts both from the tensor sizes. (Within 15%.)",
        number(
            lambda v: v["eager_bytes"] / v["fused_bytes"],
            rel=0.15,
            low="Count eager's passes over the 128 x 128 scores: every elementwise op reads "
            "a full copy and writes one, and the reductions read one.",
            high="The fused kernel still reads the scores once, reads the mask, and writes "
            "the probabilities once: it cannot move less than that.",
        ),
        "Eager: the division by sqrt(d) reads and writes the scores (2 copies of 256 KiB), the "
        "add reads them and the mask and writes (2 copies and the mask), amax reads one, the "
        "subtraction reads one and writes one, exp reads and writes, sum reads one, the last "
        "division reads and writes: 12 copies, the mask and a few row-sized buffers, about "
        "3.2 MB. The fused kernel reads the scores and the mask once and writes the "
        "probabilities once, in place: 2 copies and the mask, about 0.59 MB, some 5.4 times "
        "fewer bytes. Its own second looks at a row come from the CPU's caches.",
        worked=lambda v: v["eager_bytes"] / v["fused_bytes"],
        measured={"eager_bytes": "positive", "fused_bytes": "positive"},
        answer_as="a ratio, e.g. 3",
    ),
    Spec(
        "compile-recompiles",
        NOTEBOOK,
        "f(x) = gelu(x) * 2 + 1 is compiled with torch.compile(f, dynamic=False) and called on "
        "inputs of 64, 32, 48, 64 and 32 rows (16 columns each). How many graphs will Dynamo "
        "compile? The cell after your answer counts them with a backend that records each "
        "graph it is given.",
        number(
            lambda v: v["static_graphs"],
            abs=0,
            low="dynamic=False specialises each graph on its input's exact shape: a shape "
            "the guards have not seen fails them all.",
            high="A shape seen before passes the guards of the graph compiled for it: that "
            "graph is reused, not compiled again.",
        ),
        "Three, one per distinct shape (64, 32, 48): the guards of a static graph check the "
        "exact sizes, so each new shape recompiles and a repeated one reuses its graph. With "
        "dynamic=True one graph with a symbolic row count serves all five calls; with the "
        "default (dynamic=None) the second shape recompiles once, marking the row count "
        "dynamic, and every later shape reuses that graph.",
        worked=lambda v: v["static_graphs"],
        measured={"static_graphs": "count"},
        answer_as="a number of graphs",
    ),
    Spec(
        "compile-break-even",
        NOTEBOOK,
        lambda v: (
            f"The attention chain's first compiled call took {v['compile_s']:.3g} s (tracing, "
            f"Inductor and the C++ compiler), and then each compiled call took "
            f"{v['compiled_us']:,.0f} us against {v['eager_us']:,.0f} us in eager (host clock, "
            "one thread). After how many calls does compiling pay for itself? (Within 10%.)"
        ),
        number(
            _break_even,
            unit="calls",
            rel=0.10,
            low="Too few calls to pay for the compile time. Each compiled call saves only the "
            "difference of the two per-call times (if you divided by the whole eager time, "
            "that is the slip): divide the compile time by that saving.",
            high="Too many calls. Put both in one unit before dividing (the compile time in "
            "seconds, the saving per call in seconds too: a microsecond is a millionth of a "
            "second), and take the saving as eager's time less the compiled time.",
        ),
        lambda v: (
            f"{v['compile_s']:.3g} s / ({v['eager_us']:.3g} us - {v['compiled_us']:.3g} us) = "
            f"{_break_even(v):,.0f} calls. Below that many calls eager is faster over all; "
            "on a GPU both the compile time and the saving change (Triton instead of C++ "
            "and a launch saved per fused kernel), so the break-even must be measured there."
        ),
        worked=_break_even,
        given={"compile_s": "positive", "eager_us": "positive", "compiled_us": "positive"},
        answer_as="a number of calls",
    ),
)

# What the notebook counted and measured (its stored outputs), with which each solution
# passes its check.
EXAMPLES: dict[str, dict[str, object]] = {
    "compile-graph-breaks": {"graph_breaks": 2},
    "compile-block-kernels": {"generated": 3, "library": 2},
    "compile-fusion-bytes": {"eager_bytes": 3_219_456.0, "fused_bytes": 593_920.0},
    "compile-recompiles": {"static_graphs": 3},
    "compile-break-even": {"compile_s": 2.57, "eager_us": 755.0, "compiled_us": 319.0},
}
