"""perflab's JupyterLab extension: the kernel side (history store, comm answers, result
listeners) in process, and the whole extension in a real JupyterLab server with Chromium."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import perflab
from perflab import labext
from perflab.errors import InputError, SchemaError
from perflab.model import listeners
from perflab.model.serialize import load_json
from perflab.model.timing import TimingResult


def result(name: str, scale: float = 1.0, n: int = 30) -> TimingResult:
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    samples = scale * 1000.0 * (1 + 0.01 * rng.standard_normal(n))
    return TimingResult(samples_ns=samples, backend="cpu", device="CPU: test", name=name)


class FakeComm:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.receive: Any = None

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)

    def on_msg(self, fn: Any) -> None:
        self.receive = fn

    def on_close(self, fn: Any) -> None:
        pass


# --- the history store -------------------------------------------------------------------


def test_history_round_trips_through_its_file(tmp_path: Path) -> None:
    path = labext.history_path("nb.ipynb", tmp_path)
    assert path == tmp_path / ".perflab" / "nb.ipynb.history.json"
    history = labext.History(path)
    first, second = history.add(result("a")), history.add(result("b", 2.0))
    history.set_baseline(first.id)
    history.save()
    doc = load_json(labext.KIND, path)  # perflab's versioned JSON, header checked
    assert doc["schema_version"] >= 1 and doc["baseline"] == "r1"
    back = labext.History.load(path)
    assert back.rows() == history.rows() and back.baseline == "r1"
    assert back.add(result("c")).id == "r3"  # ids go on after a reload
    assert second.row()["ci95_ns"] == list(second.result.ci95_ns)


def test_a_replayed_result_keeps_its_origin_after_a_reload(tmp_path: Path) -> None:
    history = labext.History(tmp_path / "h.json")
    replay = result("a")
    replay.replayed_from = "recordings/h200/00-quickstart/magic-matmul-512.json"
    history.add(replay)
    history.add(result("b"))
    history.save()
    rows = labext.History.load(history.path).rows()
    assert [r["replayed"] for r in rows] == [True, False]
    assert labext.History.load(history.path).entries[0].result.replayed_from == (
        replay.replayed_from
    )


def test_the_oldest_results_go_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labext, "MAX_RESULTS", 2)
    history = labext.History(tmp_path / "h.json")
    history.set_baseline(history.add(result("a")).id)
    history.add(result("b"))
    history.add(result("c"))
    assert [e.id for e in history.entries] == ["r2", "r3"] and history.baseline is None


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d.update(perflab="TimingResult"), "expected a perflab TimingHistory"),
        (lambda d: d.update(entries={}), "(entries)"),
        (lambda d: d["entries"][1].update(id="r1"), "share an id"),
        (lambda d: d["entries"][0].update(id="../x"), "(entries[0]): bad id"),
        (lambda d: d["entries"][1]["result"].update(samples_ns=[]), "entries[1].result (field"),
        (lambda d: d["entries"][0]["result"].update(samples_ns=[1.0, -5.0]), "entries[0].result"),
        (lambda d: d["entries"][0]["result"].pop("backend"), "entries[0].result (field backend)"),
        (lambda d: d.update(baseline="r9"), "(baseline)"),
        (lambda d: d["entries"][0].update(replayed_from=7), "(entries[0]): bad replayed_from"),
        (lambda d: d["entries"][0].update(replayed_from=""), "(entries[0]): bad replayed_from"),
    ],
)
def test_a_damaged_history_file_is_a_perflab_error_naming_the_place(
    tmp_path: Path, change: Any, where: str
) -> None:
    path = tmp_path / "h.json"
    history = labext.History(path)
    history.add(result("a"))
    history.add(result("b"))
    history.save()
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError) as info:
        labext.History.load(path)
    assert str(path) in str(info.value) and where in str(info.value)


def test_an_unreadable_history_is_moved_aside_and_said(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb.history.json"
    path.write_text("{not json")
    history, note = labext.History.open(path)
    assert history.entries == [] and note is not None
    assert "not valid JSON" in note and "nb.ipynb.history.json.unreadable" in note
    assert (tmp_path / "nb.ipynb.history.json.unreadable").read_text() == "{not json"


@pytest.mark.parametrize("name", ["", ".", "..", "../nb.ipynb", "a/nb.ipynb"])
def test_history_path_takes_only_a_file_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError):
        labext.history_path(name, tmp_path)


# --- the comm's answers ------------------------------------------------------------------


def bridge_with_two(tmp_path: Path) -> labext.Bridge:
    history = labext.History(tmp_path / "nb.ipynb.history.json")
    bridge = labext.Bridge(history)
    bridge.on_result(result("slow", 2.0))
    bridge.on_result(result("fast", 1.0))
    return bridge


def test_compare_is_timing_results_compare(tmp_path: Path) -> None:
    bridge = bridge_with_two(tmp_path)
    reply = bridge.handle({"type": "compare", "a": "r2", "b": "r1", "request": 7})
    expected = bridge.history.get("r2").result.compare(bridge.history.get("r1").result)
    assert reply["request"] == 7 and reply["type"] == "comparison"
    assert reply["text"] == str(expected) and reply["ratio"] == expected.ratio
    assert reply["ci95"] == [expected.low, expected.high]
    assert reply["verdict"] == expected.verdict


def test_the_panel_is_told_when_two_results_make_no_ratio(tmp_path: Path) -> None:
    """Ticking the Triton add of Triton's interpreter and torch's add showed '3,620x
    faster': the answer now says they are not comparable and why, with no ratio."""
    bridge = labext.Bridge(labext.History(tmp_path / "nb.ipynb.history.json"))
    interpreted = result("triton-add", 3000.0)
    interpreted.interpreter = "triton"
    compiled = result("torch-add")
    compiled.interpreter, compiled.dtype = "none", "fp32"
    bridge.on_result(interpreted)
    bridge.on_result(compiled)
    rows = {row["name"]: row for row in bridge.history.rows()}
    assert (rows["triton-add"]["interpreter"], rows["triton-add"]["dtype"]) == ("triton", None)
    assert (rows["torch-add"]["interpreter"], rows["torch-add"]["dtype"]) == ("none", "fp32")
    reply = bridge.handle({"type": "compare", "a": "r2", "b": "r1", "request": 3})
    assert reply["comparable"] is False and reply["verdict"] == "not comparable"
    assert reply["ratio"] is None and reply["notes"] == []
    assert "in Triton's interpreter" in reply["why"]
    assert reply["text"] == f"torch-add vs triton-add: not comparable: {reply['why']}"
    json.dumps(reply, allow_nan=False)  # what the comm sends is plain JSON


