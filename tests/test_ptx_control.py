"""Scheduling control bits of real cubins (nvcc and nvdisasm from the wheels, no GPU),
checked against a reference decoder written here with plain shifts from the published
layout (Jia et al. 2018, section 2.2; CuAssembler), not against perflab's own code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from data_paths import PTX as PTX_DATA

from perflab.analysis.opcodes import SOURCE, opcode_info
from perflab.analysis.sass import parse_sass
from perflab.analysis.sass_control import (
    barrier_links,
    decode_control,
    falls_through,
    layout_known,
    schedule,
)
from perflab.capture import toolchain
from perflab.capture.compile import compile_cuda
from perflab.errors import InputError
from perflab.model.kernel import CompileResult, Control, KernelArtifacts, SassLine

KERNELS = """__global__ void load_use(const float* a, float* b, float x) {
  int i = threadIdx.x;
  float v = a[i];
  float p = x * 2.0f + 1.0f;
  float q = x * 3.0f + 2.0f;
  b[i] = v * p + q;
}
__global__ void fmas(float* o, float a, float b, float c, float d) {
  float x = a * b + c, y = b * c + d, z = c * d + a, w = d * a + b;
  o[threadIdx.x] = x + y + z + w;
}
__global__ void shared_loop(const float* a, float* o, int n) {
  __shared__ float s[256];
  float acc = 0;
  for (int k = 0; k < n; k += 256) {
    s[threadIdx.x] = a[k + threadIdx.x];
    __syncthreads();
    for (int j = 0; j < 256; ++j) acc += s[j];
    __syncthreads();
  }
  o[threadIdx.x] = acc;
}
"""
WMMA = (PTX_DATA / "kernels.cu").read_text()  # wmma and wgmma (sm_90a)
# every target nvcc 13 accepts (Volta's sm_70/72 left CUDA 13; nvdisasm 13 reads none older)
TARGETS = (
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_88",
    "sm_89",
    "sm_90",
    "sm_90a",
    "sm_100",
    "sm_100a",
    "sm_100f",
    "sm_103",
    "sm_110",
    "sm_120",
    "sm_121",
)
_HEX_LINE = re.compile(r"/\*([0-9a-f]{4})\*/\s*(.*?)\s*;?\s*/\* 0x([0-9a-f]{16}) \*/")
_HIGH_LINE = re.compile(r"^\s*/\* 0x([0-9a-f]{16}) \*/\s*$")


def reference(high: int) -> dict[str, int]:
    """The published layout: the top 23 bits of the 128-bit instruction."""
    code = high >> 41
    return {
        "stall": code & 0xF,
        "yield_bit": (code >> 4) & 1,
        "write": (code >> 5) & 7,
        "read": (code >> 8) & 7,
        "wait": (code >> 11) & 0x3F,
        "reuse": (code >> 17) & 0xF,
        "top": code >> 21,
    }


def hex_words(cubin: bytes, tmp: Path) -> dict[str, list[tuple[int, str, int]]]:
    """``nvdisasm -c -hex``, read here: function -> (offset, text, high word)."""
    (tmp / "k.cubin").write_bytes(cubin)
    nvdisasm = toolchain.require_tool("nvdisasm").path
    out = subprocess.run(
        [str(nvdisasm), "-c", "-hex", "k.cubin"],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    found: dict[str, list[tuple[int, str, int]]] = {}
    function, pending = "", None
    for line in out.splitlines():
        if m := re.match(r"//-+ \.text\.(\S+)", line):
            function = m.group(1)
            found[function] = []
        elif m := _HEX_LINE.search(line):
            pending = (int(m.group(1), 16), m.group(2))
        elif (m := _HIGH_LINE.match(line)) and pending:
            found[function].append((*pending, int(m.group(1), 16)))
            pending = None
    return found


def controls(kernel: KernelArtifacts) -> dict[int, Control]:
    return {s.offset: s.control for s in kernel.sass_lines if s.offset is not None and s.control}


@pytest.fixture(scope="module")
def sm90() -> CompileResult:
    return compile_cuda(KERNELS, arch="sm_90a", cache=False)


def by_text(kernel: KernelArtifacts, opcode: str) -> list[SassLine]:
    return [s for s in kernel.sass_lines if s.opcode.startswith(opcode)]


@pytest.mark.slow
@pytest.mark.parametrize("arch", TARGETS)
def test_decode_matches_the_published_layout_on_every_target(arch: str, tmp_path: Path) -> None:
    result = compile_cuda(KERNELS, arch=arch, cache=False)
    words = hex_words(result.cubin, tmp_path)
    assert {k.mangled for k in result.kernels} == set(words)
    for kernel in result.kernels:
        decoded = controls(kernel)
        listed = words[kernel.mangled]
        assert len(decoded) == len(listed) > 10
        for offset, text, high in listed:
            ref, got = reference(high), decoded[offset]
            assert got.stall == ref["stall"] <= 15
            assert got.yields == (ref["yield_bit"] == 0)
            for field, key in (("write_barrier", "write"), ("read_barrier", "read")):
                value = getattr(got, field)
                assert value == (None if ref[key] == 7 else ref[key])
                assert value is None or 0 <= value <= 5, (arch, text)
            assert (got.wait_mask, got.reuse, ref["top"]) == (ref["wait"], ref["reuse"], 0)
            # nvdisasm marks each operand kept for reuse: one mark per reuse bit
            assert bin(got.reuse).count("1") == text.count(".reuse"), (arch, text)
            # the reuse cache survives only while the warp keeps issuing: never with a yield
            assert not (got.reuse and got.yields), (arch, text)


def test_a_global_load_sets_a_barrier_its_first_use_waits_on(sm90: CompileResult) -> None:
    kernel = sm90.kernel("load_use")
    (load,) = by_text(kernel, "LDG")
    assert load.control is not None and load.control.write_barrier is not None
    loaded = load.text.split()[1].rstrip(",")  # LDG.E R2, desc[...]: R2
    after = [s for s in kernel.sass_lines if s.offset and s.offset > (load.offset or 0)]
    first_use = next(s for s in after if re.search(rf"\b{loaded}\b", s.text.split(None, 1)[1]))
    assert first_use.control is not None
    assert load.control.write_barrier in first_use.control.waits_on
    links = barrier_links(kernel.sass_lines)
    assert load.offset in links.waits_for[first_use.offset or 0]
    assert first_use.offset in links.waited_by[load.offset or 0]
    # nothing between them waits on the load
    between = [s for s in after if (s.offset or 0) < (first_use.offset or 0)]
    assert all(load.offset not in links.waits_for.get(s.offset or 0, ()) for s in between)


def test_back_to_back_independent_fmas_do_not_wait(sm90: CompileResult) -> None:
    kernel = sm90.kernel("fmas")
    lines = [s for s in kernel.sass_lines if not s.is_label]
    fmas = [i for i, s in enumerate(lines) if s.mnemonic == "FFMA"]
    assert len(fmas) == 4
    # after the first (which waits for the parameters from the constant bank), none waits
    for i in fmas[1:]:
        previous = lines[i - 1]
        control = lines[i].control
        assert control is not None and control.wait_mask == 0
        assert previous.control is not None and previous.control.write_barrier is None


def test_a_shared_memory_loop_with_syncthreads(sm90: CompileResult) -> None:
    kernel = sm90.kernel("shared_loop")
    links = barrier_links(kernel.sass_lines)
    stores, loads = by_text(kernel, "STS"), by_text(kernel, "LDS")
    assert stores and loads and by_text(kernel, "BAR.SYNC")
    # the store's source register may not be overwritten before it is read: a read barrier
    (store,) = stores
    assert store.control is not None and store.control.read_barrier is not None
    # shared loads are variable-latency: each sets a write barrier that an FADD waits on
    offsets = {s.offset: s for s in kernel.sass_lines if s.offset is not None}
    for load in loads:
        assert load.control is not None and load.control.write_barrier is not None
        waiters = [offsets[o] for o in links.waited_by.get(load.offset or 0, ())]
        assert any(w.mnemonic in ("FADD", "LDS") for w in waiters), load.text
    plan = schedule(kernel.sass_lines)
    assert plan is not None and len(plan.blocks) >= 3
    assert plan.stall_cycles == sum(
        s.control.stall for s in kernel.sass_lines if s.control and s.mnemonic != "NOP"
    )
    assert plan.long_waits >= 1  # the loop's LDG is waited on by the store to shared memory


def test_the_wait_rule_stops_at_an_unconditional_branch() -> None:
    def line(offset: int, text: str, control: Control) -> SassLine:
        return SassLine(
            offset,
            text,
            text.split()[-1] if text.startswith("@") else text.split()[0],
            control=control,
        )

    none = Control(1, False, None, None, 0, 0)
    sets0 = Control(1, False, 0, None, 0, 0)
    waits0 = Control(1, False, None, None, 0b1, 0)
    lines = [
        line(0x00, "LDG.E R2, [R4.64]", sets0),
        line(0x10, "@P0 BRA `(.L_x_1)", none),  # conditional: falls through
        line(0x20, "FADD R3, R2, R2", waits0),
        SassLine(None, ".L_x_9:"),  # a label: fall-through goes on across it
        line(0x30, "FADD R5, R2, R2", waits0),
        line(0x40, "BRA `(.L_x_2)", none),  # unconditional: the path ends
        SassLine(None, ".L_x_1:"),
        line(0x50, "FADD R6, R2, R2", waits0),
    ]
    assert [falls_through(s) for s in lines if not s.is_label] == [True] * 4 + [False, True]
    links = barrier_links(lines)
    # 0x30 waits on barrier 0 again, set by nothing since 0x20's wait: it waits for nothing
    assert links.waits_for == {0x20: (0x00,)}
    assert links.waited_by == {0x00: (0x20,)}
    assert links.unresolved == {0x50: (0,)}


def test_a_wait_covers_every_instruction_that_set_its_barrier_since_the_last_wait() -> None:
    """A barrier counts its outstanding setters: two loads on barrier 3, one FFMA waiting
    on it, waits for both (the H200-era compiler puts a pair of loads on one barrier)."""
    sets3 = Control(1, False, 3, None, 0, 0)
    waits3 = Control(1, False, None, None, 0b1000, 0)
    lines = [
        SassLine(0x00, "LDG.E R2, [R4.64]", "LDG", control=sets3),
        SassLine(0x10, "LDG.E R3, [R6.64]", "LDG", control=sets3),
        SassLine(0x20, "FFMA R8, R2, R3, R8", "FFMA", control=waits3),
        SassLine(0x30, "LDG.E R2, [R4.64+0x4]", "LDG", control=sets3),
        SassLine(0x40, "FFMA R8, R2, R3, R8", "FFMA", control=waits3),
    ]
    links = barrier_links(lines)
    assert links.waits_for == {0x20: (0x00, 0x10), 0x40: (0x30,)}
    assert links.waited_by == {0x00: (0x20,), 0x10: (0x20,), 0x30: (0x40,)}
    assert links.unresolved == {}


@pytest.mark.parametrize(
    ("text", "falls"),
    [
        ("EXIT", False),
        ("@P0 EXIT", True),
        ("@PT BRA `(.L_x_3)", False),
        ("BRA.U !UP0, `(.L_x_1)", True),
        ("BRA.DIV UR4, `(.L_x_2)", True),
        ("RET.REL.NODEC R20 `(_Z4heavyPKfPf)", False),
        ("CALL.REL.NOINC `(__internal_0)", True),
    ],
)
def test_falls_through(text: str, falls: bool) -> None:
    body = text.split(None, 1)[1] if text.startswith("@") else text
    assert falls_through(SassLine(0, text, body.split()[0])) is falls


def test_pre_volta_is_not_decoded() -> None:
    assert not layout_known("sm_61") and not layout_known("sm_52") and not layout_known("bogus")
    assert layout_known("sm_70") and layout_known("sm_100a")
    text = (
        "\t.target\tsm_61\n//--------------------- .text.k --------------------------\n"
        "        /*0008*/                   MOV R1, c[0x0][0x20] ;   /* 0x4c98078000870001 */\n"
        "        /*0010*/                   EXIT ;                   /* 0xe30000000007000f */\n"
    )
    (lines,) = parse_sass(text).values()
    assert [s.text for s in lines] == ["MOV R1, c[0x0][0x20]", "EXIT"]
    assert all(s.control is None for s in lines)
    assert schedule(lines) is None


def test_decode_refuses_a_word_wider_than_64_bits() -> None:
    with pytest.raises(InputError, match="64 bits"):
        decode_control(1 << 64)
    assert decode_control(0x000FC00000000000) == Control(0, True, None, None, 0, 0)  # NOP pad


MISC = """__global__ void misc(const double* d, const float* f, const int* x, double* od,
                     float* of, int* ox, unsigned* ou) {
  int t = threadIdx.x;
  double a = d[t], b = d[t + 32];
  od[t] = a * b + a;
  float p = f[t], q = f[t + 32];
  of[t] = p / q; of[t + 32] = rintf(p); of[t + 64] = (float)x[t]; of[t + 96] = __expf(p);
  int v = x[t];
  ox[t] = __clz(v) + __popc(v) + __brev(v) + (int)q;
  ou[t] = __match_any_sync(~0u, v) + __reduce_add_sync(~0u, v) + __shfl_xor_sync(~0u, v, 1);
  int r = atomicAdd(&ox[t + 96], 1);
  __shared__ int s[64];
  atomicAdd(&s[t % 64], r);
  __syncthreads();
  ox[t + 160] = s[t % 64];
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_120"])
def test_opcodes_that_set_a_write_barrier_are_never_fixed_latency(arch: str) -> None:
    """ptxas gives a write barrier only to variable-latency instructions: the opcode table
    must agree wherever it does (and know every such opcode)."""
    source = MISC + KERNELS + (WMMA if arch == "sm_90a" else "")
    setters: set[str] = set()
    for kernel in compile_cuda(source, arch=arch, cache=False).kernels:
        for s in kernel.sass_lines:
            if s.control is not None and s.control.write_barrier is not None:
                info = opcode_info(s.opcode)
                assert info.documented and info.latency in ("variable", "long"), (arch, s.text)
                setters.add(s.mnemonic)
    assert {"LDG", "LDS", "MUFU", "SHFL", "S2R"} <= setters


def test_opcode_help() -> None:
    assert opcode_info("LDG.E.128.CONSTANT").latency == "long"
    assert opcode_info("FFMA").latency == "fixed" and "multiply-add" in opcode_info("FFMA").summary
    assert opcode_info("UIADD3").unit == "uniform datapath"
    assert "three" in opcode_info("UIADD3").summary
    unknown = opcode_info("FROBNICATE.X")
    assert not unknown.documented and str(unknown) == "FROBNICATE: undocumented"
    assert "CUDA Binary Utilities" in SOURCE


def _text_sections(cubin: bytes) -> dict[str, bytes]:
    """``.text.<function>`` sections of an ELF64 cubin, read with plain struct offsets."""
    import struct

    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]

    def name(offset: int) -> str:
        start = names_at + offset
        return cubin[start : cubin.index(b"\0", start)].decode()

    return {
        name(h[0]).removeprefix(".text."): cubin[h[4] : h[4] + h[5]]
        for h in headers
        if name(h[0]).startswith(".text.")
    }


