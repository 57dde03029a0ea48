"""Exercises of notebooks/23-wave-quantisation-and-tiling.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, number

NOTEBOOK = "23-wave-quantisation-and-tiling"
MIB = 2**20


def _waves(values: Values) -> int:
    """Waves of tiles: every slot (SMs x blocks per SM) busy at once, the last one partly."""
    return -(-int(values["tiles"]) // int(values["slots"]))


def _last_wave_share(values: Values) -> float:
    """The fraction of the slots the last wave keeps busy."""
    slots = int(values["slots"])
    return (int(values["tiles"]) - (_waves(values) - 1) * slots) / slots


def _slices_in_one_wave(values: Values) -> int:
    """The most split-K slices whose programs (tiles x slices) still fit in one wave."""
    return int(values["slots"]) // int(values["tiles"])


def _reduction_mib(values: Values) -> float:
    """The partial sums written by the slices and read back by the reduction, in MiB."""
    return 2 * float(values["partial_bytes"]) / MIB


EXERCISES = (
    Spec(
        "wave-count",
        NOTEBOOK,
        "A bf16 product with M = N = K = 4224 runs in BM x BN = 128 x 256 output tiles, one "
        "program per tile, on the H200's 132 SMs, with as many blocks per SM as the compiled "
        "128 x 256 kernel's occupancy allows (the table above). How many waves of tiles will it "
        "take? The cell after your answer counts the tiles and the slots.",
        number(
            _waves,
            unit="waves",
            abs=0,
            low="A partial tile at an edge is still a whole tile: round M / BM and N / BN up "
            "before multiplying them.",
            high="One wave is every slot busy at once: SMs x blocks per SM tiles. Divide the "
            "tiles by that, rounding up once, at the end.",
            mistakes={
                4.0: "N / BN is not a whole number here: the last column of tiles is only half "
                "used, but it is a column of whole tiles all the same."
            },
            right="The column of half-used tiles adds a row of work to every wave's worth of "
            "tiles, and the last wave runs almost empty.",
        ),
        "ceil(4224 / 128) x ceil(4224 / 256) = 33 x 17 = 561 tiles. The compiled 128 x 256 "
        "kernel fits one block per SM (registers and shared memory), so a wave is 132 tiles: "
        "561 / 132 = 4.25, rounded up to 5 waves, the last with 33 tiles on 132 SMs.",
        worked=_waves,
        measured={"tiles": "positive count", "slots": "positive count"},
        answer_as="a whole number of waves",
    ),
    Spec(
        "last-wave-share",
        NOTEBOOK,
        "The same size, M = N = K = 4224, with 128 x 128 tiles and the blocks per SM that the "
        "compiled 128 x 128 kernel allows. What fraction of the GPU's slots (SMs x blocks per "
        "SM) does the last wave keep busy? (A fraction such as 0.5, within 0.02.)",
        number(
            _last_wave_share,
            abs=0.02,
            low="Count the tiles the full waves take, SMs x blocks per SM each, and what is "
            "left for the last one.",
            high="The last wave holds only the tiles the full waves left over: tiles minus "
            "(waves - 1) x slots, over the slots.",
            mistakes={
                0.25: "The compiled 128 x 128 kernel fits more than one block on an SM: a wave "
                "is SMs x blocks per SM tiles.",
                0.825: "That is the whole run's share of busy slots; the question asks about "
                "the last wave only.",
            },
            right="The last wave pays a whole wave's time for a small part of the work.",
        ),
        "ceil(4224 / 128)^2 = 33 x 33 = 1,089 tiles. Two blocks fit on an SM, so a wave is "
        "264 tiles: four full waves take 1,056, and the fifth holds 33 tiles, 33 / 264 = 0.125 "
        "of the slots. Over the run, 1,089 of 5 x 264 = 1,320 slot-times are busy (82.5%).",
        worked=_last_wave_share,
        measured={"tiles": "positive count", "slots": "positive count"},
        answer_as="a fraction such as 0.5",
    ),
    Spec(
        "next-wave-m",
        NOTEBOOK,
        "Keep N = K = 4096 and the 128 x 256 tile (128 rows of M, 256 columns of N per tile) "
        "with the compiled kernel's blocks per SM. As M grows from 4096, what is the smallest "
        "M that needs a fifth wave? The sweep after your answer finds it. (Within 1.)",
        number(
            lambda v: v["m_fifth_wave"],
            abs=1,
            low="Four waves hold 4 x slots tiles. Count the tiles in one row of tiles (across "
            "N), then how many such rows four waves hold.",
            high="The fifth wave starts with the first row of tiles that does not fit in four "
            "waves: the first M past that many rows of 128.",
            mistakes={
                4097.0: "At M = 4096 four waves still have room: four waves of 132 tiles hold "
                "more rows of 16 tiles than 4096 / 128.",
            },
            right="Every row of tiles past a wave's boundary starts a wave that is almost "
            "empty: efficiency drops at once and recovers as M grows.",
        ),
        "A row of tiles across N = 4096 is 4096 / 256 = 16 tiles; four waves of 132 slots hold "
        "528 tiles = 33 rows, M up to 33 x 128 = 4224. M = 4225 needs a 34th row of tiles, "
        "which does not fit: a fifth wave of 16 tiles on 132 SMs.",
        worked=lambda v: v["m_fifth_wave"],
        measured={"m_fifth_wave": "positive count"},
        answer_as="a size M",
    ),
    Spec(
        "split-k-slices",
        NOTEBOOK,
        "A skinny product, M = 256, N = 1024, K = 16384, in 128 x 128 tiles on 132 SMs, "
        "with the blocks per SM of the compiled split-K kernel. Split K into S equal slices, "
        "each computed by its own program: what is the largest S whose programs (tiles x S) "
        "all fit in one wave? The cell after your answer counts the tiles and the slots.",
        number(
            _slices_in_one_wave,
            unit="slices",
            abs=0,
            low="Count the slots: 132 SMs times the blocks the compiled kernel fits on each, "
            "then how many copies of the tiles fit in them.",
            high="More programs than slots start a second wave: tiles x S must stay within "
            "one wave's slots; round down.",
            mistakes={
                8.0: "The compiled split-K kernel fits more than one block on an SM: a wave is "
                "SMs x blocks per SM programs.",
                17.0: "Rounding up puts a few programs in a second wave: round down.",
            },
            right="The slices fill the GPU, and each slice's k loop is that many times shorter.",
        ),
        "M / 128 x N / 128 = 2 x 8 = 16 tiles, which alone would keep 16 of 264 slots busy (two "
        "blocks per SM). 264 // 16 = 16 slices fill 256 slots; each slice has K / 16 = 1,024 "
        "of K, 16 steps of BK = 64.",
        worked=_slices_in_one_wave,
        measured={"tiles": "positive count", "slots": "positive count"},
        answer_as="a whole number of slices",
    ),
    Spec(
        "split-k-bytes",
        NOTEBOOK,
        "With that S, every slice writes its partial sums of C as 4-byte floats (an M x N array "
        "per slice) and a reduction reads them all back to write C. How many MiB of "
        "traffic does splitting add (the partial sums written once and read once)? A and B "
        "together are 40 MiB. The cell after your answer allocates the partial sums' "
        "buffer as the launcher does. (Within 10%.)",
        number(
            _reduction_mib,
            unit="MiB",
            rel=0.10,
            low="Count every slice's whole M x N array of 4-byte floats, and count it twice: "
            "written by the slices, read by the reduction.",
            high="Each slice writes one M x N array of 4-byte partial sums, no more; the "
            "reduction reads each once.",
            mistakes={
                16.0: "The partial sums are written and then read back: count both.",
                8.0: "The partial sums are 4-byte floats, written and read back.",
            },
            right="The split adds almost as many bytes as the inputs hold: worth it when the "
            "SMs are idle otherwise, not when the tiles already fill the GPU.",
        ),
        "S x M x N x 4 B = 16 x 256 x 1024 x 4 B = 16 MiB of partial sums, written once and "
        "read once: 32 MiB, 80% of the 40 MiB of A and B (and 64 times the 0.5 MiB of C in "
        "bf16).",
        worked=_reduction_mib,
        measured={"partial_bytes": "positive count"},
        answer_as='e.g. "12 MiB"',
    ),
)

# What the notebook counted (its stored outputs), with which each solution passes its check.
EXAMPLES: dict[str, dict[str, object]] = {
    "wave-count": {"tiles": 561, "slots": 132},
    "last-wave-share": {"tiles": 1089, "slots": 264},
    "next-wave-m": {"m_fifth_wave": 4225},
    "split-k-slices": {"tiles": 16, "slots": 264},
    "split-k-bytes": {"partial_bytes": 16 * 256 * 1024 * 4},
}
