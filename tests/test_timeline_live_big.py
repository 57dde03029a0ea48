"""The live timeline of a large trace: a zoom is answered with every event of a window that
holds fewer events than ``live_rows`` (else that many of the largest), from indexes built
once, so that what a zoom costs follows the window and not the trace; zooming again over
the same windows leaves the page's data and the kernel's tables no larger."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_timeline import synthetic_trace

from perflab.analysis import lod
from perflab.errors import InputError
from perflab.model.trace import EventKind, Trace
from perflab.render.timeline_data import LinkIndex, SideIndex, launch_groups, link_members

N = 300_000  # events of the synthetic trace (about)
LIVE = 8_000  # events in one live answer


def stretched(n: int) -> Trace:
    """The synthetic training-like trace with one of its annotation ranges stretched over
    the whole trace, as a profiler step or a long NVTX range is."""
    trace = synthetic_trace(n)
    first = int(np.flatnonzero(trace.kind == EventKind.ANNOTATION)[0])
    trace.events["start_ns"][first] = trace.start_ns.min()
    trace.events["dur_ns"][first] = int(trace.end_ns.max() - trace.start_ns.min())
    return trace


@pytest.fixture(scope="module")
def big() -> Trace:
    return stretched(N)


@pytest.fixture(scope="module")
def view(big: Trace) -> Any:
    from perflab.render.timeline import timeline

    return timeline(big, live=True, live_rows=LIVE)


def relative(trace: Trace) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    start = (trace.start_ns - trace.start_ns.min()).astype(np.float64)
    return start, start + trace.dur_ns


def window_holding(trace: Trace, events: int, at: float = 0.5) -> tuple[float, float]:
    """A window (ms since the trace start) around ``at`` of the span holding about
    ``events`` events."""
    span = float(relative(trace)[1].max())
    width = span * events / len(trace)
    centre = span * at
    return (centre - width / 2) / 1e6, (centre + width / 2) / 1e6


def touching(trace: Trace, v0: float, v1: float) -> np.ndarray:  # type: ignore[type-arg]
    start, end = relative(trace)
    return np.flatnonzero((end >= v0 * 1e6) & (start <= v1 * 1e6))


def test_a_window_under_the_live_rows_shows_every_event(big: Trace, view: Any) -> None:
    v0, v1 = window_holding(big, 3 * LIVE // 4)
    view.live.refine(v0, v1)
    inside = touching(big, v0, v1)
    n = view.live.page.live_level.data["n"][0]
    assert 3000 < inside.size < LIVE  # more than a fixed few thousand, fewer than live_rows
    assert n == inside.size  # every one (was 3,000 whatever the row budget)
    sent = view.live.page.live.data
    start, _ = relative(big)
    assert np.allclose(np.sort(sent["start"][:n]), np.sort(start[inside] / 1e6))
    # the range stretched over the whole trace touches every window: it is among them
    whole = int(np.argmax(big.dur_ns))
    assert whole in inside


def test_a_window_over_the_live_rows_gets_its_largest_events(big: Trace, view: Any) -> None:
    v0, v1 = window_holding(big, 3 * LIVE, at=0.3)
    view.live.refine(v0, v1)
    assert view.live.page.live_level.data["n"][0] == LIVE
    inside = touching(big, v0, v1)
    start, end = relative(big)
    picked = view.live.index.window(v0 * 1e6, v1 * 1e6, glyphs=LIVE).rows
    assert picked.size == LIVE and np.isin(picked, inside).all()

    def visible(rows: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        return np.minimum(end[rows], v1 * 1e6) - np.maximum(start[rows], v0 * 1e6)

    left_out = np.setdiff1d(inside, picked)
    assert visible(picked).min() >= visible(left_out).max()


def test_a_narrow_zoom_costs_the_window_not_the_trace(big: Trace, view: Any) -> None:
    """What one zoom allocates, as tracemalloc counts numpy's arrays: for a window of a few
    hundred events, far less than one column of the trace (a zoom used to build columns as
    long as the trace to find launch details, sort every linked event and, with one long
    range in the trace, look at every event that starts before the window)."""
    column = 8 * len(big)  # one int64 column of the trace
    v0, v1 = window_holding(big, 300, at=0.7)
    view.live.refine(v0 - 0.01, v1)  # the page knows this window's labels already
    tracemalloc.start()
    try:
        view.live.refine(v0, v1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert view.live.page.live_level.data["n"][0] == touching(big, v0, v1).size
    assert peak < column / 2, (peak, column)  # was over twice the column


def test_the_window_index_finds_what_a_scan_of_every_interval_finds() -> None:
    rng = np.random.default_rng(5)
    n = 50_000
    start = rng.uniform(0, 1e9, n)
    length = rng.lognormal(8, 2.5, n)
    length[rng.choice(n, 20, replace=False)] = rng.uniform(1e8, 1e9, 20)  # a few long ones
    length[:50] = 0.0  # instants
    end = start + length
    lane = rng.integers(0, 5, n)
    index = lod.WindowIndex(start, end, lane, 5, summary_lanes=[0, 1])
    for t0, width in [(0.0, 1e9), (4e8, 1e6), (7.5e8, 3e4), (-1e6, 2e6), (9.99e8, 1e7)]:
        t1 = t0 + width
        inside = np.flatnonzero((end >= t0) & (start <= t1))
        near = index.near(t0, t1)
        assert np.isin(inside, near).all()
        # what a query looks at: the window's own intervals and a few at its edges, not
        # every interval that starts before it (the long ones reach back to the start)
        assert near.size <= 2 * inside.size + 200, (near.size, inside.size)
        win = index.window(t0, t1, glyphs=n)
        assert np.array_equal(win.rows, inside)
        for k in range(5):
            on = lane == k
            expect = lod.coverage(start[on], end[on], t0, t1, 1500)
            assert np.allclose(win.busy[k], expect)
        both = np.isin(lane, [0, 1])
        assert np.allclose(win.busy[5], lod.coverage(start[both], end[both], t0, t1, 1500))


def test_side_and_link_indexes_answer_as_a_scan_does(big: Trace) -> None:
    rng = np.random.default_rng(2)
    rows = np.sort(rng.choice(len(big), 5000, replace=False))
    events = big.kernels["event"]
    shuffled = rng.permutation(events.size)
    for table in (events, events[shuffled]):  # in order, as written, and not
        where = np.full(len(big), -1)
        where[table] = np.arange(table.size)
        assert np.array_equal(SideIndex(table).rows_of(rows), where[rows])
    assert np.array_equal(SideIndex(np.zeros(0, np.int64)).rows_of(rows), np.full(rows.size, -1))
    groups = launch_groups(big)
    members = LinkIndex(groups).members(rows)
    linked = np.isin(groups, groups[rows][groups[rows] >= 0])
    assert np.array_equal(np.sort(members), np.flatnonzero(linked))
    assert np.array_equal(link_members(groups, rows), members)


def test_zooming_again_leaves_the_page_and_the_tables_no_larger(big: Trace, view: Any) -> None:
    rng = np.random.default_rng(7)
    page, known = view.live.page, view.live.labels
    windows = [
        window_holding(big, [LIVE // 10, LIVE // 2, LIVE, 3 * LIVE][i % 4], float(at))
        for i, at in enumerate(rng.uniform(0.1, 0.9, 10))
    ]

    def tables() -> tuple[int, int, int]:
        return len(page.labels.data["name"]), len(page.names.data["text"]), len(known.index)

    for v0, v1 in windows:
        view.live.refine(v0, v1)
        # the window's events and their launch partners, no more: each answer replaces the last
        assert len(page.live.data["start"]) <= 2 * LIVE
    after_once = tables()
    assert after_once[0] == after_once[2]  # the page's label table is the kernel's
    for v0, v1 in windows:  # the same ten windows again: twenty zooms
        view.live.refine(v0 - 1e-6, v1)
    assert tables() == after_once  # labels and names are sent once each


def test_live_rows_is_a_positive_count(big: Trace) -> None:
    from perflab.render.timeline import timeline

    small = big.select(np.arange(2000))
    for bad in (0, -5, 2.5, True, "100"):
        with pytest.raises(InputError, match="live_rows"):
            timeline(small, live=True, live_rows=bad)  # type: ignore[arg-type]


def live_notebook(folder: Path, trace: Trace) -> str:
    """A notebook in ``folder`` whose one cell shows ``trace``'s live timeline: its name."""
    import nbformat

    trace.save(folder / "t.npz")
    cell = nbformat.v4.new_code_cell(
        "from perflab.model.trace import Trace\n"
        f"Trace.load({str(folder / 't.npz')!r}).timeline(live=True)"
    )
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": kernel})
    nbformat.write(notebook, folder / "big.ipynb")
    return "big.ipynb"


