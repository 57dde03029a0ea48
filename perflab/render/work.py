"""What one run of a function does, counted for its roofline point: FLOPs (torch's
``FlopCounterMode``), a minimum byte count, and the precision that did most of the FLOPs.

The inputs of each FLOP-counted op (matmuls, convolutions, attention) carry the dtype it
ran in; :func:`perflab.analysis.precision.cell_precision` weighs them and reads TF32 from
torch's settings. Everything here runs on the CPU as on a GPU: the tensors' device type
is read, never used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perflab.analysis.precision import OpFlops, Precision, Tf32, cell_precision, op_kind


@dataclass(frozen=True)
class Work:
    """One call's FLOPs, the bytes it must at least move, and the precision of its FLOPs."""

    flops: float
    bytes: float
    precision: Precision


def count_flops_bytes(fn: Callable[[], object]) -> tuple[float, float]:
    """Run ``fn`` once and count its FLOPs (torch ``FlopCounterMode``) and a minimum byte
    count: every tensor it reads that it did not create, plus what it returns, once each.
    Real traffic is at least this (caches and re-reads only add to it)."""
    work = count_work(fn)
    return work.flops, work.bytes


def count_work(fn: Callable[[], object]) -> Work:
    """Run ``fn`` once: its FLOPs and minimum bytes (as :func:`count_flops_bytes`), and the
    precision that did most of the FLOPs (from the dtype of each counted op's inputs)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import FlopCounterMode

    created: set[int] = set()
    read: dict[int, int] = {}
    by_op: dict[OpFlops, float] = {}
    counter = FlopCounterMode(display=False)

    def storage(t: torch.Tensor) -> tuple[int, int]:
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()

    def tensors(tree: object) -> list[torch.Tensor]:
        return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]

    class Reads(TorchDispatchMode):  # type: ignore[no-untyped-call,misc]
        """Above the FLOP counter: what each op reads and makes, and what its FLOPs ran in."""

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            inputs = tensors((args, kwargs or {}))
            for t in inputs:
                if t.device.type != "meta":
                    ptr, nbytes = storage(t)
                    if ptr not in created:
                        read[ptr] = nbytes
            before = counter.get_total_flops()
            out = func(*args, **(kwargs or {}))
            flops = counter.get_total_flops() - before
            if flops and inputs:
                first = next((t for t in inputs if t.is_floating_point()), inputs[0])
                op = OpFlops(op_kind(str(func)), str(first.dtype).removeprefix("torch."),
                             first.device.type)  # fmt: skip
                by_op[op] = by_op.get(op, 0.0) + flops
            for t in tensors(out):
                created.add(storage(t)[0])
            return out

    with counter, Reads():  # type: ignore[no-untyped-call]
        result = fn()
    written = {storage(t)[0]: storage(t)[1] for t in tensors(result)}
    nbytes = float(sum(read.values()) + sum(written.values()))
    precision = cell_precision(by_op, tf32_settings())
    return Work(float(counter.get_total_flops()), nbytes, precision)


def tf32_settings() -> Tf32:
    """Whether torch runs float32 matmuls and convolutions on a GPU's TF32 tensor cores
    now, and the setting that says so."""
    import torch

    matmul = None
    precision = torch.get_float32_matmul_precision()
    if precision != "highest":
        matmul = f"torch.get_float32_matmul_precision() is {precision!r}"
    elif torch.backends.cuda.matmul.allow_tf32:
        matmul = "torch.backends.cuda.matmul.allow_tf32 is on"
    conv = "torch.backends.cudnn.allow_tf32 is on" if torch.backends.cudnn.allow_tf32 else None
    return Tf32(matmul, conv)
