"""kernel_report: one analysis of a compiled kernel (real compilation, no GPU), which the
compile view formats without analysing anything itself."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from data_paths import PTX as PTX_DATA

import perflab.analysis.kernel_report as kr
from perflab.analysis.kernel_report import kernel_report, kernel_reports, resolve_block_size
from perflab.capture.compile import compile_cuda
from perflab.model.kernel import CompileResult
from perflab.render import ptx_view
from perflab.render.ptx_view import ViewOptions, compile_bundle, compile_text

SCALE = """__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""

HEAVY = (PTX_DATA / "spilly.cu").read_text()  # spills under -maxrregcount=32


@pytest.fixture(scope="module")
def scale() -> CompileResult:
    return compile_cuda(SCALE, cache=False)


@pytest.fixture(scope="module")
def spilled() -> CompileResult:
    return compile_cuda(HEAVY, flags="-maxrregcount=32", cache=False)


def test_report_of_a_small_kernel(scale: CompileResult) -> None:
    kernel = scale.kernel()
    report = kernel_report(scale, kernel)
    assert report.kernel is kernel and report.block_size == 256 and report.diff is None
    occ = report.occupancy
    assert occ is not None and report.occupancy_error is None
    assert (occ.arch, occ.block_size, occ.blocks_per_sm, occ.warps_per_sm) == ("sm_90a", 256, 8, 64)
    assert occ.limiting == ("warps",)
    topics = {i.topic: i for i in report.insights}
    assert topics["spills"].level == "good"
    assert topics["spills"].text == f"no spills ({kernel.resources.registers} registers per thread)"
    assert topics["global stores"].text == "1x 32-bit"
    stores = {s.line for s in kernel.sass_lines if s.mnemonic == "STG"}
    assert stores == {3} and 3 in report.mapped_lines  # x[i] *= a
    assert report.mapped_lines <= set(range(1, len(SCALE.splitlines()) + 1))


def test_the_text_view_shows_the_reports_values(scale: CompileResult) -> None:
    (report,) = kernel_reports(scale, block_size=128)
    text = compile_text(scale, ViewOptions(block_size=128)).splitlines()
    assert f"occupancy: {report.occupancy}" in text
    assert "128-thread blocks: 16 blocks = 64/64 warps per SM" in str(report.occupancy)
    shown = [str(i) for i in report.insights]
    start = text.index(shown[0])
    assert text[start : start + len(shown)] == shown


def test_a_block_the_hardware_refuses_gives_the_reason(scale: CompileResult) -> None:
    report = kernel_report(scale, scale.kernel(), block_size=2048)
    assert report.occupancy is None
    assert report.occupancy_error == "block size must be 1..1024 threads, not 2048"
    bundle = compile_bundle(scale, ViewOptions(block_size=2048))
    assert f"occupancy: {report.occupancy_error}" in bundle["text/plain"].splitlines()
    assert f"<div>occupancy: {report.occupancy_error}</div>" in bundle["text/html"]


def test_block_size_is_tritons_own_unless_asked(scale: CompileResult) -> None:
    triton_like = dataclasses.replace(scale, flags=["num_warps=8", "num_stages=3"])
    assert resolve_block_size(triton_like) == 256
    assert resolve_block_size(dataclasses.replace(scale, flags=["num_warps=2"])) == 64
    assert resolve_block_size(triton_like, 96) == 96
    assert resolve_block_size(scale) == kr.DEFAULT_BLOCK
    assert kernel_report(triton_like, scale.kernel()).block_size == 256


def test_diff_against_an_unspilled_build(spilled: CompileResult) -> None:
    free = compile_cuda(HEAVY, cache=False)
    report = kernel_report(spilled, spilled.kernel(), previous=free)
    assert report.diff is not None and not report.diff.identical
    before, after = report.diff.resources["registers"]
    assert after == 32 < before
    assert report.diff.mix["LDL"][0] == 0 < report.diff.mix["LDL"][1]
    assert any(i.topic == "spills" and i.level == "warn" for i in report.insights)
    same = kernel_report(spilled, spilled.kernel(), previous=spilled)
    assert same.diff is not None and same.diff.identical


def test_diff_falls_back_to_the_earlier_compiles_first_kernel(
    scale: CompileResult, spilled: CompileResult
) -> None:
    report = kernel_report(spilled, spilled.kernel(), previous=scale)
    assert report.diff is not None
    assert (report.diff.before, report.diff.after) == (scale.kernel().name, spilled.kernel().name)


