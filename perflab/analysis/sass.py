"""``nvdisasm -g -gi -gp -c -hex`` output -> per-function SASS lines with source and PTX
lines and scheduling controls; ``nvdisasm -lrm count`` output -> live registers.

nvdisasm prints location comments only when a location changes, so the last one seen
applies to every instruction after it::

    //## File "/tmp/cell.cu", line 10 inlined at "/tmp/cell.cu", line 13
    //## File ".nv_debug_ptx_txt", line 152
        /*0050*/                   LDG.E R2, desc[UR6][R2.64] ;

With ``-gi`` a comment carries the inlining chain, innermost frame first. The source line
kept is the innermost frame in one of the user's files, so code inlined from a CUDA header
maps to the user's line that called it. ``.nv_debug_ptx_txt`` lines (``-gp``, present
when ptxas ran with ``-lineinfo``) are lines of the module's PTX.

With ``-hex`` each instruction is followed by its encoding, the low 64-bit word at the end
of its line and the high word alone on the next; the high word's control bits are decoded
by :mod:`perflab.analysis.sass_control` for the targets whose layout is known (the
``.target`` line at the top says which).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping

from perflab.analysis.ptx import is_user_file
from perflab.analysis.sass_control import decode_control, layout_known
from perflab.errors import InputError
from perflab.model.kernel import LiveRegisters, Resources, SassLine

PTX_FILE = ".nv_debug_ptx_txt"
_SECTION_RE = re.compile(r"^//-+\s+\.text\.(\S+)\s+-+\s*$")
_OTHER_SECTION_RE = re.compile(r"^//-+\s+(\S+)\s+-+\s*$")
_LOCATION_RE = re.compile(r"^\s*//##\s*File\s+(.*)$")
_FRAME_RE = re.compile(r'"((?:[^"\\]|\\.)*)",\s*line\s+(\d+)')
_INSTRUCTION_RE = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s*(.*?)\s*;?\s*(?:/\*.*\*/)?\s*$")
_HIGH_WORD_RE = re.compile(r"^\s*/\*\s*0x([0-9a-fA-F]{16})\s*\*/\s*$")
_TARGET_RE = re.compile(r"^\s*\.target\s+(\w+)")
_ANNOTATION_GAP_RE = re.compile(r"\s{2,}(?=\(\*)")  # the padding before (*"SpillRefill"*)
_LABEL_RE = re.compile(r"^\s*([\w$.]+):\s*$")


def opcode_of(text: str) -> str:
    """``"@!P0 LDG.E.128 R4, [R2]"`` -> ``"LDG.E.128"``."""
    tokens = text.replace("{", " ").split()
    if tokens and tokens[0].startswith("@"):
        tokens = tokens[1:]
    return tokens[0] if tokens else ""


def _frames(comment: str) -> list[tuple[str, int]]:
    return [(path, int(line)) for path, line in _FRAME_RE.findall(comment)]


class _Location:
    """The running (source line, PTX line) state while reading one function."""

    def __init__(self, user_files: Collection[str] | None) -> None:
        self.user_files = user_files
        self.source: int | None = None
        self.ptx: int | None = None
        self._decided = False  # a comment of this block named a user line

    def note(self, comment: str) -> None:
        frames = _frames(comment)
        if not frames:
            return
        if frames[0][0] == PTX_FILE:
            self.ptx = frames[0][1]
            return
        if self._decided:  # the first comment of a block with a user frame decides
            return
        user = [line for path, line in frames if line > 0 and is_user_file(path, self.user_files)]
        self.source = user[0] if user else None
        self._decided = bool(user)

    def end_block(self) -> None:
        self._decided = False


def parse_sass(
    text: str, *, user_files: Collection[str] | None = None
) -> dict[str, list[SassLine]]:
    """Function (mangled name) -> its instructions and labels, in address order, with
    their control bits where the text has encodings (``-hex``) for a known layout."""
    if not isinstance(text, str):
        raise InputError(f"SASS must be text, not {type(text).__name__}")
    functions: dict[str, list[SassLine]] = {}
    current: list[SassLine] | None = None
    name = ""
    where = _Location(user_files)
    decode = False
    awaiting_high = False  # the last line was an instruction whose high word comes next
    for raw in text.splitlines():
        if awaiting_high:
            awaiting_high = False
            high = _HIGH_WORD_RE.match(raw)
            if high and current:
                control = decode_control(int(high.group(1), 16))
                current[-1] = dataclasses.replace(current[-1], control=control)
                continue
        if target := _TARGET_RE.match(raw):
            decode = layout_known(target.group(1))
            continue
        section = _SECTION_RE.match(raw)
        if section:
            name = section.group(1)
            current = functions.setdefault(name, [])
            where = _Location(user_files)
            continue
        if current is None:
            continue
        if _OTHER_SECTION_RE.match(raw):
            current = None
            continue
        location = _LOCATION_RE.match(raw)
        if location:
            where.note(location.group(1))
            continue
        instruction = _INSTRUCTION_RE.match(raw)
        if instruction:
            body = _ANNOTATION_GAP_RE.sub(" ", instruction.group(2).strip())
            current.append(
                SassLine(
                    int(instruction.group(1), 16), body, opcode_of(body), where.source, where.ptx
                )
            )
            awaiting_high = decode
            where.end_block()
            continue
        label = _LABEL_RE.match(raw)
        if label and label.group(1) not in (name, f".text.{name}"):
            current.append(SassLine(None, f"{label.group(1)}:"))
    return functions


# ---- live registers: ``nvdisasm -lrm count`` --------------------------------------------

_LIVE_TABLE_RE = re.compile(r"//\s*\|(.*)\|\s*$")
_LIVE_COLUMNS = {"GPR": "gpr", "PRED": "pred", "UGPR": "ugpr", "UPRED": "upred"}


def _cells(raw: str) -> list[str] | None:
    table = _LIVE_TABLE_RE.search(raw)
    return [c.strip() for c in table.group(1).split("|")] if table else None


def _live_counts(columns: list[str], cells: list[str]) -> LiveRegisters | None:
    """One instruction's counts; None when the row does not fit the header."""
    if len(cells) != len(columns):
        return None
    counts: dict[str, int] = {}
    for column, cell in zip(columns, cells, strict=True):
        if not cell:
            continue
        if not cell.isdigit() or int(cell) > 255:
            return None
        if column in _LIVE_COLUMNS:
            counts[_LIVE_COLUMNS[column]] = int(cell)
    return LiveRegisters(**counts)


