"""The compile view's scheduler columns in real headless Chromium: hovering an instruction
in the standalone page (``perflab compile --html``) outlines the instructions whose barriers
it waits on and those that wait on it; in an untrusted notebook (no script, no style) the
columns, the titles and the pressure plot are still there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_browser import browser, jupyter_server, open_page  # noqa: F401 (fixture)

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
              const ctl = [...out.querySelectorAll('.ctl')];
              const linked = ctl.filter((c) => (c.title || '').includes('waits for'));
              const load = [...out.querySelectorAll('.pv-code > div')].find(
                (r) => r.textContent.includes('LDG'));
              const img = out.querySelector('img[src^="data:image/svg+xml"]');
              return {
                styles: out.querySelectorAll('style').length,
                scripts: out.querySelectorAll('script').length,
                columns: ctl.length, text: ctl.length ? ctl[0].textContent : '',
                linked: linked.length, help: load ? load.title : '',
                peak: out.querySelectorAll('.lr.peak').length,
                plot: img ? img.getBoundingClientRect().height : 0,
              };
            }"""
        )
        assert seen["styles"] == 0 and seen["scripts"] == 0  # sanitised: untrusted
        assert seen["columns"] > 10 and seen["text"].startswith("S:")
        assert seen["linked"] >= 1 and "Loads from global memory" in seen["help"]
        assert seen["peak"] >= 1 and seen["plot"] > 50
        assert problems == []
        page.close()
