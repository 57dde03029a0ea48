"""The compile view's SASS pane shows the scheduler's view: control bits, live registers
with the peak marked, barrier links and opcode help in titles, a static pressure plot;
every string escaped (real compilation, no GPU)."""

from __future__ import annotations

import base64
import html
import re

import pytest

from perflab.analysis.kernel_report import kernel_report
from perflab.capture.compile import compile_cuda
from perflab.model.kernel import (
    CompileResult,
    Control,
    KernelArtifacts,
    LiveRegisters,
    Resources,
    SassLine,
)
from perflab.render import ptx_view
from perflab.render.html import static_text
from perflab.render.ptx_view import ViewOptions, compile_bundle, standalone_page

LOAD_USE = """__global__ void load_use(const float* a, float* b, float x) {
  int i = threadIdx.x;
  b[i] = a[i] * x + 1.0f;
}
"""


@pytest.fixture(scope="module")
def result() -> CompileResult:
    return compile_cuda(LOAD_USE, cache=False)


@pytest.fixture(scope="module")
def view(result: CompileResult) -> str:
    return compile_bundle(result)["text/html"]


def rows(view: str) -> dict[int, str]:
    """SASS instruction rows by offset."""
    found = re.findall(r'(<div class="k-instruction" data-o="(\d+)".*?</div>)', view, re.S)
    return {int(offset): row for row, offset in found}


def test_each_instruction_shows_its_control_and_live_registers(
    result: CompileResult, view: str
) -> None:
    kernel = result.kernel()
    shown = rows(view)
    instructions = [s for s in kernel.sass_lines if s.offset is not None]
    assert set(shown) == {s.offset for s in instructions}
    for s in instructions:
        assert s.control is not None
        assert html.escape(s.control.compact(), quote=True) in shown[s.offset or 0]
        live = str(s.live.gpr) if s.live is not None else "-"
        assert re.search(rf'class="lr[^"]*"[^>]*>\s*{live}</span>', shown[s.offset or 0])
    report = kernel_report(result, kernel)
    assert report.pressure is not None
    peaks = [o for o, row in shown.items() if 'class="lr peak"' in row]
    assert peaks and set(peaks) == {
        s.offset for s in instructions if s.live and s.live.gpr == report.pressure.peak
    }


def test_barrier_links_are_in_titles_and_data(result: CompileResult, view: str) -> None:
    kernel = result.kernel()
    shown = rows(view)
    load = next(s for s in kernel.sass_lines if s.mnemonic == "LDG")
    links = kernel_report(result, kernel).schedule
    assert links is not None
    waiters = links.links.waited_by[load.offset or 0]
    assert f'data-b="{" ".join(map(str, waiters))}"' in shown[load.offset or 0]
    for waiter in waiters:
        row = shown[waiter]
        assert re.search(rf'data-w="[^"]*\b{load.offset}\b', row)
        assert re.search(rf"waits for [^/]*\b{load.offset:04x} {load.opcode}", html.unescape(row))
    assert "sets barrier" in html.unescape(shown[load.offset or 0])


def test_hovering_an_opcode_says_what_it_does(view: str, result: CompileResult) -> None:
    shown = rows(view)
    load = next(s for s in result.kernel().sass_lines if s.mnemonic == "LDG")
    title = re.search(r'title="([^"]*)"', shown[load.offset or 0])
    assert title is not None
    assert html.unescape(title.group(1)) == (
        "LDG: Loads from global memory. (latency: long, global memory)"
    )


def test_the_pressure_plot_is_a_static_picture_with_the_peak(
    result: CompileResult, view: str
) -> None:
    (data,) = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)"', view)
    svg = base64.b64decode(data).decode()
    report = kernel_report(result, result.kernel())
    assert report.pressure is not None
    assert f">peak {report.pressure.peak} (line " in svg and "<circle" in svg
    assert "<script" not in svg
    assert f"live registers: peak {report.pressure.peak} of" in view


def test_the_views_browser_code_comes_from_package_files(view: str) -> None:
    assert static_text("ptx-view.js") in view and static_text("ptx-view.css") in view
    source = ptx_view.__file__
    with open(source, encoding="utf-8") as fh:
        text = fh.read()
    assert "addEventListener" not in text and ".pv-pane h4{" not in text


def test_the_standalone_page_holds_the_whole_view(result: CompileResult, view: str) -> None:
    page = standalone_page(view, 'k <"title">')
    assert (
        page.startswith("<!DOCTYPE html>") and "<title>k &lt;&quot;title&quot;&gt;</title>" in page
    )
    assert view in page


HOSTILE = '<img src=x onerror=alert(1)> "quoted"'


def hostile_result() -> CompileResult:
    """A saved result whose SASS and names carry markup: every one must be escaped."""
    control = Control(2, True, 0, None, 0, 1)
    waits = Control(1, False, None, None, 0b1, 0)
    lines = [
        SassLine(0, f"LDG.E R2, [R4] {HOSTILE}", "LDG.E", 1, None, control, LiveRegisters(3)),
        SassLine(None, f".L_{HOSTILE}:"),
        SassLine(16, f"FROB{HOSTILE}", f"FROB{HOSTILE}", 1, None, waits, LiveRegisters(5)),
    ]
    kernel = KernelArtifacts(
        name=f"k{HOSTILE}",
        mangled="k",
        arch="sm_90a",
        module_ptx=".entry k\n{\n}",
        ptx_span=(1, 3),
        ptx_lines_source=[None, None, None],
        resources=Resources(registers=8),
    )
    kernel._sass_lines = lines
    return CompileResult("cuda", "sm_90a", f"// {HOSTILE}\n", f"s{HOSTILE}", [kernel], "")


def test_every_string_is_escaped() -> None:
    view = compile_bundle(hostile_result(), ViewOptions())["text/html"]
    assert "<img src=x" not in view and '"quoted"' not in view
    assert "&lt;img src=x onerror=alert(1)&gt; &quot;quoted&quot;" in view
    shown = rows(view)
    assert f'title="FROB{html.escape(HOSTILE)}: undocumented"' in shown[16]
    assert "waits for 0000 LDG.E" in html.unescape(shown[16])


def test_a_result_without_controls_says_so() -> None:
    result = hostile_result()
    kernel = result.kernel()
    kernel._sass_lines = [SassLine(s.offset, s.text, s.opcode, s.line) for s in kernel.sass_lines]
    report = kernel_report(result, kernel)
    assert report.schedule is None and report.control_note is not None
    assert "without its encodings" in report.control_note
    view = compile_bundle(result)["text/html"]
    assert 'class="ctl"' not in view  # no empty columns
    assert html.escape(report.control_note) in view
    text = compile_bundle(result)["text/plain"]
    assert f"schedule: {report.control_note}" in text
