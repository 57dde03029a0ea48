"""Register pressure from the live-register counts nvdisasm gives (``-lrm count``), and the
spills it explains: each spill store and reload with its source line, the pressure there
and, where the evidence supports one, a cause in plain words.

Spills are the instructions nvdisasm marks ``(*"SpillRefill"*)``; where a disassembler
does not mark them and ptxas reported spills, every STL/LDL counts. The cause is read from
what limited the registers: a cap stated in the kernel's PTX (``.maxnreg``, from
``__maxnreg__``), the ``-maxrregcount`` flag, a cap worked out from ``__launch_bounds__``
(``.maxntid`` and ``.minnctapersm``: that many threads must fit the register file; ptxas'
exact rule is not published, so this cause is marked a heuristic), or the architecture's
255 registers per thread. ptxas does not say why it spilled; every cause here is an
inference from those limits and the live-register peak, and says so when it is a guess.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from perflab.model.arch import KB
from perflab.model.kernel import KernelArtifacts, SassLine

MAX_REGISTERS = 255  # per thread, every architecture from sm_70 on (CUDA C++ Programming Guide)
REGISTER_FILE = 64 * KB  # 32-bit registers per SM and per block, sm_70 to sm_121 (idem)
PER_THREAD_STEP = 8  # registers are given to a thread in steps of 8 (256 per warp)
WARP = 32
_FLAG_CAP_RE = re.compile(r"-?-maxrregcount[= ]?(\d+)")
_MAXNREG_RE = re.compile(r"^\s*\.maxnreg\s+(\d+)", re.MULTILINE)
_MAXNTID_RE = re.compile(r"^\s*\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.MULTILINE)
_MINNCTA_RE = re.compile(r"^\s*\.minnctapersm\s+(\d+)", re.MULTILINE)
_GUARD_RE = re.compile(r"^@!?U?P[0-6]\s")
_ALWAYS_RE = re.compile(r"^@U?PT\s+")  # the true predicate: no condition
_GPR_RE = re.compile(r"\bR(\d+)\b")
_PAIR_RE = re.compile(r"\bR(\d+)\.64\b")
# opcodes whose first operand is read, not written (stores, reductions, control flow)
_NO_DESTINATION = ("ST", "RED", "BRA", "BRX", "EXIT", "RET", "CALL", "JMP", "BSSY", "BSYNC")


@dataclass(frozen=True)
class RegisterCap:
    """A limit on registers per thread and where it comes from."""

    registers: int
    source: str  # "-maxrregcount=32", "__launch_bounds__(256, 4)", "__maxnreg__ (.maxnreg 64)"
    heuristic: bool  # worked out by perflab rather than stated


@dataclass(frozen=True)
class Pressure:
    """Live general registers per instruction (``points``: offset, count) and the peak."""

    points: tuple[tuple[int, int], ...]
    peak: int
    peak_offsets: tuple[int, ...]
    peak_lines: tuple[int, ...]  # the user's source lines of the peak instructions
    allocated: int  # registers per thread ptxas allocated
    # live before the first instruction: nvdisasm counts a register written only under a
    # condition (a predicate, one side of a branch) and read later as live from the entry
    entry: int = 0

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.PressureView` declares."""
        from perflab.analysis.json_views import PressureView
        from perflab.model.schema import encode, view

        return encode(view(self, PressureView))


@dataclass(frozen=True)
class Spill:
    offset: int
    text: str
    kind: str  # "store" (STL) or "load" (LDL)
    line: int | None
    live: int | None  # general registers live at it

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self)


