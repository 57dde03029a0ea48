"""Golden and fuzz tests of the PTX/SASS/ptxas parsers on samples in tests/data/ptx/."""

from __future__ import annotations

import pytest
from data_paths import PTX as PTX_DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perflab.analysis.ptx import line_kind, parse_files, parse_ptx
from perflab.analysis.sass import (
    opcode_of,
    parse_disassembly,
    parse_live_registers,
    parse_ptxas_resources,
    parse_res_usage,
    parse_sass,
)
from perflab.errors import PerflabError

PTX = (PTX_DATA / "kernels.ptx").read_text()
SASS = (PTX_DATA / "kernels.sass").read_text()
HEX_SASS = (PTX_DATA / "kernels.hex.sass").read_text()  # the same build, with -hex
LIVE = (PTX_DATA / "kernels.live.txt").read_text()  # nvdisasm -c -lrm count of that build
SOURCE = (PTX_DATA / "kernels.cu").read_text().splitlines()
USER = parse_files(PTX)[1]  # the scratch path nvcc saw for kernels.cu
ENTRIES = {
    "_Z5copy4PK6float4PS_i",
    "_Z9block_sumPKfPf",
    "_Z9wmma_tilePK6__halfS1_Pf",
    "_Z10wgmma_tilePfyy",
}


def line_of(text: str) -> int:
    """1-based line of the only source line containing ``text``."""
    hits = [n for n, line in enumerate(SOURCE, start=1) if text in line]
    assert len(hits) == 1, hits
    return hits[0]


def test_ptx_entries_and_files() -> None:
    module = parse_ptx(PTX, user_files={USER})
    assert set(module.entries) == ENTRIES
    assert USER.endswith("/cell.cu")
    for first, last in module.entries.values():
        assert module.lines[first - 1].text.lstrip().startswith(".visible .entry")
        assert module.lines[last - 1].text.strip() == "}"


def test_ptx_loc_maps_instructions_to_source_lines() -> None:
    module = parse_ptx(PTX, user_files={USER})
    body = module.entry_lines("_Z9block_sumPKfPf")
    bar = [pl for pl in body if pl.text.strip().startswith("bar.sync")]
    assert [pl.source_line for pl in bar] == [line_of("__syncthreads")]
    # shfl comes from a CUDA header, inlined at the user's line
    shfl = [pl for pl in body if "shfl.sync" in pl.text]
    assert shfl and {pl.source_line for pl in shfl} == {line_of("__shfl_down_sync")}
    assert all(pl.source_line is None for pl in body if pl.kind != "instruction")


# Triton's tl.sum: reduce (standard.py:287) inlined into sum (standard.py:314), itself
# inlined at the user's line 7; the inner frame's inlined_at names only standard.py
NESTED_PTX = """\t.file\t1 "/tmp/k.py"
\t.file\t2 "/site-packages/triton/language/standard.py"
.visible .entry k(
)
{
\t.loc\t1 7 28
\tld.global.f32 \t%r1, [%rd1];
\t.loc\t2 314 12, function_name $L__info_string0, inlined_at 1 7 28
\tshfl.sync.bfly.b32 \t%r2, %r1, 16, 31, -1;
\t.loc\t2 287 12, function_name $L__info_string0, inlined_at 2 314 12
\tadd.f32 \t%r3, %r1, %r2;
\t.loc\t2 287 12, function_name $L__info_string0, inlined_at 2 999 1
\tadd.f32 \t%r4, %r3, %r3;
\t.loc\t1 8 5
\tst.global.f32 \t[%rd1], %r3;
}
"""


def test_ptx_code_inlined_twice_maps_to_the_users_line() -> None:
    module = parse_ptx(NESTED_PTX, user_files={"/tmp/k.py"})
    found = [
        (pl.text.split()[0], pl.source_line) for pl in module.lines if pl.kind == "instruction"
    ]
    # the last add's frame (standard.py:999) was never seen inlined in the user's file
    assert found == [
        ("ld.global.f32", 7),
        ("shfl.sync.bfly.b32", 7),
        ("add.f32", 7),
        ("add.f32", None),
        ("st.global.f32", 8),
    ]


def test_ptx_without_user_files_uses_every_file() -> None:
    # header lines are kept as they are when no user file is named
    lines = {pl.source_line for pl in parse_ptx(PTX).lines if "shfl.sync" in pl.text}
    assert line_of("__shfl_down_sync") not in lines


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("\t.reg .b32 %r<5>;", "directive"),
        ("$L__BB0_2:", "label"),
        ("\tret;", "instruction"),
        ("\t// comment", "comment"),
        ("", "blank"),
        ("}", "directive"),
        ("\t@%p1 bra $L__BB0_2;", "instruction"),
    ],
)
def test_line_kinds(text: str, kind: str) -> None:
    assert line_kind(text) == kind


