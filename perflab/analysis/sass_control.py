"""The scheduler's view of Volta-and-later SASS: each instruction's control bits, which
earlier instructions it waits for, and static stall totals per basic block.

Since Volta (sm_70) every instruction is 128 bits wide and carries its scheduling
control in the top bits, 105-127. ``nvdisasm -hex`` prints each instruction as two
64-bit words, low word first, so the control is the high word shifted right by 41:

======  =====  =============================================================
bits    field  meaning
======  =====  =============================================================
0-3     stall  cycles to wait before the warp's next instruction issues
4       yield  clear: the scheduler is hinted to switch warps after this one
5-7     W      scoreboard barrier set when the result is written (7: none)
8-10    R      scoreboard barrier set once the sources are read (7: none)
11-16   wait   barriers (bit b: barrier b) to wait for before issuing
17-20   reuse  source operands (bit 0: the first, ``a``) kept in the reuse cache
======  =====  =============================================================

The layout is the one Jia, Maggioni, Staiger and Scarpazza give for Volta
("Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018, section
2.2) and CuAssembler decodes for sm_70 to sm_86 (``CuSMVersion.splitControlCodes_7x_8x``
and its ``decodeCtrlCodes``). The yield bit's sense is inverted against its name: set
means "stay on this warp", and CuAssembler shows ``Y`` when it is clear. Checked on
cubins from nvcc 13 for every target from sm_75 to sm_121 (tests/test_ptx_control.py):
the operands nvdisasm marks ``.reuse`` are exactly the reuse bits, an instruction that
keeps operands for reuse never has its yield bit clear (the cache survives only while the
warp keeps issuing), a global load sets a write barrier that its first use waits on,
and barriers are 0-5 or none.

Before Volta, control codes sat in a separate 64-bit word per three instructions; that
layout is not decoded here: such SASS gets no control (see :func:`layout_known`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from perflab.analysis.opcodes import latency_of
from perflab.errors import InputError
from perflab.model.arch import parse_arch
from perflab.model.kernel import Control, SassLine

FIRST_CC = 70  # Volta: the first architecture with 128-bit instructions
CONTROL_SHIFT = 41  # bit 105 of the instruction is bit 41 of its high word
NO_BARRIER = 7
# branches and ends: an instruction after one of these starts a new basic block
BLOCK_ENDS = frozenset({"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "KILL"})
# of those, the ones after which execution never continues with the next instruction
# (unless predicated or conditional: see falls_through)
NO_FALL_THROUGH = frozenset({"BRA", "BRX", "JMP", "JMX", "RET", "EXIT", "KILL"})
HIGH_WORD_BITS = 64
_TARGET_RE = re.compile(r"`\(([^)`]+)\)")


def layout_known(arch: str) -> bool:
    """True for sm_70 and later (the layout above); pre-Volta SASS is not decoded."""
    try:
        return parse_arch(arch).cc >= FIRST_CC
    except InputError:
        return False


def decode_control(high: int) -> Control:
    """The control bits of an instruction whose high 64-bit word is ``high``."""
    if not 0 <= high < 1 << HIGH_WORD_BITS:
        raise InputError(f"an instruction's high word must be 64 bits, not {high:#x}")
    bits = high >> CONTROL_SHIFT
    write, read = bits >> 5 & 7, bits >> 8 & 7
    return Control(
        stall=bits & 0xF,
        yields=not bits >> 4 & 1,
        write_barrier=None if write == NO_BARRIER else write,
        read_barrier=None if read == NO_BARRIER else read,
        wait_mask=bits >> 11 & 0x3F,
        reuse=bits >> 17 & 0xF,
    )


def _operands(line: SassLine) -> str:
    body = line.text.split(None, 1)
    if line.predicated:
        body = body[1].split(None, 1) if len(body) > 1 else []
    return body[1] if len(body) > 1 else ""


def falls_through(line: SassLine) -> bool:
    """Whether execution may continue with the next instruction after ``line``: not after
    an unconditional branch, jump, return or exit. A guarded one (``@P0 BRA``, but not
    ``@PT``) and a branch with a condition operand (``BRA.U !UP0, target``,
    ``BRA.DIV UR4, target``) may fall through."""
    if line.mnemonic not in NO_FALL_THROUGH:
        return True
    if line.predicated and not line.text.startswith("@PT "):
        return True
    return line.mnemonic == "BRA" and "," in _operands(line)


@dataclass(frozen=True)
class BarrierLinks:
    """Which instructions wait for which (byte offsets). ``waits_for[o]``: the earlier
    instructions whose barriers instruction ``o`` waits on; ``waited_by`` the inverse;
    ``unresolved[o]``: barriers ``o`` waits on that no instruction on its fall-through
    path sets (set before a branch to it, or in an earlier iteration of a loop)."""

    waits_for: Mapping[int, tuple[int, ...]]
    waited_by: Mapping[int, tuple[int, ...]]
    unresolved: Mapping[int, tuple[int, ...]]


def barrier_links(lines: Sequence[SassLine]) -> BarrierLinks:
    """For each instruction, the instructions that set the barriers it waits on.

    A dependency barrier is a counter: each instruction that sets it adds one, and a wait
    on it lasts until every one of them has finished. So an instruction waits for every
    earlier instruction that set one of its barriers since the last wait on that barrier
    (two loads on barrier 3, then one FFMA waiting on it: the FFMA waits for both), in
    program order, looking back through the instruction's basic block and on through any
    fall-through into it, but not past an instruction that cannot fall through (an
    unconditional branch, jump, return or exit). A barrier already waited on here and not
    set since is clear: a second wait on it waits for nothing. Branch targets are not
    followed: a barrier set only on another path into a block (a loop's back edge, a jump)
    is listed in ``unresolved``. This is a static reading of the code, not a trace.
    """
    pending: dict[int, list[int]] = {}  # barrier -> offsets that set it since its last wait
    cleared: set[int] = set()  # barriers waited on since they were last set
    waits_for: dict[int, tuple[int, ...]] = {}
    waited_by: dict[int, list[int]] = {}
    unresolved: dict[int, tuple[int, ...]] = {}
    for line in lines:
        if line.offset is None or line.control is None:
            continue
        waits = line.control.waits_on
        found = [setter for b in waits for setter in pending.get(b, ())]
        missing = tuple(b for b in waits if not pending.get(b) and b not in cleared)
        if found:
            waits_for[line.offset] = tuple(sorted(dict.fromkeys(found)))
            for setter in waits_for[line.offset]:
                waited_by.setdefault(setter, []).append(line.offset)
        if missing:
            unresolved[line.offset] = missing
        for barrier in waits:
            pending.pop(barrier, None)
            cleared.add(barrier)
        for barrier in line.control.sets:
            pending.setdefault(barrier, []).append(line.offset)
            cleared.discard(barrier)
        if not falls_through(line):
            pending.clear()
            cleared.clear()
    return BarrierLinks(waits_for, {k: tuple(v) for k, v in waited_by.items()}, unresolved)


@dataclass(frozen=True)
class BasicBlock:
    """A straight run of instructions: entered at its first, left after its last.
    ``stall_cycles`` sums the stall counts: a static lower bound on the cycles one warp
    spends issuing it (waits on barriers, other warps and cache misses come on top)."""

    start: int  # offset of the first instruction
    end: int  # offset of the last instruction
    label: str | None  # the label it starts at, if any
    instructions: int
    stall_cycles: int
    long_waits: int  # waits on barriers set by long-latency instructions (global memory...)
    lines: tuple[int, ...]  # the user's source lines its instructions come from

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self)


@dataclass(frozen=True)
class Schedule:
    """The control bits of a kernel, read together: barrier links and basic blocks."""

    links: BarrierLinks
    blocks: tuple[BasicBlock, ...]
    long_setters: frozenset[int] = field(default_factory=frozenset)  # offsets

    @property
    def stall_cycles(self) -> int:
        """Sum over basic blocks (each block once: loops are not unrolled)."""
        return sum(b.stall_cycles for b in self.blocks)

    @property
    def long_waits(self) -> int:
        return sum(b.long_waits for b in self.blocks)

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.ScheduleView` declares."""
        from perflab.analysis.json_views import ScheduleView
        from perflab.model.schema import encode, view

        return encode(view(self, ScheduleView))


def _is_padding(line: SassLine) -> bool:
    return line.mnemonic == "NOP"


def _is_end_trap(body: Sequence[SassLine], label: str | None) -> bool:
    """The ``BRA`` to itself that ptxas puts after a function's last EXIT."""
    return (
        len(body) == 1
        and body[0].mnemonic == "BRA"
        and label is not None
        and _TARGET_RE.findall(body[0].text) == [label]
    )


def _branch_targets(lines: Sequence[SassLine]) -> set[str]:
    """The labels some instruction names as a target (```(.L_x_3)``)."""
    return {f"{name}:" for s in lines if not s.is_label for name in _TARGET_RE.findall(s.text)}


def _blocks(lines: Sequence[SassLine], targets: set[str]) -> list[list[SassLine]]:
    """Labels and lines, cut into basic blocks: a label that some instruction branches to
    opens one (nvdisasm also labels spill stores, which no branch names); a branch ends
    one."""
    blocks: list[list[SassLine]] = [[]]
    for line in lines:
        opens = line.is_label and line.text in targets
        if opens and any(not s.is_label for s in blocks[-1]):
            blocks.append([])
        blocks[-1].append(line)
        if not line.is_label and line.mnemonic in BLOCK_ENDS:
            blocks.append([])
    return [b for b in blocks if any(not s.is_label for s in b)]


def schedule(lines: Sequence[SassLine]) -> Schedule | None:
    """The schedule of a kernel's SASS, or None when its control bits are not known."""
    instructions = [s for s in lines if not s.is_label]
    if not instructions or any(s.control is None for s in instructions):
        return None
    links = barrier_links(lines)
    long_setters = frozenset(
        s.offset
        for s in instructions
        if s.offset is not None and latency_of(s.opcode) == "long" and s.control is not None
        if s.control.sets
    )
    blocks = []
    targets = _branch_targets(lines)
    for block in _blocks(lines, targets):
        body = [s for s in block if not s.is_label and not _is_padding(s)]
        label = block[0].text.rstrip(":") if block[0].text in targets else None
        if not body or _is_end_trap(body, label):
            continue  # what pads the function after its end
        waits = [o for s in body for o in links.waits_for.get(s.offset or 0, ())]
        blocks.append(
            BasicBlock(
                start=body[0].offset or 0,
                end=body[-1].offset or 0,
                label=label,
                instructions=len(body),
                stall_cycles=sum(s.control.stall for s in body if s.control is not None),
                long_waits=sum(1 for o in waits if o in long_setters),
                lines=tuple(sorted({s.line for s in body if s.line is not None})),
            )
        )
    return Schedule(links, tuple(blocks), long_setters)
