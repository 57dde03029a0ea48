"""Notebook 22's exercises judge what the notebook counts: a wrong prediction hears its
direction or the hint for its known mistake (a step's count for another step, another
algorithm's count, floats for bytes), and the counted values decide the answer."""

from __future__ import annotations

import pytest
from exercise_checks import predicted

from perflab import exercises


def test_a_warp_sum_is_five_shuffles_and_counting_adds_or_lanes_is_a_known_mistake() -> None:
    assert predicted("warp-shuffle-count", 5, shfl=5)
    for answer, says in ((31, "adds lane 0's sum needs"), (32, "not the lanes")):
        verdict = predicted("warp-shuffle-count", answer, shfl=5)
        assert verdict.state == "wrong" and says in verdict.reason, verdict
    assert predicted("warp-shuffle-count", 4, shfl=5).state == "wrong"
    assert predicted("warp-shuffle-count", 10, shfl=10)  # the count decides, not a constant


def test_the_strided_trees_conflict_at_stride_two_and_the_first_steps_is_a_known_mistake() -> None:
    assert predicted("tree-bank-conflict", "4", degree=4)
    stride_one = predicted("tree-bank-conflict", 2, degree=4)
    assert stride_one.state == "wrong" and "stride 1" in stride_one.reason
    assert "too high" in predicted("tree-bank-conflict", 6, degree=4).reason


@pytest.mark.parametrize(
    ("answer", "says"),
    [(2046, "Blelloch"), (1023, "reduction"), (10240, "first d elements add nothing")],
)
def test_hillis_steele_adds_and_the_other_counts_get_their_hints(answer: int, says: str) -> None:
    assert predicted("scan-adds", "9217 adds", adds=9217)
    assert predicted("scan-adds", 9300, adds=9217)  # within 2%
    verdict = predicted("scan-adds", answer, adds=9217)
    assert verdict.state == "wrong" and says in verdict.reason, verdict


def test_the_reduction_bound_is_the_bytes_over_the_recorded_rate() -> None:
    given = {"hbm_tbps": 4.16}
    ex = exercises.get("reduction-bound", **given)
    assert "4.16 TB/s" in ex.question
    assert predicted("reduction-bound", "258 us", given, predicted_us=258.4)
    assert predicted("reduction-bound", "0.26 ms", given, predicted_us=258.4)
    floats = predicted("reduction-bound", 64.6, given, predicted_us=258.4)
    assert floats.state == "wrong" and "Bytes, not floats" in floats.reason
    assert "too high" in predicted("reduction-bound", 258_400, given, predicted_us=258.4).reason
