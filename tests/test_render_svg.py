"""Static pictures of charts (perflab.render.svg) and how chart outputs embed them and
BokehJS (perflab.render.bokeh_embed)."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_timeline import PAYLOAD, small_trace, synthetic_trace

pytest.importorskip("bokeh")

from perflab.render import bokeh_embed
from perflab.render.svg import (
    MAX_SHAPES,
    Y_LABEL_CHARS,
    frame_margin,
    layout_svg,
    merge_boxes,
    nice_ticks,
    share_budget,
)

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = PAYLOAD + "\x01</text><script>window.__pwned=2</script>"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def shapes(root: ET.Element) -> int:
    """Drawn shapes: each closed sub-path, open path and marker counts once."""
    count = 0
    for p in root.iter(f"{SVG}path"):
        d = p.get("d", "")
        count += max(d.count("Z"), d.count("M") if "Z" not in d else 0, 1)
    return count


def every_glyph_figure() -> Any:
    from bokeh.models import BoxAnnotation, Label, Span
    from bokeh.plotting import figure

    fig = figure(width=500, height=320, title=HOSTILE, x_axis_type="log", y_axis_label="y <axis>")
    fig.quad(left=[1], right=[2], bottom=[0], top=[1], color="#111111", legend_label="quad")
    fig.rect(x=[3], y=[1], width=[1], height=[0.5], color="#222222")
    fig.hbar(y=[2], height=0.5, left=[1], right=[5], color="#333333")
    fig.vbar(x=[10], width=2, top=[3], color="#444444")
    fig.line([1, 10, 100], [0, 1, 2], color="#555555", line_dash="dashed", legend_label="line")
    fig.multi_line([[1, 2], [3, 4]], [[0, 1], [1, 0]], color="#666666")
    fig.scatter([5, 50], [1, 2], marker="square", size=10, color="#777777", legend_label="dots")
    fig.circle([20], [2], radius=1, color="#888888")
    fig.segment(x0=[1], y0=[3], x1=[100], y1=[3], color="#999999")
    fig.text(x=[30], y=[1], text=[HOSTILE])
    fig.add_layout(Span(location=2.5, dimension="width", line_color="#aaaaaa"))
    fig.add_layout(Label(x=2, y=2, text="a label"))
    fig.add_layout(BoxAnnotation(left=40, right=60, fill_color="#bbbbbb"))
    return fig


def test_every_glyph_kind_is_drawn_and_strings_are_escaped() -> None:
    svg = layout_svg(every_glyph_figure(), HOSTILE)
    root = parse(svg)  # control characters and markup in names still give valid XML
    assert PAYLOAD not in svg and "<script>" not in svg and "\x01" not in svg
    words = texts(root)
    assert sum(HOSTILE.replace("\x01", "\ufffd") == w for w in words) >= 2  # title and text
    assert {"quad", "line", "dots", "a label", "y <axis>"} <= set(words)
    colours = {e.get("fill") for e in root.iter(f"{SVG}path")}
    colours |= {e.get("stroke") for e in root.iter(f"{SVG}path")}
    for c in ("#111111", "#222222", "#333333", "#444444", "#555555", "#666666", "#777777"):
        assert c in colours, c
    assert {"#888888", "#999999", "#aaaaaa", "#bbbbbb"} <= colours
    assert any(p.get("stroke-dasharray") for p in root.iter(f"{SVG}path"))


def test_log_axis_ticks_are_decades_and_readable() -> None:
    assert nice_ticks(1, 1e6, log=True) == [10.0**k for k in range(7)]
    assert nice_ticks(1, 50, log=True) == [1, 2, 5, 10, 20, 50]
    assert nice_ticks(0, 1, log=False) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    from bokeh.plotting import figure

    fig = figure(x_axis_type="log", x_range=(1, 1e6), y_range=(0, 1))
    fig.line([1, 1e6], [0, 1])
    words = texts(parse(layout_svg(fig)))
    assert {"1", "10", "100", "1000", "1e6"} <= set(words)


def test_touching_boxes_merge_and_the_budget_keeps_the_widest() -> None:
    x0 = np.array([0.0, 10.2, 20.0, 50.0])
    x1 = np.array([10.0, 19.9, 30.0, 51.0])
    y0, y1 = np.zeros(4), np.full(4, 5.0)
    assert merge_boxes(x0, x1, y0, y1, 10) == [(0.0, 5.0, 0.0, 30.0), (0.0, 5.0, 50.0, 51.0)]
    assert merge_boxes(x0, x1, y0, y1, 1) == [(0.0, 5.0, 0.0, 30.0)]
    assert share_budget([10, 5000, 20000], 3000) == [10, 1495, 1495]
    assert share_budget([3, 4], 3000) == [3, 4]


def test_a_large_timeline_gives_a_small_picture_of_its_bars() -> None:
    from perflab.render.timeline import timeline

    view = timeline(synthetic_trace(100_000))
    svg = layout_svg(view.layout, "t")
    root = parse(svg)
    figures = root.findall(f"{SVG}g")  # each figure's glyphs, clipped to its plot area
    assert len(figures) == 2  # the busy strip and the lanes
    assert all(0 < shapes(g) <= MAX_SHAPES for g in figures)
    assert len(svg) < 250_000
    words = texts(root)
    assert "stream 7" in words and "GPU busy fraction: any stream busy" in words
    fills = [p.get("fill") for p in root.iter(f"{SVG}path")]
    assert "#4c78a8" in fills  # kernels, filled in by the page script, are drawn


def test_timeline_lane_names_are_escaped() -> None:
    from perflab.render.timeline import timeline

    trace = small_trace([PAYLOAD, "k"])
    trace.meta["thread_names"] = {"99:1": "thread <b>1</b>"}
    svg = layout_svg(timeline(trace).layout, "t")
    assert "thread <b>1</b>" not in svg and "thread &lt;b&gt;1&lt;/b&gt;" in svg
    assert any("thread <b>1</b>" in w for w in texts(parse(svg)))


def test_a_long_lane_name_is_cut_to_the_margin_not_off_the_picture() -> None:
    from bokeh.models import FixedTicker
    from bokeh.plotting import figure

    fig = figure(width=600, height=200)
    fig.quad(left=[0], right=[1], bottom=[-0.4], top=[0.4])
    name = "thread 2949452224 (no name in the trace) · 42 short events (zoom in)"
    fig.yaxis.ticker = FixedTicker(ticks=[0])
    fig.yaxis.major_label_overrides = {0: name}
    shown = [t for t in texts(parse(layout_svg(fig, "t"))) if t.startswith("thread")]
    assert shown == [name[: Y_LABEL_CHARS - 1] + "…"]
    assert frame_margin(fig)[0] >= Y_LABEL_CHARS * 6.5  # the cut name fits in the margin


def test_chart_bundle_carries_the_picture_in_both_forms() -> None:
    from perflab.render.roofline import roofline

    bundle = roofline([(HOSTILE, 1e12, 1e9, 1e-3)], device="H200")._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "image/svg+xml"}
    root = parse(bundle["image/svg+xml"])
    assert "arithmetic intensity (FLOP/byte)" in texts(root)
    image = r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"'
    found = re.search(image, bundle["text/html"])
    assert found is not None
    assert base64.b64decode(found.group(1)).decode("utf-8") == bundle["image/svg+xml"]


def test_runtime_once_per_session_again_for_its_own_cell() -> None:
    once = bokeh_embed.RuntimeOnce()
    assert once.needed(None) and once.needed(None)  # outside a kernel: always
    assert once.needed({"cellId": "a"})
    assert not once.needed({"cellId": "b"})
    assert once.needed({"cellId": "a"})  # re-running the carrier replaces its output
    assert not once.needed({"cellId": "c", "deletedCells": []})
    assert once.needed({"cellId": "c", "deletedCells": ["a"]})  # carrier gone: c carries
    assert not once.needed({"cellId": "d"})
    blind = bokeh_embed.RuntimeOnce()  # a front end that sends no cell ids
    assert blind.needed({}) and not blind.needed({}) and not blind.needed({})


def test_consecutive_outputs_in_a_session_carry_bokehjs_once(monkeypatch: Any) -> None:
    from perflab.render.roofline import roofline

    monkeypatch.setattr(bokeh_embed, "RUNTIME", bokeh_embed.RuntimeOnce())
    monkeypatch.setattr(bokeh_embed, "_request_metadata", lambda: {"cellId": "x"})
    chart = roofline([("gemm", 1e12, 1e9, 1e-3)], device="H200")
    first = chart._repr_mimebundle_()["text/html"]
    monkeypatch.setattr(bokeh_embed, "_request_metadata", lambda: {"cellId": "y"})
    later = [len(chart._repr_mimebundle_()["text/html"]) for _ in range(9)]
    marker = "typeof window.Bokeh === 'undefined'"
    assert marker in first and len(first) > 1_000_000
    assert max(later) < 120_000, later  # the plot, its picture and its table only
    assert len(first) + sum(later) < 2_000_000


def test_request_metadata_in_a_kernel_and_in_colab(monkeypatch: Any) -> None:
    import sys
    import types

    class Kernel:
        def get_parent(self, channel: str) -> dict[str, Any]:
            return {"metadata": {"cellId": "c1", "deletedCells": []}}

    shell = types.SimpleNamespace(kernel=Kernel())
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    assert bokeh_embed._request_metadata() == {"cellId": "c1", "deletedCells": []}
    # Colab shows each output in its own frame: each must carry BokehJS
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert bokeh_embed._request_metadata() is None


def test_outside_a_kernel_every_output_stands_alone() -> None:
    from perflab.render.roofline import roofline

    chart = roofline([("gemm", 1e12, 1e9, 1e-3)], device="H200")
    for _ in range(2):
        assert "typeof window.Bokeh === 'undefined'" in chart._repr_mimebundle_()["text/html"]


def test_a_notebook_run_by_a_kernel_stores_bokehjs_once() -> None:
    """Five charts run by a real kernel: only the first output carries BokehJS."""
    import nbformat
    from nbclient import NotebookClient

    cells = ["import perflab"] + [
        f"perflab.roofline([('k{i}', 1e12, 1e9, 1e-3)], device='H200')" for i in range(5)
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    pages = [c.outputs[0]["data"]["text/html"] for c in nb.cells[1:]]
    carries = ["typeof window.Bokeh === 'undefined'" in p for p in pages]
    assert carries == [True, False, False, False, False]
    assert all("image/svg+xml" in c.outputs[0]["data"] for c in nb.cells[1:])
    assert len(nbformat.writes(nb)) < 2_000_000  # 1.3 MB of BokehJS once, not five times


def test_busy_outline_steps_along_its_baseline() -> None:
    from perflab.render.svg import busy_outline

    edges = np.arange(6.0)
    frac = np.array([0.0, 0.5, 1.0, 0.0, 0.2])
    xs, ys = busy_outline(edges, frac, 0.0, frac)
    # up at bin 1, a step per busy bin, down to the baseline across the gap, up again at bin 4
    assert xs == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert ys == [0, 0.5, 0.5, 1, 1, 0, 0, 0.2, 0.2, 0]
    assert busy_outline(edges, np.zeros(5), 0.4, np.zeros(5)) == ([], [])


def test_a_job_timeline_picture_keeps_its_straggler_lines_thick(tmp_path: Path) -> None:
    """The collectives' lines are filled in by the page; the static picture draws them
    itself, the straggler's in red and thicker than the page's, with larger text."""
    from bench_scripts import load_script

    from perflab.io.job import load_job
    from perflab.render.job import job_timeline

    load_script("job").generate_job(tmp_path, 4, 20, seed=3, straggler=2)
    svg = layout_svg(job_timeline(load_job(tmp_path)).layout, "job")
    red = [p for p in parse(svg).iter(f"{SVG}path") if p.get("stroke") == "#d62728"]
    assert len(red) >= 5
    assert all(float(p.get("stroke-width")) >= 3 for p in red if p.get("fill") == "none")
    sizes = {t.get("font-size") for t in parse(svg).iter(f"{SVG}text")}
    assert "14" in sizes and "11" not in sizes
