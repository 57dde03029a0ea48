"""Plain-language notes on a compiled kernel's SASS: tensor cores, load widths, async
copies and TMA, spills, barriers, shuffles, predication."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from perflab.model.arch import cc_of
from perflab.model.kernel import KernelArtifacts
from perflab.model.units import format_bytes

TENSOR_CORE = {
    "HGMMA": "warpgroup MMA on Hopper (wgmma, fp16/bf16/tf32)",
    "QGMMA": "warpgroup MMA on Hopper (wgmma, fp8)",
    "IGMMA": "warpgroup MMA on Hopper (wgmma, int8)",
    "BGMMA": "warpgroup MMA on Hopper (wgmma, binary)",
    "HMMA": "warp-level MMA (mma.sync / WMMA, fp16/bf16/tf32)",
    "IMMA": "warp-level MMA (mma.sync, int8/int4)",
    "DMMA": "warp-level MMA (mma.sync, fp64)",
    "UTCHMMA": "Blackwell tensor-core MMA (tcgen05, fp16/bf16)",
    "UTCQMMA": "Blackwell tensor-core MMA (tcgen05, fp8/fp6/fp4)",
    "UTCIMMA": "Blackwell tensor-core MMA (tcgen05, int8)",
    "UTCOMMA": "Blackwell tensor-core MMA (tcgen05, block-scaled)",
}
TMA = ("UTMALDG", "UTMASTG", "UTMAPF", "UTMAREDG", "UBLKCP")
MATMUL_HINT = re.compile(r"\btl\.dot\b|\bwmma\b|\bmma\b|\bwgmma\b|\bmatmul\b|\bgemm\b", re.I)
_WIDTH_RE = re.compile(r"\.(128|64|U8|S8|U16|S16)\b")
_WIDTHS = {"128": 128, "64": 64, "U8": 8, "S8": 8, "U16": 16, "S16": 16}


@dataclass(frozen=True)
class Insight:
    topic: str
    level: str  # "good", "info" or "warn"
    text: str

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self)

    def __str__(self) -> str:
        mark = {"good": "+", "warn": "!"}.get(self.level, "-")
        return f"{mark} {self.topic}: {self.text}"


def access_width(opcode: str) -> int:
    """Bits per thread of a load/store opcode: ``LDG.E.128`` -> 128, ``LDG.E`` -> 32."""
    m = _WIDTH_RE.search(opcode)
    return _WIDTHS[m.group(1)] if m else 32


def _count(opcodes: dict[str, int], family: str) -> int:
    return sum(n for op, n in opcodes.items() if op.split(".", 1)[0] == family)


def tensor_core_insight(kernel: KernelArtifacts, source: str, lang: str) -> Insight:
    mix = kernel.instruction_mix
    used = {op: mix[op] for op in TENSOR_CORE if op in mix}
    if used:
        parts = [f"{n} {op} ({TENSOR_CORE[op]})" for op, n in used.items()]
        note = ""
        if cc_of(kernel.arch) == 90 and "HMMA" in used and not {"HGMMA", "QGMMA"} & set(used):
            note = (
                "; on Hopper, warpgroup HGMMA is faster than HMMA and needs sm_90a "
                "and tiles of at least 64 rows per warpgroup"
            )
        return Insight("tensor cores", "good", "uses " + ", ".join(parts) + note)
    if not MATMUL_HINT.search(source):
        return Insight(
            "tensor cores",
            "info",
            "no tensor-core instructions (none expected: the source has no dot/mma)",
        )
    return Insight(
        "tensor cores",
        "warn",
        "no tensor-core instructions (HGMMA/HMMA/QGMMA): " + _why_no_tensor_cores(kernel, lang),
    )


def _why_no_tensor_cores(kernel: KernelArtifacts, lang: str) -> str:
    cc = cc_of(kernel.arch)
    if cc < 70:
        return f"{kernel.arch} has no tensor cores"
    if lang == "triton":
        return (
            "tl.dot fell back to FMA: check that both operands are fp16/bf16/fp8 (fp32 "
            "uses TF32 only with input_precision='tf32'), that every dot dimension is "
            "at least 16, and the target"
        )
    reason = (
        "the compiler never turns plain C++ loops into tensor-core instructions; use "
        "WMMA or mma.sync (any sm_80+), wgmma (needs sm_90a), CUTLASS/CuTe or cuBLAS"
    )
    if cc == 90 and not kernel.arch.endswith("a"):
        reason += f"; {kernel.arch} lacks wgmma: compile for sm_90a"
    return reason


# how to get 128-bit accesses, in the words of the kernel's language
WIDER_ACCESS = {
    "cuda": "each thread moving a float4 (16-byte aligned) needs a quarter of the instructions",
    "triton": (
        "Triton vectorises only what it can prove 16-byte aligned and contiguous: hint "
        "computed offsets with tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK), and "
        "a masked access needs its bound known to be a multiple of 16 (the JIT assumes so "
        "when the value passed is; ahead of time, list it in TritonSpec(aligned=...))"
    ),
}


def _width_insight(
    opcodes: dict[str, int], family: str, topic: str, lang: str = "cuda"
) -> Insight | None:
    widths: Counter[int] = Counter()
    for op, n in opcodes.items():
        if op.split(".", 1)[0] == family:
            widths[access_width(op)] += n
    total = sum(widths.values())
    if not total:
        return None
    spread = ", ".join(f"{n}x {w}-bit" for w, n in sorted(widths.items(), reverse=True))
    if widths[128]:
        return Insight(topic, "good", f"{widths[128]} of {total} are 128-bit ({spread})")
    if total >= 2:
        return Insight(
            topic,
            "warn",
            f"none of {total} is 128-bit ({spread}): "
            + WIDER_ACCESS.get(lang, WIDER_ACCESS["cuda"]),
        )
    return Insight(topic, "info", spread)


def kernel_insights(
    kernel: KernelArtifacts, *, source: str = "", lang: str = "cuda"
) -> list[Insight]:
    """Notes in the order a performance engineer reads them."""
    ops = kernel.opcodes
    mix = kernel.instruction_mix
    found = [tensor_core_insight(kernel, source, lang)]
    for family, topic in (("LDG", "global loads"), ("STG", "global stores")):
        width = _width_insight(ops, family, topic, lang)
        if width is not None:
            found.append(width)
    if mix.get("LDGSTS"):
        found.append(
            Insight(
                "async copies",
                "good",
                f"{mix['LDGSTS']} LDGSTS (cp.async: "
                "global to shared without registers, overlapping compute)",
            )
        )
    tma = {op: mix[op] for op in TMA if op in mix}
    if tma:
        found.append(
            Insight(
                "TMA",
                "good",
                ", ".join(f"{n} {op}" for op, n in tma.items())
                + " (tensor memory accelerator bulk copies)",
            )
        )
    if mix.get("LDSM"):
        found.append(
            Insight(
                "shared memory",
                "info",
                f"{mix['LDSM']} LDSM (ldmatrix: tensor-core fragments from shared memory)",
            )
        )
    found.extend(_spill_insights(kernel))
    found.extend(_sync_insights(kernel))
    found.extend(_predication_insight(kernel))
    fp64 = sum(mix.get(op, 0) for op in ("DFMA", "DADD", "DMUL"))
    if fp64:
        found.append(
            Insight(
                "fp64",
                "info",
                f"{fp64} double-precision instructions (DFMA/DADD/"
                "DMUL): full rate only on data-centre GPUs; a 'double' literal "
                "in float code causes them too",
            )
        )
    return found


def _spill_insights(kernel: KernelArtifacts) -> list[Insight]:
    r = kernel.resources
    mix = kernel.instruction_mix
    local = f"{mix.get('STL', 0)} STL / {mix.get('LDL', 0)} LDL"
    if r.spills:
        return [
            Insight(
                "spills",
                "warn",
                f"{format_bytes(r.spill_stores)} spilled, "
                f"{format_bytes(r.spill_loads)} reloaded ({local}) with {r.registers} "
                "registers per thread: local memory traffic; raise the register "
                "limit, shrink per-thread arrays or use smaller tiles",
            )
        ]
    if r.stack or mix.get("STL") or mix.get("LDL"):
        return [
            Insight(
                "local memory",
                "info",
                f"{format_bytes(r.stack)} stack frame ({local}) "
                "without spills: a per-thread array indexed at run time or a call",
            )
        ]
    return [Insight("spills", "good", f"no spills ({r.registers} registers per thread)")]


def _sync_insights(kernel: KernelArtifacts) -> list[Insight]:
    mix = kernel.instruction_mix
    found = []
    if mix.get("BAR"):
        found.append(
            Insight(
                "barriers",
                "info",
                f"{mix['BAR']} BAR (__syncthreads or "
                f"named barriers) using {kernel.resources.barriers} barrier(s)",
            )
        )
    if mix.get("SYNCS"):
        found.append(
            Insight(
                "barriers",
                "info",
                f"{mix['SYNCS']} SYNCS (mbarrier waits and arrivals, as in TMA pipelines)",
            )
        )
    if mix.get("SHFL"):
        found.append(
            Insight(
                "shuffles",
                "info",
                f"{mix['SHFL']} SHFL: lanes exchange "
                "registers directly, no shared memory round trip",
            )
        )
    return found


def _predication_insight(kernel: KernelArtifacts) -> list[Insight]:
    lines = [s for s in kernel.sass_lines if s.opcode and s.opcode != "NOP"]
    guarded = [s for s in lines if s.predicated and s.mnemonic not in ("BRA", "EXIT")]
    if not lines or not guarded:
        return []
    share = len(guarded) / len(lines)
    level = "warn" if share > 0.25 else "info"
    return [
        Insight(
            "predication",
            level,
            f"{len(guarded)} of {len(lines)} instructions "
            f"({share:.0%}) are predicated (@P): every warp issues them, only lanes "
            "whose guard holds do work (bounds checks, tails)",
        )
    ]


@dataclass(frozen=True)
class KernelDiff:
    """What changed between two compilations of a kernel (``before`` -> ``after``)."""

    before: str
    after: str
    resources: dict[str, tuple[int, int]]  # field -> (before, after), changed fields only
    mix: dict[str, tuple[int, int]]  # opcode family -> (before, after), changed only
    sass_diff: list[str]  # unified diff of the SASS text without addresses

    @property
    def identical(self) -> bool:
        return not (self.resources or self.mix or self.sass_diff)


def _sass_body(kernel: KernelArtifacts) -> list[str]:
    return [s.text for s in kernel.sass_lines if s.opcode and s.opcode != "NOP"]


def diff_kernels(
    before: KernelArtifacts, after: KernelArtifacts, *, context: int = 2
) -> KernelDiff:
    import difflib

    b, a = vars(before.resources), vars(after.resources)  # the counts, field by field
    resources = {k: (b[k], a[k]) for k in b if b[k] != a[k]}
    mb, ma = before.instruction_mix, after.instruction_mix
    mix = {
        k: (mb.get(k, 0), ma.get(k, 0))
        for k in sorted(set(mb) | set(ma))
        if mb.get(k, 0) != ma.get(k, 0)
    }
    lines = list(
        difflib.unified_diff(
            _sass_body(before), _sass_body(after), "before", "after", n=context, lineterm=""
        )
    )
    return KernelDiff(before.name, after.name, resources, mix, lines)
