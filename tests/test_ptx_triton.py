"""The scheduler's view for Triton kernels (ahead of time, no GPU): control bits and live
registers, advice on load widths in Triton's words, the Source pane named by the kernel."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from perflab.analysis.kernel_report import kernel_report
from perflab.cli import main
from perflab.model.kernel import CompileResult
from perflab.render.ptx_view import compile_bundle

pytest.importorskip("triton")

DOUBLE = """import triton
import triton.language as tl


@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    path = tmp_path_factory.mktemp("triton") / "double_kernel.py"
    path.write_text(DOUBLE)
    spec = importlib.util.spec_from_file_location("double_kernel", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def compiled(module: ModuleType, aligned: list[str] | None = None) -> CompileResult:
    from perflab.capture.compile import compile_triton

    return compile_triton(
        module.double,
        signature=["*fp32", "i32"],
        constexprs={"BLOCK": 1024},
        aligned=aligned,
        cache=False,
    )


def test_triton_sass_has_controls_live_registers_and_links(module: ModuleType) -> None:
    result = compiled(module)
    kernel = result.kernel()
    instructions = [s for s in kernel.sass_lines if not s.is_label]
    assert instructions and all(s.control is not None for s in instructions)
    assert all(s.live is not None for s in instructions if s.mnemonic != "NOP")
    report = kernel_report(result, kernel)
    assert report.schedule is not None and report.control_note is None
    loads = [s for s in instructions if s.mnemonic == "LDG"]
    waited = {o for s in loads for o in report.schedule.links.waited_by.get(s.offset or 0, ())}
    assert waited  # the doubled values wait on the loads
    assert report.pressure is not None and report.pressure.peak <= kernel.resources.registers


def test_the_32_bit_load_advice_speaks_triton(module: ModuleType) -> None:
    narrow = compiled(module)
    topics = {i.topic: i for i in kernel_report(narrow, narrow.kernel()).insights}
    advice = topics["global loads"]
    assert advice.level == "warn" and "tl.max_contiguous(tl.multiple_of(offs, BLOCK)" in (
        advice.text
    )
    assert "TritonSpec(aligned=...)" in advice.text and "float4" not in advice.text
    # the advice holds: with the bound known to be a multiple of 16, the loads are 128-bit
    wide = compiled(module, aligned=["x_ptr", "n"])
    topics = {i.topic: i for i in kernel_report(wide, wide.kernel()).insights}
    assert topics["global loads"].level == "good"


def test_the_source_pane_is_named_by_the_kernel(module: ModuleType) -> None:
    result = compiled(module)
    view = compile_bundle(result)["text/html"]
    assert f'<h4 title="{result.source_name}">Source: double</h4>' in view


def test_a_missing_spec_names_the_public_tritonspec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "double.py"
    source.write_text(DOUBLE)
    assert main(["compile", str(source)]) == 2
    err = capsys.readouterr().err
    assert "create a perflab.TritonSpec in the source" in err