@pytest.mark.browser
@pytest.mark.slow
def test_a_million_event_timeline_refines_in_jupyterlab(tmp_path: Path) -> None:
    """``trace.timeline(live=True)`` of a 1M-event trace run in JupyterLab: a zoom into a
    window of about 10,000 events reaches the kernel and comes back with every one of them
    drawn (a live answer held 3,000 whatever the window)."""
    from test_browser import (
        ARGS,
        CHROMIUM,
        TIMELINE_DOC,
        jupyter_server,
        open_page,
        zoom_until_refined,
    )
    from test_lab_extension import wait_kernel_idle

    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium missing (run `make browser`)")
    from playwright.sync_api import sync_playwright

    trace = synthetic_trace(1_000_000)
    notebook = live_notebook(tmp_path, trace)
    v0, v1 = window_holding(trace, 10_000)
    expected = touching(trace, v0, v1).size
    assert 3000 < expected < 20_000
    with jupyter_server("jupyterlab", tmp_path) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page, problems = open_page(
            browser, f"{url}/lab/tree/{notebook}", front_end=f"{url}/static/", wait=False
        )
        wait_kernel_idle(page)
        page.click(".jp-Notebook .jp-Cell .jp-InputArea-editor")
        page.wait_for_timeout(1000)  # let the editor take the focus
        page.keyboard.press("Shift+Enter")
        page.wait_for_function(
            f"() => window.Bokeh && {TIMELINE_DOC}() !== undefined", timeout=120_000
        )
        zoom_until_refined(page, (v0, v1), expected)
        assert problems == []
        browser.close()
