"""The quickstart's Triton kernel (notebook 00), importable so that recordings and the Nsight
Compute target run the very kernel the notebook shows. Importing it imports triton."""

from __future__ import annotations

import triton
import triton.language as tl

BLOCK = 1024


@triton.jit  # type: ignore[untyped-decorator]
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def launch(x: object, y: object, out: object, n: int) -> None:
    """``out = x + y`` over ``n`` elements, as the notebook launches it."""
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
