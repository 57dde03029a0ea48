"""Timeline and roofline pages in real headless Chromium: payload names never execute, the
pages render without console errors, and a zoomed standalone timeline still shows kernels."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_timeline import PAYLOAD, bench_timeline, small_trace, synthetic_trace

pytestmark = pytest.mark.browser
CHROMIUM = Path("/usr/bin/chromium")
ARGS = bench_timeline().CHROMIUM_ARGS  # the flags the timeline benchmark uses too
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


# JupyterLab cancels a pending kernel subshell request when a kernel restarts or a notebook is
# renamed, and the rejection reaches the page with no stack into its own bundles
SUBSHELL_FUTURE = "Canceled future for create_subshell_request"


def open_page(
    browser: Any,
    path: Path | str,
    *,
    empty_cdn: bool = False,
    front_end: str | None = None,
    wait: bool = True,
) -> tuple[Any, list[str]]:
    """Open a page, collecting console errors, uncaught exceptions and dialogs.

    ``empty_cdn``: answer requests to the network with empty scripts (nbconvert's template
    asks CDNs for require.js and MathJax, which this offline machine cannot reach), so that
    only errors from perflab's outputs count. ``wait``: until a bokeh document has rendered.
    ``front_end``: the URL prefix of a Jupyter
    front end's own bundles; errors thrown inside them are the front end's (Notebook 7
    throws one while loading plugin settings, with or without any output) and not counted;
    a script from an output throws at ``<anonymous>`` and is counted."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    if empty_cdn:
        page.route(
            "https://**/*",
            lambda route: route.fulfill(status=200, body="", content_type="text/javascript"),
        )
    problems: list[str] = []

    def own(where: str) -> bool:
        return front_end is not None and where.startswith(front_end)

    def on_console(m: Any) -> None:
        if m.type == "error" and not own(m.location.get("url", "")):
            problems.append(m.text)

    def on_error(e: Any) -> None:
        # where it was thrown: "at f (URL:line:col)", "at URL:line:col" or "at <anonymous>..."
        # (a script from an output)
        top = ((e.stack or "").splitlines()[1:] or [""])[0]
        if front_end is not None and SUBSHELL_FUTURE in str(e):
            return  # a kernel subshell request of the front end's (perflab asks for none)
        if not own(top.split("(")[-1].strip().removeprefix("at ")):
            problems.append(str(e))

    page.on("console", on_console)
    page.on("pageerror", on_error)
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(path.as_uri() if isinstance(path, Path) else path)
    if wait:  # for a bokeh document to render
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=90_000)
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


SHOWN = f"() => ({FIND})(['left', 'name', 'group']).data"
HIGHLIGHT = f"() => ({FIND})(['role', 'x']).data"
TO_SCREEN = """([x, lane]) => {
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 2);
  const plot = root.child_views[1], box = plot.el.getBoundingClientRect();
  return [box.left + plot.frame.x_scale.compute(x), box.top + plot.frame.y_scale.compute(lane)];
}"""


def tap_glyph(page: Any, i: int) -> dict[str, list[Any]]:
    """Click the middle of glyph ``i`` of the drawn events; return the highlight."""
    d = page.evaluate(SHOWN)
    x, y = page.evaluate(TO_SCREEN, [(d["left"][i] + d["right"][i]) / 2, d["lane_i"][i]])
    page.mouse.click(x, y)
    page.wait_for_timeout(100)
    return dict(page.evaluate(HIGHLIGHT))


