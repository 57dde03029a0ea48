"""%%ptx, run in-process through IPython's InteractiveShell (real compilation)."""

from __future__ import annotations

import html
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import perflab.magics.ptx as ptx_magic
from perflab.model.kernel import CompileResult
from perflab.render.ptx_view import CompileView

COPY = """__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""

TRITON = """
import triton
import triton.language as tl
from perflab.capture.compile import TritonSpec

@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
"""


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "perflab")
    return shell


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    monkeypatch.setattr(ptx_magic, "display", seen.append)
    return seen


def run(ip: InteractiveShell, line: str, cell: str) -> Any:
    return ip.run_cell(f"%%ptx {line}\n{cell}")


def test_cuda_cell_shows_three_panes(ip: InteractiveShell, shown: list[Any]) -> None:
    res = run(ip, "--block 128 -v scaled", COPY)
    assert res.success, res.error_in_exec
    assert len(shown) == 1 and isinstance(shown[0], CompileView)
    bundle = shown[0]._repr_mimebundle_()
    html, text = bundle["text/html"], bundle["text/plain"]
    for title in ("Source (cell)", "PTX", "SASS"):
        assert f"<h4>{title}</h4>" in html
    assert "128-thread blocks" in text and "scale(float*, float, int)" in text
    # the store is on the cell's line 4 (line 1 is the magic's line)
    k = ip.user_ns["scaled"].kernel()
    assert {s.line for s in k.sass_lines if s.mnemonic == "STG"} == {4}
    assert 'data-l="4"' in html


def test_output_option_returns_the_result(ip: InteractiveShell, shown: list[Any]) -> None:
    res = run(ip, "-o --arch sm_80", COPY)
    assert isinstance(res.result, CompileResult) and res.result.arch == "sm_80"
    assert shown == []  # -o returns rather than displays


def test_compile_error_shows_cell_lines_without_traceback(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run(ip, "", "__global__ void f(int* x) {\n  x[0] = nope;\n}\n")
    assert isinstance(res.error_in_exec, UsageError)
    err = capsys.readouterr().err
    assert 'cell:3: error: identifier "nope" is undefined' in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--flags '-o /tmp/x'", "is not allowed"),
        ("--arch sm_70", "not supported"),
        ("--kernel missing", "no kernel named 'missing'"),
        ("--show sass,ttir", "--show"),
        ("--diff nothing_here", "expected a CompileResult"),
        ("--smem lots", "--smem"),
    ],
)
def test_bad_options_are_usage_errors(
    ip: InteractiveShell,
    shown: list[Any],
    capsys: pytest.CaptureFixture[str],
    line: str,
    message: str,
) -> None:
    res = run(ip, line, COPY)
    assert isinstance(res.error_in_exec, UsageError)
    assert message in capsys.readouterr().err


def test_diff_against_an_earlier_result(ip: InteractiveShell, shown: list[Any]) -> None:
    assert run(ip, "-v before_fast", COPY).success
    shown.clear()
    assert run(
        ip, '--flags "-DUNUSED=1 --use_fast_math" --diff before_fast', COPY.replace("*= a", "/= a")
    ).success
    text = shown[0]._repr_mimebundle_()["text/plain"]
    assert "diff instruction mix" in text or "diff resources" in text
    assert "\n-" in text and "\n+" in text  # a text diff of the SASS


def test_run_without_gpu_says_so(
    ip: InteractiveShell, shown: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from perflab.capture.env import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present")
    ip.user_ns["launch_spec"] = {"grid": (1,), "block": (32,), "args": ()}
    res = run(ip, "--run launch_spec", COPY)
    assert isinstance(res.error_in_exec, UsageError)
    assert "no GPU" in capsys.readouterr().err


@pytest.mark.gpu
def test_run_on_gpu_times_the_kernel(ip: InteractiveShell, shown: list[Any]) -> None:
    import cupy

    x = cupy.ones(1 << 20, dtype=cupy.float32)
    ip.user_ns["launch_spec"] = {
        "grid": ((1 << 20) // 256,),
        "block": (256,),
        "args": (x, cupy.float32(2.0), cupy.int32(1 << 20)),
    }
    res = run(ip, "--run launch_spec -o", COPY)
    assert res.success, res.error_in_exec
    assert float(x[0]) > 1.0  # the kernel ran (at least once)


def test_triton_cell_with_options(ip: InteractiveShell, shown: list[Any]) -> None:
    res = run(ip, '-o --signature "*fp32,*fp32,*fp32,i32" --constexprs BLOCK=1024', TRITON)
    assert res.success, res.error_in_exec
    result = res.result
    assert result.lang == "triton" and result.kernel().name == "add"
    k = result.kernel()
    # cell lines as shown: line 1 is the magic, "y = tl.load" is line 12
    assert {s.line for s in k.sass_lines if s.mnemonic == "LDG"} == {11, 12}
    # n is not known to be a multiple of 16, so the mask forbids vector loads
    assert not any(op.startswith("LDG.E.128") for op in k.opcodes)


def test_triton_alignment_hints_give_128_bit_loads(ip: InteractiveShell, shown: list[Any]) -> None:
    cell = TRITON + (
        "spec = TritonSpec(add, signature=['*fp32'] * 3 + ['i32'], constexprs={'BLOCK': 1024},"
        " aligned=['x_ptr', 'y_ptr', 'out_ptr', 'n'])\n"
    )
    res = run(ip, "-o", cell)
    assert res.success, res.error_in_exec
    assert any(op.startswith("LDG.E.128") for op in res.result.kernel().opcodes)


def test_triton_cell_with_spec_and_stages(ip: InteractiveShell, shown: list[Any]) -> None:
    cell = (
        TRITON + "spec = TritonSpec(add, signature=['*fp16'] * 3 + ['i32'], "
        "constexprs={'BLOCK': 256}, num_warps=2)\n"
    )
    res = run(ip, "--show source,ttgir,sass", cell)
    assert res.success, res.error_in_exec
    bundle = shown[0]._repr_mimebundle_()
    assert "<h4>TTGIR</h4>" in bundle["text/html"] and "<h4>PTX</h4>" not in bundle["text/html"]
    assert "64-thread blocks" in bundle["text/plain"]  # num_warps=2 -> 64 threads


def test_triton_cell_without_spec_explains(
    ip: InteractiveShell, shown: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    res = run(ip, "", TRITON)
    assert isinstance(res.error_in_exec, UsageError)
    assert "TritonSpec" in capsys.readouterr().err


def test_help_mentions_the_options(ip: InteractiveShell) -> None:
    doc = ip.find_cell_magic("ptx").__doc__ or ""
    for option in (
        "--arch",
        "--flags",
        "--kernel",
        "--show",
        "--block",
        "--diff",
        "--run",
        "TritonSpec",
    ):
        assert option in doc


def test_help_with_a_body_prints_the_options(
    ip: InteractiveShell, shown: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    res = run(ip, "--help", COPY)
    assert res.success, res.error_in_exec
    out = capsys.readouterr().out
    assert "%ptx" in out and "--flags" in out and "--signature" in out
    assert shown == []  # nothing was compiled


@pytest.mark.parametrize("line", ["--help", "-h", "--arch sm_80 --help"])
def test_line_form_prints_the_options(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    res = ip.run_cell(f"%ptx {line}")
    assert res.success, res.error_in_exec
    out = capsys.readouterr().out
    assert out.lstrip().startswith("%ptx [--arch SM] [--flags FLAGS]")  # the usage first
    assert "--arch" in out and "--show" in out and "TritonSpec" in out


def test_line_form_without_help_says_to_use_the_cell_form(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    res = ip.run_cell("%ptx --arch sm_80")
    assert isinstance(res.error_in_exec, UsageError)
    assert "put %%ptx on the first line of a cell" in capsys.readouterr().err


def test_nvcc_error_shows_the_line_before_and_a_caret(
    ip: InteractiveShell, shown: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # the ";" is missing on cell line 3 (line 1 is the magic's); EDG reports it at the
    # "}" on line 4, so line 3 is shown too
    res = run(ip, "", "__global__ void f(int* x) {\n  x[0] = 1\n}\n")
    assert isinstance(res.error_in_exec, UsageError)
    err = capsys.readouterr().err
    assert 'cell:4: error: expected a ";"\n  3 |   x[0] = 1\n  4 | }\n    | ^\n' in err


BAD_TRITON = """
import triton
import triton.language as tl

