"""What the compile view shows about a kernel beyond its artifacts, computed once: the
occupancy at the chosen block size, the insights, the source lines that have PTX or SASS
counterparts and, given an earlier compile, what changed since. The view
(:mod:`perflab.render.ptx_view`) formats a :class:`KernelReport` and analyses nothing."""

from __future__ import annotations

from dataclasses import dataclass

from perflab.analysis.insights import Insight, KernelDiff, diff_kernels, kernel_insights
from perflab.analysis.occupancy import Occupancy, kernel_occupancy
from perflab.errors import InputError
from perflab.model.kernel import CompileResult, KernelArtifacts

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
    )


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