def assert_tap_links_kernel_and_launch(page: Any, trace: Any) -> None:
    """Tap a kernel: its launch on the CPU thread is highlighted; zoom to the launch and tap
    it: the same pair is highlighted."""
    origin = int(trace.start_ns.min())
    d = page.evaluate(SHOWN)
    kernel = next(
        i
        for i, (name, right, left) in enumerate(zip(d["name"], d["right"], d["left"], strict=True))
        if "gemm" in name and right - left > 0.02  # wide enough to click
    )
    start_ns = origin + round(d["left"][kernel] * 1e6)
    row = int(np.flatnonzero((trace.start_ns == start_ns) & (trace.kind == 0))[0])
    launch = int(
        np.flatnonzero((trace.kind == 4) & (trace.correlation == trace.correlation[row]))[0]
    )
    hl = tap_glyph(page, kernel)
    assert sorted(hl["role"]) == ["launch (CPU)", "launched GPU work"]
    at = hl["role"].index("launch (CPU)")
    assert hl["name"][at] == "cudaLaunchKernel" and hl["lane"][at] == "CPU thread 1"
    assert round(hl["left"][at] * 1e6) == trace.start_ns[launch] - origin
    selected = page.evaluate(f"() => ({FIND})(['left', 'name', 'group']).selected.indices")
    assert kernel in selected
    # and the reverse: zoomed in so the launch is drawn on its thread, tap it
    x = hl["left"][at]
    page.evaluate(
        "([a, b]) => [...Bokeh.documents[0].all_models].find("
        "m => m.type === 'Range1d' && m.bounds != null).setv({start: a, end: b})",
        [x - 0.01, x + 0.01],
    )
    d = page.evaluate(SHOWN)
    launch_glyph = d["left"].index(x)
    back = tap_glyph(page, launch_glyph)
    assert sorted(back["left"]) == sorted(hl["left"]) and back["role"][at] == "launch (CPU)"
    page.mouse.click(5, 5)  # outside the plot: nothing changes


def test_tapping_a_kernel_highlights_its_launch(browser: Any, tmp_path: Path) -> None:
    from perflab.render.timeline import timeline

    trace = synthetic_trace(3000)
    view = timeline(trace)
    notebook = tmp_path / "nb.html"
    notebook.write_text(
        "<!doctype html><html><body>" + view._repr_mimebundle_()["text/html"] + "</body></html>",
        encoding="utf-8",
    )
    for path in (view.save(tmp_path / "t.html"), notebook):
        page, problems = open_page(browser, path)
        assert_tap_links_kernel_and_launch(page, trace)
        assert_safe(page, problems)
        page.close()


LONG_NAME = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_" + "x" * 400 + ">"
TOOLTIP = """() => [...document.querySelectorAll('.bk-Tooltip')]
  .map((t) => [t.getBoundingClientRect(), t.shadowRoot ? t.shadowRoot.textContent : ""])
  .filter(([r, text]) => r.width > 0 && text.includes("duration"))
  .map(([r, text]) => ({left: r.left, right: r.right, text: text}))"""