@triton.jit
def scale(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x * tl.not_a_function(x))
"""


def test_triton_error_is_at_the_cell_line(
    ip: InteractiveShell, shown: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # cell lines: 1 the magic, 7 the def, 10 the bad call (Triton itself says "at 4:31")
    res = run(ip, '--signature "*fp32" --constexprs BLOCK=64', BAD_TRITON)
    assert isinstance(res.error_in_exec, UsageError)
    err = capsys.readouterr().err
    assert "cell:10: error: AttributeError: module 'triton.language' has no attribute" in err
    caret = " " * len("    tl.store(x_ptr + offs, x * ") + "^"
    assert "\n   9 |     x = tl.load(x_ptr + offs)\n  10 |     tl.store(" in err
    assert f"\n     | {caret}\n" in err
    assert "at 4:31" not in err


def test_triton_view_says_which_fp_fusion_compiled_it(
    ip: InteractiveShell, shown: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION", raising=False)
    monkeypatch.delenv("TRITON_FORCE_DISABLE_FP_FUSION", raising=False)
    res = run(ip, '--signature "*fp32,*fp32,*fp32,i32" --constexprs BLOCK=256', TRITON)
    assert res.success, res.error_in_exec
    bundle = shown[0]._repr_mimebundle_()
    line = "compiled with: num_warps=4, num_stages=3, fp_fusion=on (Triton&#x27;s default)"
    assert line in bundle["text/html"]
    assert html.unescape(line) in bundle["text/plain"]
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    res = run(ip, '-o --signature "*fp32,*fp32,*fp32,i32" --constexprs BLOCK=256', TRITON)
    assert "fp_fusion=off (TRITON_DEFAULT_FP_FUSION=0)" in res.result.flags


def test_an_empty_cell_points_to_the_line_form(ip: InteractiveShell) -> None:
    # IPython refuses an empty cell-magic body before the magic runs; it suggests %ptx,
    # which prints the help
    res = ip.run_cell("%%ptx --help\n")
    assert isinstance(res.error_in_exec, UsageError)
    assert "Did you mean the line magic %ptx" in str(res.error_in_exec)


TEMPLATED = """template <int K> __global__ void scale(float* x) { x[threadIdx.x * K] *= 2.0f; }
template __global__ void scale<2>(float*);
template __global__ void scale<4>(float*);
"""


def test_kernel_takes_a_quoted_name_with_spaces(ip: InteractiveShell, shown: list[Any]) -> None:
    res = run(ip, '--kernel "void scale<4>(float*)" -v picked', TEMPLATED)
    assert res.success, res.error_in_exec
    text = shown[0]._repr_mimebundle_()["text/plain"]
    assert "kernel void scale<4>(float*)" in text and "kernel void scale<2>" not in text
