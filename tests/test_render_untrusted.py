"""What a reader of an untrusted notebook sees, in real JupyterLab (headless Chromium).

A notebook opened without its signature (a copy from GitHub, a download) is sanitised:
JupyterLab drops <script> and <style> from HTML outputs and keeps only some inline styles.
Charts must still show their static picture, and the %%ptx view must keep its panes side
by side, scrolling, with line colours."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_browser import browser, jupyter_server, open_page  # noqa: F401 (fixture)
from test_ptx_magic import COPY
from test_timeline import PAYLOAD, synthetic_trace

pytestmark = pytest.mark.browser

# the output areas of a notebook JupyterLab has rendered
OUTPUTS = ".jp-OutputArea-output"


def untrusted_notebook(path: Path) -> None:
    """Outputs as a kernel would have stored them (no signature): a roofline chart, a %%ptx
    view and a timeline."""
    import nbformat

    import perflab
    from perflab.capture.compile import compile_cuda
    from perflab.render.ptx_view import CompileView
    from perflab.render.timeline import timeline

    chart = perflab.roofline([(PAYLOAD, 1e12, 1e9, 1e-3)], device="H200")
    view = CompileView(compile_cuda(COPY, arch="sm_90a"))
    lanes = timeline(synthetic_trace(2000))
    cells = []
    for source, shown in (("chart", chart), ("view", view), ("lanes", lanes)):
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.v4.new_output("display_data", data=shown._repr_mimebundle_())]
        cells.append(cell)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def test_untrusted_notebook_shows_charts_and_a_styled_ptx_view(
    browser: Any,  # noqa: F811 (fixture)
    tmp_path: Path,
) -> None:
    untrusted_notebook(tmp_path / "shared.ipynb")
    with jupyter_server("jupyterlab", tmp_path) as url:
        page, problems = open_page(
            browser, f"{url}/lab/tree/shared.ipynb", front_end=f"{url}/static/", wait=False
        )
        page.wait_for_selector(f"{OUTPUTS} .pv-pane", timeout=90_000)
        page.wait_for_timeout(500)
        shot = os.environ.get("PERFLAB_SCREENSHOT_DIR")
        if shot:
            page.screenshot(path=str(Path(shot) / "untrusted-lab.png"), full_page=True)
        pictures = page.evaluate(
            """() => [...document.querySelectorAll('img[src^="data:image/svg+xml"]')].map(
              (img) => ({w: img.naturalWidth, shown: img.getBoundingClientRect().height}))"""
        )
        assert len(pictures) == 3  # the roofline's, the %%ptx view's registers, the timeline's
        assert all(p["w"] > 300 and p["shown"] > 100 for p in pictures), pictures
        view = page.evaluate(
            """() => {
              const panes = [...document.querySelectorAll('.pv-pane')];
              const box = (e) => e.getBoundingClientRect();
              const code = getComputedStyle(document.querySelector('.pv-code'));
              const row = document.querySelector('.pv-code div[style*="background"]');
              return {
                flex: getComputedStyle(document.querySelector('.pv-panes')).display,
                tops: panes.map((p) => Math.round(box(p).top)),
                lefts: panes.map((p) => Math.round(box(p).left)),
                overflow: code.overflowY, maxHeight: code.maxHeight, space: code.whiteSpace,
                row: getComputedStyle(row).backgroundColor,
                styleTags: document.querySelectorAll('.jp-OutputArea-output style').length,
              }
            }"""
        )
        assert view["styleTags"] == 0  # the sanitiser did run: no <style> survived
        assert view["flex"] == "flex"
        assert len(view["tops"]) == 3 and len(set(view["tops"])) == 1  # side by side
        assert view["lefts"] == sorted(view["lefts"]) and len(set(view["lefts"])) == 3
        # the source pane's lines wrap (its hanging indent is inline too), never cut
        assert (view["overflow"], view["maxHeight"], view["space"]) == ("auto", "480px", "pre-wrap")
        assert view["row"] not in ("rgba(0, 0, 0, 0)", "transparent")  # line colours kept
        assert page.evaluate("() => window.__pwned") is None
        assert page.evaluate("() => typeof window.Bokeh") == "undefined"  # no script ran
        assert problems == []
        page.close()