@dataclass(frozen=True)
class Spills:
    """A kernel's spill instructions and why it spilled (``cause``: plain words)."""

    spills: tuple[Spill, ...]
    cause: str
    heuristic: bool  # the cause is a guess from the evidence, not read off a limit
    cap: RegisterCap | None
    marked: bool  # nvdisasm marked them; False: every STL/LDL, as ptxas reported spills

    def by_line(self) -> list[tuple[int | None, int, int, int | None]]:
        """(source line, stores, loads, most registers live) per line, most spills first."""
        stores = Counter(s.line for s in self.spills if s.kind == "store")
        loads = Counter(s.line for s in self.spills if s.kind == "load")
        rows = []
        for line in {*stores, *loads}:
            lives = [s.live for s in self.spills if s.line == line and s.live is not None]
            rows.append((line, stores[line], loads[line], max(lives, default=None)))
        return sorted(rows, key=lambda r: (-(r[1] + r[2]), r[0] is None, r[0] or 0))

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.SpillsView` declares."""
        from perflab.analysis.json_views import SpillsView
        from perflab.model.schema import encode, view

        return encode(view(self, SpillsView))


def pressure(kernel: KernelArtifacts) -> Pressure | None:
    """The kernel's live-register curve, or None without live-register counts."""
    points = tuple(
        (s.offset, s.live.gpr) for s in kernel.sass_lines if s.offset is not None and s.live
    )
    if not points:
        return None
    peak = max(n for _, n in points)
    offsets = tuple(o for o, n in points if n == peak)
    lines = {s.offset: s.line for s in kernel.sass_lines if s.offset is not None}
    peak_lines = tuple(sorted({n for o in offsets if (n := lines.get(o)) is not None}))
    first = next(s for s in kernel.sass_lines if s.offset is not None and s.live)
    entry = max(points[0][1] - len(written_only(first)), 0)
    return Pressure(points, peak, offsets, peak_lines, kernel.resources.registers, entry)


def written_only(line: SassLine) -> set[int]:
    """The general registers ``line`` writes without reading them. nvdisasm counts them
    live at ``line`` itself, so the first instruction's count less these is what was live
    before it (``LDC R1, c[0x0][0x28]``, the stack pointer, writes R1). A write under a
    predicate keeps the old value where the predicate is false: none."""
    text = _ALWAYS_RE.sub("", line.text.strip()).rstrip(" ;")
    if _GUARD_RE.match(text):
        return set()
    opcode, _, operands = text.partition(" ")
    target, _, sources = operands.partition(",")
    found = _GPR_RE.fullmatch(target.strip())
    if found is None or opcode.startswith(_NO_DESTINATION):
        return set()
    width = 4 if ".128" in opcode else 2 if ".64" in opcode else 1
    written = set(range(int(found.group(1)), int(found.group(1)) + width))
    pairs = _PAIR_RE.findall(sources)  # R6.64: an address in R6 and R7
    read = {int(n) for n in _GPR_RE.findall(sources)} | {int(n) + 1 for n in pairs}
    return written - read


def register_cap(kernel: KernelArtifacts, flags: Sequence[str]) -> RegisterCap | None:
    """The tightest limit on ``kernel``'s registers per thread that perflab can see."""
    ptx = kernel.ptx
    if m := _MAXNREG_RE.search(ptx):
        return RegisterCap(int(m.group(1)), f"__maxnreg__ (.maxnreg {m.group(1)})", False)
    found: list[RegisterCap] = []
    if m := _FLAG_CAP_RE.search(" ".join(flags)):
        found.append(RegisterCap(int(m.group(1)), f"-maxrregcount={m.group(1)}", False))
    bounds = _launch_bounds_cap(ptx)
    if bounds is not None:
        found.append(bounds)
    return min(found, key=lambda c: c.registers) if found else None


def _launch_bounds_cap(ptx: str) -> RegisterCap | None:
    """``__launch_bounds__(T, B)``: B blocks of T threads must fit the register file."""
    threads_m = _MAXNTID_RE.search(ptx)
    if threads_m is None:
        return None
    threads = 1
    for part in threads_m.groups():
        threads *= int(part) if part else 1
    blocks_m = _MINNCTA_RE.search(ptx)
    blocks = max(int(blocks_m.group(1)), 1) if blocks_m else 1
    warps = -(-max(threads, 1) // WARP)
    per_thread = REGISTER_FILE // (blocks * warps * WARP) // PER_THREAD_STEP * PER_THREAD_STEP
    cap = min(per_thread, MAX_REGISTERS)
    if cap >= MAX_REGISTERS:
        return None  # no tighter than the architecture's own limit
    return RegisterCap(
        cap, f"__launch_bounds__({threads}{f', {blocks}' if blocks_m else ''})", True
    )


def _kind(line: SassLine) -> str | None:
    return {"STL": "store", "LDL": "load"}.get(line.mnemonic)


def spills(kernel: KernelArtifacts, flags: Sequence[str] = ()) -> Spills | None:
    """The kernel's spill traffic and its likely cause; None when ptxas reported none."""
    marked = [s for s in kernel.sass_lines if s.is_spill and _kind(s)]
    if not kernel.resources.spills and not marked:
        return None
    chosen = marked or [s for s in kernel.sass_lines if _kind(s)]
    found = tuple(
        Spill(s.offset or 0, s.text, _kind(s) or "", s.line, s.live.gpr if s.live else None)
        for s in chosen
    )
    cap = register_cap(kernel, flags)
    cause, heuristic = _cause(kernel, cap, pressure(kernel))
    return Spills(found, cause, heuristic, cap, bool(marked))


def _peak_words(curve: Pressure | None) -> str:
    if curve is None:
        return "live registers unknown"
    where = ", ".join(f"line {n}" for n in curve.peak_lines[:3]) or "no source line"
    return f"up to {curve.peak} live at once ({where})"


def _cause(
    kernel: KernelArtifacts, cap: RegisterCap | None, curve: Pressure | None
) -> tuple[str, bool]:
    used = kernel.resources.registers
    peak = _peak_words(curve)
    if cap is not None and used >= cap.registers - PER_THREAD_STEP:
        allows = (
            f"leaves about {cap.registers} registers per thread (the register file shared "
            "by that many threads: a heuristic, ptxas' rule is not published)"
            if cap.heuristic
            else f"allows {cap.registers} registers per thread"
        )
        return (
            f"the register cap: {cap.source} {allows}; the kernel uses {used}, {peak}, and "
            "what does not fit goes to local memory",
            cap.heuristic,
        )
    if used >= MAX_REGISTERS:
        return (
            f"the architecture's limit of {MAX_REGISTERS} registers per thread, {peak}",
            False,
        )
    return (
        f"no register cap found and {used} registers used, {peak}: perhaps a per-thread "
        "array indexed at run time or a call (a heuristic guess)",
        True,
    )
