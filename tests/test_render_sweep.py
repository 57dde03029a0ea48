"""Sweep charts (perflab.render.sweep_chart): log axes with labelled ticks, plateaus and
cache sizes marked, hover values, a legend outside the plot; checked on the bokeh figure and
on its static picture."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytest.importorskip("bokeh")

from perflab.model.machine import BenchResult, Level, Series
from perflab.render.labels import MAX_TICKS, log_ticks
from perflab.render.sweep_chart import cache_marks

SVG = "{http://www.w3.org/2000/svg}"
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


def ladder(device: str) -> BenchResult:
    """A latency ladder shaped like a GPU's: test input for the chart, not a measurement."""
    x = 2.0 ** np.arange(10, 31)
    y = np.where(x < 200 * KIB, 35.0, np.where(x < 40 * MIB, 260.0, 600.0))
    levels = [
        Level("L1", KIB, 128 * KIB, 35, 8),
        Level("L2", 256 * KIB, 32 * MIB, 260, 8),
        Level("HBM", 64 * MIB, GIB, 600, 5),
    ]
    series = Series("chase", x, y, "bytes", "ns", levels=levels)
    return BenchResult(benchmark="latency", device=device, backend="cuda", series=[series])


def test_ticks_are_even_powers_of_two_or_one_two_five() -> None:
    ticks = log_ticks(KIB, 4 * GIB, base=2)
    assert len(ticks) <= MAX_TICKS and ticks[0] == KIB and ticks[-1] <= 4 * GIB
    assert all(np.log2(t) % 2 == 0 for t in ticks)
    assert log_ticks(20, 900, base=10) == [20, 50, 100, 200, 500]
    assert log_ticks(1, 1e9, base=10) == [10.0**k for k in range(0, 10, 2)]
    assert log_ticks(0, 10, base=10) == []


def test_gpu_ladder_marks_caches_levels_and_keeps_the_legend_outside() -> None:
    bundle = ladder("NVIDIA H200")._repr_mimebundle_()
    words = texts(bundle["image/svg+xml"])
    assert {"L1/shared per SM 256 KiB", "L2 50 MiB"} <= set(words)  # from the spec table
    assert {"L1 ≈ 35 ns", "L2 ≈ 260 ns", "HBM ≈ 600 ns"} <= set(words)
    assert {"1 KiB", "4 MiB", "1 GiB", "50 ns", "100 ns", "500 ns"} <= set(words)
    assert "working set" in words and "time per access (ns)" in words
    assert "cache sizes of H200 from the spec table" in bundle["text/html"]
    root = ET.fromstring(bundle["image/svg+xml"])
    frame_right = max(
        float(r.get("x", 0)) + float(r.get("width", 0))
        for r in root.iter(f"{SVG}rect")
        if r.get("stroke") == "#cccccc"
    )
    legend = next(t for t in root.iter(f"{SVG}text") if t.text == "chase")
    assert float(legend.get("x", 0)) > frame_right  # the legend never covers a point


def test_chart_has_hover_values_in_the_tables_units() -> None:
    from perflab.render.machine_view import _formatters
    from perflab.render.sweep_chart import sweep_figure

    r = ladder("H200")
    x_fmt, y_fmt = _formatters(r.series[0])
    fig = sweep_figure(
        r.series, title="t", x_label="x", y_label="y", x_fmt=x_fmt, y_fmt=y_fmt, device="H200"
    )
    hover = [t for t in fig.tools if type(t).__name__ == "HoverTool"]
    assert hover and ("value", "@ys") in hover[0].tooltips
    source = hover[0].renderers[0].data_source.data
    assert source["xs"][0] == "1 KiB" and source["ys"][0] == "35 ns"


def test_a_cpu_run_says_what_is_known_about_its_caches() -> None:
    from perflab.machine import latency

    r = latency.run(backend="cpu", quick=True, show_progress=False)
    marks, note = cache_marks(r.device)
    assert marks == [] and "not in the spec table" in note and "plateaus found" in note
    bundle = r._repr_mimebundle_()
    words = texts(bundle["image/svg+xml"])
    for lv in r.series[0].levels:  # every plateau found is labelled on the chart
        assert any(w.startswith(f"{lv.name} ≈ ") for w in words), lv.name
    assert "not in the spec table" in bundle["text/html"]


def test_device_without_published_caches_says_so() -> None:
    marks, note = cache_marks("B200")
    assert marks == [] and "not published: L1/shared per SM, L2" in note


def test_nothing_to_draw_gives_the_tables_only() -> None:
    from perflab.render.machine_view import chart_bundle

    empty = Series("chase", np.array([KIB]), np.array([np.nan]), "bytes", "ns")
    bundle = chart_bundle(
        [empty], benchmark="latency", device="H200", title="t", text="t", after="<p>x</p>"
    )
    assert set(bundle) == {"text/plain", "text/html"}  # no chart of no points
    assert bundle["text/html"].endswith("<p>x</p>")


def test_level_and_cache_labels_never_overlap() -> None:
    from perflab.render.labels import LabelPlacer, overlap, text_px
    from perflab.render.machine_view import _formatters
    from perflab.render.sweep_chart import HEIGHT, WIDTH, sweep_figure

    r = ladder("H200")
    # two more plateaus crowded next to L2, at almost its value
    r.series[0].levels += [
        Level("L2 (2)", 512 * KIB, 2 * MIB, 270, 3),
        Level("x", KIB, 2 * KIB, 36, 2),
    ]
    x_fmt, y_fmt = _formatters(r.series[0])
    fig = sweep_figure(
        r.series, title="t", x_label="x", y_label="y", x_fmt=x_fmt, y_fmt=y_fmt, device="H200"
    )
    ranges = (fig.x_range.start, fig.x_range.end), (fig.y_range.start, fig.y_range.end)
    placer = LabelPlacer(*ranges, WIDTH, HEIGHT, right=50 + text_px("chase"))  # legend room
    boxes = []
    for m in fig.center:
        left = getattr(m, "text_align", "left") == "right"
        if type(m).__name__ == "LabelSet":
            d = m.source.data
            for x, y, t, dx, dy in zip(d["x"], d["y"], d["text"], d["dx"], d["dy"], strict=True):
                boxes.append(placer.box(x, y, t, dx, dy, left))
        elif type(m).__name__ == "Label":
            boxes.append(placer.box(m.x, m.y, m.text, m.x_offset, m.y_offset, left))
    assert len(boxes) == 5 + 2  # five plateaus, two caches
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not overlap(a, b), (a, b)
