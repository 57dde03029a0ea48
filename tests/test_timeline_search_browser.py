"""The timeline page's search box in Chromium, on the stored AlexNet trace: plain text (any
case) by default; a regular expression only on request (the .* toggle), matched in a Web
Worker that the page ends after its time limit, so that a pattern that backtracks without end
(typed in full or half-typed) never freezes the page; a page that cannot start a worker
refuses regex search with a message rather than running it on its own thread. Checked in the
saved page and the notebook output (file://) and inside JupyterLab."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_paths import TRACES
from test_browser import (  # noqa: F401 (fixture)
    assert_safe,
    browser,
    jupyter_dirs,
    jupyter_server,
    open_page,
)

pytestmark = pytest.mark.browser
ALEXNET = TRACES / "kineto" / "alexnet_a100.json.gz"
# each backtracks for ever on the AlexNet page's kernel names (the tab froze on every one)
HOSTILE = [r"(\w+\s?)+$", "(.*)*zzz", "([a-z]+)*Q"]
TOO_SLOW = "pattern took too long (over 0.5 s); plain text search is the default"
NO_WORKER = "regex search needs a Web Worker, which this page cannot start"
ANSWERED = '.pl-tl-count[aria-busy="false"]'  # the search of the last keystroke has answered


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The saved page and a page holding the notebook output (the same bundle a notebook
    shows), both of the AlexNet trace."""
    from perflab.io import load_trace
    from perflab.render.timeline import timeline

    root = tmp_path_factory.mktemp("search")
    view = timeline(load_trace(ALEXNET))
    notebook = root / "nb.html"
    notebook.write_text(
        "<!doctype html><html><body>" + view._repr_mimebundle_()["text/html"] + "</body></html>",
        encoding="utf-8",
    )
    return {"saved": view.save(root / "t.html"), "notebook": notebook}


def events_named(test: Callable[[str], bool]) -> int:
    """How many of the trace's events have a name that passes ``test`` (the page holds all
    867 of them)."""
    from perflab.io import load_trace

    trace = load_trace(ALEXNET)
    return sum(test(trace.strings[i]) for i in trace.name)


def void_events() -> int:  # what the regex ^void finds
    return events_named(lambda name: re.match("void", name, re.IGNORECASE) is not None)


def gemm_events() -> int:  # what the text gemm finds
    return events_named(lambda name: "gemm" in name.lower())


def search(page: Any, text: str, *, delay: float = 0) -> tuple[str, str]:
    """Type ``text`` into the search box, a key every ``delay`` ms (over the box's 150 ms
    pause, every prefix is searched in turn): the count and the note it ends with. A frozen
    page never answers; the bounds are there to fail rather than hang."""
    box = page.locator(".pl-tl-search")
    box.fill("")
    box.press_sequentially(text, delay=delay, timeout=30_000)
    return answer(page)


def answer(page: Any) -> tuple[str, str]:
    """Once the last search has answered: its count and note."""
    page.wait_for_selector(ANSWERED, state="attached", timeout=10_000)
    assert page.evaluate("1 + 1") == 2  # the page's own thread still answers at once
    return page.inner_text(".pl-tl-count"), page.inner_text(".pl-tl-search-note")


def regex_mode(page: Any, on: bool) -> None:
    toggle = page.locator(".pl-tl-regex")
    if (toggle.get_attribute("aria-pressed") == "true") != on:
        toggle.click()
    assert toggle.get_attribute("aria-pressed") == ("true" if on else "false")


def matches(n: int) -> str:
    return f"{n} match" if n == 1 else f"{n} matches"


@pytest.mark.parametrize("which", ["saved", "notebook"])
def test_hostile_patterns_never_freeze_the_page(
    browser: Any,  # noqa: F811 (fixture)
    pages: dict[str, Path],
    which: str,
) -> None:
    page, problems = open_page(browser, pages[which])
    assert page.get_attribute(".pl-tl-search", "placeholder") == "search names (text)"
    # plain text by default: a pattern is only text, found nowhere in the names
    for pattern in HOSTILE:
        assert search(page, pattern, delay=200) == ("no match", "")
    # as a regular expression: refused once past the time limit, the page still answers
    regex_mode(page, True)
    assert page.get_attribute(".pl-tl-search", "placeholder") == (
        "search names (regular expression)"
    )
    for pattern in HOSTILE:
        assert search(page, pattern, delay=200) == ("", TOO_SLOW)
    # the next search works again (a new worker), and the toggle is kept
    assert search(page, "^void") == (matches(void_events()), "")
    assert page.get_attribute(".pl-tl-regex", "aria-pressed") == "true"
    assert_safe(page, problems)
    page.close()


