"""Exercises of notebooks/07-triton-from-python-to-sass.ipynb."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from perflab.exercises import Spec
from perflab.exercises.checks import Values, choice, kernel_check, number

if TYPE_CHECKING:
    from perflab.model.kernel import KernelArtifacts

NOTEBOOK = "07-triton-from-python-to-sass"
TWO_BLOCKS_BYTES = 113 * 1024  # half of an H100/H200 SM's 228 KiB, less a block's reserve


def _stages(flags: Sequence[str]) -> int:
    found = [int(m.group(1)) for f in flags if (m := re.fullmatch(r"num_stages=(\d+)", f))]
    return found[0] if found else 0


def _deep_and_fits_twice(kernel: KernelArtifacts, flags: Sequence[str]) -> bool:
    return bool(
        _stages(flags) >= 4
        and kernel.instruction_mix.get("HGMMA", 0) > 0
        and not kernel.resources.spills
        and kernel.resources.shared_bytes <= TWO_BLOCKS_BYTES
    )


def _direction(values: Values) -> str:
    four, eight = values["regs_4_warps"], values["regs_8_warps"]
    return "down" if eight < four else "up" if eight > four else "same"


EXERCISES = (
    Spec(
        "shared-memory",
        NOTEBOOK,
        "BM = 64, BN = 256, BK = 64, num_stages = 3, fp16 operands: how much shared memory will "
        "the kernel need, in KiB? The cell after your answer compiles it. (Within 10%.)",
        number(
            lambda v: v["shared_bytes"] / 1024,
            unit="KiB",
            rel=0.10,
            low="Count every stage: num_stages copies of both the A tile (BM x BK) and the B "
            "tile (BK x BN), 2 bytes per element.",
            high="Only the A and B tiles are staged, once per stage; the fp32 accumulator lives "
            "in registers.",
        ),
        "stages x (BM x BK + BK x BN) x 2 bytes = 3 x (4,096 + 16,384) x 2 = 122,880 bytes = "
        "120 KiB: more than half of an H100/H200 SM's 228 KiB, so only one such block fits on "
        "an SM.",
        worked="120 KiB",
        measured={"shared_bytes": "count"},
        answer_as='e.g. "64 KiB"',
    ),
    Spec(
        "warps-registers",
        NOTEBOOK,
        "The sweep below compiles the 128x128x64 tile (3 stages) with 4 and with 8 warps. Going "
        "from 4 to 8 warps, will the registers per thread go 'up', 'down' or stay the 'same'?",
        choice(
            _direction,
            ["up", "down", "same"],
            why={
                "up": "More threads share the same accumulator tile: does each hold more of it, "
                "or less?",
                "down": "Fewer registers each would mean the tile's work is spread thinner: look "
                "at what else a thread holds besides its share of the accumulator.",
                "same": "The accumulator tile is divided among the block's threads: does each "
                "thread's share change with the number of warps?",
            },
            right="The fp32 accumulator tile is split over the block's threads.",
        ),
        "Down: 128 x 128 fp32 accumulators over 256 threads is 64 per thread instead of 128 "
        "over 128 threads. The table's regs column shows it.",
        worked=_direction,
        measured={"regs_4_warps": "count", "regs_8_warps": "count"},
    ),
    Spec(
        "fit-twice",
        NOTEBOOK,
        "Find BM, BN, BK, num_warps and num_stages with a deeper pipeline, num_stages of 4 or "
        "more, for which the kernel still uses HGMMA, does not spill and needs at most 113 KiB "
        "of shared memory, so that two blocks fit on an SM. Answer with build(...); no row of "
        "the sweep above does all of it.",
        kernel_check(
            _deep_and_fits_twice,
            goal="a build(...) with num_stages of 4 or more that uses HGMMA, does not spill and "
            "needs at most 113 KiB of shared memory",
            right="A pipeline of 4 stages or more, HGMMA, no spills, and two blocks' worth of "
            "shared memory.",
            wrong="Check the four conditions: num_stages of 4 or more, HGMMA in the instruction "
            "mix, no spill stores or loads, at most 113 KiB of shared memory. The formula of "
            "section 4 says which tiles are small enough for 4 stages.",
        ),
        "Many answers work: make the tiles small enough that num_stages x (BM x BK + BK x BN) x "
        "2 bytes stays under 113 KiB. build(128, 128, 32, num_stages=4) needs 4 x (4,096 + "
        "4,096) x 2 bytes = 64 KiB; build(64, 128, 64, num_stages=4) needs 96 KiB. The "
        "128x128x64 tile with 4 stages needs 128 KiB, and only one block fits.",
    ),
)
