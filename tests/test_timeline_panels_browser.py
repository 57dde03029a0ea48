"""The timeline page's panels in Chromium, on the stored NCCL trace (26,932 events): the area
table of a page that holds only some of the events says so plainly and names the knob that
holds more where the page was made (the CLI's --rows, Python's row_budget); its names are
shown whole, wrapped, with the full name on hover; the details panel follows the search's
current match as Enter steps through them; and the keys' hint sits under the time axis of
the interactive page only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from data_paths import TRACES
from test_browser import assert_safe, browser, open_page  # noqa: F401 (fixture)
from test_timeline_browser import PLOT, TO_SCREEN

pytestmark = pytest.mark.browser
TRACE = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"
ROWS = 1000  # far fewer than the trace's events: the page holds the longest only
WIDTH = 1300
AXIS = """() => { for (const m of Bokeh.documents[0].all_models) {
  if (m.type === 'LinearAxis' && m.axis_label) return m.axis_label; } }"""
# the area table's name cells: text, title, whether any is cut, and the longest one's lines
NAME_CELLS = """() => [...document.querySelectorAll('.pl-tl-area td.pl-tl-name')].map((c) => ({
  text: c.textContent, title: c.title, cut: c.scrollWidth > c.clientWidth + 1,
  lines: Math.round(c.getBoundingClientRect().height
                    / parseFloat(getComputedStyle(c).lineHeight))}))"""
CURRENT = """() => { for (const m of Bokeh.documents[0].all_models) {
  if (m.type === 'ColumnDataSource' && 'current' in m.data) return m.data.current; } }"""
DOUBLE_TAP_MS = 400  # Bokeh reads two taps within 300 ms as one double tap, not a second tap
# the drawn bar whose part inside the plot's x range is widest: that part's middle, its lane
WIDEST_SHOWN_BAR = """() => {
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 2);
  const range = root.child_views[1].frame.x_range;
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'ColumnDataSource' || !('cat' in m.data) || !('ev' in m.data)) continue;
    const d = m.data;
    let best = null;
    for (let k = 0; k < d.left.length; k++) {
      const lo = Math.max(d.left[k], range.start), hi = Math.min(d.right[k], range.end);
      if (hi > lo && (best === null || hi - lo > best.width))
        best = {width: hi - lo, x: (lo + hi) / 2, lane: d.lane_i[k], name: d.name[k]};
    }
    return best;
  } }"""
LINKED = """() => { for (const m of Bokeh.documents[0].all_models) {
  if (m.type === 'ColumnDataSource' && 'role' in m.data) return m.data; } }"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The page ``perflab timeline --rows 1000`` writes, and a notebook's output of
    ``trace.timeline(row_budget=1000)``."""
    from perflab.cli import main as cli
    from perflab.io import load_trace

    root = tmp_path_factory.mktemp("panels")
    saved = root / "cli.html"
    assert cli(["timeline", str(TRACE), "-o", str(saved), "--rows", str(ROWS)]) == 0
    view = load_trace(TRACE).timeline(row_budget=ROWS)
    notebook = root / "nb.html"
    notebook.write_text(
        "<!doctype html><html><body>" + view._repr_mimebundle_()["text/html"] + "</body></html>",
        encoding="utf-8",
    )
    return {"cli": saved, "notebook": notebook}


@contextmanager
def opened(browser: Any, path: Path) -> Iterator[Any]:  # noqa: F811
    """The page at ``path``, WIDTH px wide; on leaving, checked for errors and closed."""
    page, problems = open_page(browser, path)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.wait_for_timeout(300)
    yield page
    assert_safe(page, problems)
    page.close()


def select_everything(page: Any) -> str:
    """Shift+drag across every lane and the whole trace: the area panel's text."""
    plot = page.evaluate(PLOT)
    left, right, top, bottom = plot["frame"]
    page.keyboard.down("Shift")
    page.mouse.move(plot["left"] + left + 3, plot["top"] + top + 3)
    page.mouse.down()
    page.mouse.move(plot["left"] + right - 3, plot["top"] + bottom - 3, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_timeout(300)
    return str(page.inner_text(".pl-tl-area"))


def held(page: Any) -> int:
    held_events: int = page.evaluate(
        "() => { for (const m of Bokeh.documents[0].all_models) { if (m.type === 'CustomJS' "
        "&& m.args.events && m.args.worker_code) return m.args.events.data.start.length; } }"
    )
    return held_events


@pytest.mark.parametrize(
    ("made_by", "knob", "other"),
    [("cli", "a larger --rows holds more", "row_budget"), ("notebook", "row_budget", "--rows")],
)
def test_the_area_table_says_it_counts_only_the_events_the_page_holds(
    browser: Any,  # noqa: F811
    pages: dict[str, Path],
    made_by: str,
    knob: str,
    other: str,
) -> None:
    with opened(browser, pages[made_by]) as page:
        area = select_everything(page)
        n = held(page)
        assert 0 < n < 26_932
        note = page.locator(".pl-tl-area .pl-tl-note").first.inner_text()
        assert f"counts only the events this page holds: {n:,} of the trace's 26,932" in note
        assert "shorter events here are not counted" in note
        assert knob in note and other not in note  # the knob of where the page was made
        assert "events on 9 lanes from" in area

        # every name whole: wrapped rather than cut, the full name on hover
        cells = page.evaluate(NAME_CELLS)
        assert cells and not [c["text"] for c in cells if c["cut"]]
        assert all(
            c["title"].startswith(c["text"]) and "search for it" in c["title"] for c in cells
        )
        longest = max(cells, key=lambda c: len(c["text"]))
        assert len(longest["text"]) > 60 and longest["lines"] >= 2, longest  # wraps in the panel


def test_the_details_panel_follows_the_current_search_match(
    browser: Any,  # noqa: F811
    pages: dict[str, Path],
) -> None:
    with opened(browser, pages["cli"]) as page:
        page.fill(".pl-tl-search", "ncclKernel_AllReduce")
        # the search has answered (its count is no longer busy), whatever the machine's load
        page.wait_for_selector('.pl-tl-count[aria-busy="false"]', state="attached")
        seen = []
        for step in range(3):  # Enter, Enter, then Shift+Enter back to the second
            page.press(".pl-tl-search", "Shift+Enter" if step == 2 else "Enter")
            page.wait_for_function(
                "(n) => document.querySelector('.pl-tl-count').innerText.startsWith(n + ' of ')",
                arg=[1, 2, 1][step],
            )
            page.wait_for_selector(".pl-tl-details .pl-tl-title")
            current = page.evaluate(CURRENT)
            event = page.evaluate(
                "([e]) => { for (const m of Bokeh.documents[0].all_models) { if (m.type === "
                "'CustomJS' && m.args.events && m.args.worker_code) { const E = m.args.events.data;"
                " return {start: E.start[e], dur: E.dur[e]}; } } }",
                [current[1]],
            )
            assert page.is_visible(".pl-tl-details")
            details = page.inner_text(".pl-tl-details")
            assert page.inner_text(".pl-tl-details .pl-tl-title").startswith("ncclKernel_AllReduce")
            seen.append((details, event["start"]))
            # the match is selected as a click selects it: its launch link highlighted
            linked = page.evaluate(LINKED)
            assert any(s == pytest.approx(event["start"]) for s in linked["left"])
            assert "launch (CPU)" in linked["role"] and "launched by" in details
        assert seen[0][1] < seen[1][1] and seen[2][1] == seen[0][1]
        assert seen[0][0] != seen[1][0] and seen[2][0] == seen[0][0]

        # a click elsewhere still fills the panel with what was clicked
        plot = page.evaluate(PLOT)
        page.mouse.click(plot["left"] + plot["frame"][0] + 2, plot["top"] + plot["frame"][2] + 2)
        page.wait_for_timeout(200)
        assert not page.is_visible(".pl-tl-details")
        # the bar with the widest part inside the window the search left on screen, clicked
        # in the middle of that part; the panel is waited for, not given a fixed pause
        bar = page.evaluate(WIDEST_SHOWN_BAR)
        x, y = page.evaluate(TO_SCREEN, [bar["x"], bar["lane"]])
        page.wait_for_timeout(DOUBLE_TAP_MS)  # else Bokeh takes the two clicks for a double tap
        page.mouse.click(x, y)
        page.wait_for_function(
            "(name) => { const t = document.querySelector('.pl-tl-details .pl-tl-title');"
            " return t !== null && t.innerText.startsWith(name); }",
            arg=bar["name"][:40],
        )


def test_the_interactive_page_names_its_keys_under_the_time_axis(
    browser: Any,  # noqa: F811
    pages: dict[str, Path],
) -> None:
    with opened(browser, pages["notebook"]) as page:
        label = page.evaluate(AXIS)
    assert label.startswith("ms since trace start") and "W/S zoom, A/D pan" in label