def test_baseline_is_kept_and_told_to_every_comm(tmp_path: Path) -> None:
    bridge = bridge_with_two(tmp_path)
    comm = FakeComm()
    bridge.open_comm(comm, {})
    assert comm.sent[-1]["type"] == "history" and len(comm.sent[-1]["rows"]) == 2
    comm.receive({"content": {"data": {"type": "baseline", "id": "r1", "request": 1}}})
    assert comm.sent[-2]["baseline"] == "r1" and comm.sent[-1] == {"request": 1, "type": "ok"}
    assert labext.History.load(bridge.history.path).baseline == "r1"
    bridge.on_result(result("third"))
    assert comm.sent[-1]["type"] == "added" and comm.sent[-1]["row"]["id"] == "r3"


def test_a_malformed_comm_message_gets_an_error_answer(tmp_path: Path) -> None:
    bridge = bridge_with_two(tmp_path)
    comm = FakeComm()
    bridge.open_comm(comm, {})
    comm.receive({"content": "nonsense"})
    assert comm.sent[-1] == {"type": "error", "message": "a request must be an object"}


def test_exports_are_csv_rows_and_the_saved_json(tmp_path: Path) -> None:
    bridge = bridge_with_two(tmp_path)
    bridge.handle({"type": "baseline", "id": "r2"})
    reply = bridge.handle({"type": "export", "format": "csv"})
    assert reply["filename"] == "nb-perf-history.csv"
    rows = list(csv.DictReader(io.StringIO(reply["text"])))
    assert [r["name"] for r in rows] == ["slow", "fast"]
    assert float(rows[0]["median_ns"]) == bridge.history.get("r1").result.median_ns
    assert [r["baseline"] for r in rows] == ["", "yes"]
    doc = json.loads(bridge.handle({"type": "export", "format": "json"})["text"])
    assert doc["perflab"] == labext.KIND and len(doc["entries"]) == 2


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"type": "compare", "a": "r1", "b": "r9"}, "no result 'r9'"),
        ({"type": "baseline", "id": 3}, "no result 3"),
        ({"type": "export", "format": "xml"}, "csv or json"),
        ({"type": "launch"}, "unknown request"),
    ],
)
def test_bad_requests_get_perflab_errors(
    tmp_path: Path, request_: dict[str, Any], message: str
) -> None:
    reply = bridge_with_two(tmp_path).handle({**request_, "request": 4})
    assert reply["type"] == "error" and reply["request"] == 4 and message in reply["message"]


