"""The timeline's memory lane in Chromium, on the page ``perflab timeline`` writes of a real
CPU trace recorded with profile_memory=True: under the lanes, on their time axis; hover on the
area gives the bytes in binary units and the op, hover on the peak its bytes and op."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from data_paths import TRACES
from test_browser import assert_safe, browser, open_page  # noqa: F401 (fixture)
from test_timeline_browser import TOOLTIP

from perflab.analysis.memory import memory_report
from perflab.io import load_trace
from perflab.model.units import format_bytes
from perflab.render.timeline_memory import memory_curves

pytestmark = pytest.mark.browser
TRACE = TRACES / "cpu" / "cpu_memory_train.json.gz"
# a point of the memory lane (ms since the page's zero, bytes) on screen
ON_SCREEN = """([x, y]) => {
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 3);
  const plot = root.child_views[2], box = plot.el.getBoundingClientRect();
  return [box.left + plot.frame.x_scale.compute(x), box.top + plot.frame.y_scale.compute(y)];
}"""
SHARED_RANGE = """() => {
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 3);
  return root.child_views[2].model.x_range === root.child_views[1].model.x_range;
}"""


def tip_with(page: Any, text: str) -> str:
    page.wait_for_function(f"() => ({TOOLTIP})().some((t) => t.includes({text!r}))", timeout=10_000)
    return str(next(t for t in page.evaluate(TOOLTIP) if text in t))


def test_the_memory_lane_hovers_with_bytes_and_op(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from perflab.cli import main as cli

    out = tmp_path / "memory.html"
    assert cli(["timeline", str(TRACE), "-o", str(out)]) == 0
    trace = load_trace(TRACE)
    origin = int(trace.start_ns.min())
    [cpu] = memory_report(trace).devices
    page, problems = open_page(browser, out)
    page.set_viewport_size({"width": 1600, "height": 900})
    page.wait_for_function(
        "() => Object.values(Bokeh.index).some((v) => v.child_views && v.child_views.length === 3)"
    )
    assert page.evaluate(SHARED_RANGE)  # zooming the lanes zooms the memory lane
    peak_ms = (cpu.peak_ns - origin) / 1e6
    x, y = page.evaluate(ON_SCREEN, [peak_ms, cpu.peak_allocated])
    page.mouse.move(x, y - 4)  # the marker sits on the peak, pointing at it
    peak = tip_with(page, "peak of")
    assert format_bytes(cpu.peak_allocated) in peak and cpu.peak_op in peak
    # the area under the curve, half way between two events in the middle of the trace
    middle = len(cpu.time_ns) // 2
    t = (int(cpu.time_ns[middle]) + int(cpu.time_ns[middle + 1])) / 2
    x, y = page.evaluate(ON_SCREEN, [(t - origin) / 1e6, 1])
    page.mouse.move(5, 5)
    page.mouse.move(x, y - 2)
    area = tip_with(page, "allocated")
    assert format_bytes(int(cpu.allocated[middle])) in area
    assert memory_curves(trace, origin)[0].ops[middle] in area  # the op that set those bytes
    assert "not tracked" in area  # a CPU's allocator says no reserved bytes
    assert_safe(page, problems)
    page.close()