def test_reports_of_a_chosen_kernel_or_all(scale: CompileResult) -> None:
    assert [r.kernel.name for r in kernel_reports(scale)] == [scale.kernel().name]
    assert [r.kernel.name for r in kernel_reports(scale, kernel="scale")] == [scale.kernel().name]
    assert kernel_reports(dataclasses.replace(scale, kernels=[])) == ()


def test_the_bundle_analyses_each_kernel_once(
    scale: CompileResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = kr.kernel_report

    def counted(result: CompileResult, *args: object, **kwargs: object) -> kr.KernelReport:
        calls.append(result.source_name)
        return real(result, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kr, "kernel_report", counted)
    compile_bundle(scale, ViewOptions(diff_with=scale))
    assert len(calls) == len(scale.kernels) == 1


def test_the_view_calls_no_analysis_but_the_report_and_the_line_classifier() -> None:
    # types are fine; any other analysis function would be the view analysing again
    allowed = {"Insight", "KernelDiff", "KernelReport", "kernel_reports", "resolve_block_size"}
    allowed.add("line_kind")  # per displayed PTX line, what colour it gets
    tree = ast.parse(Path(ptx_view.__file__).read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("perflab.analysis")
        for alias in node.names
    }
    assert imported <= allowed, imported - allowed


# ---- live registers and spills ----------------------------------------------------------


def source_line(text: str, source: str = HEAVY) -> int:
    (line,) = [n for n, t in enumerate(source.splitlines(), start=1) if text in t]
    return line


def test_spills_have_their_source_line_pressure_and_cause(spilled: CompileResult) -> None:
    report = kernel_report(spilled, spilled.kernel())
    found = report.spills
    assert found is not None and found.marked and not found.heuristic
    assert found.cap is not None and found.cap.registers == 32
    assert "-maxrregcount=32 allows 32 registers per thread" in found.cause
    inner = source_line("acc[i] = acc[i] * acc[(i + r + 1) % 64]")
    # the inner update keeps 64 values live: most spill traffic is there
    top_line, stores, loads, live = found.by_line()[0]
    assert top_line == inner and stores > 0 and loads > 0
    assert live is not None and 24 <= live <= 32
    lines = {s.line for s in found.spills}
    assert inner in lines and lines <= {source_line("acc[i] = in["), inner, source_line("s += acc")}
    assert all(s.kind in ("store", "load") and s.live is not None for s in found.spills)
    assert {s.kind for s in found.spills} == {"store", "load"}
    curve = report.pressure
    assert curve is not None and curve.allocated == 32 and curve.peak <= 32
    assert curve.peak == max(s.live for s in found.spills if s.live is not None)
    assert set(curve.peak_lines) <= report.mapped_lines
    text = compile_text(spilled)
    assert f"spills: {found.cause}" in text
    assert f"  line {inner}: {stores} STL / {loads} LDL, up to {live} registers live" in text


def test_a_launch_bounds_cap_is_a_heuristic_cause() -> None:
    bounded = HEAVY.replace("__global__ void", "__global__ void __launch_bounds__(1024)")
    bigger = bounded.replace("acc[64]", "acc[160]").replace("< 64", "< 160")
    result = compile_cuda(bigger.replace("% 64", "% 160"), cache=False)
    found = kernel_report(result, result.kernel()).spills
    assert found is not None and found.heuristic
    assert found.cap is not None and found.cap.registers == result.kernel().resources.registers
    assert found.cap.source == "__launch_bounds__(1024)"
    assert "a heuristic" in found.cause


def test_no_spills_and_a_small_kernels_pressure(scale: CompileResult) -> None:
    report = kernel_report(scale, scale.kernel())
    assert report.spills is None
    curve = report.pressure
    assert curve is not None and 1 <= curve.peak <= scale.kernel().resources.registers
    assert set(curve.peak_lines) <= {1, 2, 3}
    assert len(curve.points) == len(
        [s for s in scale.kernel().sass_lines if s.live is not None and s.offset is not None]
    )


def test_the_report_as_json(spilled: CompileResult) -> None:
    import json

    doc = json.loads(json.dumps(kernel_report(spilled, spilled.kernel()).to_dict()))
    assert doc["occupancy"]["limiting"] and doc["instruction_mix"]["LDL"] > 0
    assert any(i["topic"] == "spills" for i in doc["insights"])
    assert doc["spills"]["cap"] == {
        "registers": 32,
        "source": "-maxrregcount=32",
        "heuristic": False,
    }
    assert (
        len(doc["spills"]["instructions"])
        == spilled.kernel().instruction_mix["STL"] + (spilled.kernel().instruction_mix["LDL"])
    )
    assert doc["schedule"]["stall_cycles"] > 0 and doc["schedule"]["basic_blocks"]
    assert doc["live_registers"]["peak"] <= 32 and doc["control_note"] is None