def _tampered(tmp_path: Path, change: Any) -> Path:
    """A saved history of two results, then ``change``d as someone editing the file would."""
    bridge = bridge_with_two(tmp_path)
    doc = json.loads(bridge.history.path.read_text())
    change(doc)
    bridge.history.path.write_text(json.dumps(doc))
    return bridge.history.path


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["entries"][0]["result"].update(samples_ns=[0.0] * 30),
        lambda d: d["entries"][1]["result"]["samples_ns"].__setitem__(3, "fast"),
        lambda d: d["entries"][0]["result"]["summary"].update(median_ns=0.0),
    ],
)
def test_a_tampered_history_entry_still_gets_every_request_answered(
    tmp_path: Path, change: Any
) -> None:
    bridge = labext.Bridge(*labext.History.open(_tampered(tmp_path, change)))
    comm = FakeComm()
    bridge.open_comm(comm, {})
    comm.receive({"content": {"data": {"type": "compare", "a": "r1", "b": "r2", "request": 5}}})
    reply = comm.sent[-1]
    assert reply["request"] == 5 and reply["type"] in ("comparison", "error")
    if reply["type"] == "error":  # the damaged file was moved aside, and the panel told why
        assert "no result 'r1'" in reply["message"]
        assert bridge.note is not None and "moved to" in bridge.note
    else:  # the summary is not believed: the comparison is the samples'
        assert reply["ratio"] == pytest.approx(2.0, rel=0.05)  # "slow" is twice "fast"


def test_a_fault_inside_the_bridge_is_answered_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: TimingResult, other: TimingResult) -> Any:
        return 1 / 0

    monkeypatch.setattr(TimingResult, "compare", broken)
    bridge = bridge_with_two(tmp_path)
    comm = FakeComm()
    bridge.open_comm(comm, {})
    comm.receive({"content": {"data": {"type": "compare", "a": "r1", "b": "r2", "request": 6}}})
    reply = comm.sent[-1]
    assert reply["type"] == "error" and reply["request"] == 6
    assert reply["message"] == (
        "perflab could not answer the 'compare' request: an internal error (ZeroDivisionError)"
    )

    def lost(self: labext.History) -> Any:
        raise KeyError("entries")

    monkeypatch.setattr(labext.History, "rows", lost)
    reply = bridge.handle({"type": "history", "request": 7})
    assert reply["type"] == "error" and reply["request"] == 7
    assert reply["message"].startswith("perflab could not answer the 'history' request")
    assert "Traceback" not in reply["message"] and "File " not in reply["message"]


def test_info_is_perflab_info_json() -> None:
    doc = labext.perflab_info()
    assert doc["backend"] in ("cpu", "cuda") and isinstance(doc["devices"], list)


# --- results reach the history -----------------------------------------------------------


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    ip = InteractiveShell.instance()
    yield ip
    if labext._bridge is not None:
        listeners.remove_listener(labext._bridge.on_result)
    labext._bridge = None


def test_bench_and_gpuprofile_results_reach_the_saved_history(shell: Any, tmp_path: Path) -> None:
    bridge = labext.connect("work.ipynb")
    timed = perflab.bench(lambda: sum(range(100)), backend="cpu", budget_ms=5, warmup_ms=1)
    shell.run_line_magic("load_ext", "perflab")  # the notebook's own, connect loads no magic
    shell.run_cell("%%gpuprofile --budget 5 --warmup 1 --name cell\nx = sum(range(100))")
    labext.profile_cell(shell, "%%gpuprofile --budget 5 --warmup 1 --name button\nx = 1")
    saved = labext.History.load(tmp_path / ".perflab" / "work.ipynb.history.json")
    assert [e.result.name for e in saved.entries] == [timed.name, "cell", "button"]
    assert saved.entries[0].result.median_ns == timed.median_ns
    assert labext.connect("work.ipynb") is bridge  # a second connect keeps the history


def test_a_renamed_notebook_keeps_its_history(shell: Any, tmp_path: Path) -> None:
    bridge = labext.connect("old.ipynb")
    perflab.bench(lambda: None, backend="cpu", budget_ms=2, warmup_ms=0)
    assert labext.connect("new.ipynb", renamed_from="old.ipynb") is bridge
    folder = tmp_path / ".perflab"
    assert sorted(p.name for p in folder.iterdir()) == ["new.ipynb.history.json"]
    perflab.bench(lambda: None, backend="cpu", budget_ms=2, warmup_ms=0)
    assert [e.id for e in labext.History.load(folder / "new.ipynb.history.json").entries] == [
        "r1",
        "r2",
    ]
    # a name that already has a history keeps it: the kernel switches to that one
    labext.connect("other.ipynb")
    kept = labext.connect("new.ipynb", renamed_from="other.ipynb").history
    assert kept.path == folder / "new.ipynb.history.json" and len(kept.entries) == 2


