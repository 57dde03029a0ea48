"""Notebook 10's prediction of a CUDA graph against eager launches on the GPU's clock: the
band is the graph's share of the eager time, and each wrong band hears the hint for its own
mistake (expecting the host's savings on a clock that hides them, or no saving at all)."""

from __future__ import annotations

from exercise_checks import predicted

RECORDED = {"eager_us": 19.04, "graph_us": 13.57}  # the H200's ten-kernel cell


def test_the_recorded_graph_is_somewhat_less_than_eager() -> None:
    assert predicted("graph-gpu-clock", "somewhat less", **RECORDED)
    assert predicted("graph-gpu-clock", "Much less", eager_us=19.0, graph_us=9.0)
    assert predicted("graph-gpu-clock", "about the same", eager_us=19.0, graph_us=18.0)


def test_expecting_the_hosts_savings_hears_that_the_filler_hides_them() -> None:
    too_low = predicted("graph-gpu-clock", "much less", **RECORDED)
    assert too_low.state == "wrong" and "queue filler" in too_low.reason


def test_expecting_no_saving_hears_about_the_gaps_between_kernels() -> None:
    too_high = predicted("graph-gpu-clock", "about the same", **RECORDED)
    assert too_high.state == "wrong" and "between one kernel" in too_high.reason
