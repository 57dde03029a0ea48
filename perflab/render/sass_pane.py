"""The SASS pane of the compile view (:mod:`perflab.render.ptx_view`): the scheduler's view
of each instruction in a narrow control column and the registers live at it, then the
instruction's text, which wraps rather than being cut when the pane is narrow.

The control column is compact (stall cycles as a number, ``»`` for the yield hint, ``W2``
/ ``R2`` for a barrier set, ``w02`` for the barriers waited on); its title holds the full
decoding and the barrier links, which the view's script also shows in a details row. The
rows wrap under a hanging indent, so continuation lines start under the instruction text:
inline (em) for untrusted notebooks, refined to exact character widths by the view's style,
which also hides the control column in a pane too narrow for it and the instruction both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from perflab.analysis.kernel_report import KernelReport
from perflab.model.kernel import Control, SassLine
from perflab.render.code_rows import EM_PER_CHAR, INLINE, code_row, line_color, number_span
from perflab.render.html import esc

LIVE_WIDTH = 4  # "live" in the header; counts reach 255
CONTROL_HELP = (
    "Control bits, compact: the stall cycles before the warp's next instruction may issue; "
    "» the yield hint (switch warps after it); W2 / R2: sets barrier 2 when its result is "
    "written / once its sources are read; w02: waits on barriers 0 and 2. Hover an "
    "instruction's control for the full decoding (S stall, Y yield, W R barriers, w wait "
    "mask with bit 0 rightmost, reuse) and its barrier links; click the row for a details row."
)
LIVE_HELP = (
    "Live general registers at the instruction, as nvdisasm --print-life-ranges counts "
    "them: those live across it and those it writes; the peak in red. A register written "
    "only under a condition (a predicate, or one side of a branch) and read later counts as "
    "live from the kernel's entry, so the first rows can show registers that nothing has "
    "written yet."
)


@dataclass(frozen=True)
class ControlSlots:
    """How wide each part of the control column is in one kernel, so the parts line up
    from row to row and the column is only as wide as that kernel needs."""

    stall: int  # digits of the longest stall
    yields: bool  # some instruction has the yield hint
    sets: int  # characters of the most barriers set ("W2R3")
    waits: int  # characters of the most barriers waited on ("w02")

    @classmethod
    def of(cls, controls: Iterable[Control]) -> ControlSlots:
        found = list(controls)
        return cls(
            stall=max((len(str(c.stall)) for c in found), default=1),
            yields=any(c.yields for c in found),
            sets=max((len(_sets(c)) for c in found), default=0),
            waits=max((len(_waits(c)) for c in found), default=0),
        )

    @property
    def width(self) -> int:
        parts = self.stall + self.yields
        return parts + sum(1 + n for n in (self.sets, self.waits) if n)

    def mark(self, c: Control) -> str:
        """``c`` in this kernel's compact form, e.g. `` 4» W2 w0``."""
        text = str(c.stall).rjust(self.stall) + ("»" if c.yields else " ") * self.yields
        for part, size in ((_sets(c), self.sets), (_waits(c), self.waits)):
            if size:
                text += " " + part.ljust(size)
        return text


def _sets(c: Control) -> str:
    write = f"W{c.write_barrier}" if c.write_barrier is not None else ""
    return write + (f"R{c.read_barrier}" if c.read_barrier is not None else "")


def _waits(c: Control) -> str:
    return "w" + "".join(map(str, c.waits_on)) if c.waits_on else ""


