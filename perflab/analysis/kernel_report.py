"""What the compile view shows about a kernel beyond its artifacts, computed once: the
occupancy at the chosen block size, the insights, the source lines that have PTX or SASS
counterparts, the scheduler's view of the SASS (barrier waits, stall cycles per basic
block), register pressure and spills with their cause, what each opcode does and, given an
earlier compile, what changed since. The view (:mod:`perflab.render.ptx_view`) formats a
:class:`KernelReport` and analyses nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perflab.analysis.insights import Insight, KernelDiff, diff_kernels, kernel_insights
from perflab.analysis.occupancy import Occupancy, kernel_occupancy
from perflab.analysis.opcodes import OpcodeInfo, opcode_info
from perflab.analysis.registers import Pressure, Spills, pressure, spills
from perflab.analysis.sass_control import Schedule, layout_known, schedule
from perflab.errors import InputError
from perflab.model.kernel import CompileResult, KernelArtifacts

if TYPE_CHECKING:
    from perflab.analysis.json_views import KernelReportView
    from perflab.model.schema import S

DEFAULT_BLOCK = 256


@dataclass(frozen=True)
class KernelReport:
    """One kernel of a compile, analysed. Exactly one of ``occupancy`` and
    ``occupancy_error`` is set: the error says why there is no occupancy (a block size the
    hardware refuses, an architecture without known limits)."""

    kernel: KernelArtifacts
    block_size: int
    shared_dynamic: int  # dynamic shared bytes per block assumed: as given, else the kernel's
    shared_dynamic_given: bool  # given by the caller (--smem), not the kernel's own
    occupancy: Occupancy | None
    occupancy_error: str | None
    insights: tuple[Insight, ...]
    mapped_lines: frozenset[int]  # source lines some PTX or SASS line comes from
    diff: KernelDiff | None = None  # against the same kernel of an earlier compile
    schedule: Schedule | None = None  # None: see control_note
    control_note: str | None = None  # why the SASS has no decoded control bits
    pressure: Pressure | None = None  # None without live-register counts
    spills: Spills | None = None  # None when ptxas reported no spills
    opcodes: Mapping[str, OpcodeInfo] = field(default_factory=dict)  # mnemonic -> help

    def to_dict(self) -> dict[str, object]:
        """The report as JSON: occupancy (with its limiter), instruction mix, insights,
        spills with their cause, the schedule's totals and the register peak (the
        document :class:`perflab.analysis.json_views.KernelReportView` declares)."""
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> KernelReportView:
        from perflab.analysis import json_views as v
        from perflab.model.schema import view

        def part(value: object, kind: type[S]) -> S | None:
            return None if value is None else view(value, kind)

        return v.KernelReportView(
            block_size=self.block_size,
            shared_dynamic=self.shared_dynamic,
            occupancy=part(self.occupancy, v.OccupancyView),
            occupancy_error=self.occupancy_error,
            instruction_mix=self.kernel.instruction_mix,
            insights=list(self.insights),
            spills=part(self.spills, v.SpillsView),
            schedule=part(self.schedule, v.ScheduleView),
            control_note=self.control_note,
            live_registers=part(self.pressure, v.PressureView),
        )


def resolve_block_size(result: CompileResult, requested: int | None = None) -> int:
    """``requested``, else a Triton kernel's own block (num_warps x 32), else
    :data:`DEFAULT_BLOCK`."""
    if requested is not None:
        return requested
    for flag in result.flags:
        name, _, value = flag.partition("=")
        if name == "num_warps" and value.isdigit():
            return int(value) * 32
    return DEFAULT_BLOCK


def kernel_report(
    result: CompileResult,
    kernel: KernelArtifacts,
    *,
    block_size: int | None = None,
    dynamic_shared: int | None = None,
    previous: CompileResult | None = None,
) -> KernelReport:
    """The report of ``kernel`` (one of ``result``'s) at ``block_size`` (see
    :func:`resolve_block_size`) with ``dynamic_shared`` bytes of dynamic shared memory
    (default: the kernel's own), diffed against ``previous`` when given."""
    block = resolve_block_size(result, block_size)
    occupancy: Occupancy | None = None
    error: str | None = None
    try:
        occupancy = kernel_occupancy(kernel, block, dynamic_shared)
    except InputError as exc:
        error = str(exc)
    insights = kernel_insights(kernel, source=result.source, lang=result.lang)
    diff = None if previous is None else diff_kernels(_counterpart(previous, kernel), kernel)
    plan = schedule(kernel.sass_lines)
    return KernelReport(
        kernel=kernel,
        block_size=block,
        shared_dynamic=(
            kernel.resources.shared_dynamic if dynamic_shared is None else dynamic_shared
        ),
        shared_dynamic_given=dynamic_shared is not None,
        occupancy=occupancy,
        occupancy_error=error,
        insights=tuple(insights),
        mapped_lines=mapped_source_lines(kernel),
        diff=diff,
        schedule=plan,
        control_note=None if plan is not None else control_note(kernel),
        pressure=pressure(kernel),
        spills=spills(kernel, result.flags),
        opcodes={op: opcode_info(op) for op in kernel.instruction_mix},
    )


def control_note(kernel: KernelArtifacts) -> str | None:
    """Why ``kernel``'s SASS carries no control bits (None when it has them)."""
    instructions = [s for s in kernel.sass_lines if not s.is_label]
    if not instructions:
        return "no SASS"
    if all(s.control is not None for s in instructions):
        return None
    if not layout_known(kernel.arch):
        return (
            f"control bits not decoded: the layout of {kernel.arch} (before Volta) is not "
            "known to perflab"
        )
    return "no control bits: this SASS was saved or disassembled without its encodings"


def kernel_reports(
    result: CompileResult,
    *,
    kernel: str | None = None,
    block_size: int | None = None,
    dynamic_shared: int | None = None,
    previous: CompileResult | None = None,
) -> tuple[KernelReport, ...]:
    """:func:`kernel_report` of the kernel called ``kernel``, or of every kernel of
    ``result`` when None."""
    chosen = [result.kernel(kernel)] if kernel else list(result.kernels)
    return tuple(
        kernel_report(
            result, k, block_size=block_size, dynamic_shared=dynamic_shared, previous=previous
        )
        for k in chosen
    )


def mapped_source_lines(kernel: KernelArtifacts) -> frozenset[int]:
    """The source lines that some SASS or PTX line of ``kernel`` comes from."""
    lines = {s.line for s in kernel.sass_lines if s.line is not None}
    lines |= {n for n in kernel.ptx_lines_source if n is not None}
    return frozenset(lines)


def _counterpart(previous: CompileResult, kernel: KernelArtifacts) -> KernelArtifacts:
    """The kernel of ``previous`` with ``kernel``'s mangled name, else its first kernel."""
    same = next((k for k in previous.kernels if k.mangled == kernel.mangled), None)
    return same if same is not None else previous.kernel(None)
