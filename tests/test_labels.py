"""Label placement on log-log charts: labels stay inside the plot and off each other."""

from __future__ import annotations

from perflab.render.labels import BOTTOM_PX, LEFT_PX, TOP_PX, LabelPlacer, overlap, text_px


def _placer() -> LabelPlacer:
    return LabelPlacer((1.0, 1e6), (1.0, 1e3), 760, 380, right=120)


def _plot_size(placer: LabelPlacer) -> tuple[float, float]:
    return placer.width - LEFT_PX - placer.right, placer.height - BOTTOM_PX - TOP_PX


def test_a_label_by_the_last_point_is_moved_inside_the_right_edge() -> None:
    placer = _placer()
    text = "DRAM ≈ 3.35 TB/s"
    spot = placer.place(1e6, 10.0, text, [(8, 3, False)])  # right of the rightmost point
    w, _ = _plot_size(placer)
    assert spot.box[2] <= w and spot.box[0] >= 0
    assert spot.box[2] - spot.box[0] == text_px(text)


def test_a_label_at_the_corners_stays_inside_on_both_axes() -> None:
    placer = _placer()
    w, h = _plot_size(placer)
    low = placer.place(1.0, 1.0, "L1 ≈ 30 cycles", [(-8, -14, True)])
    high = placer.place(1e6, 1e3, "HBM ≈ 800 ns", [(8, 16, False)])
    for spot in (low, high):
        x0, y0, x1, y1 = spot.box
        assert x0 >= 0 and x1 <= w and y0 >= 0 and y1 <= h


def test_labels_placed_at_one_point_do_not_overlap() -> None:
    placer = _placer()
    boxes = [placer.place(1e6, 10.0, f"level {i} ≈ {i} GB/s").box for i in range(4)]
    assert not any(overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