def test_a_committed_history_link_out_of_the_folder_is_moved_aside(
    shell: Any, tmp_path: Path
) -> None:
    """A repository that commits ``.perflab/NB.history.json`` (and its ``.tmp``) as links to a
    file elsewhere: the next result neither overwrites nor moves that file."""
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("not perflab's")
    folder = tmp_path / ".perflab"
    folder.mkdir()
    (folder / "work.ipynb.history.json").symlink_to(Path("..", "outside", "victim.txt"))
    (folder / "work.ipynb.history.json.tmp").symlink_to(Path("..", "outside", "victim.txt"))
    bridge = labext.connect("work.ipynb")
    assert bridge.note is not None and "outside its folder" in bridge.note
    assert "moved to work.ipynb.history.json.unreadable" in bridge.note
    perflab.bench(lambda: None, backend="cpu", budget_ms=2, warmup_ms=0)
    assert victim.read_text() == "not perflab's"
    assert os.readlink(folder / "work.ipynb.history.json.unreadable") == str(
        Path("..", "outside", "victim.txt")
    )
    saved = folder / "work.ipynb.history.json"
    assert not saved.is_symlink() and len(labext.History.load(saved).entries) == 1


def test_a_failing_listener_warns_and_the_result_stands() -> None:
    def broken(_: object) -> None:
        raise OSError("disk full")

    listeners.add_listener(broken)
    try:
        with pytest.warns(UserWarning, match="disk full"):
            timed = perflab.bench(lambda: None, backend="cpu", budget_ms=2, warmup_ms=0)
    finally:
        listeners.remove_listener(broken)
    assert timed.n > 0


# --- the extension in JupyterLab ---------------------------------------------------------

PROFILED = "import torch\na = torch.randn(64, 64)\nb = a @ a"
PTX_CELL = "%%ptx --arch sm_90a\n__global__ void fill(float* x) { x[threadIdx.x] = 1.0f; }"
FAILING = "x = 1\nraise ValueError('bad cell')"
# the notebook never loads perflab's magics until this cell (the %%ptx cell needs them)
TYPED = "%%gpuprofile --budget 5\nx = 2"
LOAD_EXT = "%load_ext perflab"
ROWS = "() => [...document.querySelectorAll('#perflab-history tr.jp-perflab-row')].length"
CELL_OUTPUT = """i => document.querySelectorAll('.jp-Notebook .jp-Cell')[i]
  .querySelector('.jp-OutputArea')?.textContent ?? ''"""
OUTPUT = "() => document.querySelector('.jp-Notebook .jp-Cell .jp-OutputArea')?.textContent ?? ''"
STATUS = "() => document.querySelector('.jp-perflab-status')?.textContent ?? ''"
KEYWORD_COLOUR = """() => {
  const probe = document.createElement('span');
  probe.style.color = 'var(--jp-mirror-editor-keyword-color)';
  document.body.append(probe);
  const colour = getComputedStyle(probe).color;
  probe.remove();
  return colour;
}"""
GLOBAL_COLOUR = """() => {
  const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[1];
  const spans = [...cell.querySelectorAll('.cm-line span')];
  const span = spans.find(s => s.textContent === '__global__');
  return span ? getComputedStyle(span).color : null;
}"""


ASM_KINDS = """() => {
  const out = {};
  for (const pane of document.querySelectorAll('.pv-pane')) {
    const spans = pane.querySelectorAll('[class^="jp-perflab-asm-"]');
    if (spans.length) {
      const title = pane.querySelector('h4').textContent;
      out[title] = [...new Set([...spans].map(s => s.className.replace('jp-perflab-asm-', '')))];
    }
  }
  return out;
}"""


def lab_notebook(root: Path) -> Path:
    import nbformat

    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(c) for c in (PROFILED, PTX_CELL, FAILING, TYPED, LOAD_EXT)
        ],
        metadata={"kernelspec": kernelspec},
    )
    path = root / "lab.ipynb"
    nbformat.write(nb, path)
    return path


def installed_extension() -> Path:
    where = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "perflab-jupyterlab"
    if not (where / "package.json").exists():
        pytest.fail(f"perflab's JupyterLab extension is not installed in {where}: run make install")
    return where


@contextlib.contextmanager
def lab_page(root: Path, notebook: str) -> Iterator[tuple[Any, list[str]]]:
    """``notebook`` (in ``root``) open in JupyterLab in Chromium, its kernel idle; with the
    page's console errors, uncaught exceptions and dialogs (see test_browser.open_page)."""
    from test_browser import ARGS, CHROMIUM, jupyter_server, open_page

    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium missing (run `make browser`)")
    installed_extension()
    from playwright.sync_api import sync_playwright

    with jupyter_server("jupyterlab", root) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page, problems = open_page(
            browser, f"{url}/lab/tree/{notebook}", front_end=f"{url}/static/", wait=False
        )
        page.set_viewport_size({"width": 1500, "height": 900})
        wait_kernel_idle(page)
        yield page, problems
        page.close()
        browser.close()


def wait_kernel_idle(page: Any) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-status]')].some("
        "e => e.getAttribute('data-status') === 'idle')",
        timeout=90_000,
    )