def test_long_names_in_hover_boxes_stay_in_the_window(browser: Any, tmp_path: Path) -> None:
    """A 400-character kernel name, hovered near the left edge, the middle and the right
    edge: the box wraps it, sits wholly inside the window and shows the name's start."""
    from perflab.render.timeline import timeline

    names = [f"k{i}" for i in range(30)]
    trace = small_trace([*names[:15], LONG_NAME, *names[15:]])
    trace.strings[15] = LONG_NAME  # every GPU event below carries the long name
    gpu = trace.kind == 0
    trace.name[gpu] = 15
    page, problems = open_page(browser, timeline(trace).save(tmp_path / "t.html"))
    width = page.viewport_size["width"]
    d = page.evaluate(SHOWN)
    on_gpu = [i for i, lane in enumerate(d["lane_i"]) if lane == 1]
    for i in (on_gpu[0], on_gpu[len(on_gpu) // 2], on_gpu[-1]):
        x, y = page.evaluate(TO_SCREEN, [(d["left"][i] + d["right"][i]) / 2, 1])
        page.mouse.move(x, y)
        page.wait_for_timeout(150)
        boxes = page.evaluate(TOOLTIP)
        assert len(boxes) == 1, boxes
        box = boxes[0]
        assert box["left"] >= 0 and box["right"] <= width and box["right"] - box["left"] < width / 2
        assert "void cutlass::Kernel<cutlass_80_tensorop" in box["text"]
    assert_safe(page, problems)
    page.close()


COVER = """() => {
  const doc = Bokeh.documents[0];
  const cover = {xs: [], ys: []};  // every outline drawn: each lane's, and the strip's
  for (const m of doc.all_models) {
    if (m.type === "GlyphRenderer" && m.glyph.type === "Patches") {
      cover.xs.push(...m.data_source.data.xs); cover.ys.push(...m.data_source.data.ys);
    }
  }
  const root = Object.values(Bokeh.index).find((v) => v.child_views && v.child_views.length === 2);
  const frame = root.child_views[1].frame;
  return {cover, px: (frame.x_range.end - frame.x_range.start) / frame.bbox.width};
}"""


def test_a_lane_of_short_events_shows_marks(browser: Any, tmp_path: Path, trace_data: Path) -> None:
    """The stored NCCL trace's thread of 42 short runtime calls: the whole-trace view draws
    none of the events, but marks where they are, each at least a pixel wide."""
    from perflab.io import load_trace
    from perflab.render.timeline import assign_lanes, timeline

    trace = load_trace(trace_data / "kineto" / "nccl_2ranks_a100.json.gz")
    # the trace names the process (python3.10) but not this thread
    label = "python3.10 2910249 · thread -549452224 (no name in the trace)"
    lane = assign_lanes(trace).labels.index(label)
    page, problems = open_page(browser, timeline(trace).save(tmp_path / "t.html"))
    got = page.evaluate(COVER)
    # the lane's outline: along its baseline, a step up for each bin with work
    baseline = lane + 0.4
    xs, ys = next(
        (x, y)
        for x, y in zip(got["cover"]["xs"], got["cover"]["ys"], strict=True)
        if abs(y[0] - baseline) < 1e-9
    )
    steps = [i for i in range(len(ys) - 1) if ys[i] == ys[i + 1] and abs(ys[i] - baseline) > 1e-9]
    assert steps and not any(lane == ln for ln in page.evaluate(SHOWN)["lane_i"])
    for i in steps:
        assert xs[i + 1] - xs[i] >= got["px"] * 0.99
        assert baseline - ys[i] >= 0.8 * 0.25 - 1e-9
    assert_safe(page, problems)
    page.close()


NOTEBOOK_CELLS = [
    "from perflab.model.trace import Trace\nimport perflab\n"
    "trace = Trace.load({trace!r})\ntrace.timeline()",
    "Trace.load({payloads!r}).timeline()",
    "perflab.roofline([(name, 1e12, 1e9, 1e-3) for name in {names!r}], device='H200')",
]


def executed_report(tmp_path: Path) -> tuple[Any, Any]:
    """A notebook with a timeline, a timeline of payload names and a roofline, run by a
    real kernel: (notebook, the timeline's trace)."""
    import nbformat
    from nbclient import NotebookClient

    trace = synthetic_trace(3000)
    trace.save(tmp_path / "trace.npz")
    small_trace(PAYLOADS).save(tmp_path / "payloads.npz")
    values = {
        "trace": str(tmp_path / "trace.npz"),
        "payloads": str(tmp_path / "payloads.npz"),
        "names": PAYLOADS,
    }
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c.format(**values)) for c in NOTEBOOK_CELLS]
    )
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    return nb, trace


def assert_report_works(page: Any, problems: list[str], trace: Any) -> None:
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length === 3", timeout=90_000)
    assert_tap_links_kernel_and_launch(page, trace)
    sweep_mouse(page)
    assert PAYLOAD in page.evaluate("() => document.body.innerText")  # the roofline's table
    assert_safe(page, problems)


def test_nbconvert_html_export_stays_interactive(browser: Any, tmp_path: Path) -> None:
    """The notebook exported by nbconvert (what a shared report is): every output renders
    with no console errors, tapping a kernel still highlights its launch, and payload names
    stay text."""
    from nbconvert import HTMLExporter

    nb, trace = executed_report(tmp_path)
    body, _ = HTMLExporter().from_notebook_node(nb)
    path = tmp_path / "report.html"
    path.write_text(body, encoding="utf-8")
    page, problems = open_page(browser, path, empty_cdn=True)
    assert_report_works(page, problems, trace)
    page.close()


