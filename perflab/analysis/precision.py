"""The precision a cell's arithmetic ran in, and the compute ceiling that judges it.

A roofline point is only as honest as the ceiling it is set against: a float32 matmul sits
far below a bf16 tensor-core peak whatever it does. The FLOPs torch counts are those of
matmuls, convolutions and attention; the dtype of their inputs says which units ran them,
and the precision of the cell is the one that did most of its FLOPs. One exception needs
torch's settings: a float32 matmul on a GPU runs on TF32 tensor cores when
``torch.backends.cuda.matmul.allow_tf32`` is on (or the float32 matmul precision is not
``"highest"``), and a float32 convolution when ``torch.backends.cudnn.allow_tf32`` is.

Precision names: ``fp64``, ``fp32``, ``tf32``, ``bf16``, ``fp16``, ``fp8`` (those of
measured ceilings, ``perflab ceilings``); the spec table's keys for them are in
:data:`CEILING_KEYS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
# torch dtype name -> precision (complex numbers run on the units of their parts)
DTYPE_PRECISION = {
    "float64": "fp64",
    "complex128": "fp64",
    "float32": "fp32",
    "complex64": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float8_e4m3fn": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2": "fp8",
    "float8_e5m2fnuz": "fp8",
}
# precision -> the compute ceilings that hold it, first found wins: a measured ceiling is
# named by the precision, the spec table names the tensor-core peak (FP16 shares BF16's
# there; cuBLAS runs FP64 matmuls on FP64 tensor cores where a device has them)
CEILING_KEYS = {
    "fp64": ("fp64_tensor", "fp64"),
    "fp32": ("fp32",),
    "tf32": ("tf32", "tf32_tensor"),
    "bf16": ("bf16", "bf16_tensor"),
    "fp16": ("fp16", "fp16_tensor", "bf16_tensor"),
    "fp8": ("fp8", "fp8_tensor"),
}
UNKNOWN = "the cell's precision is unknown"


@dataclass(frozen=True)
class Precision:
    """What a cell's FLOPs ran in: ``name`` (one of :data:`PRECISIONS`, None when unknown)
    and ``why``, in words ("the cell's matmuls ran in float32")."""

    name: str | None
    why: str


@dataclass(frozen=True)
class OpFlops:
    """The FLOPs of one kind of op (``"matmul"``, ``"convolution"``, ``"attention"``) on
    inputs of one torch dtype (``"float32"``) on one device type (``"cuda"``)."""

    kind: str
    dtype: str
    device: str


@dataclass(frozen=True)
class Tf32:
    """Whether float32 runs on TF32 tensor cores on a GPU, and the setting that says so
    (None: it does not): for matmuls and for convolutions."""

    matmul: str | None = None
    convolution: str | None = None

    def why(self, kind: str) -> str | None:
        return self.convolution if kind == "convolution" else self.matmul


def op_kind(op_name: str) -> str:
    """What kind of FLOP-counted op ``op_name`` (``"aten.mm.default"``) is."""
    if "convolution" in op_name:
        return "convolution"
    if "attention" in op_name:
        return "attention"
    return "matmul"


def _ran_in(op: OpFlops, tf32: Tf32) -> tuple[str | None, str]:
    """The precision one op ran in, and the words that say so."""
    precision = DTYPE_PRECISION.get(op.dtype)
    setting = tf32.why(op.kind) if op.device == "cuda" else None
    if precision == "fp32" and setting is not None:
        return "tf32", f"float32 on TF32 tensor cores ({setting})"
    return precision, op.dtype


_PLURAL = {"matmul": "matmuls", "convolution": "convolutions", "attention": "attention"}


def cell_precision(flops: Mapping[OpFlops, float], tf32: Tf32) -> Precision:
    """The precision that did most of the cell's FLOPs (``flops``: FLOPs per kind of op,
    dtype and device), and why; unknown when torch counted none, or when most ran in a
    dtype no ceiling is named for (integers)."""
    by_precision: dict[str | None, float] = {}
    words: dict[str | None, dict[str, set[str]]] = {}
    for op, count in flops.items():
        if count <= 0:
            continue
        precision, said = _ran_in(op, tf32)
        by_precision[precision] = by_precision.get(precision, 0.0) + count
        words.setdefault(precision, {}).setdefault(said, set()).add(op.kind)
    if not by_precision:
        return Precision(None, f"{UNKNOWN}: torch counted no FLOPs in it")
    top = max(by_precision, key=lambda p: by_precision[p])
    why = "; ".join(
        f"the cell's {' and '.join(_PLURAL[k] for k in sorted(kinds))} ran in {said}"
        for said, kinds in words[top].items()
    )
    share = by_precision[top] / sum(by_precision.values())
    if share < 1:
        others = ", ".join(str(p) for p in by_precision if p != top)
        why += f" ({100 * share:.0f}% of its FLOPs; the rest in {others})"
    if top is None:
        return Precision(None, f"{UNKNOWN}: {why}, which no ceiling is named for")
    return Precision(top, why)


def ceiling_key(precision: str, keys: Mapping[str, object]) -> str | None:
    """The key of ``keys`` (a roof's compute ceilings) that holds ``precision``: the first
    of its :data:`CEILING_KEYS` there (a name not in that table stands for itself, such
    as a spec key, ``"bf16_tensor"``); None when the roof has none."""
    return next((k for k in CEILING_KEYS.get(precision, (precision,)) if k in keys), None)
