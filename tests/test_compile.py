"""Real compilation with the nvcc/nvdisasm wheels and Triton ahead of time (no GPU)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from data_paths import PTX as PTX_DATA

from perflab.analysis.insights import kernel_insights
from perflab.capture.compile import (
    CompileError,
    CudaJob,
    TritonSpec,
    cache_key,
    cache_root,
    check_flags,
    compile_cuda,
    compile_triton,
    located_diagnostics,
    parse_diagnostics,
    source_excerpt,
)
from perflab.errors import InputError, ToolchainError
from perflab.model.arch import parse_arch
from perflab.model.kernel import CompileResult, KernelArtifacts, Resources, SassLine

KERNELS = (PTX_DATA / "kernels.cu").read_text()
SOURCE_LINES = KERNELS.splitlines()

SPILLY = (PTX_DATA / "spilly.cu").read_text()  # spills under -maxrregcount=32

CUB = """
#include <cub/cub.cuh>
__global__ void block_reduce(const int* in, int* out) {
  using Reduce = cub::BlockReduce<int, 128>;
  __shared__ typename Reduce::TempStorage tmp;
  int total = Reduce(tmp).Sum(in[blockIdx.x * 128 + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""


def line_of(text: str) -> int:
    hits = [n for n, line in enumerate(SOURCE_LINES, start=1) if text in line]
    assert len(hits) == 1, hits
    return hits[0]


@pytest.fixture(scope="module")
def kernels() -> CompileResult:
    return compile_cuda(KERNELS, cache=False)


@pytest.fixture(scope="module")
def spilly() -> CompileResult:
    return compile_cuda(SPILLY, flags="-maxrregcount=32", cache=False)


def test_every_kernel_is_found_and_demangled(kernels: CompileResult) -> None:
    names = {k.name.split("(")[0] for k in kernels.kernels}
    assert names == {"copy4", "block_sum", "wmma_tile", "wgmma_tile"}
    k = kernels.kernel("copy4")
    assert k.mangled == "_Z5copy4PK6float4PS_i" and k.arch == "sm_90a"
    assert k.ptx.lstrip().startswith(".visible .entry _Z5copy4PK6float4PS_i")
    assert len(k.ptx_lines_source) == len(k.ptx.splitlines())
    assert kernels.cubin[:4] == b"\x7fELF"


def test_float4_copy_uses_128_bit_loads(kernels: CompileResult) -> None:
    k = kernels.kernel("copy4")
    assert any(op.startswith("LDG.E.128") for op in k.opcodes)
    assert k.instruction_mix["LDG"] == 1
    loads = next(i for i in kernel_insights(k) if i.topic == "global loads")
    assert loads.level == "good" and "128-bit" in loads.text


def test_shared_memory_barrier_and_shuffles(kernels: CompileResult) -> None:
    k = kernels.kernel("block_sum")
    assert k.resources.shared_static == 1024 and k.resources.barriers == 1
    assert k.instruction_mix["SHFL"] == 5 and k.instruction_mix["BAR"] == 1
    bar = [s.line for s in k.sass_lines if s.mnemonic == "BAR"]
    assert bar == [line_of("__syncthreads")]
    topics = {i.topic for i in kernel_insights(k)}
    assert {"barriers", "shuffles"} <= topics


def test_tensor_cores_from_wmma_and_wgmma(kernels: CompileResult) -> None:
    wmma = kernels.kernel("wmma_tile")
    assert "HMMA" in wmma.instruction_mix
    assert {s.line for s in wmma.sass_lines if s.mnemonic == "HMMA"} == {line_of("mma_sync")}
    wgmma = kernels.kernel("wgmma_tile")
    assert "HGMMA" in wgmma.instruction_mix
    tc = kernel_insights(wgmma, source=KERNELS)[0]
    assert tc.level == "good" and "HGMMA" in tc.text


def test_sass_lines_agree_with_ptx_loc(kernels: CompileResult) -> None:
    k = kernels.kernel("block_sum")
    first = k.ptx_span[0]
    checked = 0
    for s in k.sass_lines:
        if s.mnemonic in ("BAR", "SHFL") and s.ptx_line is not None:
            assert k.ptx_lines_source[s.ptx_line - first] == s.line
            checked += 1
    assert checked == 6


def test_forced_spills_are_reported(spilly: CompileResult) -> None:
    k = spilly.kernel("heavy")
    assert k.resources.registers <= 32
    assert k.resources.spill_stores > 0 and k.resources.spill_loads > 0
    assert "STL" in k.instruction_mix and "LDL" in k.instruction_mix
    spills = next(i for i in kernel_insights(k) if i.topic == "spills")
    assert spills.level == "warn" and "spilled" in spills.text
    assert spilly.flags == ["-maxrregcount=32"]


def test_cub_headers_compile() -> None:
    result = compile_cuda(CUB, cache=False)
    k = result.kernel("block_reduce")
    assert k.resources.shared_static > 0
    # sm_90 reduces integers within a warp with REDUX, then across warps through shared memory
    assert {"REDUX", "BAR", "STS", "LDS"} <= set(k.instruction_mix)
    # code inlined from CUB maps to the user's line that called it
    lines = {s.line for s in k.sass_lines if s.mnemonic in ("REDUX", "BAR", "STS", "LDS")}
    assert lines == {6}


def test_compile_error_points_at_the_users_line() -> None:
    source = "__global__ void f(int* x) {\n  int a = 1;\n  x[0] = undefined_name;\n}\n"
    with pytest.raises(CompileError) as info:
        compile_cuda(source, source_name="demo.cu", cache=False)
    errors = [d for d in info.value.diagnostics if d.severity == "error"]
    assert errors and errors[0].file == "demo.cu" and errors[0].line == 3
    assert "undefined_name" in errors[0].message
    assert str(info.value).startswith("nvcc failed:\ndemo.cu:3: error:")


def test_scratch_folders_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a private temp root, so other processes' scratch folders cannot interfere
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(CompileError):
        compile_cuda("__global__ void f() { oops }", cache=False)
    compile_cuda("__global__ void g() {}", cache=False).kernel().sass_lines  # noqa: B018
    assert list(tmp_path.iterdir()) == []


def test_timeout_gives_a_clear_message() -> None:
    with pytest.raises(ToolchainError, match=r"nvcc timed out after 0\.01 s"):
        compile_cuda("__global__ void f() {}", timeout=0.01, cache=False)


@pytest.mark.parametrize(
    "flags",
    [
        "-o /tmp/evil",
        "; rm -rf /",
        "$(touch /tmp/pwned)",
        "--compiler-bindir=/tmp",
        "-ccbin /tmp",
        "-Xptxas -o,/tmp/x",
        "--options-file x",
        "-Xptxas",
        "'unbalanced",
    ],
)
def test_hostile_flags_are_refused_before_anything_runs(flags: str) -> None:
    with pytest.raises(InputError, match="--flags"):
        compile_cuda("__global__ void f() {}", flags=flags, cache=False)


def test_allowed_flags_pass_through() -> None:
    assert check_flags("-DN=4 -I /tmp -Xptxas -v,-warn-spills --use_fast_math") == [
        "-DN=4",
        "-I",
        "/tmp",
        "-Xptxas",
        "-v,-warn-spills",
        "--use_fast_math",
    ]


def test_unsupported_arch_and_std() -> None:
    with pytest.raises(InputError, match="sm_70 is not supported"):
        compile_cuda("__global__ void f() {}", arch="sm_70", cache=False)
    with pytest.raises(InputError, match="std must be one of"):
        compile_cuda("__global__ void f() {}", std="c++98", cache=False)
    with pytest.raises(InputError, match="empty"):
        compile_cuda("  \n", cache=False)


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90", "sm_100a"])
def test_other_architectures(arch: str) -> None:
    result = compile_cuda(
        "__global__ void f(float* x) { x[threadIdx.x] *= 2.f; }", arch=arch, cache=False
    )
    assert result.arch == arch and result.kernel().arch == arch
    assert "STG" in result.kernel().instruction_mix


def test_results_are_cached_on_disk_as_json_and_text() -> None:
    src = "__global__ void cached_kernel(float* x) { x[threadIdx.x] += 1.f; }"
    first = compile_cuda(src)
    sass = first.kernel().sass
    assert not first.cached
    again = compile_cuda(src)
    assert again.cached and again.kernel().sass == sass
    assert again.kernel().resources == first.kernel().resources
    entries = list(cache_root().rglob("*.json"))
    assert entries and all(
        json.loads(p.read_text())["perflab"] == "CompileCacheEntry" for p in entries
    )
    assert list(cache_root().rglob("*.sass"))
    assert not compile_cuda(src, flags="-DX=1").cached  # flags are part of the key


def test_the_job_is_the_cache_key_less_name_and_timeout() -> None:
    src = "__global__ void job_key(float* x) { x[1] = 5.f; }"
    first = compile_cuda(src, source_name="a.cu", timeout=30)
    again = compile_cuda(src, source_name="b.cu", timeout=40)
    assert again.cached and again.source_name == "b.cu"
    job = CudaJob(src, parse_arch("sm_90a"), source_name="a.cu", timeout=30)
    other = dataclasses.replace(job, source_name="b.cu", timeout=40)
    assert cache_key(job.cache_parts()) == cache_key(other.cache_parts())
    assert cache_key(dataclasses.replace(job, std="c++20").cache_parts()) != cache_key(
        job.cache_parts()
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.std = "c++20"  # type: ignore[misc]
    assert first.kernel().sass == again.kernel().sass


def test_defer_sass_runs_the_loader_once_and_keeps_known_sass() -> None:
    calls: list[int] = []
    line = SassLine(0, "EXIT", "EXIT")

    def loader() -> list[SassLine]:
        calls.append(1)
        return [line]

    kernel = KernelArtifacts("k", "k", "sm_90a", ".entry k", (1, 1), [None], Resources())
    kernel.defer_sass(loader)
    assert calls == []  # nothing disassembled until SASS is asked for
    assert kernel.sass_lines == [line] and kernel.sass_lines == [line] and calls == [1]
    kernel.defer_sass(lambda: [])  # known SASS is not replaced
    assert kernel.sass_lines == [line]


def test_corrupt_cache_entry_is_recompiled() -> None:
    src = "__global__ void corrupt_me(float* x) { x[0] = 3.f; }"
    compile_cuda(src)
    for path in cache_root().rglob("*.json"):
        if "corrupt_me" in path.read_text():
            path.write_text("{not json")
    result = compile_cuda(src)
    assert not result.cached and result.kernel().name == "corrupt_me(float*)"


def test_save_and_load_round_trip(kernels: CompileResult, tmp_path: Path) -> None:
    path = kernels.save(tmp_path / "k.json")
    loaded = CompileResult.load(path)
    assert loaded.cubin == kernels.cubin
    for a, b in zip(loaded.kernels, kernels.kernels, strict=True):
        assert a.sass_lines == b.sass_lines and a.resources == b.resources
        assert a.opcodes == b.opcodes


def test_source_excerpt_shows_the_line_before_and_a_caret() -> None:
    lines = ["int a = 1", "\tx = 2;", "}"]
    assert source_excerpt(lines, 2, 1) == "\n  1 | int a = 1\n  2 | \tx = 2;\n    | \t^"
    assert source_excerpt(lines, 1, None) == "\n  1 | int a = 1"  # no line before the first
    assert source_excerpt(lines, 4, 0) == "" and source_excerpt(lines, None, 0) == ""
    assert source_excerpt(lines, 3, 99) == "\n  2 | \tx = 2;\n  3 | }"  # no such column
    assert source_excerpt([""] * 9 + ["x"], 10, 0).endswith("\n  10 | x\n     | ^")


def test_columns_come_from_edg_carets_and_gcc_positions() -> None:
    log = (
        'cell.cu(4): error: expected a ";"\n'
        "    x[0] = nope + 1;\n"
        "    ^\n"
        "\n"
        'cell.cu(2): warning #177-D: variable "a" was declared but never referenced\n'
        "cell.cu:7:12: error: oops\n"
    )
    found = located_diagnostics(log, {"cell.cu": "k.cu"})
    assert [(d.file, d.line, column) for d, column in found] == [
        ("k.cu", 4, 2),
        ("k.cu", 2, None),
        ("k.cu", 7, 11),
    ]


def test_compile_error_message_has_the_excerpt() -> None:
    source = "__global__ void f(int* x) {\n  int a = 1\n  x[0] = a;\n}\n"
    with pytest.raises(CompileError) as info:
        compile_cuda(source, source_name="demo.cu", cache=False)
    assert str(info.value) == (
        'nvcc failed:\ndemo.cu:3: error: expected a ";"\n'
        "  2 |   int a = 1\n  3 |   x[0] = a;\n    |   ^"
    )
    assert info.value.details == str(info.value).split("\n", 1)[1]


def test_parse_diagnostics_formats() -> None:
    log = (
        '/tmp/x/cell.cu(7): error: expected a ";"\n'
        'cell.cu(2): warning #177-D: variable "y" was declared but never referenced\n'
        "/tmp/x/cell.cu:4:10: fatal error: cub/nope.cuh: No such file or directory\n"
        "ptxas error   : Entry function 'k' uses too much shared data\n"
        "random noise\n"
    )
    diags = parse_diagnostics(log, {"/tmp/x/cell.cu": "cell", "cell.cu": "cell"})
    assert [(d.file, d.line, d.severity) for d in diags] == [
        ("cell", 7, "error"),
        ("cell", 2, "warning"),
        ("cell", 4, "error"),
        ("ptxas", None, "error"),
    ]
    assert "nvidia-cuda-cccl" in diags[2].message


# ---- Triton ---------------------------------------------------------------------------

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def matmul_tile(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)


DOT_LINE = matmul_tile.fn.__code__.co_firstlineno + 7  # the "c = tl.dot(a, b)" line


@pytest.fixture(scope="module")
def tdot() -> CompileResult:
    return compile_triton(
        matmul_tile,
        signature=["*fp16", "*fp16", "*fp32"],
        constexprs={"BM": 64, "BN": 64, "BK": 32},
        cache=False,
    )


def test_triton_dot_on_sm90a_uses_hgmma(tdot: CompileResult) -> None:
    k = tdot.kernel()
    assert tdot.lang == "triton" and k.name == "matmul_tile" and tdot.arch == "sm_90a"
    assert "HGMMA" in k.instruction_mix
    assert {s.line for s in k.sass_lines if s.mnemonic == "HGMMA"} == {DOT_LINE}
    assert Path(__file__).read_text().splitlines()[DOT_LINE - 1].strip() == "c = tl.dot(a, b)"
    assert {"ttir", "ttgir", "llir"} <= set(tdot.stages)
    assert k.resources.registers > 0 and k.resources.shared_dynamic > 0


def test_triton_spec_and_signature_forms(tdot: CompileResult) -> None:
    spec = TritonSpec(
        matmul_tile,
        signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
        constexprs={"BM": 64, "BN": 64, "BK": 32},
    )
    again = spec.compile(arch="sm_90a")
    assert again.kernel().opcodes == tdot.kernel().opcodes


@pytest.mark.parametrize(
    ("signature", "constexprs", "message"),
    [
        (["*fp16"], {"BM": 64, "BN": 64, "BK": 32}, "signature has 1 types"),
        (["*fp16"] * 3, {"BX": 1}, "not parameters"),
        ({"a_ptr": "*fp16"}, {"BM": 64, "BN": 64, "BK": 32}, "missing"),
    ],
)
def test_triton_bad_specs(signature: object, constexprs: dict[str, int], message: str) -> None:
    with pytest.raises(InputError, match=message):
        compile_triton(
            matmul_tile,
            signature=signature,
            constexprs=constexprs,  # type: ignore[arg-type]
            cache=False,
        )


def test_triton_compile_error_is_a_perflab_error() -> None:
    # BK=8 is below tl.dot's minimum of 16
    with pytest.raises(CompileError, match="triton failed"):
        compile_triton(
            matmul_tile,
            signature=["*fp16", "*fp16", "*fp32"],
            constexprs={"BM": 64, "BN": 64, "BK": 8},
            cache=False,
        )


def test_a_plain_function_is_not_compiled_as_triton() -> None:
    with pytest.raises(InputError, match=r"needs a @triton\.jit function, not function"):
        compile_triton(lambda x: x, signature=["*fp32"], cache=False)


INTERPRETED = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import triton, triton.language as tl
from perflab.capture.compile import compile_triton
from perflab.errors import InputError

@triton.jit
def copy(x_ptr, B: tl.constexpr):
    i = tl.arange(0, B)
    tl.store(x_ptr + i, tl.load(x_ptr + i))

try:
    compile_triton(copy, signature=["*fp32"], constexprs={"B": 16}, cache=False)
except InputError as exc:
    print("refused:", exc)
"""


def test_a_kernel_under_triton_interpret_is_refused_with_the_reason() -> None:
    # TRITON_INTERPRET acts when the kernel is defined, so it is set in a process of its own
    done = subprocess.run(
        [sys.executable, "-c", INTERPRETED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: copy is run by Triton's interpreter (TRITON_INTERPRET is set)" in done.stdout


@triton.jit
def missing_helper(x):
    return x * tl.no_such_function(x)


@triton.jit
def calls_missing(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, missing_helper(x))


def test_triton_errors_are_at_file_lines_innermost_first() -> None:
    helper_line = missing_helper.fn.__code__.co_firstlineno + 2  # the "return" line
    call_line = calls_missing.fn.__code__.co_firstlineno + 4  # the tl.store line
    with pytest.raises(CompileError) as info:
        compile_triton(calls_missing, signature=["*fp32"], constexprs={"BLOCK": 64}, cache=False)
    diags = info.value.diagnostics
    assert [(d.file, d.line, d.severity) for d in diags] == [
        ("test_compile.py", helper_line, "error"),
        ("test_compile.py", call_line, "note"),
    ]
    assert diags[0].message.startswith("AttributeError: module 'triton.language' has no")
    message = str(info.value)
    assert f"\n  {helper_line} |     return x * tl.no_such_function(x)\n" in message
    assert "\n" + " " * (len(str(helper_line)) + 3) + "|" + " " * 16 + "^\n" in message


def test_triton_fp_fusion_warning_is_hidden_and_the_setting_kept(tmp_path: Path) -> None:
    """In a fresh process (Triton warns once per process): no warning on stderr, even
    with warnings shown as errors would be, and the result says what fusion was used."""
    script = (
        "import sys, warnings, triton, triton.language as tl\n"
        "from perflab.capture.compile import compile_triton\n"
        "@triton.jit\n"
        "def k(x_ptr, BLOCK: tl.constexpr):\n"
        "    o = tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + o, tl.load(x_ptr + o) * 2.0 + 1.0)\n"
        "r = compile_triton(k, signature=['*fp32'], constexprs={'BLOCK': 64}, cache=False)\n"
        "print(r.flags[-1])\n"
    )
    (tmp_path / "k.py").write_text(script)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRITON_DEFAULT_FP_FUSION", "TRITON_FORCE_DISABLE_FP_FUSION")
    }
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    done = subprocess.run(
        [sys.executable, "-W", "always", str(tmp_path / "k.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fp_fusion=on (Triton's default)"
    assert "FP_FUSION" not in done.stderr


def test_ptxas_line_errors_are_shown() -> None:
    # wgmma exists only on sm_90a: ptxas refuses it on sm_90 with a per-line PTX message
    source = (
        '__global__ void f() {\n  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");\n}\n'
    )
    with pytest.raises(CompileError) as info:
        compile_cuda(source, arch="sm_90", cache=False)
    message = str(info.value)
    assert "wgmma.fence" in message and "sm_90" in message
    ptx_errors = [d for d in info.value.diagnostics if d.file.endswith(".ptx")]
    assert ptx_errors and ptx_errors[0].line is not None
    assert "/tmp/" not in message  # scratch paths are not shown


# ---- the scheduler's view: control bits and live registers, cached and saved -------------


def _entry_files(source: str) -> tuple[Path, list[Path]]:
    """The cache entry (JSON) of ``source``, and the files beside it (a Triton entry's
    source is this whole file, which holds every CUDA source here too)."""
    (entry,) = [
        p
        for p in cache_root().rglob("*.json")
        if json.loads(p.read_text())["result"]["source"] == source
    ]
    return entry, sorted(entry.parent.glob(entry.stem + ".*"))


def test_control_and_live_registers_are_cached_beside_the_entry() -> None:
    src = "__global__ void cached_controls(float* x) { x[threadIdx.x] *= 3.f; }"
    first = compile_cuda(src).kernel()
    assert all(
        s.control is not None and s.live is not None
        for s in first.sass_lines
        if s.mnemonic == "STG"
    )
    entry, files = _entry_files(src)
    assert {p.name.removeprefix(entry.stem) for p in files} == {".json", ".hex.sass", ".live.txt"}
    again = compile_cuda(src)
    assert again.cached and again.kernel().sass_lines == first.sass_lines


def test_an_entry_cached_before_the_controls_gets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry written by an earlier perflab has '<key>.sass' without encodings and no
    live registers: it still loads, and its SASS is disassembled again from the cubin."""
    src = "__global__ void old_entry(float* x) { x[threadIdx.x] += 2.f; }"
    compile_cuda(src).kernel().sass_lines  # noqa: B018
    entry, files = _entry_files(src)
    for path in files:
        if path != entry:
            path.unlink()
    old = entry.with_suffix(".sass")
    old.write_text("        /*0000*/                   EXIT ;\n")  # the old format, plain
    result = compile_cuda(src)
    assert result.cached
    stores = [s for s in result.kernel().sass_lines if s.mnemonic == "STG"]
    assert stores and all(s.control is not None and s.live is not None for s in stores)
    assert old.read_text() == "        /*0000*/                   EXIT ;\n"  # left alone


def test_sass_without_live_registers_when_that_run_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import perflab.capture.compile_cache as compile_module

    def refuse(cubin: bytes, *, timeout: float) -> str:
        raise ToolchainError("nvdisasm failed: no life ranges here")

    monkeypatch.setattr(compile_module, "live_ranges", refuse)
    kernel = compile_cuda("__global__ void no_live(float* x) { x[0] = 1.f; }", cache=False).kernel()
    instructions = [s for s in kernel.sass_lines if not s.is_label]
    assert instructions and all(s.control is not None and s.live is None for s in instructions)


def test_controls_survive_save_and_load(kernels: CompileResult, tmp_path: Path) -> None:
    loaded = CompileResult.load(kernels.save(tmp_path / "k.json"))
    for a, b in zip(loaded.kernels, kernels.kernels, strict=True):
        assert [s.control for s in a.sass_lines] == [s.control for s in b.sass_lines]
        assert [s.live for s in a.sass_lines] == [s.live for s in b.sass_lines]
        assert any(s.control is not None for s in a.sass_lines)


def test_a_result_saved_without_controls_loads(kernels: CompileResult) -> None:
    doc = kernels.to_dict()
    for k in doc["kernels"]:
        for s in k["sass_lines"]:
            del s["control"], s["live_registers"]
    loaded = CompileResult.from_dict(doc)
    assert all(s.control is None and s.live is None for s in loaded.kernel().sass_lines)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stall", 16),
        ("stall", -1),
        ("stall", 1.5),
        ("yield", 1),
        ("write_barrier", 7),
        ("read_barrier", "2"),
        ("wait_mask", 64),
        ("reuse", 16),
        ("live_registers", {"gpr": 256}),
        ("live_registers", {"gpr": True}),
        ("live_registers", {"spare": 1}),
        ("live_registers", [1, 2]),
    ],
)
def test_a_tampered_control_or_live_count_is_refused(
    kernels: CompileResult, field: str, value: object
) -> None:
    from perflab.errors import SchemaError

    doc = kernels.to_dict()
    line = next(s for s in doc["kernels"][0]["sass_lines"] if s["control"] is not None)
    if field == "live_registers":
        line["live_registers"] = value
    else:
        line["control"][field] = value
    with pytest.raises(SchemaError, match="malformed compile result"):
        CompileResult.from_dict(doc)