def open_history(page: Any) -> None:
    if not page.is_visible("#perflab-history"):
        page.click(".jp-SideBar.jp-mod-right li[data-id='perflab-history']")
    page.wait_for_selector("#perflab-history", state="visible")


def save_and_reload(page: Any, rows: int) -> None:
    """Save the notebook (no "leave the page?" question), reload the page and wait for the
    history panel to show ``rows`` rows again."""
    page.click(".jp-Notebook .jp-Cell >> nth=0 >> .jp-InputArea-editor")
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=30_000)
    page.reload()
    wait_kernel_idle(page)
    open_history(page)
    page.wait_for_function(f"() => ({ROWS})() === {rows}", timeout=90_000)


def run_cell_in_place(page: Any, index: int) -> None:
    """Run cell ``index`` as Ctrl+Enter does (the active cell stays where it is)."""
    page.locator(f".jp-Notebook .jp-Cell >> nth={index}").scroll_into_view_if_needed()
    page.click(f".jp-Notebook .jp-Cell >> nth={index} >> .jp-InputArea-editor")
    page.keyboard.press("Control+Enter")


def profile_first_cell(page: Any, rows_before: int, *, by_key: bool = False) -> None:
    page.click(".jp-Notebook .jp-Cell >> nth=0 >> .jp-InputArea-editor")
    if by_key:
        page.keyboard.press("Control+Alt+p")
    else:
        page.click(".jp-perflab-profile-button")
    page.wait_for_function(f"() => ({ROWS})() === {rows_before + 1}", timeout=120_000)


def panel_rows(page: Any) -> list[dict[str, str]]:
    return page.evaluate(
        "() => [...document.querySelectorAll('#perflab-history tr.jp-perflab-row')].map(tr => ({"
        "id: tr.dataset.id, name: tr.querySelector('.jp-perflab-name-text').textContent,"
        "median: tr.querySelector('.jp-perflab-median').textContent,"
        "median_ns: tr.querySelector('.jp-perflab-median').dataset.medianNs,"
        "baseline: tr.classList.contains('jp-perflab-baseline-row')}))"
    )


def saved_history(root: Path) -> labext.History:
    return labext.History.load(root / ".perflab" / "lab.ipynb.history.json")


def widen_right_sidebar(page: Any, pixels: int) -> None:
    x, y = page.evaluate(
        "() => { const r = [...document.querySelectorAll("
        "'#jp-main-split-panel > .lm-SplitPanel-handle:not(.lm-mod-hidden)')]"
        ".map(h => h.getBoundingClientRect()).sort((a, b) => b.x - a.x)[0];"
        " return [r.x + r.width / 2, r.y + r.height / 2]; }"
    )
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - pixels, y, steps=5)
    page.mouse.up()


def assert_comparison(page: Any, expected: str) -> None:
    page.wait_for_function(
        "t => document.querySelector('.jp-perflab-compare-text')?.textContent === t",
        arg=expected,
        timeout=30_000,
    )


def restart_kernel(page: Any) -> None:
    page.click(".jp-NotebookPanel-toolbar [data-jp-item-name='restart'] button")
    page.click(".jp-Dialog .jp-mod-accept")
    page.wait_for_function(f"() => ({STATUS})() !== 'no GPU: host clock'", timeout=30_000)
    wait_kernel_idle(page)


