"""Theoretical occupancy: resident blocks and warps per SM for a block size, the way
``cuda_occupancy.h`` computes it (limits from :mod:`perflab.model.arch`), with the
limiting factor named."""

from __future__ import annotations

from dataclasses import dataclass

from perflab.errors import InputError
from perflab.model.arch import SMLimits, limits_for
from perflab.model.kernel import KernelArtifacts
from perflab.model.units import format_bytes

FACTORS = ("warps", "blocks", "registers", "shared memory")


@dataclass(frozen=True)
class Occupancy:
    arch: str
    block_size: int
    registers: int
    shared_per_block: int  # static + dynamic + reserved, rounded to the granularity
    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limits: dict[str, int]  # factor -> blocks per SM it allows
    limiting: tuple[str, ...]  # the factors that set blocks_per_sm

    @property
    def occupancy(self) -> float:
        return self.warps_per_sm / self.max_warps

    def summary(self) -> str:
        if self.blocks_per_sm == 0:
            return (
                f"block of {self.block_size} threads does not fit on an SM of {self.arch}: "
                f"limited by {' and '.join(self.limiting)}"
            )
        return (
            f"{self.occupancy:.0%} occupancy on {self.arch} with {self.block_size}-thread "
            f"blocks: {self.blocks_per_sm} blocks = {self.warps_per_sm}/{self.max_warps} "
            f"warps per SM, limited by {' and '.join(self.limiting)}"
        )

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.OccupancyView` declares."""
        from perflab.analysis.json_views import OccupancyView
        from perflab.model.schema import encode, view

        return encode(view(self, OccupancyView))

    def __str__(self) -> str:
        return self.summary()


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def _register_limit(sm: SMLimits, registers: int, warps_per_block: int) -> int:
    if registers <= 0:
        return 1 << 30  # no registers: no limit from the register file
    per_warp = _round_up(registers * sm.warp_size, sm.register_granularity)
    assumed = per_warp * _round_up(warps_per_block, sm.sub_partitions)  # hardware check
    if (
        registers > sm.max_registers_per_thread
        or assumed > sm.registers_per_block
        or per_warp * warps_per_block > sm.registers_per_block
    ):
        return 0
    warps_per_partition = (sm.registers_per_sm // sm.sub_partitions) // per_warp
    return (warps_per_partition * sm.sub_partitions) // warps_per_block


def occupancy(
    arch: str,
    block_size: int,
    *,
    registers: int,
    shared_static: int = 0,
    shared_dynamic: int = 0,
) -> Occupancy:
    """Resident blocks per SM for ``block_size`` threads on ``arch``, and why."""
    sm = limits_for(arch)
    if not isinstance(block_size, int) or not 1 <= block_size <= sm.max_threads_per_block:
        raise InputError(
            f"block size must be 1..{sm.max_threads_per_block} threads, not {block_size!r}"
        )
    if registers < 0 or shared_static < 0 or shared_dynamic < 0:
        raise InputError("registers and shared memory must not be negative")
    warps = -(-block_size // sm.warp_size)
    requested = shared_static + shared_dynamic
    shared = _round_up(requested + sm.reserved_shared_per_block, sm.shared_granularity)
    fits = requested <= sm.shared_per_block
    limits = {
        "warps": sm.max_warps // warps,
        "blocks": sm.max_blocks,
        "registers": _register_limit(sm, registers, warps),
        "shared memory": (sm.shared_per_sm // shared if fits else 0) if requested else 1 << 30,
    }
    blocks = min(limits.values())
    limiting = tuple(f for f in FACTORS if limits[f] == blocks)
    shown = {f: n for f, n in limits.items() if n < 1 << 30}
    return Occupancy(
        arch,
        block_size,
        registers,
        shared if requested else 0,
        blocks,
        blocks * warps,
        sm.max_warps,
        shown,
        limiting,
    )


def kernel_occupancy(
    kernel: KernelArtifacts, block_size: int, dynamic_shared: int | None = None
) -> Occupancy:
    """:func:`occupancy` from a compiled kernel's resources (its own dynamic shared
    memory, e.g. Triton's, unless ``dynamic_shared`` is given)."""
    r = kernel.resources
    dynamic = r.shared_dynamic if dynamic_shared is None else dynamic_shared
    return occupancy(
        kernel.arch,
        block_size,
        registers=r.registers,
        shared_static=r.shared_static,
        shared_dynamic=dynamic,
    )


def describe_shared(occ: Occupancy) -> str:
    return format_bytes(occ.shared_per_block) if occ.shared_per_block else "none"