def test_sass_golden() -> None:
    functions = parse_sass(SASS, user_files={USER})
    assert set(functions) == ENTRIES
    copy = functions["_Z5copy4PK6float4PS_i"]
    assert [s.opcode for s in copy if s.mnemonic == "LDG"] == ["LDG.E.128.CONSTANT"]
    assert [s.opcode for s in copy if s.mnemonic == "STG"] == ["STG.E.128"]
    assert copy[0].offset == 0 and all(s.offset is None or s.offset % 16 == 0 for s in copy)
    assert any(s.is_label for s in copy)
    block = functions["_Z9block_sumPKfPf"]
    assert {s.line for s in block if s.mnemonic == "BAR"} == {line_of("__syncthreads")}
    # inlined from sm_30_intrinsics.hpp: mapped to the user's call
    assert {s.line for s in block if s.mnemonic == "SHFL"} == {line_of("__shfl_down_sync")}
    assert len([s for s in block if s.mnemonic == "SHFL"]) == 5
    wmma = functions["_Z9wmma_tilePK6__halfS1_Pf"]
    assert {s.line for s in wmma if s.mnemonic == "HMMA"} == {line_of("wmma::mma_sync")}
    wgmma = functions["_Z10wgmma_tilePfyy"]
    assert [s.opcode for s in wgmma if s.mnemonic == "HGMMA"] == ["HGMMA.64x8x16.F32"]


def test_sass_ptx_lines_point_at_matching_ptx() -> None:
    ptx_lines = PTX.splitlines()
    functions = parse_sass(SASS, user_files={USER})
    load = next(s for s in functions["_Z5copy4PK6float4PS_i"] if s.mnemonic == "LDG")
    assert load.ptx_line is not None
    assert "ld.global" in ptx_lines[load.ptx_line - 1]
    bar = next(s for s in functions["_Z9block_sumPKfPf"] if s.mnemonic == "BAR")
    assert "bar.sync" in ptx_lines[bar.ptx_line - 1]  # type: ignore[operator]


def test_ptxas_and_res_usage_golden() -> None:
    res = parse_ptxas_resources((PTX_DATA / "ptxas.log").read_text())
    assert set(res) == ENTRIES
    assert res["_Z9block_sumPKfPf"].shared_static == 1024
    assert res["_Z9block_sumPKfPf"].barriers == 1
    assert res["_Z5copy4PK6float4PS_i"].registers == 14
    assert not any(r.spills for r in res.values())
    usage = parse_res_usage((PTX_DATA / "res_usage.txt").read_text())
    assert set(usage) == ENTRIES
    assert usage["_Z5copy4PK6float4PS_i"]["REG"] == 14
    assert usage["_Z5copy4PK6float4PS_i"]["CONSTANT[0]"] > 0


def test_ptxas_spill_report() -> None:
    log = (
        "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90a'\n"
        "ptxas info    : Function properties for _Z1kPf\n"
        "    952 bytes stack frame, 1904 bytes spill stores, 1940 bytes spill loads\n"
        "ptxas info    : Used 32 registers, used 0 barriers, 952 bytes cumulative stack size,"
        " 360 bytes cmem[0]\n"
    )
    r = parse_ptxas_resources(log)["_Z1kPf"]
    assert (r.registers, r.stack, r.spill_stores, r.spill_loads, r.constant) == (
        32,
        952,
        1904,
        1940,
        360,
    )


def test_encodings_change_nothing_but_add_the_controls() -> None:
    plain = parse_sass(SASS, user_files={USER})
    encoded = parse_sass(HEX_SASS, user_files={USER})
    assert set(plain) == set(encoded) == ENTRIES
    for name, lines in plain.items():
        assert [(s.offset, s.text, s.line, s.ptx_line) for s in lines] == [
            (s.offset, s.text, s.line, s.ptx_line) for s in encoded[name]
        ]
        assert all(s.control is None for s in lines)
        assert all(s.control is not None for s in encoded[name] if not s.is_label)


def test_hex_golden_controls_by_hand() -> None:
    # copy4's 128-bit load and the store that waits on it, read off the sample by hand:
    # LDG high word 0x000ea2000c1e9d00, STG high word 0x004fe2000c101d04
    copy = parse_sass(HEX_SASS, user_files={USER})["_Z5copy4PK6float4PS_i"]
    load = next(s for s in copy if s.mnemonic == "LDG")
    store = next(s for s in copy if s.mnemonic == "STG")
    assert load.control is not None and store.control is not None
    assert (load.control.stall, load.control.write_barrier, load.control.read_barrier) == (
        1,
        2,
        None,
    )
    assert store.control.waits_on == (2,)


