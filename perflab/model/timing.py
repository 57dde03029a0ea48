"""TimingResult: every sample of a timed function, and what can be said about them."""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.model import stats
from perflab.model.optable import OpTable
from perflab.model.serialize import dump_json, load_json
from perflab.model.units import format_ns

KIND = "TimingResult"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


@dataclass
class Comparison:
    """How ``result`` compares with ``baseline``: ratio of median times, with its 95% CI."""

    name: str
    baseline_name: str
    ratio: float
    low: float
    high: float
    significant: bool

    @property
    def verdict(self) -> str:
        if not self.significant:
            return "no significant difference"
        if self.ratio < 1:
            return f"{1 / self.ratio:.3g}x faster"
        return f"{self.ratio:.3g}x slower"

    def __str__(self) -> str:
        return (
            f"{self.name} vs {self.baseline_name}: time ratio {self.ratio:.3f} "
            f"(95% CI {self.low:.3f}-{self.high:.3f}): {self.verdict}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "baseline": self.baseline_name,
            "ratio": self.ratio,
            "ci95": [self.low, self.high],
            "significant": self.significant,
        }


@dataclass
class TimingResult:
    """Per-call times of one timed function (``samples_ns``), kept in full.

    ``number`` is how many calls each raw sample averaged over (1 when every call was
    timed on its own, as with an L2 flush before each).
    """

    samples_ns: npt.NDArray[np.float64]
    backend: str
    device: str
    name: str = "cell"
    number: int = 1
    warnings: list[str] = field(default_factory=list)
    created: str = field(default_factory=now_iso)
    versions: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    kernels: OpTable | None = None
    flops: float | None = None
    bytes: float | None = None
    replayed_from: str | None = None

    def __post_init__(self) -> None:
        self.samples_ns = np.asarray(self.samples_ns, dtype=np.float64)

    # --- statistics -------------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self.samples_ns.size)

    @property
    def median_ns(self) -> float:
        return stats.median(self.samples_ns)

    @property
    def iqr_ns(self) -> float:
        return stats.iqr(self.samples_ns)

    @property
    def ci95_ns(self) -> tuple[float, float]:
        return stats.median_ci95(self.samples_ns)

    @property
    def min_ns(self) -> float:
        return float(self.samples_ns.min())

    @property
    def max_ns(self) -> float:
        return float(self.samples_ns.max())

    @property
    def mean_ns(self) -> float:
        return float(self.samples_ns.mean())

    def compare(self, baseline: TimingResult) -> Comparison:
        """Ratio of this result's median time to ``baseline``'s (< 1 means faster)."""
        r = stats.median_ratio(self.samples_ns, baseline.samples_ns)
        return Comparison(self.name, baseline.name, r.ratio, r.low, r.high, r.significant)

    # --- persistence ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.ci95_ns
        return {
            "name": self.name,
            "backend": self.backend,
            "device": self.device,
            "number": self.number,
            "created": self.created,
            "versions": dict(self.versions),
            "options": dict(self.options),
            "warnings": list(self.warnings),
            "samples_ns": [float(x) for x in self.samples_ns],
            "summary": {
                "n": self.n,
                "median_ns": self.median_ns,
                "iqr_ns": self.iqr_ns,
                "ci95_ns": [lo, hi],
                "min_ns": self.min_ns,
                "max_ns": self.max_ns,
            },
            "kernels": self.kernels.to_dict() if self.kernels is not None else None,
            "flops": self.flops,
            "bytes": self.bytes,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> TimingResult:
        kernels = doc.get("kernels")
        return cls(
            samples_ns=np.asarray(doc["samples_ns"], dtype=np.float64),
            backend=str(doc["backend"]),
            device=str(doc["device"]),
            name=str(doc.get("name", "cell")),
            number=int(doc.get("number", 1)),
            warnings=[str(w) for w in doc.get("warnings", [])],
            created=str(doc.get("created", "")),
            versions={str(k): str(v) for k, v in doc.get("versions", {}).items()},
            options=dict(doc.get("options", {})),
            kernels=OpTable.from_dict(kernels) if kernels else None,
            flops=doc.get("flops"),
            bytes=doc.get("bytes"),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        return dump_json(KIND, self.to_dict(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TimingResult:
        from perflab.errors import SchemaError

        doc = load_json(KIND, path)
        try:
            result = cls.from_dict(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError(f"malformed TimingResult: {exc}", source=str(path)) from None
        if result.n == 0:
            raise SchemaError("TimingResult has no samples", source=str(path))
        result.replayed_from = str(path)
        return result

    # --- display ----------------------------------------------------------------------
    def summary_line(self) -> str:
        lo, hi = self.ci95_ns
        return (
            f"{self.name}: median {format_ns(self.median_ns)} "
            f"(95% CI {format_ns(lo)} - {format_ns(hi)}), IQR {format_ns(self.iqr_ns)}, "
            f"n={self.n} on {self.device} [{self.backend}]"
        )

    def __str__(self) -> str:
        return self.summary_line()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        from perflab.render.timing import timing_text

        p.text(timing_text(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from perflab.render.timing import timing_bundle

        return timing_bundle(self)