def test_plain_text_by_default_and_a_regex_on_request(
    browser: Any,  # noqa: F811 (fixture)
    pages: dict[str, Path],
) -> None:
    page, problems = open_page(browser, pages["saved"])
    gemm, void = gemm_events(), void_events()
    parens = events_named(lambda name: "(" in name)
    assert gemm > 0 and void > gemm and parens > 0
    # plain: any case, and regex syntax is only text
    assert search(page, "GEMM") == (matches(gemm), "")
    page.press(".pl-tl-search", "Enter")
    assert page.inner_text(".pl-tl-count") == f"1 of {matches(gemm)}"
    assert search(page, "^void") == ("no match", "")
    assert search(page, "(") == (matches(parens), "")
    # the toggle searches the box's text again, as a regex
    page.fill(".pl-tl-search", "^void")
    answer(page)
    regex_mode(page, True)
    assert answer(page) == (matches(void), "")
    # Enter before the worker's answer steps to the first match once it comes
    page.fill(".pl-tl-search", "gemm")
    page.press(".pl-tl-search", "Enter")
    assert answer(page) == (f"1 of {matches(gemm)}", "")
    # a pattern that is not a regex is refused, saying why
    count, note = search(page, "(")
    assert count == "" and note.startswith("pattern refused: ") and "(" in note
    regex_mode(page, False)
    assert answer(page) == (matches(parens), "")
    assert_safe(page, problems)
    page.close()


# put first in the page's <head>: no Worker at all, or a security policy that forbids one
NO_WORKERS = {
    "no Worker": "<script>delete window.Worker;</script>",
    "worker-src 'none'": '<meta http-equiv="Content-Security-Policy" '
    "content=\"worker-src 'none'\">",
}


@pytest.mark.parametrize("head", NO_WORKERS.values(), ids=NO_WORKERS.keys())
def test_a_page_without_workers_refuses_a_regex(
    browser: Any,  # noqa: F811 (fixture)
    pages: dict[str, Path],
    tmp_path: Path,
    head: str,
) -> None:
    html = pages["saved"].read_text(encoding="utf-8").replace("<head>", "<head>" + head, 1)
    path = tmp_path / "t.html"
    path.write_text(html, encoding="utf-8")
    page, problems = open_page(browser, path)
    regex_mode(page, True)
    for pattern in ("^void", HOSTILE[0]):
        count, note = search(page, pattern)
        assert count == "" and note.startswith(NO_WORKER)
    regex_mode(page, False)  # plain text still works
    assert search(page, "gemm") == (matches(gemm_events()), "")
    # the only complaint is the browser's own, about the policy it enforced
    assert all("Content Security Policy" in p for p in problems), problems
    page.close()


def test_regex_search_runs_in_a_worker_inside_jupyterlab(
    browser: Any,  # noqa: F811 (fixture)
    tmp_path: Path,
) -> None:
    """The timeline as a trusted notebook's output in JupyterLab: the page there can start
    the worker too, so a regex finds its matches and a hostile one is cut off."""
    import nbformat
    from nbformat.sign import NotebookNotary

    from perflab.io import load_trace
    from perflab.render.timeline import timeline

    cell = nbformat.v4.new_code_cell("trace.timeline()")
    bundle = timeline(load_trace(ALEXNET))._repr_mimebundle_()
    cell.outputs = [nbformat.v4.new_output("display_data", data=bundle)]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": kernelspec})
    NotebookNotary(data_dir=jupyter_dirs(tmp_path)["JUPYTER_DATA_DIR"]).sign(nb)
    nbformat.write(nb, tmp_path / "search.ipynb")
    with jupyter_server("jupyterlab", tmp_path) as url:
        page, problems = open_page(
            browser, f"{url}/lab/tree/search.ipynb", front_end=f"{url}/static/", wait=False
        )
        page.wait_for_selector(".jp-OutputArea-output .pl-tl-regex", timeout=90_000)
        regex_mode(page, True)
        assert search(page, "^void") == (matches(void_events()), "")
        assert search(page, HOSTILE[2]) == ("", TOO_SLOW)
        assert problems == []
        page.close()
