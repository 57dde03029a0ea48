"""The compile view's SASS pane shows the scheduler's view: control bits in a compact column
with their full decoding in titles, live registers with the peak marked and the registers
live at entry explained, barrier links and opcode help in titles, a static pressure plot;
rows that wrap rather than being cut; every string escaped (real compilation, no GPU)."""

from __future__ import annotations

import base64
import html
import re

import pytest

from perflab.analysis.kernel_report import kernel_report
from perflab.analysis.registers import written_only
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
# registers written only under a condition are live from the entry, as nvdisasm counts them
GUARDED = """__global__ void scale_rows(const float4* x, float4* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 v, w;
  if (i < n) { v = x[i]; w = x[i + n]; }
  __syncthreads();
  if (i < n) { v.x = a * v.x + w.y; y[i] = v; }
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


# ---- a SASS pane that reads at any width ------------------------------------------------

CONTROL_CELL = re.compile(r'<span class="ctl" title="([^"]*)"[^>]*>([^<]*)</span>')
TAGS = re.compile(r"<[^>]+>")


def test_the_control_column_is_compact_and_its_title_decodes_it(
    result: CompileResult, view: str
) -> None:
    instructions = {s.offset: s for s in result.kernel().sass_lines if s.offset is not None}
    shown = rows(view)
    marks = {}
    for offset, row in shown.items():
        cell = CONTROL_CELL.search(row)
        assert cell is not None
        title, marks[offset] = html.unescape(cell.group(1)), html.unescape(cell.group(2))
        control = instructions[offset].control
        assert control is not None
        assert title.startswith(f"stall {control.stall} cycle") and control.compact() in title
        assert marks[offset].split()[0].rstrip("»") == str(control.stall)  # cycles, a number
        assert ("»" in marks[offset]) == control.yields
    assert len({len(m) for m in marks.values()}) == 1  # one width: the columns line up
    assert max(len(m) for m in marks.values()) <= 12
    assert not any("w:0b" in m or "reuse" in m for m in marks.values())
    load = next(s for s in instructions.values() if s.mnemonic == "LDG")
    assert f"W{load.control.write_barrier}" in marks[load.offset or 0]  # type: ignore[union-attr]


def test_rows_wrap_under_a_hanging_indent_of_the_side_columns(view: str) -> None:
    """Inline styles (kept in an untrusted notebook) wrap the SASS rows; each continuation
    line starts where the instruction's text does, after the address, control and live
    columns (0.6 em a character of a monospace font; the view's style makes it exact)."""
    style = re.search(
        r'data-pane="sass"[^>]*><h4>SASS</h4><div class="pv-code" style="([^"]*)"', view
    )
    assert style is not None
    code = style.group(1)
    assert code.startswith("max-height: 480px; overflow: auto;")  # as the other panes
    assert "white-space: pre-wrap" in code.split("white-space: pre;")[1]
    found = re.search(r"--pv-indent: (\d+)ch", code)
    assert found is not None
    indent = int(found.group(1))
    em = f"{indent * 0.6:.2f}em"
    assert f"padding-left: {em}; text-indent: -{em}" in code
    for offset, row in rows(view).items():
        columns = row.split(">", 1)[1].rsplit("</span>", 1)[0]  # up to the live count
        assert len(html.unescape(TAGS.sub("", columns))) + 2 == indent, offset


ENTRY_NOTE = (
    "5 registers are live at entry: written only under a condition (a predicate, or one "
    "side of a branch) and read later, they count as live from the kernel's start, as "
    "nvdisasm counts them; the first instruction's 6 adds the 1 it writes"
)


def test_registers_live_at_entry_are_explained() -> None:
    guarded = compile_cuda(GUARDED, cache=False)
    first = next(s for s in guarded.kernel().sass_lines if s.offset is not None)
    assert first.text == "LDC R1, c[0x0][0x28]" and first.live == LiveRegisters(6)
    report = kernel_report(guarded, guarded.kernel())
    assert report.pressure is not None and report.pressure.entry == 5
    assert report.to_dict()["live_registers"]["live_at_entry"] == 5  # type: ignore[index]
    bundle = compile_bundle(guarded)
    page, text = bundle["text/html"], bundle["text/plain"]
    assert ENTRY_NOTE in text.splitlines()
    # one line under the SASS rows, in their pane
    sass = page.split('data-pane="sass"', 1)[1]
    note = re.search(r'</div><div class="pv-note"[^>]*>([^<]*)</div></div>', sass)
    assert note is not None and html.unescape(note.group(1)) == ENTRY_NOTE
    head = re.search(r'<div class="k-head".*?<span class="lr" title="([^"]*)"', sass)
    assert head is not None
    assert "counts as live from the kernel's entry" in html.unescape(head.group(1))
    live = re.search(r'class="lr" title="([^"]*)"', rows(page)[0])
    assert live is not None and html.unescape(live.group(1)) == (
        "6 general, 0 predicate, 0 uniform registers live; 5 of them live at entry "
        "(see the note under the pane)"
    )


def test_no_note_where_nothing_is_live_at_entry(result: CompileResult, view: str) -> None:
    report = kernel_report(result, result.kernel())
    assert report.pressure is not None and report.pressure.entry == 0
    assert "pv-note" not in view and "live at entry" not in view
    assert "live at entry" not in compile_bundle(result)["text/plain"]


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("LDC R1, c[0x0][0x28]", {1}),
        ("LDC.64 R2, c[0x0][0x210]", {2, 3}),
        ("LDG.E.128 R4, desc[UR4][R8.64]", {4, 5, 6, 7}),
        ("@P0 LDG.E.128 R4, desc[UR4][R8.64]", set()),  # elsewhere, R4-R7 keep their values
        ("@PT LDC R1, c[0x0][0x28]", {1}),
        ("LDG.E.64 R2, desc[UR4][R2.64]", set()),
        ("LDG.E.128 R4, desc[UR4][R6.64]", {4, 5}),
        ("S2R R0, SR_TID.X", {0}),
        ("IMAD R9, R9, UR4, R0", set()),  # reads what it writes: live before it
        ("STG.E desc[UR4][R2.64], R7", set()),
        ("ULDC UR4, c[0x0][0x0]", set()),
        ("EXIT", set()),
    ],
)
def test_the_registers_an_instruction_writes_without_reading(text: str, written: set[int]) -> None:
    assert written_only(SassLine(0, text, "")) == written
