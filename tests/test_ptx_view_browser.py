"""The compile view in real headless Chromium: hovering an instruction in the standalone page
(``perflab compile --html``) outlines the instructions whose barriers it waits on and those
that wait on it; in a notebook-output-sized box at a 1,600 px window every SASS instruction
reads in full beside a narrow control column, whatever the layout (auto, side by side,
stacked, resized by a drag); in an untrusted notebook (no script, no style) the columns,
the titles and the pressure plot are still there and the instructions wrap, not cut."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_browser import browser, jupyter_server, open_page  # noqa: F401 (fixture)
from test_ptx_view import GUARDED

from perflab.cli import main

pytestmark = pytest.mark.browser

KERNEL = """__global__ void load_use(const float* a, float* b, float x) {
  int i = threadIdx.x;
  b[i] = a[i] * x + 1.0f;
}
"""
LINKS = """() => {
  const rows = [...document.querySelectorAll('.pv-code [data-o]')];
  const waiter = rows.find((r) => r.hasAttribute('data-w'));
  return {offset: waiter.dataset.o, waits: waiter.dataset.w.split(' ')};
}"""
OUTLINED = """(cls) => [...document.querySelectorAll('.' + cls)].map((r) => r.dataset.o)"""


def test_hovering_an_instruction_outlines_its_barrier_links(
    browser: Any,  # noqa: F811 (fixture)
    tmp_path: Path,
) -> None:
    source, page_file = tmp_path / "k.cu", tmp_path / "view.html"
    source.write_text(KERNEL)
    assert main(["compile", str(source), "--html", str(page_file)]) == 0
    page, problems = open_page(browser, page_file, wait=False)
    link = page.evaluate(LINKS)
    row = page.locator(f'.pv-code [data-o="{link["offset"]}"]')
    row.hover()
    assert page.evaluate(OUTLINED, "pv-setter") == link["waits"]
    assert page.evaluate(OUTLINED, "pv-self") == [link["offset"]]
    setter = page.locator(f'.pv-code [data-o="{link["waits"][0]}"]')
    setter.hover()
    assert link["offset"] in page.evaluate(OUTLINED, "pv-waiter")
    page.mouse.move(1, 1)
    page.locator("body").hover(position={"x": 1, "y": 1})
    assert problems == []
    page.close()


def test_an_untrusted_notebook_keeps_the_columns_titles_and_plot(
    browser: Any,  # noqa: F811 (fixture)
    tmp_path: Path,
) -> None:
    import nbformat

    from perflab.capture.compile import compile_cuda
    from perflab.render.ptx_view import CompileView

    view = CompileView(compile_cuda(KERNEL, arch="sm_90a"))
    cell = nbformat.v4.new_code_cell("view")
    cell.outputs = [nbformat.v4.new_output("display_data", data=view._repr_mimebundle_())]
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), tmp_path / "shared.ipynb")
    with jupyter_server("jupyterlab", tmp_path) as url:
        page, problems = open_page(
            browser, f"{url}/lab/tree/shared.ipynb", front_end=f"{url}/static/", wait=False
        )
        page.wait_for_selector(".jp-OutputArea-output .pv-pane", timeout=90_000)
        seen = page.evaluate(
            """() => {
              const out = document.querySelector('.jp-OutputArea-output');
              const ctl = [...out.querySelectorAll('.k-instruction .ctl')];
              const linked = ctl.filter((c) => (c.title || '').includes('waits for'));
              const load = [...out.querySelectorAll('.pv-code > div')].find(
                (r) => r.textContent.includes('LDG'));
              const img = out.querySelector('img[src^="data:image/svg+xml"]');
              return {
                styles: out.querySelectorAll('style').length,
                scripts: out.querySelectorAll('script').length,
                columns: ctl.length, text: ctl.length ? ctl[0].textContent : '',
                full: ctl.length ? ctl[0].title : '',
                linked: linked.length, help: load ? load.title : '',
                peak: out.querySelectorAll('.lr.peak').length,
                plot: img ? img.getBoundingClientRect().height : 0,
              };
            }"""
        )
        assert seen["styles"] == 0 and seen["scripts"] == 0  # sanitised: untrusted
        assert seen["columns"] > 10 and seen["text"].strip() == "1"  # LDC R1: stall 1
        assert seen["full"].startswith("stall 1 cycle\nS:1 - W- R- w:0b000000")
        assert seen["linked"] >= 1 and "Loads from global memory" in seen["help"]
        assert seen["peak"] >= 1 and seen["plot"] > 50
        # at a 1,600 px window, file browser open: the panes stay side by side, so the SASS
        # pane is narrow; its inline styles alone wrap each instruction rather than cut it
        page.set_viewport_size({"width": 1600, "height": 1000})
        page.wait_for_timeout(300)
        shot = os.environ.get("PERFLAB_SCREENSHOT_DIR")
        if shot:
            page.locator(".pv-panes").screenshot(path=str(Path(shot) / "untrusted-sass.png"))
        assert page.evaluate(SASS_READ)["width"] < 450
        assert_reads_in_full(page)
        assert problems == []
        page.close()


# ---- reading the SASS pane at 1,600 px --------------------------------------------------

OUTPUT_WIDTH = 1000  # a notebook's output area at a 1,600 px window, file browser open
# Each SASS instruction's text (all of the row after its live-register count) against the
# inner edges of its code box: a line past them is text the reader cannot see.
SASS_READ = """() => {
  const pane = [...document.querySelectorAll('.pv-pane')].find(
    (p) => p.querySelector('h4').textContent === 'SASS');
  const code = pane.querySelector('.pv-code');
  const box = code.getBoundingClientRect();
  const left = box.left + code.clientLeft, right = left + code.clientWidth;
  const rows = [...code.querySelectorAll('.k-instruction')];
  const cut = rows.filter((row) => {
    const range = document.createRange();
    range.setStartAfter(row.querySelector('.lr'));
    range.setEnd(row, row.childNodes.length);
    return [...range.getClientRects()].some((r) => r.left < left - 0.5 || r.right > right + 0.5);
  }).map((row) => row.dataset.o);
  const control = rows.map((row) => row.querySelector('.ctl').getBoundingClientRect().width);
  return {rows: rows.length, cut, overflow: code.scrollWidth - code.clientWidth,
          control: Math.max(...control), width: pane.getBoundingClientRect().width};
}"""
# Each Source and PTX row's text against its code box, and where each wrapped row's lines
# start: every line after the first must start right of the number column.
NUMBERED_READ = """(name) => {
  const pane = [...document.querySelectorAll('.pv-pane')].find(
    (p) => p.querySelector('h4').textContent.split(' ')[0] === name);
  const code = pane.querySelector('.pv-code');
  const box = code.getBoundingClientRect();
  const left = box.left + code.clientLeft, right = left + code.clientWidth;
  const rows = [...code.children];
  let cut = 0, wrapped = 0, under = 0;
  for (const row of rows) {
    const number = row.querySelector('.n').getBoundingClientRect();
    const range = document.createRange();
    range.setStartAfter(row.querySelector('.n'));
    range.setEnd(row, row.childNodes.length);
    const rects = [...range.getClientRects()].filter((r) => r.width > 0);
    if (rects.some((r) => r.left < left - 0.5 || r.right > right + 0.5)) cut += 1;
    const lines = [...new Set(rects.map((r) => Math.round(r.top)))];
    if (lines.length > 1) {
      wrapped += 1;
      const later = rects.filter((r) => Math.round(r.top) > lines[0]);
      if (later.some((r) => r.left < number.right - 0.5)) under += 1;
    }
  }
  return {rows: rows.length, cut, wrapped, under, overflow: code.scrollWidth - code.clientWidth};
}"""
PANES = """() => [...document.querySelectorAll('.pv-pane')].map((p) => {
  const b = p.getBoundingClientRect();
  return {name: p.querySelector('h4').textContent.split(' ')[0],
          left: Math.round(b.left), top: Math.round(b.top), width: Math.round(b.width)};
})"""


@pytest.fixture(scope="module")
def output_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The view of GUARDED in a box as wide as a notebook's output area."""
    from perflab.capture.compile import compile_cuda
    from perflab.render.ptx_view import compile_bundle, standalone_page

    view = compile_bundle(compile_cuda(GUARDED, arch="sm_90a"))["text/html"]
    body = f'<div id="output" style="width: {OUTPUT_WIDTH}px">{view}</div>'
    path = tmp_path_factory.mktemp("view") / "view.html"
    path.write_text(standalone_page(body, "scale_rows"), encoding="utf-8")
    return path