@dataclass(frozen=True)
class _SassPane:
    """What the SASS rows of one kernel are formatted from."""

    report: KernelReport
    offsets: dict[int, SassLine]  # instruction by offset
    slots: ControlSlots | None  # None: no instruction has control bits or live registers
    digits: int  # of the largest offset, in hex

    @property
    def indent(self) -> int:
        """Characters before an instruction's text: address, control and live columns."""
        if self.slots is None:
            return self.digits + 1
        return self.digits + 1 + max(self.slots.width, 3) + 1 + LIVE_WIDTH + 2

    def waits(self, offset: int) -> tuple[int, ...]:
        plan = self.report.schedule
        return plan.links.waits_for.get(offset, ()) if plan is not None else ()

    def waited(self, offset: int) -> tuple[int, ...]:
        plan = self.report.schedule
        return plan.links.waited_by.get(offset, ()) if plan is not None else ()

    def unresolved(self, offset: int) -> tuple[int, ...]:
        plan = self.report.schedule
        return plan.links.unresolved.get(offset, ()) if plan is not None else ()

    def short(self, offset: int) -> str:
        line = self.offsets.get(offset)
        return f"{offset:04x} {line.opcode}" if line is not None else f"{offset:04x}"


def _pane_of(report: KernelReport) -> _SassPane:
    lines = [s for s in report.kernel.sass_lines if s.offset is not None]
    offsets = {s.offset: s for s in lines if s.offset is not None}
    columns = any(s.control is not None or s.live is not None for s in lines)
    controls = (s.control for s in lines if s.control is not None)
    slots = ControlSlots.of(controls) if columns else None
    digits = max(4, len(f"{max(offsets, default=0):x}"))
    return _SassPane(report, offsets, slots, digits)


def sass_pane(report: KernelReport) -> tuple[str, str, str]:
    """The pane's rows, the inline style of its code box (the hanging indent) and the note
    under it (registers live at entry), for :func:`perflab.render.code_rows.pane`."""
    pane = _pane_of(report)
    rows = [_column_head(pane)] if pane.slots is not None else []
    blank = " " * (pane.indent - 1)
    for s in report.kernel.sass_lines:
        if s.offset is None:
            rows.append(code_row("", f"{blank}{s.text}", kind="label"))
        else:
            rows.append(_sass_row(s, pane))
    em = f"{pane.indent * EM_PER_CHAR:.2f}em"
    control = max(pane.slots.width, 3) if pane.slots is not None else 0
    style = (
        f"{INLINE['code']}; white-space: pre-wrap; overflow-wrap: break-word; "
        f"padding-left: {em}; text-indent: -{em}; --pv-indent: {pane.indent}ch; "
        f"--pv-control: {control}ch"
    )
    note = entry_note(report)
    foot = f'<div class="pv-note" style="{INLINE["pane-note"]}">{esc(note)}</div>' if note else ""
    return "".join(rows), style, foot


def _column_head(pane: _SassPane) -> str:
    """The columns' names, whose titles say how to read them."""
    width = max(pane.slots.width if pane.slots is not None else 0, 3)
    return (
        f'<div class="k-head" style="{INLINE["column-head"]}">'
        f'<span class="n">{"addr".ljust(pane.digits)} </span>'
        f'<span class="ctl" title="{esc(CONTROL_HELP)}">{"ctl".ljust(width)}</span>'
        f'<span class="lr" title="{esc(LIVE_HELP)}"> {"live".rjust(LIVE_WIDTH)}</span>'
        '<span class="ins">  instruction</span></div>'
    )


def _sass_row(line: SassLine, pane: _SassPane) -> str:
    """An instruction: address, control, live registers, then its text as one text node
    (the JupyterLab extension highlights a row's own text). The row's title is the
    opcode's help; the control cell's, the full decoding and the barrier links."""
    offset = line.offset or 0
    attrs = f' class="k-instruction" data-o="{offset}"'
    waits, waited = pane.waits(offset), pane.waited(offset)
    if waits:
        attrs += f' data-w="{" ".join(map(str, waits))}"'
    if waited:
        attrs += f' data-b="{" ".join(map(str, waited))}"'
    if line.line is not None:
        attrs += f' data-l="{line.line}"'
    if line.ptx_line is not None:
        attrs += f' data-p="{line.ptx_line}"'
    help_ = pane.report.opcodes.get(line.mnemonic)
    title = str(help_) if help_ is not None else ""
    style = f' style="background-color: {line_color(line.line)}"' if line.line is not None else ""
    cells = _control_cells(line, pane) if pane.slots is not None else ""
    return (
        f'<div{attrs} title="{esc(title)}"{style}>{number_span(f"{offset:0{pane.digits}x}")}'
        f"{cells}{esc(line.text)}</div>"
    )