@pytest.mark.browser
@pytest.mark.slow
def test_the_lab_extension_in_jupyterlab(tmp_path: Path) -> None:
    """One JupyterLab session: the status item, the profile button and shortcut in a
    notebook that has not loaded perflab's magics (and still has none after), a failing
    cell's traceback from the user's line, the history panel (live rows, compare, baseline,
    CSV export), the history across a page reload and a kernel restart, CUDA highlighting of
    a %%ptx cell and of its view's PTX and SASS panes, the history following a rename, no
    console errors."""
    lab_notebook(tmp_path)
    with lab_page(tmp_path, "lab.ipynb") as (page, problems):
        page.wait_for_function(f"() => ({STATUS})() === 'no GPU: host clock'", timeout=90_000)
        open_history(page)

        # the button: output in the cell, source untouched, a row with the saved median
        profile_first_cell(page, 0)
        page.wait_for_function(f"() => ({OUTPUT})().includes('median')", timeout=60_000)
        assert "host clock" in page.evaluate(OUTPUT)
        source = page.locator(".jp-Notebook .jp-Cell >> nth=0 >> .cm-content").inner_text()
        assert source == PROFILED
        [row] = panel_rows(page)
        [entry] = saved_history(tmp_path).entries
        assert float(row["median_ns"]) == entry.result.median_ns
        assert row["name"] == entry.result.name
        assert row["median"].split(" (")[0][0].isdigit()

        # a cell that raises shows its error as %%gpuprofile does, from the user's own line,
        # and adds no row
        page.click(".jp-Notebook .jp-Cell >> nth=2 >> .jp-InputArea-editor")
        page.click(".jp-perflab-profile-button")
        page.wait_for_function(f"() => ({CELL_OUTPUT})(2).includes('bad cell')", timeout=60_000)
        failed = page.evaluate(f"() => ({CELL_OUTPUT})(2)")
        assert "ValueError" in failed and re.search(r"Cell In\[\d+\], line 2", failed), failed
        for internal in ("profile_cell", "__import__", "run_cell_magic", "skipping hidden"):
            assert internal not in failed, internal
        assert page.evaluate(ROWS) == 1

        # the button loaded no magic: a %%gpuprofile cell needs the notebook's %load_ext
        run_cell_in_place(page, 3)
        page.wait_for_function(f"() => ({CELL_OUTPUT})(3).includes('not found')", timeout=90_000)
        assert "Cell magic `%%gpuprofile` not found" in page.evaluate(f"() => ({CELL_OUTPUT})(3)")
        page.locator(".jp-Notebook .jp-Cell >> nth=0").scroll_into_view_if_needed()
        page.mouse.move(700, 600)  # no tooltip over the picture
        shot = os.environ.get("PERFLAB_PROFILE_SCREENSHOT")
        page.screenshot(path=shot or str(tmp_path / "profile.png"))

        # the shortcut, then a comparison of the two, computed by TimingResult.compare
        profile_first_cell(page, 1, by_key=True)
        for box in page.locator("#perflab-history .jp-perflab-pick").all():
            box.check()
        first, second = saved_history(tmp_path).entries
        assert_comparison(page, str(second.result.compare(first.result)))
        for box in page.locator("#perflab-history .jp-perflab-pick").all():
            box.uncheck()

        # a baseline, kept in the file, and a CSV export
        page.click("#perflab-history tr[data-id='r1'] .jp-perflab-baseline")
        page.wait_for_function(
            "() => document.querySelector(\"tr[data-id='r1']\")"
            ".classList.contains('jp-perflab-baseline-row')"
        )
        assert saved_history(tmp_path).baseline == "r1"
        with page.expect_download() as download:
            page.click(".jp-perflab-export-csv")
        lines = Path(download.value.path()).read_text().splitlines()
        assert lines[0].startswith("id,name,median_ns") and len(lines) == 3

        # a reload and a kernel restart keep the history; new ids follow on
        save_and_reload(page, 2)
        restart_kernel(page)
        page.wait_for_function(f"() => ({STATUS})() === 'no GPU: host clock'", timeout=90_000)
        assert [r["id"] for r in panel_rows(page)] == ["r1", "r2"]
        assert [r["baseline"] for r in panel_rows(page)] == [True, False]
        profile_first_cell(page, 2)
        assert [r["id"] for r in panel_rows(page)] == ["r1", "r2", "r3"]
        page.wait_for_function(f"() => ({OUTPUT})().includes('median')", timeout=60_000)
        # and the new kernel compares what the old one measured
        for row_id in ("r2", "r3"):
            page.check(f"#perflab-history tr[data-id='{row_id}'] .jp-perflab-pick")
        _, second, third = saved_history(tmp_path).entries
        assert_comparison(page, str(third.result.compare(second.result)))

        # %%ptx cells are CUDA: __global__ is a keyword
        page.locator(".jp-Notebook .jp-Cell >> nth=1").scroll_into_view_if_needed()
        page.wait_for_function(f"() => ({GLOBAL_COLOUR})() !== null", timeout=30_000)
        assert page.evaluate(GLOBAL_COLOUR) == page.evaluate(KEYWORD_COLOUR)
        # and, once the notebook loads perflab, its view's PTX and SASS panes get opcodes,
        # registers... as token spans
        run_cell_in_place(page, 4)
        run_cell_in_place(page, 1)
        page.wait_for_function(
            f"() => {{ const k = ({ASM_KINDS})(); return k.PTX && k.SASS; }}", timeout=180_000
        )
        kinds = page.evaluate(ASM_KINDS)
        assert {"op", "reg"} <= set(kinds["PTX"]) and {"op", "reg"} <= set(kinds["SASS"])
        # Profile on the %%ptx cell says why it times nothing, and records nothing
        page.click(".jp-Notebook .jp-Cell >> nth=1 >> .jp-InputArea-editor")
        page.click(".jp-perflab-profile-button")
        page.wait_for_function(f"() => ({CELL_OUTPUT})(1).includes('not profiled')")
        assert "%%ptx cell runs its magic" in page.evaluate(f"() => ({CELL_OUTPUT})(1)")
        assert page.evaluate(ROWS) == 3

        page.locator(".jp-Notebook .jp-Cell >> nth=0").scroll_into_view_if_needed()
        widen_right_sidebar(page, 200)  # for the picture: the panel's default width is narrow
        page.mouse.move(700, 600)  # no tooltip over the picture
        wait_kernel_idle(page)
        shot = os.environ.get("PERFLAB_LAB_SCREENSHOT")
        page.screenshot(path=shot or str(tmp_path / "lab.png"))

        # a renamed notebook takes its history along
        page.click(".lm-MenuBar-itemLabel:text-is('File')")
        page.click(".lm-Menu-itemLabel:text-is('Rename Notebook…')")
        page.fill(".jp-Dialog input", "renamed.ipynb")
        page.click(".jp-Dialog .jp-mod-accept")
        page.wait_for_function(
            "() => document.querySelector('.jp-perflab-history-notebook')"
            ".textContent === 'renamed.ipynb'"
        )
        renamed = tmp_path / ".perflab" / "renamed.ipynb.history.json"
        deadline = time.monotonic() + 30
        while not renamed.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(labext.History.load(renamed).entries) == 3
        assert not (tmp_path / ".perflab" / "lab.ipynb.history.json").exists()
        assert problems == []