@pytest.fixture
def page(browser: Any, output_page: Path) -> Iterator[Any]:  # noqa: F811 (fixture)
    """The page at a 1,600 px window; no console errors by the end of the test."""
    opened, problems = open_page(browser, output_page, wait=False)
    opened.set_viewport_size({"width": 1600, "height": 1000})
    yield opened
    assert problems == []
    opened.close()


def assert_reads_in_full(page: Any) -> dict[str, Any]:
    seen: dict[str, Any] = page.evaluate(SASS_READ)
    assert seen["rows"] > 20 and seen["cut"] == [], seen
    assert seen["overflow"] <= 0, seen  # nothing to scroll sideways to
    assert seen["control"] < 90, seen  # the control column leaves the width to the text
    return seen


def by_name(page: Any) -> dict[str, dict[str, int]]:
    return {p["name"]: p for p in page.evaluate(PANES)}


def test_every_sass_instruction_reads_in_full_in_each_layout(page: Any) -> None:
    # auto: the SASS pane does not fit beside the others and takes a row of its own
    panes = by_name(page)
    assert panes["SASS"]["top"] > panes["Source"]["top"] == panes["PTX"]["top"]
    assert panes["SASS"]["width"] == OUTPUT_WIDTH
    assert_reads_in_full(page)
    assert page.locator(".pv-layout button[aria-pressed=true]").inner_text() == "auto"

    page.click(".pv-layout button[data-mode=side]")
    panes = by_name(page)
    assert len({p["top"] for p in panes.values()}) == 1  # side by side
    assert panes["SASS"]["width"] < OUTPUT_WIDTH / 2  # narrow: its rows wrap instead
    assert_reads_in_full(page)

    page.click(".pv-layout button[data-mode=stacked]")
    panes = by_name(page)
    assert len({p["left"] for p in panes.values()}) == 1
    assert panes["Source"]["top"] < panes["PTX"]["top"] < panes["SASS"]["top"]
    assert {p["width"] for p in panes.values()} == {OUTPUT_WIDTH}
    assert_reads_in_full(page)


