"""Timeline and roofline pages in real headless Chromium: payload names never execute, the
pages render without console errors, and a zoomed standalone timeline still shows kernels."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_timeline import PAYLOAD, small_trace, synthetic_trace

pytestmark = pytest.mark.browser
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAYLOADS = [PAYLOAD, "<script>window.__pwned=2</script>", '"><svg onload=alert(3)>', "k"]
FIND = """(cols) => {
  const doc = Bokeh.documents[0];
  for (const m of doc.all_models) {
    if (m.type === "ColumnDataSource" && cols.every((c) => c in m.data)) return m;
  }
  return null;
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium missing (run `make browser`)")
    if importlib.util.find_spec("playwright") is None:
        pytest.skip("playwright is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def open_page(browser: Any, path: Path) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(path.as_uri())
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=30_000)
    page.wait_for_timeout(300)
    return page, problems


def sweep_mouse(page: Any) -> None:
    """Hover across the whole page so every tooltip gets rendered."""
    for y in range(60, 600, 16):
        for x in range(150, 1100, 90):
            page.mouse.move(x, y)


def assert_safe(page: Any, problems: list[str]) -> None:
    assert page.evaluate("() => window.__pwned") is None
    assert problems == []


def test_timeline_payloads_never_execute(browser: Any, tmp_path: Path) -> None:
    from perflab.render.timeline import timeline

    view = timeline(small_trace(PAYLOADS))
    standalone = view.save(tmp_path / "t.html")
    notebook = tmp_path / "nb.html"
    notebook.write_text(
        "<!doctype html><html><body>" + view._repr_mimebundle_()["text/html"] + "</body></html>",
        encoding="utf-8",
    )
    for path in (standalone, notebook):
        page, problems = open_page(browser, path)
        shown = page.evaluate(f"() => ({FIND})(['left', 'name', 'dur']).data.name")
        assert set(PAYLOADS) <= set(shown)  # the names are there, as text
        sweep_mouse(page)
        assert_safe(page, problems)
        page.close()


def test_roofline_payloads_never_execute(browser: Any, tmp_path: Path) -> None:
    from perflab.render.roofline import roofline

    chart = roofline([(p, 1e9 * (i + 1), 1e8, 1e-4) for i, p in enumerate(PAYLOADS)], device="H200")
    standalone = chart.save(tmp_path / "r.html")
    notebook = tmp_path / "nb.html"
    notebook.write_text(
        "<!doctype html><html><body>" + chart._repr_mimebundle_()["text/html"] + "</body></html>",
        encoding="utf-8",
    )
    for path in (standalone, notebook):
        page, problems = open_page(browser, path)
        sweep_mouse(page)
        assert_safe(page, problems)
        if path == notebook:  # the table below the chart shows the names as text
            assert PAYLOAD in page.evaluate("() => document.body.innerText")
        page.close()


def test_zoomed_million_event_file_still_draws_kernels(browser: Any, tmp_path: Path) -> None:
    from perflab.render.timeline import timeline

    path = timeline(synthetic_trace(1_000_000)).save(tmp_path / "m.html")
    page, problems = open_page(browser, path)
    span = page.evaluate(
        f"() => ({FIND})(['start', 'dur', 'lane', 'label']) && "
        "[...Bokeh.documents[0].all_models].find(m => m.type === 'Range1d' "
        "&& m.start === 0).end"
    )
    for frac in (0.25, 0.5, 0.8):
        a = span * frac
        page.evaluate(
            "([a, b]) => { const r = [...Bokeh.documents[0].all_models].find("
            "m => m.type === 'Range1d' && m.bounds != null); r.setv({start: a, "
            "end: b}); }",
            [a, a + span / 1000],
        )
        page.wait_for_timeout(100)
        data = page.evaluate(
            f"() => {{ const d = ({FIND})(['left', 'name', 'dur']).data; "
            "return {n: d.left.length, names: [...new Set(d.name)], "
            "left: Math.min(...d.left), detail: d.detail[0]}; }"
        )
        kernels = [n for n in data["names"] if "kernel" in n or "gemm" in n or "triton" in n]
        assert data["n"] >= 20 and kernels, data
        assert "grid" in " ".join(
            page.evaluate(f"() => ({FIND})(['left', 'name', 'dur']).data.detail")
        )
    assert_safe(page, problems)
    page.close()