JUPYTER_DIRS = ("JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR")


def jupyter_dirs(root: Path) -> dict[str, str]:
    """Jupyter's data, config and runtime directories under ``root`` (created)."""
    dirs = {name: root / f".jupyter-{name.split('_')[1].lower()}" for name in JUPYTER_DIRS}
    for path in dirs.values():
        path.mkdir(exist_ok=True)
    # JupyterLab's question about its news feed is a toast over the bottom right of the page,
    # where it takes the clicks meant for what lies under it: answered "never" in advance
    settings = dirs["JUPYTER_CONFIG_DIR"] / "lab" / "user-settings" / "@jupyterlab"
    notification = settings / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True, exist_ok=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    return {name: str(path) for name, path in dirs.items()}


@contextlib.contextmanager
def jupyter_server(app: str, root: Path) -> Iterator[str]:
    """A Jupyter server (``app``: jupyterlab or notebook) on a free local port, no token,
    its own Jupyter directories."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", app, "--no-browser", f"--port={port}"]
    command += ["--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", f"--notebook-dir={root}"]
    command += ["--allow-root"]  # CI runs as root; the server only listens on 127.0.0.1
    server = subprocess.Popen(
        command,
        env={**os.environ, **jupyter_dirs(root)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"{app} did not start within 60 s")
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=20)


@pytest.mark.parametrize(
    ("app", "route"), [("jupyterlab", "lab/tree"), ("notebook", "notebooks")], ids=["lab", "nb7"]
)
def test_jupyter_front_ends_render_the_outputs(
    browser: Any, tmp_path: Path, app: str, route: str
) -> None:
    """JupyterLab and Notebook 7 themselves open the saved notebook (signed as trusted, as a
    notebook you ran is; untrusted, its scripts would not run and nothing would render):
    the outputs render inside them with working taps and no console errors."""
    import nbformat
    from nbformat.sign import NotebookNotary

    nb, trace = executed_report(tmp_path)
    NotebookNotary(data_dir=jupyter_dirs(tmp_path)["JUPYTER_DATA_DIR"]).sign(nb)
    nbformat.write(nb, tmp_path / "report.ipynb")
    with jupyter_server(app, tmp_path) as url:
        page, problems = open_page(
            browser, f"{url}/{route}/report.ipynb", front_end=f"{url}/static/"
        )
        assert_report_works(page, problems, trace)
        page.close()


# the bokeh document holding the timeline (panel may add documents of its own)
TIMELINE_DOC = (
    "(() => Bokeh.documents.find(d => [...d.all_models].some("
    "m => m.type === 'ColumnDataSource' && 'group' in m.data)))"
)


def run_first_cell(page: Any, attempts: int = 3) -> None:
    """Run the notebook's first cell from the keyboard until its timeline renders (a key
    press that lands while JupyterLab is still wiring the kernel is lost now and then)."""
    for attempt in range(attempts):
        page.click(".jp-Notebook .jp-Cell .jp-InputArea-editor")
        page.wait_for_timeout(1000)  # let the editor take the focus
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function(
                f"() => window.Bokeh && {TIMELINE_DOC}() !== undefined", timeout=30_000
            )
            return
        except Exception:
            if attempt == attempts - 1:
                raise


def zoom_until_refined(page: Any, window: tuple[float, float], expected: int) -> None:
    """Zoom the live timeline to ``window`` (ms) until the kernel's refined events arrive: a
    range change made while panel is still opening its comm is dropped, so a zoom that gets no
    answer is made again (through a wider window, since an unchanged range sends nothing)."""
    start, end = window
    for attempt in range(4):
        for lo, hi in ((start - 0.1, end + 0.1), (start, end)) if attempt else ((start, end),):
            page.evaluate(
                f"() => [...{TIMELINE_DOC}().all_models].find("
                f"m => m.type === 'Range1d' && m.bounds != null).setv({{start: {lo}, end: {hi}}})"
            )
        try:
            page.wait_for_function(
                f"() => [...{TIMELINE_DOC}().all_models].some("
                "m => m.type === 'Title' && m.text.includes('[live:')) && "
                f"[...{TIMELINE_DOC}().all_models].find("
                "m => m.type === 'ColumnDataSource' && 'group' in m.data).data.left.length"
                f" === {expected}",
                timeout=20_000,
            )
            return
        except Exception:
            if attempt == 3:
                raise


def test_live_refinement_in_jupyterlab(browser: Any, tmp_path: Path) -> None:
    """``timeline(trace, live=True)`` run from JupyterLab in a real kernel: a zoom in the page
    reaches Python through panel's notebook comms and comes back with every event of the
    new range."""
    import nbformat

    trace = synthetic_trace(30_000)
    trace.save(tmp_path / "t.npz")
    source = (
        "from perflab.model.trace import Trace\nfrom perflab.render.timeline import timeline\n"
        f"timeline(Trace.load({str(tmp_path / 't.npz')!r}), live=True)"
    )
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source)], metadata={"kernelspec": kernelspec}
    )
    nbformat.write(nb, tmp_path / "live.ipynb")
    with jupyter_server("jupyterlab", tmp_path) as url:
        page, problems = open_page(
            browser, f"{url}/lab/tree/live.ipynb", front_end=f"{url}/static/", wait=False
        )
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-status]')].some("
            "e => e.getAttribute('data-status') === 'idle')",  # the kernel is ready
            timeout=90_000,
        )
        run_first_cell(page)
        rel = trace.start_ns - trace.start_ns.min()
        touching = (rel + trace.dur_ns >= 20e6) & (rel <= 20.4e6)
        zoom_until_refined(page, (20, 20.4), int(touching.sum()))
        drawn = page.evaluate(
            f"() => [...{TIMELINE_DOC}().all_models].find("
            "m => m.type === 'ColumnDataSource' && 'group' in m.data).data.left.length"
        )
        assert drawn == int(touching.sum()) > 20
        assert problems == []
        page.close()


def test_live_view_refines_through_a_server(browser: Any) -> None:
    """A bokeh server stands in for the notebook kernel: a zoom in the page reaches Python,
    which answers with every event of the new range."""
    import asyncio
    import threading
    import time

    from bokeh.application import Application
    from bokeh.application.handlers.function import FunctionHandler
    from bokeh.server.server import Server

    from perflab.render.timeline import timeline

    trace = synthetic_trace(30_000)
    started: dict[str, Any] = {}

    def serve() -> None:
        asyncio.set_event_loop(asyncio.new_event_loop())
        app = Application(FunctionHandler(lambda doc: timeline(trace, live=True).add_to(doc)))
        server = Server({"/": app}, port=0, address="127.0.0.1")
        server.start()
        started["server"] = server
        server.io_loop.start()

    threading.Thread(target=serve, daemon=True).start()
    deadline = time.monotonic() + 20
    while "server" not in started and time.monotonic() < deadline:
        time.sleep(0.05)
    server = started["server"]
    try:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(f"http://127.0.0.1:{server.port}/")
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0")
        page.wait_for_function(f"() => ({FIND})(['left', 'name', 'group']).data.left.length > 0")
        page.evaluate(
            "() => [...Bokeh.documents[0].all_models].find("
            "m => m.type === 'Range1d' && m.bounds != null).setv({start: 20, end: 20.4})"
        )
        page.wait_for_function(
            "() => [...Bokeh.documents[0].all_models].some("
            "m => m.type === 'Title' && m.text.includes('[live:'))",
            timeout=15_000,
        )
        d = page.evaluate(SHOWN)
        rel = trace.start_ns - trace.start_ns.min()
        touching = (rel + trace.dur_ns >= 20e6) & (rel <= 20.4e6)
        assert len(d["left"]) == int(touching.sum()) > 20
        assert problems == []
        page.close()
    finally:
        server.io_loop.add_callback(server.stop)
