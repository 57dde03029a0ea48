"""GPU architectures in one place: target names (``sm_90a``), which targets have
arch-specific and family variants, and the per-architecture SM limits that feed the
occupancy calculation. Capture (nvcc targets), analysis (occupancy, insights) and the
front-ends (the default target) all read this module.

Sources:
- [CG] CUDA C++ Programming Guide, "Compute Capabilities", table "Technical
  Specifications per Compute Capability" (CUDA 13): warps, registers and shared memory
  per SM and per block.
- [OCC] ``cuda_occupancy.h`` as shipped with CUDA 13.5 (the ``nvidia-cuda-nvcc`` wheel):
  ``cudaOccMaxBlocksPerMultiprocessor`` (blocks per SM), ``cudaOccRegAllocationGranularity``
  (256 registers per warp), ``cudaOccSubPartitionsPerMultiprocessor`` (4), and
  ``cudaOccSMemAllocationGranularity`` (256 bytes up to 7.x, 128 bytes from 8.0).
- [RT] ``cudaDevAttrReservedSharedMemoryPerBlock``: 1 KB reserved by the system per
  block from compute capability 8.0 on (0 on 7.5), as the Programming Guide's shared
  memory section describes.
- [NVCC] ``nvcc --list-gpu-arch`` (CUDA 13): ``sm_90a`` is the first arch-specific target,
  ``sm_100f`` the first family target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perflab.errors import InputError

KB = 1024

# The first compute capability with each target suffix [NVCC]: "a" (arch-specific:
# wgmma, setmaxnreg...) and "f" (family).
SUFFIX_FROM = {"a": 90, "f": 100}
SUFFIX_KIND = {"a": "arch-specific", "f": "family"}

_ARCH_RE = re.compile(r"^(?:sm_?|compute_?)?(\d{2,3})([af]?)$")
_DOTTED_ARCH_RE = re.compile(r"^(\d{1,2})\.(\d)([af]?)$")


@dataclass(frozen=True)
class Arch:
    """A target such as ``sm_90a``: compute capability 9.0 with arch-specific features."""

    cc: int  # 90 for 9.0
    suffix: str = ""  # "a" (arch-specific), "f" (family) or ""

    @property
    def name(self) -> str:
        return f"sm_{self.cc}{self.suffix}"

    @property
    def major(self) -> int:
        return self.cc // 10

    @property
    def minor(self) -> int:
        return self.cc % 10

    def __str__(self) -> str:
        return self.name

    @classmethod
    def preferred(cls, cc: int) -> Arch:
        """The target to compile for a device of compute capability ``cc``: its
        arch-specific variant where one exists (``sm_90a`` on Hopper), else plain."""
        return cls(cc, "a" if cc >= SUFFIX_FROM["a"] else "")

    def suffix_error(self) -> str | None:
        """Why this suffix does not exist for this compute capability, or None."""
        first = SUFFIX_FROM.get(self.suffix)
        if first is None or self.cc >= first:
            return None
        kind = SUFFIX_KIND[self.suffix]
        return f"{self}: {kind} '{self.suffix}' targets start at sm_{first}{self.suffix}"


def parse_arch(text: str) -> Arch:
    """``"sm_90a"``, ``"90a"``, ``"9.0"`` or ``"compute_90"`` -> Arch; InputError otherwise."""
    raw = text.strip().lower()
    m = _ARCH_RE.match(raw)
    if m:
        return Arch(int(m.group(1)), m.group(2))
    m = _DOTTED_ARCH_RE.match(raw)
    if m:
        return Arch(int(m.group(1)) * 10 + int(m.group(2)), m.group(3))
    raise InputError(f"not a GPU architecture: {text!r} (use e.g. sm_80, sm_90a, sm_100a)")


@dataclass(frozen=True)
class SMLimits:
    cc: int  # 90 for compute capability 9.0
    max_warps: int  # resident warps per SM [CG]
    max_blocks: int  # resident blocks per SM [OCC]
    shared_per_sm: int  # bytes, largest carve-out [CG]
    shared_per_block: int  # bytes, largest a block may opt in to [CG]
    reserved_shared_per_block: int  # bytes the system keeps per block [RT]
    registers_per_sm: int = 64 * KB  # 32-bit registers [CG]
    registers_per_block: int = 64 * KB  # [CG]
    max_registers_per_thread: int = 255  # [CG]
    max_threads_per_block: int = 1024  # [CG]
    register_granularity: int = 256  # registers, allocated per warp [OCC]
    sub_partitions: int = 4  # register file partitions per SM [OCC]
    shared_granularity: int = 128  # bytes [OCC]
    warp_size: int = 32


# One row per compute capability; 'a'/'f' targets share their base's limits.
LIMITS: dict[int, SMLimits] = {
    75: SMLimits(
        75,
        max_warps=32,
        max_blocks=16,
        shared_per_sm=64 * KB,
        shared_per_block=64 * KB,
        reserved_shared_per_block=0,
        shared_granularity=256,
    ),
    80: SMLimits(
        80,
        max_warps=64,
        max_blocks=32,
        shared_per_sm=164 * KB,
        shared_per_block=163 * KB,
        reserved_shared_per_block=KB,
    ),
    86: SMLimits(
        86,
        max_warps=48,
        max_blocks=16,
        shared_per_sm=100 * KB,
        shared_per_block=99 * KB,
        reserved_shared_per_block=KB,
    ),
    87: SMLimits(
        87,
        max_warps=48,
        max_blocks=16,
        shared_per_sm=164 * KB,
        shared_per_block=163 * KB,
        reserved_shared_per_block=KB,
    ),
    89: SMLimits(
        89,
        max_warps=48,
        max_blocks=24,
        shared_per_sm=100 * KB,
        shared_per_block=99 * KB,
        reserved_shared_per_block=KB,
    ),
    90: SMLimits(
        90,
        max_warps=64,
        max_blocks=32,
        shared_per_sm=228 * KB,
        shared_per_block=227 * KB,
        reserved_shared_per_block=KB,
    ),
    100: SMLimits(
        100,
        max_warps=64,
        max_blocks=32,
        shared_per_sm=228 * KB,
        shared_per_block=227 * KB,
        reserved_shared_per_block=KB,
    ),
    103: SMLimits(
        103,
        max_warps=64,
        max_blocks=32,
        shared_per_sm=228 * KB,
        shared_per_block=227 * KB,
        reserved_shared_per_block=KB,
    ),
    120: SMLimits(
        120,
        max_warps=48,
        max_blocks=24,
        shared_per_sm=100 * KB,
        shared_per_block=99 * KB,
        reserved_shared_per_block=KB,
    ),
    121: SMLimits(
        121,
        max_warps=48,
        max_blocks=24,
        shared_per_sm=100 * KB,
        shared_per_block=99 * KB,
        reserved_shared_per_block=KB,
    ),
}


def cc_of(arch: str) -> int:
    """``"sm_90a"`` -> 90 (also ``"sm90"``, ``"90a"``, ``"9.0"``, ``"compute_90"``)."""
    return parse_arch(arch).cc


def limits_for(arch: str) -> SMLimits:
    cc = cc_of(arch)
    if cc not in LIMITS:
        known = ", ".join(f"sm_{c}" for c in LIMITS)
        raise InputError(f"no SM limits recorded for {arch} (known: {known})")
    return LIMITS[cc]
