"""The GPU pointer chase written in Triton: the fallback when CuPy cannot compile the
CUDA C++ chase (no NVRTC, or one too old for the driver). Triton is always there with
torch. One program of one warp follows ``steps`` links (every lane loads the same
address), so the loads are serial as in the CUDA kernel; it reports ns only (no SM cycle
counter). Imported only when used: importing it imports triton."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def chase_kernel(next_ptr, state_ptr, steps):  # type: ignore[no-untyped-def]
    p = tl.load(state_ptr)
    for _ in range(steps):
        p = tl.load(next_ptr + p)
    tl.store(state_ptr, p)  # the result is used: nothing is optimised away


SIGNATURE = {"next_ptr": "*i64", "state_ptr": "*i64", "steps": "i64"}