def test_volta_cubins_keep_the_layout(tmp_path: Path) -> None:
    """sm_70 left CUDA 13 and its nvdisasm, but Triton's ptxas (CUDA 12) still builds it:
    the words read straight from the cubin decode to sane controls that link up."""
    triton = pytest.importorskip("triton")
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.is_file():
        pytest.skip("Triton's ptxas is not installed")
    ptx = compile_cuda(KERNELS, arch="sm_75", cache=False).ptx
    ptx = re.sub(r"^\.version .*$", ".version 8.0", ptx, flags=re.MULTILINE)
    (tmp_path / "k.ptx").write_text(re.sub(r"^\.target sm_75", ".target sm_70", ptx, flags=re.M))
    done = subprocess.run(
        [str(ptxas), "--gpu-name=sm_70", "k.ptx", "-o", "k.cubin"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        pytest.skip(f"this ptxas does not build sm_70: {done.stderr[-300:]}")
    sections = _text_sections((tmp_path / "k.cubin").read_bytes())
    assert set(sections) == {"_Z8load_usePKfPff", "_Z4fmasPfffff", "_Z11shared_loopPKfPfi"}
    for name, code in sections.items():
        lines = []
        for offset in range(0, len(code), 16):
            high = int.from_bytes(code[offset + 8 : offset + 16], "little")
            ref, got = reference(high), decode_control(high)
            assert got.stall == ref["stall"] and ref["top"] == 0
            assert got.yields == (ref["yield_bit"] == 0) and not (got.reuse and got.yields)
            assert got.write_barrier is None or 0 <= got.write_barrier <= 5
            assert got.read_barrier is None or 0 <= got.read_barrier <= 5
            lines.append(SassLine(offset, "X", "X", control=got))
        links = barrier_links(lines)
        assert links.waits_for, name  # loads set barriers that later instructions wait on
        if name == "_Z8load_usePKfPff":  # straight-line code: every wait finds its setter
            assert not links.unresolved