# --- the history panel at its default width ----------------------------------------------

PANEL_NOTEBOOK = "18-whole-jobs-and-collectives-on-eight-ranks.ipynb"
NOISY = "noisy: IQR is 23% of the median (> 10%)"
HOST_CLOCK = "no GPU: timed with the host clock (perf_counter_ns)"
# (name, median in microseconds, relative spread of the samples, warnings)
PANEL_RESULTS: list[tuple[str, float, float, list[str]]] = [
    ("In[12]", 7995.0, 0.6, [NOISY, HOST_CLOCK]),
    ("matmul 2048 bf16 cuBLAS", 1234.5, 0.02, [HOST_CLOCK]),
    ("In[3]", 18.4, 0.05, []),
    ("attention forward fused flash kernel causal seq 4096", 51234.0, 0.3, [NOISY]),
    ("copy 256 MiB device to device", 64.2, 0.01, []),
    ("allreduce 1 GiB over NVLink ring", 412.0, 0.2, [NOISY, HOST_CLOCK]),
    ("layernorm", 3.1, 0.1, []),
    ("decode step batch 8", 2270.0, 0.05, [HOST_CLOCK]),
    ("Softmax rows 4096", 95.0, 0.04, []),
    ("In[7]", 640.0, 0.08, [HOST_CLOCK]),
]
PANEL_ROWS = "#perflab-history tr.jp-perflab-row"
# every box in the panel whose content is wider than itself: text cut or a scroll bar
OVERFLOWING = """() => [document.querySelector('#perflab-history'),
    ...document.querySelectorAll('#perflab-history *')]
  .filter(e => getComputedStyle(e).display !== 'inline' && e.scrollWidth > e.clientWidth)
  .map(e => `${e.tagName}.${e.className}: ${e.scrollWidth} > ${e.clientWidth}`)"""
PANEL_WIDTH = "() => document.querySelector('#perflab-history').clientWidth"
# where the comparison is, against the table and the panel's visible part
COMPARE_PLACE = """() => {
  const panel = document.querySelector('#perflab-history').getBoundingClientRect();
  const compare = document.querySelector('.jp-perflab-compare').getBoundingClientRect();
  const table = document.querySelector('#perflab-history .jp-perflab-table')
    .getBoundingClientRect();
  return {above: compare.bottom <= table.top,
          inView: compare.top >= panel.top && compare.bottom <= panel.bottom};
}"""


def seed_panel_history(root: Path) -> labext.History:
    """A notebook whose history already holds PANEL_RESULTS, as the kernel will load it."""
    import nbformat

    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("x = 1")], metadata={"kernelspec": kernelspec}
    )
    nbformat.write(nb, root / PANEL_NOTEBOOK)
    history = labext.History(labext.history_path(PANEL_NOTEBOOK, root))
    rng = np.random.default_rng(5)
    for name, median_us, spread, warnings in PANEL_RESULTS:
        samples = median_us * 1e3 * np.exp(spread * rng.standard_normal(40))
        history.add(
            TimingResult(
                samples_ns=samples,
                backend="cpu",
                device="CPU: AMD EPYC 9654 96-Core Processor",
                name=name,
                warnings=warnings,
            )
        )
    history.save()
    return history


def natural_key(name: str) -> list[Any]:
    """Names as the panel sorts them: case ignored, numbers by value (In[3] before In[12])."""
    return [int(part) if part.isdigit() else part.casefold() for part in re.split(r"(\d+)", name)]


def panel_order(page: Any) -> list[str]:
    return page.evaluate(
        f"() => [...document.querySelectorAll('{PANEL_ROWS}')].map(r => r.dataset.id)"
    )


