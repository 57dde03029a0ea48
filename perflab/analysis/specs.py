"""The device spec table: vendor peak compute and bandwidth, each figure with its source.

These are spec-sheet values, not measurements: real kernels reach less, and measured
ceilings (``perflab ceilings``) replace them in the roofline when present.

Conventions:

- Tensor-core figures are **dense** (no 2:4 structured sparsity). Where a datasheet only
  prints the sparse figure (marked with an asterisk there), the table holds half of it and
  says so in ``derived``.
- FP16 and BF16 tensor peaks are equal on every device here, so they share ``bf16_tensor``.
- ``l1_shared`` is derived, not printed by the vendor: SMs x 32 banks x 4 bytes per clock
  (CUDA C++ Programming Guide, shared memory section) x boost clock.
- A figure the vendor does not publish is ``None``, with a note; measure it instead.
- ``caches``: sizes in bytes, ``l1_shared_per_sm`` (the combined L1 data cache and shared
  memory of one SM, which a kernel splits between them) and ``l2`` (the whole device).

Compute keys: ``fp64``, ``fp64_tensor``, ``fp32``, ``tf32_tensor``, ``bf16_tensor``,
``fp8_tensor``. Bandwidth keys: ``hbm`` (device memory, GDDR on L4), ``l2``, ``l1_shared``.
Values are stored in TFLOP/s and TB/s for readability; accessors return FLOP/s and B/s.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

COMPUTE_KEYS = ("fp64", "fp64_tensor", "fp32", "tf32_tensor", "bf16_tensor", "fp8_tensor")
BANDWIDTH_KEYS = ("hbm", "l2", "l1_shared")
COMPUTE_LABELS = {
    "fp64": "FP64",
    "fp64_tensor": "FP64 tensor",
    "fp32": "FP32",
    "tf32_tensor": "TF32 tensor",
    "bf16_tensor": "BF16/FP16 tensor",
    "fp8_tensor": "FP8 tensor",
}
BANDWIDTH_LABELS = {"hbm": "HBM", "l2": "L2", "l1_shared": "L1/shared", "dram": "DRAM"}
CACHE_KEYS = ("l1_shared_per_sm", "l2")
CACHE_LABELS = {"l1_shared_per_sm": "L1/shared per SM", "l2": "L2"}
KIB, MIB = 1024, 1024 * 1024

SHARED_BYTES_PER_CLOCK_PER_SM = 32 * 4  # 32 banks x 32 bits per clock
PROGRAMMING_GUIDE = "CUDA C++ Programming Guide, shared memory (32 banks x 4 B per clock)"


@dataclass(frozen=True)
class Figure:
    """One number of the table (TFLOP/s or TB/s) with where it comes from."""

    value: float | None
    source: str
    derived: str = ""


@dataclass(frozen=True)
class DeviceSpec:
    """Peak figures of one device. ``compute``: TFLOP/s per key; ``bandwidth``: TB/s."""

    name: str
    patterns: tuple[str, ...]  # regexes matched against a reported device name
    compute: dict[str, Figure]
    bandwidth: dict[str, Figure]
    sms: int | None = None
    boost_mhz: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    caches: dict[str, Figure] = field(default_factory=dict)

    def cache_bytes(self) -> dict[str, float]:
        """Known cache sizes in bytes, keyed like :data:`CACHE_KEYS`."""
        return {k: f.value for k, f in self.caches.items() if f.value is not None}

    def flops(self) -> dict[str, float]:
        """Known compute peaks in FLOP/s, keyed like :data:`COMPUTE_KEYS`."""
        return {k: f.value * 1e12 for k, f in self.compute.items() if f.value is not None}

    def bytes_per_s(self) -> dict[str, float]:
        """Known bandwidths in B/s, keyed like :data:`BANDWIDTH_KEYS`."""
        return {k: f.value * 1e12 for k, f in self.bandwidth.items() if f.value is not None}

    def rows(self) -> list[tuple[str, str, str, str]]:
        """``(what, value, source, derivation)`` for every figure: the cited table."""
        out = []
        for key, fig in self.compute.items():
            value = "not published" if fig.value is None else f"{fig.value:g} TFLOP/s"
            out.append((COMPUTE_LABELS[key], value, fig.source, fig.derived))
        for key, fig in self.bandwidth.items():
            value = "not published" if fig.value is None else f"{fig.value:g} TB/s"
            out.append((BANDWIDTH_LABELS[key], value, fig.source, fig.derived))
        return out


def _sparse_half(sparse: float, source: str) -> Figure:
    return Figure(sparse / 2, source, f"half of the {sparse:g} TFLOP/s printed with sparsity")


def _l1(sms: int, boost_mhz: float, clock_source: str) -> Figure:
    tbs = sms * SHARED_BYTES_PER_CLOCK_PER_SM * boost_mhz * 1e6 / 1e12
    return Figure(
        round(tbs, 1),
        f"{PROGRAMMING_GUIDE}; {clock_source}",
        f"{sms} SMs x {SHARED_BYTES_PER_CLOCK_PER_SM} B/clk x {boost_mhz:g} MHz",
    )


def _unpublished(level: str) -> Figure:
    return Figure(
        None,
        f"{level} bandwidth is not published by the vendor; measure it with `perflab ceilings`",
    )


H100_DS = "NVIDIA H100 Tensor Core GPU datasheet"
H100_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (SM count, boost clock)"
H200_DS = "NVIDIA H200 Tensor Core GPU datasheet"
A100_DS = "NVIDIA A100 Tensor Core GPU datasheet"
A100_WP = "NVIDIA A100 Tensor Core GPU Architecture whitepaper"
L4_DS = "NVIDIA L4 Tensor Core GPU datasheet"
B200_DS = "NVIDIA Blackwell (HGX B200) datasheet, per GPU"
ADA_WP = "NVIDIA Ada GPU Architecture whitepaper (AD104)"


def _caches(l1_kib: float | None, l2_mib: float | None, source: str) -> dict[str, Figure]:
    unpublished = f"not published in the {source}; measure it with `perflab machine latency`"
    return {
        "l1_shared_per_sm": Figure(l1_kib * KIB, source) if l1_kib else Figure(None, unpublished),
        "l2": Figure(l2_mib * MIB, source) if l2_mib else Figure(None, unpublished),
    }


def _hopper(
    ds: str, fp64: float, fp64t: float, fp32: float, tf32s: float, bf16s: float, fp8s: float
) -> dict[str, Figure]:
    return {
        "fp64": Figure(fp64, ds),
        "fp64_tensor": Figure(fp64t, ds),
        "fp32": Figure(fp32, ds),
        "tf32_tensor": _sparse_half(tf32s, ds),
        "bf16_tensor": _sparse_half(bf16s, ds),
        "fp8_tensor": _sparse_half(fp8s, ds),
    }


SPECS: tuple[DeviceSpec, ...] = (
    DeviceSpec(
        name="H100 SXM",
        patterns=(r"h100.*(sxm|hbm3)", r"^h100$", r"h100 80gb"),
        compute=_hopper(H100_DS + " (SXM)", 34, 67, 67, 989, 1979, 3958),
        bandwidth={
            "hbm": Figure(3.35, H100_DS + " (SXM, 80 GB HBM3)"),
            "l2": _unpublished("L2"),
            "l1_shared": _l1(132, 1980, H100_WP),
        },
        sms=132,
        boost_mhz=1980,
        caches=_caches(256, 50, H100_WP),
    ),
    DeviceSpec(
        name="H100 PCIe",
        patterns=(r"h100.*pcie",),
        compute=_hopper(H100_DS + " (PCIe)", 26, 51, 51, 756, 1513, 3026),
        bandwidth={
            "hbm": Figure(2.0, H100_DS + " (PCIe, 80 GB HBM2e)"),
            "l2": _unpublished("L2"),
            "l1_shared": _l1(114, 1755, H100_WP),
        },
        sms=114,
        boost_mhz=1755,
        caches=_caches(256, 50, H100_WP),
    ),
    DeviceSpec(
        name="H200",
        patterns=(r"h200",),
        compute=_hopper(H200_DS + " (SXM)", 34, 67, 67, 989, 1979, 3958),
        bandwidth={
            "hbm": Figure(4.8, H200_DS + " (SXM, 141 GB HBM3e)"),
            "l2": _unpublished("L2"),
            "l1_shared": _l1(132, 1980, H100_WP + "; H200 uses the same GH100 SXM configuration"),
        },
        sms=132,
        boost_mhz=1980,
        caches=_caches(256, 50, H100_WP + "; H200 uses the same GH100 SXM configuration"),
    ),
    DeviceSpec(
        name="A100 SXM4 80GB",
        patterns=(r"a100.*80", r"a100.*pg509", r"^a100$", r"a100-sxm4"),
        compute={
            "fp64": Figure(9.7, A100_DS),
            "fp64_tensor": Figure(19.5, A100_DS),
            "fp32": Figure(19.5, A100_DS),
            "tf32_tensor": Figure(156, A100_DS),
            "bf16_tensor": Figure(312, A100_DS),
            "fp8_tensor": Figure(None, "A100 (Ampere) has no FP8 tensor cores"),
        },
        bandwidth={
            "hbm": Figure(2.039, A100_DS + " (SXM4 80 GB HBM2e)"),
            "l2": Figure(7.2, A100_WP + " (L2 read bandwidth 5120 B/clk)", "5120 B/clk x 1410 MHz"),
            "l1_shared": _l1(108, 1410, A100_WP),
        },
        sms=108,
        boost_mhz=1410,
        caches=_caches(192, 40, A100_WP),
        notes=("A100-PG509-200 (an SXM4 board) is matched here; 40 GB parts have 1.555 TB/s",),
    ),
    DeviceSpec(
        name="L4",
        patterns=(r"\bl4\b",),
        compute={
            "fp64": Figure(None, "not in the " + L4_DS),
            "fp64_tensor": Figure(None, "L4 (Ada) has no FP64 tensor cores"),
            "fp32": Figure(30.3, L4_DS),
            "tf32_tensor": _sparse_half(120, L4_DS),
            "bf16_tensor": _sparse_half(242, L4_DS),
            "fp8_tensor": _sparse_half(485, L4_DS),
        },
        bandwidth={
            "hbm": Figure(0.3, L4_DS + " (24 GB GDDR6)"),
            "l2": _unpublished("L2"),
            "l1_shared": _l1(58, 2040, L4_DS + " (7,424 CUDA cores = 58 SMs, 2040 MHz boost)"),
        },
        sms=58,
        boost_mhz=2040,
        caches=_caches(128, 48, ADA_WP),
    ),
    DeviceSpec(
        name="B200",
        patterns=(r"b200",),
        compute={
            "fp64": Figure(40, B200_DS),
            "fp64_tensor": Figure(40, B200_DS),
            "fp32": Figure(80, B200_DS),
            "tf32_tensor": _sparse_half(2200, B200_DS),
            "bf16_tensor": _sparse_half(4500, B200_DS),
            "fp8_tensor": _sparse_half(9000, B200_DS),
        },
        bandwidth={
            "hbm": Figure(8.0, B200_DS + " (192 GB HBM3e, 'up to 8 TB/s')"),
            "l2": _unpublished("L2"),
            "l1_shared": Figure(None, "B200 SM boost clock is not published; measure it"),
        },
        sms=148,
        caches=_caches(None, None, B200_DS),
        notes=("later HGX B200 systems list 180 GB and 7.7 TB/s per GPU",),
    ),
)


def find_spec(device_name: str) -> DeviceSpec | None:
    """The table row for a device name as drivers or users write it
    (``"NVIDIA H100 80GB HBM3"``, ``"h200"``, ``"A100-PG509-200"``), or None."""
    key = re.sub(r"^nvidia\s+", "", device_name.strip().lower())
    for spec in SPECS:
        if key == spec.name.lower() or any(re.search(p, key) for p in spec.patterns):
            return spec
    return None


def spec_names() -> list[str]:
    return [s.name for s in SPECS]


# --- this CPU ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuDescription:
    """What the OS says about the CPU. No peak figures: a CPU's ceilings depend on clocks,
    SIMD units and memory channels that /proc does not report, so they are measured."""

    model: str
    logical_cpus: int
    simd: tuple[str, ...]
    mhz: float | None = None

    def describe(self) -> str:
        simd = ", ".join(self.simd) or "no SIMD flags reported"
        clock = f", {self.mhz:.0f} MHz" if self.mhz else ""
        return f"{self.model}: {self.logical_cpus} logical CPUs{clock}; SIMD: {simd}"


_SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "asimd", "sve")


def parse_cpuinfo(text: str, logical_cpus: int | None = None) -> CpuDescription:
    """Describe the CPU from the text of ``/proc/cpuinfo`` (x86 or Arm layouts)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    model = fields.get("model name") or fields.get("Hardware") or fields.get("CPU part") or "CPU"
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    count = logical_cpus or text.count("processor\t:") or text.count("processor :") or 1
    try:
        mhz: float | None = float(fields["cpu MHz"])
    except (KeyError, ValueError):
        mhz = None
    return CpuDescription(model, count, tuple(f for f in _SIMD_FLAGS if f in flags), mhz)


def describe_cpu() -> CpuDescription:
    """This machine's CPU (Linux ``/proc/cpuinfo``; elsewhere the platform string)."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return parse_cpuinfo(fh.read(), os.cpu_count())
    except OSError:
        return CpuDescription(platform.processor() or "CPU", os.cpu_count() or 1, ())
