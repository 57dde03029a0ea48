"""Roofline maths: attainable performance, which ceiling bounds a point, and by how much.

Units are SI throughout: FLOP, bytes, seconds, FLOP/s, B/s; intensity in FLOP/byte.
A :class:`Roof` is a set of compute ceilings (one per data type) and bandwidth ceilings
(one per memory level). A :class:`Point` is one kernel (or one memory level of a kernel,
for hierarchical rooflines) with its FLOPs, bytes moved and time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perflab.analysis.precision import PRECISIONS, ceiling_key
from perflab.analysis.specs import BANDWIDTH_LABELS, COMPUTE_LABELS, DeviceSpec
from perflab.model.ceilings import level_name
from perflab.model.units import plain_number

if TYPE_CHECKING:
    from perflab.analysis.json_views import VerdictView
    from perflab.model.ceilings import Ceilings


@dataclass(frozen=True)
class Roof:
    """Ceilings of one device. ``compute``: FLOP/s per data type; ``memory``: B/s per level.
    ``source`` says where they come from (spec sheet or a measurement)."""

    device: str
    compute: dict[str, float]
    memory: dict[str, float]
    source: str
    measured: bool = False

    def __post_init__(self) -> None:
        for what, table in (("compute", self.compute), ("memory", self.memory)):
            for key, value in table.items():
                if not (value > 0 and math.isfinite(value)):
                    raise ValueError(f"{what} ceiling {key!r} must be positive, not {value!r}")
        if not self.compute or not self.memory:
            raise ValueError(f"{self.device}: a roofline needs a compute and a memory ceiling")

    @classmethod
    def from_spec(cls, spec: DeviceSpec) -> Roof:
        return cls(
            spec.name,
            spec.flops(),
            spec.bytes_per_s(),
            f"spec sheet values for {spec.name} (not measured)",
        )

    @classmethod
    def from_ceilings(cls, device: str, ceilings: Ceilings, source: str = "measured") -> Roof:
        """From a measured-ceilings object with ``flops`` {dtype: GFLOP/s} and
        ``bandwidth`` {level: GB/s} (``perflab.model.ceilings.Ceilings``)."""
        compute = {str(k): float(v) * 1e9 for k, v in dict(ceilings.flops).items() if v}
        memory = {str(k): float(v) * 1e9 for k, v in dict(ceilings.bandwidth).items() if v}
        return cls(device, compute, memory, source, measured=True)

    def peak(self, dtype: str | None = None) -> tuple[str, float]:
        """The compute ceiling for ``dtype`` (a precision such as ``"fp32"``, or a ceiling's
        own key); the highest one when ``dtype`` is None."""
        if dtype is None:
            return max(self.compute.items(), key=lambda kv: kv[1])
        key = self.compute_key(dtype)
        if key is None:
            raise KeyError(f"{self.device} has no {dtype!r} ceiling (known: {self.known()})")
        return key, self.compute[key]

    def compute_key(self, dtype: str) -> str | None:
        """The key of the compute ceiling that holds ``dtype`` (None when there is none)."""
        return ceiling_key(dtype, self.compute)

    def known(self) -> str:
        """The compute ceilings there are, for a message."""
        return ", ".join(self.compute)

    def bandwidth(self, level: str | None = None) -> tuple[str, float]:
        """The bandwidth ceiling of ``level``; the first (device memory) when None."""
        if level is None:
            return next(iter(self.memory.items()))
        if level not in self.memory:
            raise KeyError(
                f"{self.device} has no {level!r} bandwidth (known: {', '.join(self.memory)})"
            )
        return level, self.memory[level]

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.RoofView` declares."""
        from perflab.analysis.json_views import RoofView
        from perflab.model.schema import encode, view

        return encode(view(self, RoofView))


@dataclass(frozen=True)
class Point:
    """One kernel at one memory level: ``flops`` and ``bytes`` moved in ``seconds``."""

    name: str
    flops: float
    bytes: float
    seconds: float
    level: str | None = None  # memory level the bytes were counted at; None: device memory
    dtype: str | None = None  # precision (or compute ceiling) that applies; None: unknown
    extra: dict[str, object] = field(default_factory=dict)
    dtype_why: str = ""  # how the precision is known ("--dtype"), or why it is not

    def __post_init__(self) -> None:
        for label, value in (("flops", self.flops), ("bytes", self.bytes)):
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(
                    f"{self.name}: {label} must be a non-negative number, not {value!r}"
                )
        if not (self.seconds > 0 and math.isfinite(self.seconds)):
            raise ValueError(f"{self.name}: time must be positive, not {self.seconds!r}")
        if self.flops == 0 and self.bytes == 0:
            raise ValueError(f"{self.name}: needs FLOPs or bytes (both are 0)")

    @property
    def intensity(self) -> float:
        """FLOP per byte (inf when no bytes were moved)."""
        return self.flops / self.bytes if self.bytes else math.inf

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds


@dataclass(frozen=True)
class RooflineVerdict:
    """Where a point sits under a roof."""

    point: Point
    compute_key: str
    peak: float
    memory_key: str
    bandwidth: float
    attainable: float  # FLOP/s the roof allows at this intensity
    bound: str  # "memory" or "compute"
    compute_why: str = ""  # which compute ceiling applies and why, in words

    @property
    def ceiling(self) -> str:
        """The ceiling that bounds the point, in words (``"HBM bandwidth"``)."""
        if self.bound == "memory":
            return f"{level_label(self.memory_key)} bandwidth"
        return peak_label(self.compute_key)

    @property
    def fraction(self) -> float:
        """Achieved / attainable performance, in 0..1 for points under the roof."""
        if self.point.flops == 0:  # a pure copy: compare bandwidths instead
            return self.point.bytes_per_s / self.bandwidth
        return self.point.flops_per_s / self.attainable

    @property
    def headroom(self) -> float:
        """How many times faster the kernel could run before touching its ceiling."""
        return 1 / self.fraction

    @property
    def ridge(self) -> float:
        """Intensity (FLOP/byte) where the memory and compute ceilings meet."""
        return self.peak / self.bandwidth

    def describe(self) -> str:
        return (
            f"{self.point.name}: {self.bound}-bound ({self.ceiling}); at "
            f"{100 * self.fraction:.1f}% of the ceiling, {plain_number(self.headroom)}x headroom"
        )

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> VerdictView:
        """The point as :class:`perflab.analysis.json_views.VerdictView` declares it."""
        from perflab.analysis.json_views import VerdictView

        p = self.point
        return VerdictView(
            name=p.name,
            level=self.memory_key,
            dtype=self.compute_key,
            flops=p.flops,
            bytes=p.bytes,
            seconds=p.seconds,
            intensity=p.intensity if math.isfinite(p.intensity) else None,
            flops_per_s=p.flops_per_s,
            bytes_per_s=p.bytes_per_s,
            attainable_flops_per_s=self.attainable,
            bound=self.bound,
            ceiling=self.ceiling,
            fraction_of_ceiling=self.fraction,
            headroom=self.headroom,
            compute_ceiling=self.compute_why,
        )


def peak_label(key: str) -> str:
    """A compute ceiling in words: ``"FP32 peak"``."""
    return f"{compute_label(key)} peak"


def compute_label(key: str) -> str:
    """A compute ceiling's name: ``"BF16/FP16 tensor"`` (the spec table's), ``"BF16"`` (a
    measured one, keyed by its precision), else the key."""
    return COMPUTE_LABELS.get(key) or (key.upper() if key in PRECISIONS else key)


def level_label(key: str) -> str:
    """A memory level in words, spelled as measured ceilings spell it (``"L3"``, ``"HBM"``;
    the spec table's ``"L1/shared"``), whichever case the key is in."""
    return BANDWIDTH_LABELS.get(key) or level_name(key)


def attainable(intensity: float, peak: float, bandwidth: float) -> float:
    """The classic roofline: ``min(peak, bandwidth * intensity)`` in FLOP/s."""
    if math.isinf(intensity):
        return peak
    return min(peak, bandwidth * intensity)


def compute_ceiling(point: Point, roof: Roof) -> tuple[str, str]:
    """The compute ceiling that judges ``point`` and why, in words: the one of the precision
    it ran in ("fp32 peak (the cell's matmuls ran in float32)"), else the highest, saying
    why ("the highest ceiling (BF16 peak): the cell's precision is unknown")."""
    key = None if point.dtype is None else roof.compute_key(point.dtype)
    if key is not None:
        how = f" ({point.dtype_why})" if point.dtype_why else ""
        return key, f"{peak_label(key)}{how}"
    highest = roof.peak()[0]
    if point.dtype is None:
        why = point.dtype_why or "its precision is unknown"
    else:
        how = f" ({point.dtype_why})" if point.dtype_why else ""
        why = f"{roof.device} has no {point.dtype} ceiling{how} (known: {roof.known()})"
    return highest, f"the highest ceiling ({peak_label(highest)}): {why}"


def assess(point: Point, roof: Roof) -> RooflineVerdict:
    """Which ceiling bounds ``point`` under ``roof`` and how close it gets."""
    compute_key, why = compute_ceiling(point, roof)
    peak = roof.compute[compute_key]
    memory_key, bandwidth = roof.bandwidth(point.level)
    reach = attainable(point.intensity, peak, bandwidth)
    bound = "compute" if point.intensity >= peak / bandwidth else "memory"
    return RooflineVerdict(point, compute_key, peak, memory_key, bandwidth, reach, bound, why)


def assess_all(points: list[Point], roof: Roof) -> list[RooflineVerdict]:
    return [assess(p, roof) for p in points]