def parse_live_registers(text: str) -> dict[str, dict[int, LiveRegisters]]:
    """``nvdisasm -lrm count`` (``--print-life-ranges`` with counts only) -> function ->
    instruction offset -> registers live there. Each function's table header names its
    columns (GPR, PRED, UGPR, UPRED: only those the function uses); a row that does not
    fit its header is left out."""
    if not isinstance(text, str):
        raise InputError(f"live-range text must be str, not {type(text).__name__}")
    found: dict[str, dict[int, LiveRegisters]] = {}
    current: dict[int, LiveRegisters] | None = None
    columns: list[str] = []
    for raw in text.splitlines():
        section = _SECTION_RE.match(raw)
        if section:
            current = found.setdefault(section.group(1), {})
            columns = []
            continue
        if current is None:
            continue
        cells = _cells(raw)
        instruction = _INSTRUCTION_RE.match(raw.split("//", 1)[0])
        if cells is None:
            continue
        if not columns and any(c in _LIVE_COLUMNS for c in cells):
            columns = cells
        elif instruction and columns:
            counts = _live_counts(columns, cells)
            if counts is not None:
                current[int(instruction.group(1), 16)] = counts
    return found


def with_live_registers(
    functions: Mapping[str, list[SassLine]], live: Mapping[str, Mapping[int, LiveRegisters]]
) -> dict[str, list[SassLine]]:
    """``functions`` with each instruction's live registers from ``live`` (where known)."""
    merged = {}
    for name, lines in functions.items():
        counts = live.get(name, {})
        merged[name] = [
            dataclasses.replace(s, live=counts[s.offset])
            if s.offset is not None and s.offset in counts
            else s
            for s in lines
        ]
    return merged


def parse_disassembly(
    sass: str, live: str | None = None, *, user_files: Collection[str] | None = None
) -> dict[str, list[SassLine]]:
    """:func:`parse_sass` of ``sass`` with live registers from ``live`` when given."""
    functions = parse_sass(sass, user_files=user_files)
    if live is None:
        return functions
    return with_live_registers(functions, parse_live_registers(live))


# ---- resources: ``ptxas -v`` and ``cuobjdump -res-usage`` ---------------------------------

_COMPILING_RE = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES_RE = re.compile(r"Function properties for (\S+)")
_FRAME_STATS_RE = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_USED_RE = re.compile(r"Used (\d+) registers")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_CMEM_RE = re.compile(r"(\d+) bytes cmem\[0\]")
_RES_FUNCTION_RE = re.compile(r"^\s*Function (\S+):\s*$")
_RES_FIELD_RE = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")


def parse_ptxas_resources(log: str) -> dict[str, Resources]:
    """``ptxas -v`` output -> kernel (mangled) -> Resources (entries only)."""
    found: dict[str, Resources] = {}
    frames: dict[str, tuple[int, int, int]] = {}
    entry: str | None = None
    properties: str | None = None
    for line in log.splitlines():
        if m := _COMPILING_RE.search(line):
            entry = m.group(1)
            found.setdefault(entry, Resources())
        elif m := _PROPERTIES_RE.search(line):
            properties = m.group(1)
        elif (m := _FRAME_STATS_RE.search(line)) and properties is not None:
            frames[properties] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED_RE.search(line)) and entry is not None:
            r = found[entry]
            r.registers = int(m.group(1))
            r.barriers = _int(_BARRIERS_RE, line)
            r.shared_static = _int(_SMEM_RE, line)
            r.constant = _int(_CMEM_RE, line) or r.constant
    for name, r in found.items():
        r.stack, r.spill_stores, r.spill_loads = frames.get(name, (0, 0, 0))
    return found


def _int(pattern: re.Pattern[str], text: str) -> int:
    m = pattern.search(text)
    return int(m.group(1)) if m else 0


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage`` -> function -> {"REG": 12, "STACK": 0, "SHARED": ...,
    "CONSTANT[0]": 544, ...}."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in text.splitlines():
        if m := _RES_FUNCTION_RE.match(line):
            current = m.group(1)
            found[current] = {}
        elif current is not None and line.strip():
            found[current].update((k, int(v)) for k, v in _RES_FIELD_RE.findall(line))
    return found
