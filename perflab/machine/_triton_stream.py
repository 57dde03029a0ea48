"""The GPU bandwidth loop written in Triton: ``passes`` passes of read, copy or triad
over whole arrays inside one launch, so that an L2-sized working set moves far more data
per launch than a launch costs. Imported only when used: importing it imports triton.

Each program walks its tiles grid-stride. ``n`` is a multiple of ``BLOCK`` (the launcher
rounds it down): no mask, so each thread's loads go out together (with a mask, the
masked-off lanes' zeros made the compiler reuse one register and issue them one by one)
as 128-bit loads (LDG.E.128).

L1: an L2-sized working set is spread over every SM, but a program that re-read the
same slice each pass would find it in its SM's L1 (256 KB on Hopper) from the second
pass on, and the L2 point would time L1. So loads use ``cache_modifier=".cg"`` (cached
in L2 only; SASS ``LDG.E.128.STRONG.GPU``): every pass is served by L2, whichever SM
read the slice before. Each pass also shifts every program's tiles by one tile, so the
addresses depend on the pass and no pass repeats the previous one's loads for the
compiler to drop. Read sums into one value per program, written at the end: the loads
are not dead.
"""

from __future__ import annotations

import triton
import triton.language as tl

READ, COPY, TRIAD = 0, 1, 2
KIND_CODES = {"read": READ, "copy": COPY, "triad": TRIAD}
BLOCK = 2048  # float32 elements per tile: 16 per thread with 4 warps, four 128-bit loads
NUM_WARPS = 4


@triton.jit  # type: ignore[untyped-decorator]
def stream_kernel(  # type: ignore[no-untyped-def]
    x_ptr, y_ptr, out_ptr, sums_ptr, n, passes, scale, KIND: tl.constexpr, BLOCK: tl.constexpr
):
    """read: sums[pid] = the sum of x over the program's tiles and every pass; copy:
    out = x; triad: out = y + scale * x. ``n`` must be a multiple of BLOCK."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    tiles = n // BLOCK
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for p in range(passes):
        shift = p % tiles
        for t in range(pid, tiles, programs):
            tile = t + shift
            tile = tl.where(tile >= tiles, tile - tiles, tile)
            offs = tile * BLOCK + lanes
            x = tl.load(x_ptr + offs, cache_modifier=".cg")
            if KIND == 0:
                acc += x
            elif KIND == 1:
                tl.store(out_ptr + offs, x)
            else:
                y = tl.load(y_ptr + offs, cache_modifier=".cg")
                tl.store(out_ptr + offs, y + scale * x)
    if KIND == 0:
        tl.store(sums_ptr + pid, tl.sum(acc, axis=0))


SIGNATURE = {
    "x_ptr": "*fp32",
    "y_ptr": "*fp32",
    "out_ptr": "*fp32",
    "sums_ptr": "*fp32",
    "n": "i32",
    "passes": "i32",
    "scale": "fp32",
}
# what the JIT sees for torch tensors and an n that is a multiple of BLOCK
ALIGNED = ("x_ptr", "y_ptr", "out_ptr", "sums_ptr", "n")
