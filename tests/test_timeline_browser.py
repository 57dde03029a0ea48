"""The standalone timeline page of a real trace in Chromium at a 1,600 px wide window: the
plot spans the page, W zooms, D pans, hover names a kernel with its duration, a click opens
the details panel, search finds kernels, Shift+drag lists what ran in that stretch, and a
group of lanes collapses into its header and expands again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from data_paths import TRACES
from test_browser import ARGS, CHROMIUM, assert_safe, open_page

pytestmark = pytest.mark.browser
TRACE = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"
WIDTH = 1600
RANGE = """() => { const r = [...Bokeh.documents[0].all_models].find(
  (m) => m.type === 'Range1d' && m.bounds != null); return [r.start, r.end]; }"""
PLOT = """() => {
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 2);
  const plot = root.child_views[1], r = plot.el.getBoundingClientRect();
  return {left: r.left, top: r.top, width: r.width, frame: [plot.frame.bbox.left,
          plot.frame.bbox.right, plot.frame.bbox.top, plot.frame.bbox.bottom]};
}"""
SHOWN = """() => { for (const m of Bokeh.documents[0].all_models) {
  if (m.type === 'ColumnDataSource' && 'cat' in m.data && 'ev' in m.data) return m.data; } }"""
TO_SCREEN = """([x, lane]) => {
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 2);
  const plot = root.child_views[1], box = plot.el.getBoundingClientRect();
  return [box.left + plot.frame.x_scale.compute(x), box.top + plot.frame.y_scale.compute(lane)];
}"""
TOOLTIP = """() => [...document.querySelectorAll('.bk-Tooltip')]
  .filter((t) => t.getBoundingClientRect().width > 0)
  .map((t) => t.shadowRoot ? t.shadowRoot.textContent : t.textContent)"""


@pytest.fixture(scope="module")
def browser() -> Any:
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium missing (run `make browser`)")
    pytest.importorskip("playwright")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from perflab.cli import main as cli

    out = tmp_path_factory.mktemp("timeline") / "t.html"
    assert cli(["timeline", str(TRACE), "-o", str(out)]) == 0
    return out


def widest_kernel(page: Any) -> tuple[int, dict[str, list[Any]]]:
    d = page.evaluate(SHOWN)
    kernels = [i for i, c in enumerate(d["cat"]) if c.startswith("kernel")]
    return max(kernels, key=lambda i: d["right"][i] - d["left"][i]), d


def test_the_standalone_page_at_1600_px(browser: Any, page_file: Path) -> None:
    page, problems = open_page(browser, page_file)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.wait_for_timeout(400)
    plot = page.evaluate(PLOT)
    margins = page.evaluate(
        "() => { const s = getComputedStyle(document.body); "
        "return parseFloat(s.marginLeft) + parseFloat(s.marginRight); }"
    )
    assert plot["width"] >= 0.95 * (WIDTH - margins), plot
    # the lane names take at most about a fifth of the width
    assert plot["frame"][0] <= WIDTH / 5 + 20, plot

    # W zooms around the mouse, D pans
    x_mid = plot["left"] + (plot["frame"][0] + plot["frame"][1]) / 2
    y_mid = plot["top"] + (plot["frame"][2] + plot["frame"][3]) / 2
    page.mouse.move(x_mid, y_mid)
    before = page.evaluate(RANGE)
    page.keyboard.press("w")
    zoomed = page.evaluate(RANGE)
    assert zoomed[1] - zoomed[0] < 0.9 * (before[1] - before[0])
    assert before[0] <= zoomed[0] and zoomed[1] <= before[1]
    page.keyboard.press("d")
    panned = page.evaluate(RANGE)
    assert panned[0] > zoomed[0] and panned[1] - panned[0] == pytest.approx(zoomed[1] - zoomed[0])
    page.mouse.dblclick(x_mid, y_mid)  # fits the whole trace again
    assert page.evaluate(RANGE) == pytest.approx(before)

    # hover: a kernel's name, category, duration and start
    i, d = widest_kernel(page)
    x, y = page.evaluate(TO_SCREEN, [(d["left"][i] + d["right"][i]) / 2, d["lane_i"][i]])
    page.mouse.move(x, y)
    page.wait_for_timeout(200)
    tips = page.evaluate(TOOLTIP)
    assert any(d["name"][i][:40] in t and "duration" in t and d["dur"][i] in t for t in tips)

    # click: the details panel names the kernel, its launch and the launch's CPU op
    page.mouse.click(x, y)
    page.wait_for_timeout(200)
    details = page.inner_text(".pl-tl-details")
    assert d["name"][i][:40] in details and "launched by" in details
    assert "its CPU op" in details and "idle before" in details

    # search: a count, the matches outlined, Enter centres the first
    page.fill(".pl-tl-search", "ncclKernel_AllReduce")
    page.wait_for_timeout(400)
    count = page.inner_text(".pl-tl-count")
    assert count.endswith("matches") and int(count.split()[0].replace(",", "")) > 0
    page.press(".pl-tl-search", "Enter")
    page.wait_for_timeout(200)
    assert page.inner_text(".pl-tl-count").startswith("1 of ")
    found = page.evaluate(
        "() => { for (const m of Bokeh.documents[0].all_models) { if (m.type === "
        "'ColumnDataSource' && 'color' in m.data && !('name' in m.data) && 'top' in m.data) "
        "return m.data.left.length; } }"
    )
    assert found > 0
    page.keyboard.press("Escape")

    # Shift+drag across lanes and time: a table of what ran there, by name
    page.mouse.dblclick(x_mid, y_mid)
    x0 = plot["left"] + plot["frame"][0] + 5
    x1 = plot["left"] + plot["frame"][1] - 5
    page.keyboard.down("Shift")
    page.mouse.move(x0, plot["top"] + plot["frame"][2] + 5)
    page.mouse.down()
    page.mouse.move(x1, plot["top"] + plot["frame"][3] - 5, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_timeout(200)
    assert page.evaluate(RANGE) == pytest.approx(before)  # the drag did not pan
    area = page.inner_text(".pl-tl-area")
    assert "events on" in area and "ncclKernel_AllReduce" in area and "mean duration" in area
    assert_safe(page, problems)
    page.close()


LANES = """() => {
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 2);
  const main = root.child_views[1].model, ov = main.left[0].major_label_overrides;
  return {rows: main.left[0].ticker.ticks.length, height: main.height,
          names: main.left[0].ticker.ticks.map((r) => ov.get(r))};
}"""


FOUND = """() => { for (const m of Bokeh.documents[0].all_models) { if (m.type ===
  'ColumnDataSource' && 'color' in m.data && !('name' in m.data) && 'top' in m.data)
  return m.data; } }"""


def lane_rows(page: Any) -> dict[str, Any]:
    rows: dict[str, Any] = page.evaluate(LANES)
    return rows


def test_groups_collapse_and_expand_at_1600_px(browser: Any, page_file: Path) -> None:
    page, problems = open_page(browser, page_file)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.wait_for_timeout(400)
    plot = page.evaluate(PLOT)
    before = lane_rows(page)
    heads = [i for i, n in enumerate(before["names"]) if n.startswith("\u25be ")]
    assert len(heads) >= 2, before["names"]  # a process's threads and a GPU's streams
    first, second = heads[0], heads[1]
    members = before["names"][first + 1 : second]
    second_y = page.evaluate(TO_SCREEN, [0, second])[1]

    # a click on the first group's name collapses it: its lanes are gone, the next group's
    # header moves up to the row below it, the figure shrinks, and no bar is drawn in them
    x_name = plot["left"] + plot["frame"][0] - 30
    page.mouse.click(x_name, page.evaluate(TO_SCREEN, [0, first])[1])
    page.wait_for_timeout(300)
    after = lane_rows(page)
    assert after["rows"] == before["rows"] - len(members)
    assert after["names"][first].startswith("\u25b8 ")
    assert after["names"][first].endswith(f"{len(members)} lanes")
    assert after["names"][first + 1] == before["names"][second]  # the next group moved up
    assert not set(members) & set(after["names"])
    assert after["height"] < before["height"]
    assert page.evaluate(TO_SCREEN, [0, first + 1])[1] < second_y
    shown = page.evaluate(SHOWN)
    assert shown["left"] and max(shown["lane_i"]) < after["rows"]
    full = page.evaluate(
        "() => { for (const m of Bokeh.documents[0].all_models) { if (m.type === 'CustomJS' "
        "&& m.args.meta) return m.args.meta.lanes; } }"
    )
    assert not set(shown["lane"]) & set(full[first + 1 : second])

    # hover and a click still work on the lanes that moved up
    i, d = widest_kernel(page)
    assert d["lane_i"][i] > first
    x, y = page.evaluate(TO_SCREEN, [(d["left"][i] + d["right"][i]) / 2, d["lane_i"][i]])
    page.mouse.move(x, y)
    page.wait_for_timeout(200)
    assert any(d["name"][i][:40] in t for t in page.evaluate(TOOLTIP))
    page.mouse.click(x, y)
    page.wait_for_timeout(200)
    assert d["name"][i][:40] in page.inner_text(".pl-tl-details")

    # search highlights and the level of detail after a zoom stay on the rows shown
    page.fill(".pl-tl-search", "ncclKernel_AllReduce")
    page.wait_for_timeout(400)
    page.mouse.click(x, y)  # the keys go to the plot again, not the search box
    page.keyboard.press("w")
    page.wait_for_timeout(300)
    found = page.evaluate(FOUND)
    assert found["top"] and max(found["bottom"]) < after["rows"]
    shown = page.evaluate(SHOWN)
    assert shown["left"] and not set(shown["lane"]) & set(full[first + 1 : second])
    page.mouse.dblclick(x, y)

    # Shift+drag over every row: the collapsed group's header stands for its lanes
    page.keyboard.down("Shift")
    page.mouse.move(plot["left"] + plot["frame"][0] + 5, page.evaluate(TO_SCREEN, [0, 0])[1])
    page.mouse.down()
    page.mouse.move(
        plot["left"] + plot["frame"][1] - 5,
        page.evaluate(TO_SCREEN, [0, after["rows"] - 1])[1],
        steps=5,
    )
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_timeout(200)
    area = page.inner_text(".pl-tl-area")
    lanes = len(full) - sum(n.startswith(("\u25be", "\u25b8")) for n in before["names"])
    assert f"events on {lanes} lanes" in area and "ncclKernel_AllReduce" in area

    # C over the collapsed group's header expands it again: every lane is back in place
    page.mouse.move(x_name + 40, page.evaluate(TO_SCREEN, [0, first])[1])
    page.keyboard.press("c")
    page.wait_for_timeout(300)
    assert lane_rows(page) == before
    assert page.evaluate(TO_SCREEN, [0, second])[1] == pytest.approx(second_y)
    assert "collapse / expand" in page.inner_text(".pl-tl-help")
    assert_safe(page, problems)
    page.close()
