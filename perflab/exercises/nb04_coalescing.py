"""Exercises of notebooks/04-coalescing-and-bank-conflicts.ipynb."""

from __future__ import annotations

import math

from perflab.exercises import Spec
from perflab.exercises.checks import Values, number

NOTEBOOK = "04-coalescing-and-bank-conflicts"

BANKS = 32  # shared-memory banks, 4 bytes wide


def _column_ways(v: Values) -> int:
    """The n-way conflict of a warp reading one column of a float tile whose rows are
    ``row_words`` 4-byte words long: lane i reads word i * row_words + c, in bank
    (i * row_words + c) mod 32, so gcd(row_words, 32) lanes share each bank used."""
    return math.gcd(int(v["row_words"]), BANKS)


def _knee_solution(v: Values) -> str:
    knee = int(v["knee_stride"])
    head = (
        "A cache line is 64 bytes, 16 floats: from stride 16 on, each element needs a line "
        f"of its own. The measured knee was at stride {knee} ({4 * knee} bytes)."
    )
    if knee > 16:
        return (
            f"{head} The cost still rose from 16 to {knee}: the memory side moved more than "
            "the one line asked for (adjacent-line prefetch fetches lines in pairs, 128 bytes, "
            "like a GPU's cache line of four 32-byte sectors). From there on each element "
            "costs one such unit, and a larger stride adds nothing per element."
        )
    if knee == 16:
        return f"{head} From there on each element costs one line, however far apart they are."
    return (
        f"{head} A knee below 16 means the cost stopped growing before each element needed "
        "a line of its own: on a noisy machine, rerun the measurement."
    )


EXERCISES = (
    Spec(
        "stride2-sectors",
        NOTEBOOK,
        "A warp of 32 threads executes `v = in[2 * i]` (i = the thread's index, `in` a float "
        "array aligned to 128 bytes): one 32-bit load instruction. How many 32-byte sectors "
        "does the warp's request touch? The cell after your answer computes it from the "
        "addresses.",
        number(
            lambda v: v["sectors"],
            unit="sectors",
            abs=0.5,
            low="Write down the byte addresses: lane i reads the 4 bytes at 4 x (2i). What span "
            "of bytes do the 32 lanes cover from first to last, and how many 32-byte sectors "
            "is that?",
            high="Neighbouring lanes are close together: several of them share each 32-byte "
            "sector, and a sector is moved once per request however many lanes read from it.",
        ),
        lambda v: (
            "Lane i reads bytes 8i to 8i + 3: the warp spans 32 x 8 = 256 bytes, eight "
            f"sectors of 32 bytes (computed: {v['sectors']}), two 128-byte lines. Each sector "
            "carries 16 useful bytes of its 32: half of the traffic is wasted. A stride of 8 "
            "floats or more puts every lane in a sector of its own (32 sectors, 1/8 used)."
        ),
        worked=lambda v: v["sectors"],
        measured={"sectors": "count"},
        answer_as="a number of sectors, e.g. 4",
    ),
    Spec(
        "padded-conflict",
        NOTEBOOK,
        lambda v: (
            f"A block stages a tile as `__shared__ float tile[32][{v['row_words']}]` (rows "
            f"padded to {v['row_words']} floats). A warp reads one column: lane i reads "
            "`tile[i][c]`. Shared memory has 32 banks of 4 bytes (word w sits in bank w mod "
            "32). How many ways is the bank conflict, i.e. how many lanes share the busiest "
            "bank? (1 means conflict-free.)"
        ),
        number(
            _column_ways,
            unit="",
            abs=0.5,
            low="Lane i's word is i * (row length) + c. Which banks do the 32 lanes land in? "
            "Count how many lanes fall in the same bank, e.g. lanes 0 and 16.",
            high="The padding moves each row's start to another bank: list the banks of "
            "the first few lanes and count how many distinct banks the 32 lanes use.",
        ),
        lambda v: (
            f"Lane i reads word {v['row_words']}i + c, in bank ({v['row_words']}i + c) mod 32. "
            f"With rows of {v['row_words']} words the lanes use 32 / gcd({v['row_words']}, 32) "
            f"= {BANKS // _column_ways(v)} distinct banks, so {_column_ways(v)} lanes share "
            f"each: a {_column_ways(v)}-way conflict (the access takes {_column_ways(v)} "
            "passes). Only an odd row length (33) spreads a column over all 32 banks."
        ),
        worked=_column_ways,
        given={"row_words": "count"},
        answer_as="a number of ways, e.g. 4",
    ),
    Spec(
        "cpu-knee-stride",
        NOTEBOOK,
        "The next cell reads a 128 MiB array of 4-byte floats with numpy, every s-th element, for "
        "s = 1, 2, 4, ..., 128, and times each pass per element read. Up to some stride the "
        "cost per element grows with s; beyond it, it stays about flat. Predict that stride "
        "(in elements) on this CPU. (A power of two.)",
        number(
            lambda v: v["knee_stride"],
            unit="",
            factor=1.5,
            low="The cost per element stops growing when each element costs a whole unit "
            "of transfer of its own, with nothing shared with its neighbours. Is the unit this "
            "CPU's memory system moves only one cache line?",
            high="Once the stride exceeds the unit the memory system moves at a time, each "
            "element already costs one whole unit: a larger stride adds no bytes per element. "
            "How many 4-byte floats are in a 64-byte cache line?",
        ),
        _knee_solution,
        worked=lambda v: v["knee_stride"],
        measured={"knee_stride": "count"},
        answer_as="a stride in elements, e.g. 8",
    ),
)

# Values from the notebook's executed outputs, for tests/test_exercises.py
EXAMPLES = {
    "stride2-sectors": {"sectors": 8},
    "padded-conflict": {"row_words": 34},
    "cpu-knee-stride": {"knee_stride": 32},
}