def assert_nothing_cut(page: Any) -> None:
    assert page.evaluate(OVERFLOWING) == []


def drag_right_sidebar(page: Any, pixels: int) -> None:
    """Move the right side panel's edge ``pixels`` to the left (negative: to the right), and
    wait until the panel has taken its new width."""
    before = page.evaluate(PANEL_WIDTH)
    widen_right_sidebar(page, pixels)
    page.wait_for_function(f"() => ({PANEL_WIDTH})() !== {before}", timeout=10_000)
    page.wait_for_timeout(200)  # a layout frame for the rows


@pytest.mark.browser
@pytest.mark.slow
def test_the_history_panel_reads_whole_at_its_default_width(tmp_path: Path) -> None:
    """The panel at JupyterLab's default side-panel width: no text cut (the interval, the
    warnings, the notebook's name), the whole row in its tooltip; reflowed when the side panel
    is resized; a comparison shown above the rows and scrolled into view; sorted by time or
    name, the choice kept across a reload."""
    history = seed_panel_history(tmp_path)
    entries = {e.id: e for e in history.entries}
    with lab_page(tmp_path, PANEL_NOTEBOOK) as (page, problems):
        open_history(page)
        page.wait_for_function(f"() => ({ROWS})() === {len(entries)}", timeout=90_000)

        # two rows near the top: their comparison shows at the top, in view
        page.check(f"{PANEL_ROWS}[data-id='r1'] .jp-perflab-pick")
        page.check(f"{PANEL_ROWS}[data-id='r2'] .jp-perflab-pick")
        assert_comparison(page, str(entries["r2"].result.compare(entries["r1"].result)))
        page.mouse.move(700, 600)  # no tooltip over the picture
        shot = os.environ.get("PERFLAB_PANEL_SCREENSHOT")
        page.locator("#perflab-history").screenshot(path=shot or str(tmp_path / "panel.png"))
        assert page.evaluate(COMPARE_PLACE) == {"above": True, "inView": True}

        # nothing cut at the default width; each row's tooltip holds all of it
        default_width = page.evaluate(PANEL_WIDTH)
        assert_nothing_cut(page)
        titles = page.evaluate(
            f"() => Object.fromEntries([...document.querySelectorAll('{PANEL_ROWS}')]"
            ".map(r => [r.dataset.id, r.title]))"
        )
        for row_id, entry in entries.items():
            shown = panel_rows(page)[int(row_id[1:]) - 1]
            assert entry.result.name in titles[row_id] and shown["median"] in titles[row_id]
            assert all(w in titles[row_id] for w in entry.result.warnings)

        # a pair at the bottom, the panel scrolled down to it: the comparison comes into view
        for row_id in ("r1", "r2"):
            page.uncheck(f"{PANEL_ROWS}[data-id='{row_id}'] .jp-perflab-pick")
        page.check(f"{PANEL_ROWS}[data-id='r9'] .jp-perflab-pick")
        scrolled = "p => { p.scrollTop = p.scrollHeight; return p.scrollTop; }"
        assert page.eval_on_selector("#perflab-history", scrolled) > 0
        page.check(f"{PANEL_ROWS}[data-id='r10'] .jp-perflab-pick")
        assert_comparison(page, str(entries["r10"].result.compare(entries["r9"].result)))
        page.wait_for_function(f"() => ({COMPARE_PLACE})().inView", timeout=5_000)

        # sorted by time, by name, and back to the order they were run in
        by_time = sorted(entries, key=lambda i: entries[i].result.median_ns)
        by_name = sorted(entries, key=lambda i: natural_key(entries[i].result.name))
        page.select_option("#perflab-history .jp-perflab-sort", "time")
        assert panel_order(page) == by_time
        page.select_option("#perflab-history .jp-perflab-sort", "name")
        assert panel_order(page) == by_name
        assert_nothing_cut(page)

        # resized: wider, the rows take fewer lines; at the narrowest, still nothing cut
        tall = page.locator(f"{PANEL_ROWS}[data-id='r4']").bounding_box()["height"]
        drag_right_sidebar(page, 250)
        assert page.evaluate(PANEL_WIDTH) > default_width
        assert_nothing_cut(page)
        assert page.locator(f"{PANEL_ROWS}[data-id='r4']").bounding_box()["height"] < tall
        drag_right_sidebar(page, -600)
        assert page.evaluate(PANEL_WIDTH) <= default_width
        assert_nothing_cut(page)

        # the choice stays for the session: a reload sorts by name again
        save_and_reload(page, len(entries))
        assert page.input_value("#perflab-history .jp-perflab-sort") == "name"
        assert panel_order(page) == by_name
        page.select_option("#perflab-history .jp-perflab-sort", "run")
        assert panel_order(page) == list(entries)
        assert problems == []
