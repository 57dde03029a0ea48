"""The caching-allocator arithmetic behind notebook 19's segment exercise: 512-byte rounding,
2 MiB small-pool segments, 20 MiB segments shared by requests of 1 to 10 MiB, and a segment of
its own, rounded to 2 MiB, from 10 MiB on."""

from __future__ import annotations

import pytest

from perflab import exercises
from perflab.exercises.nb19_memory import rounded_request, segment_bytes

MIB = 1 << 20


@pytest.mark.parametrize(
    ("request_bytes", "block"),
    [(1, 512), (4, 512), (512, 512), (513, 1024), (1_000_001, 1_000_448)],
)
def test_requests_round_up_to_512_bytes(request_bytes: int, block: int) -> None:
    assert rounded_request(request_bytes) == block


@pytest.mark.parametrize(
    ("request_bytes", "segment"),
    [
        (4, 2 * MIB),
        (MIB, 2 * MIB),  # the largest small-pool request
        (MIB + 1, 20 * MIB),  # rounds to MIB + 512: the large pool
        (6_553_600, 20 * MIB),
        (10 * MIB - 512, 20 * MIB),
        (10 * MIB - 1, 10 * MIB),  # rounds to 10 MiB: its own segment
        (10 * MIB, 10 * MIB),  # its own segment, already a multiple of 2 MiB
        (13_107_200, 14 * MIB),
        (20 * MIB + 1, 22 * MIB),
    ],
)
def test_the_segment_a_request_gets_from_an_empty_allocator(
    request_bytes: int, segment: int
) -> None:
    assert segment_bytes(request_bytes) == segment


def test_the_segment_exercise_accepts_the_rounded_segment_only() -> None:
    ex = exercises.get("segment-bytes", request_bytes=13_107_200)
    assert ex.answer(14 * MIB).state == "right"
    assert ex.answer(13_107_200).state == "wrong"  # not rounded to 2 MiB
    assert ex.answer(20 * MIB).state == "wrong"  # the shared segment of smaller requests