def _control_cells(line: SassLine, pane: _SassPane) -> str:
    """The compact control bits and the live registers; the live count has a title only
    where it adds to the number (the peak, the first instruction), which keeps a long
    kernel's view small."""
    slots = pane.slots
    width = max(slots.width if slots is not None else 0, 3)
    mark = slots.mark(line.control) if slots is not None and line.control is not None else ""
    peak = _at_peak(line, pane.report)
    first = _is_first(line, pane.report)
    live = str(line.live.gpr) if line.live is not None else "-"
    live_style = INLINE["peak"] if peak else INLINE["live"]
    live_title = f' title="{esc(_live_title(line, pane.report))}"' if peak or first else ""
    return (
        f'<span class="ctl" title="{esc(control_title(line, pane))}" '
        f'style="{INLINE["control"]}">{esc(mark.ljust(width))}</span>'
        f'<span class="lr{" peak" if peak else ""}"{live_title} '
        f'style="{live_style}"> {live.rjust(LIVE_WIDTH)}</span>  '
    )


def _at_peak(line: SassLine, report: KernelReport) -> bool:
    curve = report.pressure
    return curve is not None and line.live is not None and line.live.gpr == curve.peak


def _is_first(line: SassLine, report: KernelReport) -> bool:
    curve = report.pressure
    return curve is not None and curve.entry > 0 and line.offset == curve.points[0][0]


def control_title(line: SassLine, pane: _SassPane) -> str:
    """The control bits in words, their raw form and the barrier links."""
    c = line.control
    if c is None:
        return pane.report.control_note or "control bits not decoded"
    offset = line.offset or 0
    out = ["; ".join(_control_words(c)), c.compact()]
    if waits := pane.waits(offset):
        out.append("waits for " + ", ".join(map(pane.short, waits)))
    if missing := pane.unresolved(offset):
        barriers = ", ".join(map(str, missing))
        out.append(f"barrier {barriers}: set on another path (a branch or a loop's back edge)")
    if waited := pane.waited(offset):
        out.append("waited on by " + ", ".join(map(pane.short, waited)))
    return "\n".join(out)


def _control_words(c: Control) -> list[str]:
    parts = [f"stall {c.stall} cycle{'' if c.stall == 1 else 's'}"]
    if c.yields:
        parts.append("yield hint (switch warps after it)")
    if c.write_barrier is not None:
        parts.append(f"sets barrier {c.write_barrier} when its result is written")
    if c.read_barrier is not None:
        parts.append(f"sets barrier {c.read_barrier} once its sources are read")
    if c.reuse:
        kept = ", ".join("abcd"[i] for i in range(4) if c.reuse >> i & 1)
        parts.append(f"keeps operand {kept} in the reuse cache")
    if c.waits_on:
        parts.append(f"waits on barrier {', '.join(map(str, c.waits_on))}")
    return parts


def _live_title(line: SassLine, report: KernelReport) -> str:
    if line.live is None:
        return "live registers unknown"
    live = line.live
    text = f"{live.gpr} general, {live.pred} predicate, {live.ugpr} uniform registers live"
    if report.pressure is not None and _at_peak(line, report):
        text += f" (the peak; {report.pressure.allocated} allocated)"
    if report.pressure is not None and _is_first(line, report):
        text += f"; {report.pressure.entry} of them live at entry (see the note under the pane)"
    return text


def entry_note(report: KernelReport) -> str | None:
    """Why the first instruction already has registers live, or None where none are."""
    curve = report.pressure
    if curve is None or curve.entry == 0:
        return None
    n, first = curve.entry, curve.points[0][1]
    text = (
        f"{n} register{'s are' if n != 1 else ' is'} live at entry: written only under a "
        "condition (a predicate, or one side of a branch) and read later, "
        f"{'they count' if n != 1 else 'it counts'} as live from the kernel's start, as "
        "nvdisasm counts them"
    )
    if first > n:
        text += f"; the first instruction's {first} adds the {first - n} it writes"
    return text
