"""The critical path's toggle in Chromium, on the page ``perflab timeline`` writes and on a
notebook's output of ``trace.timeline(critical=True)``: reached and switched with the keyboard,
it draws each step's stretches over their lanes (waiting hatched) and dims the other events;
hover says a stretch's kind and its time on the path; off, the page is as it was. A kernel
whose name is markup shows as text. Where there is no path, the toggle is disabled and says
why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from data_paths import TRACES
from kineto_gen import injected_trace
from test_browser import assert_safe, browser, open_page  # noqa: F401 (fixture)
from test_timeline import PAYLOAD
from test_timeline_browser import TOOLTIP

pytestmark = pytest.mark.browser
NO_STEPS = TRACES / "kineto" / "alexnet_a100.json.gz"
DRAWN = """() => { for (const m of Bokeh.documents[0].all_models) {
  if (m.type === 'ColumnDataSource' && 'on_path' in m.data) return m.data; } }"""
# the events' bars: how opaque they are drawn now
BARS_ALPHA = """() => { for (const m of Bokeh.documents[0].all_models) {
  if (m.type === 'GlyphRenderer' && 'ev' in m.data_source.data && 'cat' in m.data_source.data)
    return m.glyph.fill_alpha.value; } }"""
# the widest drawn stretch: its middle on screen, its name and kind
WIDEST = """() => {
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 2);
  const plot = root.child_views[1], box = plot.el.getBoundingClientRect();
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'ColumnDataSource' || !('on_path' in m.data)) continue;
    const d = m.data;
    let k = 0;
    for (let i = 1; i < d.left.length; i++) {
      if (d.right[i] - d.left[i] > d.right[k] - d.left[k]) k = i;
    }
    return {x: box.left + plot.frame.x_scale.compute((d.left[k] + d.right[k]) / 2),
            y: box.top + plot.frame.y_scale.compute((d.bottom[k] + d.top[k]) / 2),
            name: d.name[k], kind: d.kind[k], on_path: d.on_path[k]};
  } }"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The generated steps (one kernel named with markup), as ``perflab timeline`` writes
    them and as a notebook shows ``trace.timeline(critical=True)``; and the CLI's page of a
    trace without ProfilerStep ranges."""
    from perflab.cli import main as cli
    from perflab.io import load_trace

    root = tmp_path_factory.mktemp("critical-pages")
    doc = injected_trace(0).doc
    for event in doc["traceEvents"]:
        if event.get("name") == "relu_kernel":
            event["name"] = PAYLOAD
    source = root / "steps.json"
    source.write_text(json.dumps(doc), encoding="utf-8")
    out = {"cli": root / "cli.html", "notebook": root / "nb.html", "none": root / "none.html"}
    assert cli(["timeline", str(source), "-o", str(out["cli"])]) == 0
    view = load_trace(source).timeline(critical=True)
    out["notebook"].write_text(
        "<!doctype html><html><body>" + view._repr_mimebundle_()["text/html"] + "</body></html>",
        encoding="utf-8",
    )
    assert cli(["timeline", str(NO_STEPS), "-o", str(out["none"])]) == 0
    return out


@contextmanager
def opened(browser: Any, path: Path) -> Iterator[Any]:  # noqa: F811
    page, problems = open_page(browser, path)
    page.set_viewport_size({"width": 1600, "height": 900})
    page.wait_for_selector(".pl-tl-crit input", timeout=30_000)
    yield page
    assert_safe(page, problems)
    page.close()


def switch(page: Any) -> None:
    """The toggle, reached with Tab from the search box and switched with Space."""
    page.focus(".pl-tl-search")
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.closest('.pl-tl-crit') !== null"):
            break
    page.keyboard.press("Space")


@pytest.mark.parametrize("made_by", ["cli", "notebook"])
def test_the_toggle_draws_the_path_and_puts_the_page_back(
    browser: Any,  # noqa: F811
    pages: dict[str, Path],
    made_by: str,
) -> None:
    with opened(browser, pages[made_by]) as page:
        assert page.evaluate(DRAWN)["left"] == []
        assert page.evaluate(BARS_ALPHA) == 1
        switch(page)
        page.wait_for_function(f"() => ({DRAWN})().left.length > 0", timeout=10_000)
        drawn = page.evaluate(DRAWN)
        assert page.is_checked(".pl-tl-crit input")
        assert page.evaluate(BARS_ALPHA) < 0.5  # the rest dimmed
        assert "/" in drawn["hatch"] and " " in drawn["hatch"]  # waiting apart from work
        kinds = set(drawn["kind"])
        assert {"kernel", "host work"} <= kinds
        assert any(k.startswith("launch latency") for k in kinds)
        assert PAYLOAD in drawn["name"]  # a name from the trace, as data
        assert all(step.startswith("ProfilerStep#") for step in drawn["step"])
        widest = page.evaluate(WIDEST)
        page.mouse.move(widest["x"], widest["y"])
        page.wait_for_function(
            f"() => ({TOOLTIP})().some((t) => t.includes('on the path'))", timeout=10_000
        )
        tip = next(t for t in page.evaluate(TOOLTIP) if "on the path" in t)
        assert widest["kind"] in tip and widest["on_path"] in tip
        page.mouse.move(5, 5)
        switch(page)
        page.wait_for_function(f"() => ({DRAWN})().left.length === 0", timeout=10_000)
        assert page.evaluate(BARS_ALPHA) == 1
        assert not page.is_checked(".pl-tl-crit input")


def test_the_path_follows_a_zoom(browser: Any, pages: dict[str, Path]) -> None:  # noqa: F811
    with opened(browser, pages["cli"]) as page:
        switch(page)
        page.wait_for_function(f"() => ({DRAWN})().left.length > 0", timeout=10_000)
        everything = len(page.evaluate(DRAWN)["left"])
        page.evaluate(
            """() => { for (const m of Bokeh.documents[0].all_models) {
              if (m.type === 'Range1d' && m.bounds && m.bounds !== 'auto' && m.start === 0) {
                m.end = m.end / 10; return; } } }"""
        )
        page.wait_for_function(f"() => ({DRAWN})().left.length < {everything}", timeout=10_000)


def test_without_a_path_the_toggle_is_disabled_and_says_why(
    browser: Any,  # noqa: F811
    pages: dict[str, Path],
) -> None:
    with opened(browser, pages["none"]) as page:
        assert page.is_disabled(".pl-tl-crit input")
        assert "ProfilerStep#N" in page.get_attribute(".pl-tl-crit", "title")
        page.click(".pl-tl-crit", force=True)
        page.wait_for_timeout(300)  # nothing to wait for: a disabled toggle draws nothing
        assert page.evaluate(DRAWN)["left"] == []
        assert page.evaluate(BARS_ALPHA) == 1