def test_source_and_ptx_lines_wrap_under_their_numbers_side_by_side(page: Any) -> None:
    page.click(".pv-layout button[data-mode=side]")
    for name in ("Source", "PTX"):
        seen = page.evaluate(NUMBERED_READ, name)
        assert seen["rows"] > 3 and seen["cut"] == 0 and seen["overflow"] <= 0, (name, seen)
        assert seen["under"] == 0, (name, seen)  # continuations start after the numbers
    assert page.evaluate(NUMBERED_READ, "PTX")["wrapped"] > 0  # the PTX pane is narrow there


@pytest.mark.parametrize(("width", "rows"), [(600, 3), (1400, 1)])
def test_panes_stack_by_themselves_below_a_width(page: Any, width: int, rows: int) -> None:
    page.evaluate("(w) => { document.getElementById('output').style.width = w + 'px'; }", width)
    panes = by_name(page)
    assert len({p["top"] for p in panes.values()}) == rows
    assert_reads_in_full(page)


def test_a_handle_between_panes_resizes_them(page: Any) -> None:
    page.click(".pv-layout button[data-mode=side]")
    before = by_name(page)
    grip = page.locator('[data-pane="ptx"] > .pv-grip').bounding_box()
    x, y = grip["x"] + grip["width"] / 2, grip["y"] + 100
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 60, y, steps=4)
    page.mouse.move(x - 150, y, steps=4)
    page.mouse.up()
    after = by_name(page)
    assert abs(after["PTX"]["width"] - (before["PTX"]["width"] - 150)) <= 2
    assert abs(after["SASS"]["width"] - (before["SASS"]["width"] + 150)) <= 2
    assert abs(after["Source"]["width"] - before["Source"]["width"]) <= 1
    assert_reads_in_full(page)
    page.click(".pv-layout button[data-mode=side]")  # choosing a layout again resets sizes
    assert by_name(page) == before


def test_a_click_opens_the_control_bits_in_words_and_the_live_column_explains_itself(
    page: Any,
) -> None:
    waiter = page.locator("[data-pane=sass] .k-instruction[data-w]").first
    compact = waiter.locator(".ctl").inner_text()
    assert "w:0b" not in compact and len(compact.strip()) <= 12
    waiter.click()
    detail = page.locator("[data-pane=sass] .pv-detail")
    assert detail.count() == 1
    text = detail.inner_text()
    assert text.startswith("stall ") and "\nS:" in text and "w:0b" in text
    assert "waits for " in text and "general registers live" in text
    under = page.evaluate("() => document.querySelector('.pv-detail').previousSibling.dataset.o")
    assert under == waiter.get_attribute("data-o")  # right under the row clicked
    waiter.click()  # a second click closes it
    assert detail.count() == 0
    head = page.locator("[data-pane=sass] .k-head .lr").get_attribute("title") or ""
    assert "live from the kernel's entry" in head and "nvdisasm" in head
    note = page.locator("[data-pane=sass] .pv-note").inner_text()
    assert note.startswith("5 registers are live at entry: written only under a condition")
    first = page.locator("[data-pane=sass] .k-instruction").first.locator(".lr")
    assert first.inner_text().strip() == "6"  # LDC R1 writes the sixth


# where the first instruction's text starts, from the left edge of its code box
TEXT_LEFT = """() => {
  const row = document.querySelector('[data-pane=sass] .k-instruction');
  const range = document.createRange();
  range.setStartAfter(row.querySelector('.lr'));
  range.setEnd(row, row.childNodes.length);
  return range.getClientRects()[0].left - row.parentNode.getBoundingClientRect().left;
}"""


def test_a_narrow_sass_pane_gives_the_control_columns_width_to_the_instructions(
    page: Any,
) -> None:
    page.click(".pv-layout button[data-mode=side]")
    wide = page.evaluate(TEXT_LEFT)
    page.evaluate("() => { document.getElementById('output').style.width = '560px'; }")
    assert by_name(page)["SASS"]["width"] < 320
    first = page.locator("[data-pane=sass] .k-instruction").first
    assert first.locator(".ctl").is_hidden()
    assert page.evaluate(TEXT_LEFT) < wide - 60  # the control column's width went to the text
    assert_reads_in_full(page)
    first.click()  # the decoding is still a click away
    assert "\nS:1 " in page.locator("[data-pane=sass] .pv-detail").inner_text()
