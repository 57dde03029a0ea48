"""The trace diff's HTML view in Chromium: a click on a column's header sorts the rows by
it (times read with their units), a second click reverses them, and nothing errs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from data_paths import DATA
from test_browser import browser, open_page  # noqa: F401 (fixture)

import perflab
from perflab.model.units import format_ns
from perflab.render.views import to_bundle

pytestmark = pytest.mark.browser

COLUMN = """(title) => {
  const table = document.querySelector('table.perflab-sortable');
  const col = [...table.tHead.rows[0].cells].findIndex((th) => th.textContent.startsWith(title));
  return [...table.tBodies[0].rows].map((r) => r.cells[col].textContent.trim());
}"""


def test_clicking_a_header_sorts_the_diff_table_by_that_column(
    browser: Any,  # noqa: F811 (fixture)
    tmp_path: Path,
) -> None:
    control = perflab.load_trace(DATA / "trace_diff" / "control.json.gz")
    test = perflab.load_trace(DATA / "trace_diff" / "test.json.gz")
    diff = control.diff(test, step=1010)
    page_file = tmp_path / "diff.html"
    page_file.write_text(f"<html><body>{to_bundle(diff)['text/html']}</body></html>")
    page, problems = open_page(browser, page_file, wait=False)
    control_times = [diff.kernels.control_ns[i] for i in range(min(25, len(diff.kernels)))]
    page.locator("table.perflab-sortable th", has_text="control").first.click()
    shown = page.evaluate(COLUMN, "control")
    present = sorted((ns for ns in control_times if ns > 0), reverse=True)
    assert shown[: len(present)] == [format_ns(ns) for ns in present]  # largest first
    page.locator("table.perflab-sortable th", has_text="control").first.click()
    again = page.evaluate(COLUMN, "control")
    assert again[0] == "-" or again[0] == format_ns(min(control_times))  # reversed
    page.locator("table.perflab-sortable th", has_text="name").first.click()
    names = page.evaluate(COLUMN, "name")
    assert names == sorted(names, key=str.lower, reverse=True)
    assert problems == []
    page.close()
