"""Notebook 24's exercises judge what torch.compile did: the counts decide the answer, a
known mistake hears its own hint, and a break-even with no saving per call is refused with a
clear error rather than judged."""

from __future__ import annotations

import pytest
from exercise_checks import predicted

from perflab import exercises
from perflab.errors import InputError


def test_graph_breaks_follow_the_count_and_zero_hears_why_print_and_item_break() -> None:
    assert predicted("compile-graph-breaks", 2, graph_breaks=2)
    too_many = predicted("compile-graph-breaks", 3, graph_breaks=2)
    assert too_many.state == "wrong" and "Python float" in too_many.reason
    none = predicted("compile-graph-breaks", 0, graph_breaks=2)
    assert none.state == "wrong" and ".item()" in none.reason
    assert predicted("compile-graph-breaks", 3, graph_breaks=3)  # another torch's count


def test_block_kernels_count_generated_and_library_kernels() -> None:
    assert predicted("compile-block-kernels", 5, generated=3, library=2)
    fused_away = predicted("compile-block-kernels", 1, generated=3, library=2)
    assert fused_away.state == "wrong" and "extern_kernels.addmm" in fused_away.reason
    generated_only = predicted("compile-block-kernels", 3, generated=3, library=2)
    assert generated_only.state == "wrong" and "library matrix products" in generated_only.reason
    assert predicted("compile-block-kernels", 4, generated=2, library=2)


def test_fusion_bytes_is_the_ratio_of_the_counted_bytes_within_15_percent() -> None:
    counted = {"eager_bytes": 3_219_456, "fused_bytes": 593_920}  # 5.42 times
    assert predicted("compile-fusion-bytes", 5, **counted)
    assert predicted("compile-fusion-bytes", "6", **counted)
    low = predicted("compile-fusion-bytes", 2, **counted)
    assert low.state == "wrong" and "too low" in low.reason and "5.4" not in low.reason
    assert predicted("compile-fusion-bytes", 8, **counted).state == "wrong"


def test_recompiles_count_the_graphs_and_a_wrong_side_hears_its_hint() -> None:
    assert predicted("compile-recompiles", 3, static_graphs=3)
    once = predicted("compile-recompiles", 1, static_graphs=3)
    assert once.state == "wrong" and "exact shape" in once.reason
    every_call = predicted("compile-recompiles", 5, static_graphs=3)
    assert every_call.state == "wrong" and "reused" in every_call.reason


def test_break_even_is_compile_time_over_the_saving_per_call() -> None:
    ex = exercises.get("compile-break-even", compile_s=3.08, eager_us=1315, compiled_us=830)
    assert "3.08 s" in ex.question and "1,315 us" in ex.question
    assert ex.answer(6350)  # 3.08 s / 485 us = 6,351 calls
    assert ex.answer("6,300 calls")
    wrong = ex.answer(2342)  # divided by the eager time, not the saving
    assert wrong.state == "wrong" and "too low" in wrong.reason
    assert "if you divided by the whole eager time" in wrong.reason  # named as a possibility
    units = ex.answer(6_351_000)  # the saving left in microseconds
    assert units.state == "wrong" and "too high" in units.reason and "one unit" in units.reason
    assert "6,351" in ex.solution().text


def test_break_even_without_a_saving_is_refused_clearly() -> None:
    ex = exercises.get("compile-break-even", compile_s=3.0, eager_us=800, compiled_us=900)
    with pytest.raises(InputError, match="compile-break-even"):
        ex.answer(1000)