def test_live_registers_golden() -> None:
    live = parse_live_registers(LIVE)
    assert set(live) == ENTRIES
    lines = parse_disassembly(HEX_SASS, LIVE, user_files={USER})
    for name, found in lines.items():
        instructions = [s for s in found if not s.is_label and s.mnemonic != "NOP"]
        assert all(s.live is not None for s in instructions), name  # padding has none
        assert max(s.live.gpr for s in instructions if s.live) <= 255
    copy = lines["_Z5copy4PK6float4PS_i"]
    assert copy[0].live is not None and copy[0].live.gpr == 1  # LDC R1: the stack pointer
    load = next(s for s in copy if s.mnemonic == "LDG")
    assert load.live is not None and load.live.gpr >= 4  # the float4 it loads, and more
    registers = parse_ptxas_resources((PTX_DATA / "ptxas.log").read_text())
    for name, found in lines.items():  # never more live than ptxas allocated
        peak = max(s.live.gpr for s in found if s.live)
        assert peak <= registers[name].registers, name


def test_live_rows_that_do_not_fit_their_header_are_left_out() -> None:
    text = (
        "//--------------------- .text.k --------------------------\n"
        "   // | GPR   | PRED   |\n"
        "        /*0000*/   LDC R1, c[0x0][0x28] ;   // |   1   |        |\n"
        "        /*0010*/   EXIT ;                   // |   1   |        |    |\n"
        "        /*0020*/   EXIT ;                   // |  999  |        |\n"
        "        /*0030*/   EXIT ;                   // |   x   |   2    |\n"
    )
    assert list(parse_live_registers(text)["k"]) == [0]


@pytest.mark.parametrize(
    ("text", "opcode"),
    [
        ("@!P0 LDG.E.128 R4, desc[UR6][R2.64]", "LDG.E.128"),
        ("EXIT", "EXIT"),
        ("@P1 BRA `(.L_x_1)", "BRA"),
        ("", ""),
    ],
)
def test_opcode_of(text: str, opcode: str) -> None:
    assert opcode_of(text) == opcode


# ---- fuzz: mutated samples give results or perflab errors, never anything else ----------

_PTX_LINES = PTX.splitlines()
_SASS_LINES = SASS.splitlines()
_HEX_LINES = HEX_SASS.splitlines()
_LIVE_LINES = LIVE.splitlines()


def _mutate(lines: list[str], data: st.DataObject) -> str:
    out = list(lines)
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["drop", "dup", "cut", "junk", "swap"]))
        i = data.draw(st.integers(0, len(out) - 1))
        if op == "drop":
            del out[i]
        elif op == "dup":
            out.insert(i, out[i])
        elif op == "cut":
            out[i] = out[i][: data.draw(st.integers(0, len(out[i])))]
        elif op == "junk":
            out[i] = data.draw(st.text(max_size=40))
        else:
            j = data.draw(st.integers(0, len(out) - 1))
            out[i], out[j] = out[j], out[i]
        if not out:
            out = [""]
    return "\n".join(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_ptx_parser_survives_mutation(data: st.DataObject) -> None:
    text = _mutate(_PTX_LINES, data)
    try:
        module = parse_ptx(text, user_files={USER})
    except PerflabError:
        return
    assert len(module.lines) == len(text.splitlines())
    for first, last in module.entries.values():
        assert 1 <= first <= last <= len(module.lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_sass_parser_survives_mutation(data: st.DataObject) -> None:
    text = _mutate(_SASS_LINES, data)
    try:
        functions = parse_sass(text, user_files={USER})
        parse_ptxas_resources(text)
        parse_res_usage(text)
    except PerflabError:
        return
    for lines in functions.values():
        assert all(s.offset is None or s.offset >= 0 for s in lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_encoded_sass_and_live_registers_survive_mutation(data: st.DataObject) -> None:
    code, live = _mutate(_HEX_LINES, data), _mutate(_LIVE_LINES, data)
    try:
        functions = parse_disassembly(code, live, user_files={USER})
    except PerflabError:
        return
    for lines in functions.values():
        for s in lines:
            if s.control is not None:
                assert 0 <= s.control.stall <= 15 and 0 <= s.control.wait_mask < 64
            if s.live is not None:
                assert 0 <= s.live.gpr <= 255


@given(st.text(max_size=300))
def test_parsers_take_any_text(text: str) -> None:
    parse_ptx(text)
    parse_sass(text)
    parse_live_registers(text)
    parse_ptxas_resources(text)
    parse_res_usage(text)


def test_non_text_is_a_perflab_error() -> None:
    with pytest.raises(PerflabError, match="must be text"):
        parse_ptx(b"\x00")  # type: ignore[arg-type]
    with pytest.raises(PerflabError, match="must be text"):
        parse_sass(None)  # type: ignore[arg-type]
